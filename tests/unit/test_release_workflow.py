"""Issue 42: the release workflow (.github/workflows/release.yml) cannot run here, so it is linted (actionlint, with
shellcheck on its scripts; tools/actionlint.py, also run by `make lint`) and its own scripts run here: the step
that checks the tag against the package's version and the four artifacts, and the one that takes the release
notes from CHANGELOG.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import pulsar_throttled_source
from tools import actionlint
from tools.actionlint import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
VERSION = pulsar_throttled_source.__version__
ARTIFACTS = [f"pulsar_throttled_source-{VERSION}.tar.gz", f"pulsar_throttled_source-{VERSION}-py3-none-any.whl",
             *(f"pulsar_throttled_source_native-{VERSION}-cp310-abi3-manylinux_2_17_{arch}.whl" for arch in ("x86_64", "aarch64"))]


@pytest.fixture(scope="module")
def lint() -> list[str]:
    cmd = actionlint.command()
    if cmd is None:
        pytest.skip("no Go toolchain to build actionlint (tools/actionlint.py)")
    return cmd


@pytest.fixture(scope="module")
def jobs() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]


def step(job: dict, name: str) -> dict:
    (found,) = [s for s in job["steps"] if s.get("name", "").startswith(name)]
    return found


def test_actionlint_passes_the_workflows_and_catches_a_broken_one(lint, tmp_path):
    done = subprocess.run(lint, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / ".github" / "workflows" / "release.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(WORKFLOW.read_text().replace("id-token: write", "id-token: writ")
                      .replace('"$TAG" != "v$version"', "$TAG != v$version"))
    done = subprocess.run([*lint, str(broken)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert '"writ" is invalid as permission of scope "id-token"' in done.stdout and "SC2086" in done.stdout, done.stdout  # shellcheck ran


def test_a_v_tag_builds_with_make_dist_and_publishes_with_trusted_publishing(jobs):
    on = yaml.safe_load(WORKFLOW.read_text())[True]  # YAML 1.1 reads the key `on` as True
    assert on == {"push": {"tags": ["v*"]}}
    build = jobs["build"]
    assert "make dist" in [s.get("run") for s in build["steps"]]
    assert step(build, "twine check")["run"] == ".venv-dist/bin/python -m twine check --strict dist/*"
    pypi = jobs["pypi"]
    assert pypi["needs"] == "build" and pypi["permissions"] == {"id-token": "write"} and pypi["environment"]["name"] == "pypi"
    publish = step(pypi, "Publish")
    assert publish["uses"] == "pypa/gh-action-pypi-publish@release/v1" and "password" not in publish.get("with", {})
    release = jobs["github-release"]
    assert release["permissions"] == {"contents": "write"} and "pypi" in release["needs"]
    assert 'gh release create "$TAG" dist/*' in step(release, "Create the GitHub release")["run"]


def run_step(script: str, cwd: Path, tag: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env={"TAG": tag, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)


def test_the_tag_must_be_the_package_version_and_name_every_artifact(jobs, tmp_path):
    script = step(jobs["build"], "Check that the tag is the package's version")["run"]
    (tmp_path / ".venv-dist" / "bin").mkdir(parents=True)
    python = tmp_path / ".venv-dist" / "bin" / "python"  # stands for the lean venv `make dist` made
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    (tmp_path / "dist").mkdir()
    for name in ARTIFACTS:
        (tmp_path / "dist" / name).touch()
    ok = run_step(script, tmp_path, f"v{VERSION}")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = run_step(script, tmp_path, "v99.0.0")
    assert wrong.returncode == 1 and f"::error::The tag v99.0.0 is not v{VERSION}" in wrong.stdout, wrong.stdout + wrong.stderr
    (tmp_path / "dist" / ARTIFACTS[-1]).unlink()
    missing = run_step(script, tmp_path, f"v{VERSION}")
    assert missing.returncode == 1 and f"make dist did not build {ARTIFACTS[-1]}" in missing.stdout, missing.stdout
    (tmp_path / "dist" / ARTIFACTS[-1]).touch()
    (tmp_path / "dist" / "stray.whl").touch()
    stray = run_step(script, tmp_path, f"v{VERSION}")
    assert stray.returncode == 1 and "other files than the four artifacts" in stray.stdout, stray.stdout


def test_the_release_notes_are_the_versions_changelog_section(jobs, tmp_path):
    script = step(jobs["github-release"], "Release notes")["run"]
    (tmp_path / "CHANGELOG.md").write_text((ROOT / "CHANGELOG.md").read_text())
    released = "0.1.0"  # the released section of CHANGELOG.md
    done = run_step(script, tmp_path, f"v{released}")
    assert done.returncode == 0, done.stdout + done.stderr
    notes = (tmp_path / "notes.md").read_text()
    assert notes.strip().startswith("The first version:") and "## [" not in notes and "[Unreleased]" not in notes, notes
    absent = run_step(script, tmp_path, "v99.0.0")
    assert absent.returncode == 1 and "CHANGELOG.md has no section '## [99.0.0]'" in absent.stdout, absent.stdout


def test_main_carries_a_development_version_after_the_last_release():
    """A release commit carries the version of CHANGELOG.md's newest release; every commit after it a development
    version past it (so a build of main is never taken for the release), which the [native] extra pins too."""
    import re

    from packaging.version import Version

    released = [Version(v) for v in re.findall(r"^## \[(\d[^\]]*)\] - \d{4}-\d\d-\d\d$", (ROOT / "CHANGELOG.md").read_text(), re.M)]
    assert released, "CHANGELOG.md names no release"
    version, newest = Version(VERSION), max(released)
    assert version == newest or (version.is_devrelease and version > newest), (
        f"__version__ {VERSION}: expected {newest} (its release commit) or a development version after it, e.g. "
        f"{newest.major}.{newest.minor + 1}.0.dev0")
    assert f'"pulsar-throttled-source-native=={VERSION};' in (ROOT / "pyproject.toml").read_text()


def test_make_dist_and_make_demo_have_lean_venvs_of_their_own():
    """`make dist` installs only the release extra's tools, `make demo` the package with the demo extra: neither
    needs the development venv (the test extra's toolchain, ~1.7 GB)."""
    from tools.extra_requirements import requirements, tomllib

    makefile = (ROOT / "Makefile").read_text()
    dist = makefile.split("\ndist: ", 1)[1].split("\n\n", 1)[0]
    demo = makefile.split("\ndemo: ", 1)[1].split("\n\n", 1)[0]
    assert dist.startswith("$(DIST_STAMP)") and "$(PY)" not in dist and "$(DIST_PY) -m build" in dist, dist
    assert demo.startswith("$(DEMO_STAMP)") and "$(PY)" not in demo, demo
    assert "-m tools.extra_requirements release" in makefile and "-e '.[demo]'" in makefile
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {r.split(">")[0].split("=")[0].split("[")[0] for r in requirements("release")}
    assert names == {"build", "twine", "ziglang", "auditwheel", "setuptools"}
    assert set(requirements("release")) <= set(extras["test"])  # the test extra builds the artifacts too
    assert not {"pytest", "ruff", "mypy"} & {r.split(">")[0] for r in extras["demo"] + extras["release"]}

