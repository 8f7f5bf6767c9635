"""Room on the disk a local broker's or cluster's bookies write to, checked before they start.

A bookie turns read-only once its disk's usage passes `diskUsageThreshold` (BookKeeper counts usage as
1 - usable/total of the file system, which on a thin-provisioned disk is far more than `df`'s Used column
says), and a broker then fails every write with "Not enough non-faulty bookies": a misleading diagnosis
minutes into a run. The launcher sets the threshold high (BOOKIE_DISK_USAGE_THRESHOLD) and refuses to start
when even that leaves less than RESERVE_BYTES for the run's own data, naming the disk and what to free.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from .broker_error import BrokerError

BOOKIE_DISK_USAGE_THRESHOLD = 0.99  # BookKeeper's default 0.95 stops a bookie with gigabytes still free
BOOKIE_DISK_USAGE_WARN_THRESHOLD = 0.98
RESERVE_BYTES = 2 * 1024 ** 3  # what a test run or a demo writes, with room to spare


class DiskUsage(NamedTuple):
    total: int
    free: int


def bookie_disk_settings() -> dict[str, object]:
    """The bookie settings the checks below assume (standalone and cluster configs both carry them)."""
    return {"diskUsageThreshold": BOOKIE_DISK_USAGE_THRESHOLD, "diskUsageWarnThreshold": BOOKIE_DISK_USAGE_WARN_THRESHOLD}


def check_disk_room(path: Path, usage: Callable[[Path], DiskUsage] = lambda p: DiskUsage(*shutil.disk_usage(p)[::2]),
                    reserve: int = RESERVE_BYTES) -> None:
    """Raise BrokerError if bookies writing under `path` would turn read-only within `reserve` bytes."""
    disk = usage(path)
    read_only_below = round(disk.total * (1 - BOOKIE_DISK_USAGE_THRESHOLD))  # free bytes at which bookies stop
    if disk.free - reserve >= read_only_below:
        return
    used = 1 - disk.free / disk.total if disk.total else 1.0
    raise BrokerError(
        f"Not enough free disk for the broker's bookies under {path}: {disk.free / 1024 ** 3:.1f} GiB free of "
        f"{disk.total / 1024 ** 3:.1f} GiB ({used:.1%} used as BookKeeper counts it, 1 - free/total). Bookies turn "
        f"read-only above {BOOKIE_DISK_USAGE_THRESHOLD:.0%} and the broker then refuses every write; free at least "
        f"{(read_only_below + reserve - disk.free) / 1024 ** 3:.1f} GiB on that disk (old data dirs, temp files) "
        f"and start again.")


def java_temp_dir(data: Path) -> Path:
    """Where a member's JVM puts its temp files (java.io.tmpdir): RocksDB unpacks its ~13 MB native library on
    every start and a killed JVM leaves it behind, so it lives in the data dir and goes with it."""
    directory = data / "tmp"
    directory.mkdir(parents=True, exist_ok=True)
    return directory
