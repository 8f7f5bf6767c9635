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


def test_a_broker_without_a_data_dir_removes_its_temp_dir_when_its_block_ends(tmp_path: Path, monkeypatch) -> None:
    from pulsar_throttled_source.local_broker import broker as broker_module
    from pulsar_throttled_source.local_broker.data_dir_state import BrokerInfo

    made = tmp_path / "pulsar-standalone-x"

    def fake_start(data_dir, *args, **kwargs) -> BrokerInfo:  # the launcher's own temp dir when given none
        made.mkdir(exist_ok=True)
        return BrokerInfo(serviceUrl="pulsar://h:1", adminUrl="http://h:2", pid=1, dataDir=str(data_dir or made))

    monkeypatch.setattr(broker_module, "start", fake_start)
    monkeypatch.setattr(broker_module, "stop", lambda data_dir: True)
    with broker_module.LocalBroker() as b:
        b.restart()  # a restart keeps the data
        assert made.is_dir()
    assert not made.exists()
    kept = tmp_path / "given"
    kept.mkdir()
    with broker_module.LocalBroker(data_dir=kept):
        pass
    assert kept.is_dir()  # a data dir the caller gave stays
