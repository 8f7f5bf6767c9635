"""Small builders the unit tests share: partition layouts, planners on a fake catalog, what the quota
engine is asked for, backlogs of entries, and looks into stores and columns that only tests take."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import replace
from typing import Any

from fakes import FakeAdmin, FakeCatalog, FakeClock
from memory_quota_store import MemoryQuotaStore
from pyspark.sql.streaming.datasource import ReadMaxRows
from pyspark.sql.types import DataType, StructField, StructType

from pulsar_throttled_source.backlog_values import BacklogValues, LearnBacklog, LearnedBacklog
from pulsar_throttled_source.metadata.catalog import CatalogSettings, PartitionCatalog
from pulsar_throttled_source.metadata.layout import PartitionLayout
from pulsar_throttled_source.metadata.publish_times import OldestUnread
from pulsar_throttled_source.offsets import LEDGER_ENDS, PROGRESS, QUERY_ID, QUERY_START
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.planner_wiring import build_planner
from pulsar_throttled_source.planning.read_limit import UNLIMITED_ROWS
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.quota_settings import Rate
from pulsar_throttled_source.reading.arrow_rows import Columns
from pulsar_throttled_source.stream_spark40 import LatestOffsetStreamReader
from pulsar_throttled_source.stream_spark42 import AdmissionControlStreamReader
from pulsar_throttled_source.throttling.demands import Admission, PartitionDemand
from pulsar_throttled_source.throttling.sqlite_store import SqliteQuotaStore
from pulsar_throttled_source.topics import TopicName

TOPIC = "persistent://public/default/orders"
P0, P1 = f"{TOPIC}-partition-0", f"{TOPIC}-partition-1"
PLANNER_START = 1_000.25  # the planners' clock: a quarter second into a quota window


# --- layouts and planners


def layout(partition: str, ledgers: list[tuple[int, int]], entry_size: int = 100) -> PartitionLayout:
    """A partition whose closed ledgers hold `entries` each, the last one open."""
    *closed, (open_id, open_entries) = ledgers
    stats = {"ledgers": [{"ledgerId": l, "entries": n, "size": n * entry_size} for l, n in closed]
             + [{"ledgerId": open_id, "entries": 0, "size": 0}],
             "currentLedgerEntries": open_entries, "currentLedgerSize": open_entries * entry_size,
             "lastConfirmedEntry": f"{open_id}:{open_entries - 1}",
             "entriesAddedCounter": sum(n for _, n in ledgers)}
    return PartitionLayout.from_internal_stats(partition, stats)


def backlog_after(entry: int, entries: int):
    """The backlog after `entry` of a partition whose one ledger (5) holds `entries` of 100 bytes."""
    one_ledger = PartitionLayout.from_internal_stats(P0, {
        "ledgers": [{"ledgerId": 5, "entries": 0, "size": 0}], "lastConfirmedEntry": f"5:{entries - 1}",
        "currentLedgerEntries": entries, "currentLedgerSize": entries * 100, "entriesAddedCounter": entries})
    return one_ledger.backlog_after(EntryPosition(5, entry))


# A query's required URLs; unit tests answer from fakes, so nothing is ever reached there.
URLS = {"service.url": "pulsar://localhost:6650", "admin.url": "http://localhost:8080"}


def _options(tmp_path, defaults: dict[str, str], options: dict[str, object]):
    raw = {**URLS, "topic": TOPIC, "startingOffsets": "earliest", "quotaStatePath": str(tmp_path / "quota.sqlite"), **defaults}
    raw |= {k: str(v) for k, v in options.items()}
    return parse_options({k.lower(): v for k, v in raw.items()})


def reader(tmp_path, catalog: FakeCatalog, clock: FakeClock | None = None, publish_ms: dict[str, Any] | None = None,
           **options: object) -> AdmissionControlStreamReader:
    """The 4.2+ reader on `catalog` (publish times: see on_catalog)."""
    clock = clock or FakeClock(PLANNER_START)
    return on_catalog(AdmissionControlStreamReader(_options(tmp_path, {}, options), clock, sleep=clock.sleep), catalog, publish_ms)


def reader40(tmp_path, catalog: FakeCatalog, clock: FakeClock, **options: object) -> LatestOffsetStreamReader:
    """The 4.0/4.1 reader on `catalog` (batch mode, 10 messages a window unless told)."""
    defaults = {"throttlingMode": "batch", "dispatchThrottlingRatePerTopicInMsg": "10"}
    return on_catalog(LatestOffsetStreamReader(_options(tmp_path, defaults, options), clock, sleep=clock.sleep), catalog)


def on_catalog(r, catalog: FakeCatalog, publish_ms: dict[str, Any] | None = None):
    """The reader with its planner built on `catalog`, as the planner process builds it but for the catalog and
    the publish times its progress reports look up: in `publish_ms` (partition -> the publish-time header of every entry), not
    on a broker."""
    known = publish_ms or {}

    def oldest_unread() -> OldestUnread:
        return OldestUnread(lambda p, e: {"X-Pulsar-publish-time": known[p]} if p in known else None)
    r._planner = build_planner(r.options, r.value_schema, r._clock, r._sleep, r.progress_in_offset, catalog=catalog,
                               oldest_unread=oldest_unread)
    return r


def catalog_of(admin: FakeAdmin, clock: FakeClock, *topics: str, pattern: str | None = None, streaming: bool = True,
               on_topics: Callable[[list[TopicName]], None] | None = None, **options: object) -> PartitionCatalog:
    """A PartitionCatalog of the named topics (or `pattern`) on a fake admin API, built as every caller builds it,
    from the query's options (a stream's unless `streaming` is False); its snapshots fetched when asked, never by
    a refresh thread: the fake clock moves time."""
    which = {"topicsPattern": pattern} if pattern else {"topics": ",".join(topics)}
    parsed = parse_options({**URLS, **which, **{k: str(v) for k, v in options.items()}})
    settings = replace(CatalogSettings.of(parsed, streaming=streaming), in_background=False)
    return PartitionCatalog(admin, settings, on_topics, clock)  # type: ignore[arg-type]


def positions(offsets: dict) -> dict[str, tuple[int, int]]:
    return {p: (v["ledgerId"], v["entryId"]) for p, v in offsets.items() if p not in (QUERY_START, QUERY_ID, LEDGER_ENDS, PROGRESS)}


def unlimited() -> ReadMaxRows:
    return ReadMaxRows(UNLIMITED_ROWS)


# --- what the quota engine is asked for


def _learned_from(counts: list[int]) -> LearnBacklog:
    """A backlog whose entries hold `counts` messages each, learned the way the planner does:
    the entries that hold the asked-for messages, and one more."""

    def learn(msgs: float, size: float) -> LearnedBacklog:
        known, total = [], 0
        for count in counts:
            known.append(count)
            if total >= msgs:
                break
            total += count
        return LearnedBacklog(BacklogValues(tuple(known)))  # bytes: the ledger averages

    return learn


def demand(
    partition: str = P0,
    backlog: int = 1000,
    entry_bytes: int = 100,
    msgs_per_entry: int | list[int] | None = 1,
    topic: Rate | None = None,
    subscription: Rate | None = None,
    subscription_name: str = "sub",
    publish_msgs: float = 0.0,
    publish_bytes: float = 0.0,
    topic_rates: tuple[tuple[str, Rate], ...] | None = None,
) -> PartitionDemand:
    counts = [msgs_per_entry] * backlog if isinstance(msgs_per_entry, int) else msgs_per_entry
    return PartitionDemand(
        partition=partition,
        subscription=subscription_name,
        backlog_entries=backlog,
        bytes_for=lambda k: float(k * entry_bytes),
        learn_backlog=None if counts is None else _learned_from(counts),
        publish_rate_msgs=publish_msgs,
        publish_rate_bytes=publish_bytes,
        topic_rates=topic_rates
        if topic_rates is not None
        else ((("options", topic),) if topic else ()),
        subscription_rates=(("options", subscription),) if subscription else (),
    )


def entries(admissions: Sequence[Admission]) -> list[int]:
    return [a.entries for a in admissions]


def entries_holding(estimate, msgs: float) -> int:
    """How many entries an admission of `msgs` messages (or bytes) takes, as the engine prices them."""
    held = 0
    while estimate.total(held + 1) <= msgs:
        held += 1
    return held


# --- a write's columns


def columns(*fields: tuple[str, DataType]) -> StructType:
    """A DataFrame's columns, (name, type) each, all nullable: what a write (the sink) is given."""
    return StructType([StructField(name, kind, True) for name, kind in fields])


# --- looks only tests take


def stored_keys(store: MemoryQuotaStore | SqliteQuotaStore) -> list[str]:
    """Every bucket key a quota store holds, sorted: for a file, read from the file itself."""
    if isinstance(store, SqliteQuotaStore):
        with closing(sqlite3.connect(store.path)) as conn:
            return [row[0] for row in conn.execute("SELECT key FROM buckets ORDER BY key")]
    return sorted(store._rows)


def add_row(columns: Columns, msg: Any, serialized_id: bytes, publish_ms: int, producer: str) -> None:
    """One message into `columns` through the appends the read loop makes; `publish_ms` and `producer`
    are its entry's."""
    _, add_msg, add_id, add_publish_ms, add_producer = columns.appenders()
    add_msg(msg)
    add_id(serialized_id)
    add_publish_ms(publish_ms)
    add_producer(producer)
