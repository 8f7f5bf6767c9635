"""The pinned Pulsar broker's jars: checking for Java, resolving the distribution from Maven Central once per machine."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .broker_error import BrokerError

PULSAR_VERSION = "4.0.7"  # pinned LTS; keep in step with pom.xml (and docker-compose.yml's image)
CACHE_ENV = "PULSAR_THROTTLED_BROKER_CACHE"
# pom.xml and maven-settings.xml ship next to this module (package data).
MAVEN_FILES = Path(__file__).parent


def cache_dir() -> Path:
    """Where the jars (and the last-started pointer) live; $PULSAR_THROTTLED_BROKER_CACHE overrides the base."""
    override = os.environ.get(CACHE_ENV)
    base = Path(override) if override else Path.home() / ".cache" / "pulsar-throttled-source"
    return base / f"pulsar-{PULSAR_VERSION}"


def check_java() -> str:
    """The path of a Java 17+ `java`, or a BrokerError saying what is missing."""
    java = shutil.which("java")
    if java is None:
        raise BrokerError("Java 17 or newer is required to run the local Pulsar broker, but `java` is not on PATH.")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):
        major = int(match.group(2))  # "1.8" style
    if major < 17:
        found = out.strip().splitlines()[0] if out.strip() else "unknown"
        raise BrokerError(f"Java 17 or newer is required to run the local Pulsar broker; found: {found}")
    return java


def jars_root(pom: Path) -> Path:
    """Where the jars of `pom` are cached: a directory per digest of the pom, so a changed pom (a new artifact, a
    new version) is resolved again instead of finding an older jar set complete, and checkouts with different poms
    sharing one cache never replace each other's jars."""
    return cache_dir() / f"jars-{hashlib.sha256(pom.read_bytes()).hexdigest()[:12]}"


def resolve_broker_jars(quiet: bool = True) -> Path:
    """Download the pinned Pulsar (broker, bookie, ZooKeeper, proxy) and its dependencies once per machine; return
    the lib dir."""
    pom = MAVEN_FILES / "pom.xml"
    return maven_jars(jars_root(pom), pom, f"Apache Pulsar {PULSAR_VERSION} jars", quiet)


def maven_jars(root: Path, pom: Path, what: str, quiet: bool = True) -> Path:
    """The runtime jars of `pom` in root/lib, resolved by Maven from Maven Central once per machine
    (the broker's; the tests' OAuth2 server's). Processes that fetch at once (test sessions side by
    side, `make` steps) take turns: a second one waits for the first and then finds its jars, instead
    of sharing one staging directory and the local repo."""
    lib, marker = root / "lib", root / "COMPLETE"
    if marker.exists() and lib.is_dir():
        return lib
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and lib.is_dir():
            return lib
        return _download(root, pom, what, quiet)


def _download(root: Path, pom: Path, what: str, quiet: bool) -> Path:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(f"Maven (`mvn`) is required once to download the {what}, but it is not on PATH.")
    # Copy into a staging dir and rename at the end, so an interrupted download never looks complete.
    staging, lib = root / "lib.partial", root / "lib"
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        mvn, "-B", "-q",
        "-s", str(MAVEN_FILES / "maven-settings.xml"),
        "-f", str(pom),
        f"-Dmaven.repo.local={root / 'm2'}",
        "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    if not quiet:
        print(f"Downloading the {what} into {root} (once per machine)...", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise BrokerError(f"Downloading the {what} with Maven failed:\n{tail}")
    shutil.rmtree(lib, ignore_errors=True)
    staging.rename(lib)
    shutil.rmtree(root / "m2", ignore_errors=True)  # jars are copied; the local repo is only a download cache
    (root / "COMPLETE").write_text(root.name)
    return lib
