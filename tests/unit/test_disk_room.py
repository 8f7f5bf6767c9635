"""The launcher refuses to start bookies on a disk where they would turn read-only, naming the disk."""

from pathlib import Path

import pytest

from pulsar_throttled_source.local_broker.broker_error import BrokerError
from pulsar_throttled_source.local_broker.config import standalone_conf
from pulsar_throttled_source.local_broker.disk_room import (
    BOOKIE_DISK_USAGE_THRESHOLD,
    RESERVE_BYTES,
    DiskUsage,
    check_disk_room,
    java_temp_dir,
)

GIB = 1024 ** 3
TOTAL = 252 * GIB  # this machine's thin-provisioned disk: bookies count against its full size


def test_a_disk_with_room_for_the_run_passes() -> None:
    check_disk_room(Path("/data"), usage=lambda _: DiskUsage(TOTAL, 56 * GIB))


def test_a_disk_the_bookies_would_fill_to_their_threshold_is_refused_naming_it_and_what_to_free() -> None:
    stop_at = TOTAL * (1 - BOOKIE_DISK_USAGE_THRESHOLD)  # ~2.5 GiB free: bookies turn read-only
    free = int(stop_at + RESERVE_BYTES - GIB)  # one GiB short of the run's reserve
    with pytest.raises(BrokerError) as e:
        check_disk_room(Path("/data/pulsar-x"), usage=lambda _: DiskUsage(TOTAL, free))
    text = str(e.value)
    assert "/data/pulsar-x" in text and "read-only above 99%" in text and "free at least 1.0 GiB" in text, text


def test_the_edge_is_the_reserve_above_the_threshold() -> None:
    stop_at = round(TOTAL * (1 - BOOKIE_DISK_USAGE_THRESHOLD))
    check_disk_room(Path("/d"), usage=lambda _: DiskUsage(TOTAL, stop_at + RESERVE_BYTES))
    with pytest.raises(BrokerError):
        check_disk_room(Path("/d"), usage=lambda _: DiskUsage(TOTAL, stop_at + RESERVE_BYTES - 1))


def test_the_standalone_bookie_is_given_the_threshold_the_check_assumes() -> None:
    ports = dict.fromkeys(["broker", "web", "bookie", "streamStorage"], 1)
    conf = standalone_conf(ports, None, None)
    assert f"diskUsageThreshold={BOOKIE_DISK_USAGE_THRESHOLD}" in conf.splitlines(), conf


def test_java_temp_files_live_in_the_data_dir(tmp_path: Path) -> None:
    assert java_temp_dir(tmp_path) == tmp_path / "tmp" and (tmp_path / "tmp").is_dir()
