"""Issue 5: docker-compose.yml is well formed and refers only to files that exist (no Docker here)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path, PurePosixPath

import pytest
import yaml

from pulsar_throttled_source.local_broker import PULSAR_VERSION

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def bind_mounts(service: dict) -> dict[PurePosixPath, tuple[Path, bool]]:
    """container path -> (host path, read-only) for the service's bind mounts."""
    mounts = {}
    for volume in service.get("volumes", []):
        host, container, *mode = volume.split(":")
        if host.startswith((".", "/")):
            mounts[PurePosixPath(container)] = ((ROOT / host).resolve(), mode == ["ro"])
    return mounts


def host_path(mounts: dict[PurePosixPath, tuple[Path, bool]], container_path: str) -> Path | None:
    path = PurePosixPath(container_path)
    for target, (host, _) in mounts.items():
        if path == target or target in path.parents:
            return host / path.relative_to(target)
    return None


def as_list(value) -> list[str]:
    return value.split() if isinstance(value, str) else list(value or [])


def test_pulsar_service(compose):
    pulsar = compose["services"]["pulsar"]
    assert re.fullmatch(r"apachepulsar/pulsar:4\.0\.\d+", pulsar["image"]), "pin a 4.0.x LTS image"
    assert pulsar["image"].endswith(PULSAR_VERSION), "keep the image in step with the local broker's version"
    assert " ".join(as_list(pulsar["command"])).startswith("bin/pulsar standalone")
    published = {str(p).split(":")[-1] for p in pulsar["ports"]}
    assert {"6650", "8080"} <= published
    check = " ".join(as_list(pulsar["healthcheck"]["test"]))
    assert "pulsar-admin" in check or "localhost:8080/admin" in check, "health must come from the admin API"
    assert "public/default" in check or "healthcheck" in check


def test_spark_service_waits_for_a_healthy_broker(compose):
    spark = compose["services"]["spark"]
    assert re.fullmatch(r"apache/spark:4\.\d+\.\d+-python3", spark["image"])
    assert spark["depends_on"]["pulsar"]["condition"] == "service_healthy"


def test_every_mounted_or_run_path_exists(compose):
    spark = compose["services"]["spark"]
    mounts = bind_mounts(spark)
    assert mounts, "the spark service must mount the repo"
    for _, (host, _) in mounts.items():
        assert host.exists(), host
    named = [v.split(":")[0] for v in spark["volumes"] if not v.startswith((".", "/"))]
    assert set(named) <= set(compose.get("volumes") or {}), "named volumes must be declared"

    run = as_list(spark["entrypoint"]) + as_list(spark["command"])
    referenced = [arg for arg in run if host_path(mounts, arg) is not None]
    script = host_path(mounts, next(arg for arg in run if arg.endswith(".sh")))
    referenced += re.findall(r"/workspace/[\w./-]+", script.read_text())
    assert any(r.endswith("examples/throttled_ingest.py") for r in referenced)
    for container_path in referenced:
        assert host_path(mounts, container_path).exists(), f"{container_path} is not in the repo"


def test_ingest_command_parses_and_targets_the_pulsar_service(compose):
    spark = compose["services"]["spark"]
    command = as_list(spark["command"])
    app = next(i for i, arg in enumerate(command) if arg.endswith("examples/throttled_ingest.py"))
    spec = importlib.util.spec_from_file_location("throttled_ingest", ROOT / "examples" / "throttled_ingest.py")
    ingest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ingest)
    args = ingest.build_parser().parse_args(command[app + 1:])
    assert (args.service_url, args.admin_url) == ("pulsar://pulsar:6650", "http://pulsar:8080")
    assert (spark["environment"]["SERVICE_URL"], spark["environment"]["ADMIN_URL"]) == (args.service_url, args.admin_url)
    assert args.trigger == {"availableNow": True}
    # Output and checkpoint go to a writable volume, not into the read-only repo mount.
    writable = [v.split(":")[1] for v in spark["volumes"] if not v.endswith(":ro")]
    for path in (args.output, args.checkpoint):
        assert any(PurePosixPath(w) in PurePosixPath(path).parents for w in writable), path
