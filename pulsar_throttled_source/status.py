"""How far behind a query is, from its checkpoint and the broker, without Spark (issue 39), as Kafka's
consumer-groups tool answers it for a consumer group:

    python -m pulsar_throttled_source.status --checkpoint /chk/orders --admin-url http://pulsar:8080 [--json]

For each partition: the committed position (the end offset of the checkpoint's newest committed batch,
checkpoint_log.py), the newest readable entry, and the lag after it in entries, messages (estimated from
the partition's messages per entry, as the query progress report does: planning/progress.py) and
seconds (the publish time of the oldest unread entry: one admin lookup per partition behind, all within
--timeout); then the state of the query's quota buckets in its quota store (status_quota.py).

Options are the source's own (--option name=value, repeated, or --options-file with a JSON object; a
few have flags of their own), parsed by options.parse_options, so credentials and TLS act exactly as
in the query; no secret is printed. Secrets are not taken on the command line (any user of the host
sees it): credentials go in --options-file, the Redis password there or in PULSAR_THROTTLED_QUOTA_STORE_PASSWORD.
The topics default to those of the checkpoint's partitions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .checkpoint_log import CheckpointError, CommittedBatch, committed_batch
from .metadata.admin import PulsarAdmin
from .metadata.admin_http import AdminError
from .metadata.catalog import CatalogSettings, CatalogSnapshot, PartitionCatalog
from .metadata.publish_times import OldestUnread
from .options import SETTINGS, SourceOptions, parse_options
from .options.passthrough import short_name
from .planning.progress import Lags, partition_lags
from .positions import EntryPosition
from .status_quota import quota_state, quota_table
from .topics import TopicName, partition_sort_key

LOOKUP_TIMEOUT_S = 10.0
PASSWORD_ENV = "PULSAR_THROTTLED_QUOTA_STORE_PASSWORD"  # quotaStorePassword, kept off the command line
_TOPIC_OPTIONS = ("topic", "topics", "topicspattern")


def status(batch: CommittedBatch, options: SourceOptions, timeout_s: float = LOOKUP_TIMEOUT_S) -> dict[str, Any]:
    """The status report of the query whose committed batch is `batch` (see the module doc)."""
    admin = PulsarAdmin.at(options.admin, retry_timeout_s=0.0)
    catalog = PartitionCatalog(admin, CatalogSettings.of(options, streaming=False))
    try:
        snap = catalog.snapshot(force=True)
    finally:
        catalog.close()
    committed = batch.offset.positions
    lags = partition_lags(snap, committed)
    report = lag_report(snap, committed, lags, oldest_unread_ms(admin, lags.behind, timeout_s), time.time())
    partitions = sorted({*snap.layouts, *batch.offset.positions}, key=partition_sort_key)
    return {"checkpoint": str(batch.checkpoint), "batchId": batch.batch_id, "source": batch.source,
            "queryId": batch.offset.query_id, "subscription": options.subscription, **report,
            "quota": quota_state(options, batch.offset.query_id, partitions, time.time())}


def lag_report(snap: CatalogSnapshot, committed: Mapping[str, EntryPosition], lags: Lags, publish: Mapping[str, int],
               now: float) -> dict[str, Any]:
    """Per partition its committed position, newest readable entry and lag (`lags`: partition_lags(snap,
    committed)); the totals as the progress report names them. `publish`: epoch-ms publish time of each
    lagging partition's first unread entry; `now`: epoch seconds."""
    seconds = {p: max(0.0, round(now - publish[p] / 1000.0, 3)) for p in lags.behind if p in publish}
    rows: dict[str, dict[str, Any]] = {}
    for partition in sorted({*lags.partitions, *committed}, key=partition_sort_key):
        position = committed.get(partition)
        lag = lags.partitions.get(partition)
        rows[partition] = {
            "committed": position.to_json() if position is not None else None,  # None: a partition added since
            "latest": snap.readable_end(partition).to_json() if lag is not None else None,  # None: no longer stored
            "entriesBehind": lag.entries if lag else None, "messagesBehind": lag.messages if lag else None,
            "secondsBehind": (seconds.get(partition, None if lag.entries else 0.0)) if lag else None}
    totals = {**lags.totals, "secondsBehindLatest": max(seconds.values(), default=None if lags.behind else 0.0),
              "partitions": len(lags.partitions), "partitionsBehind": len(lags.behind)}
    return {**totals, "perPartition": rows}


def oldest_unread_ms(admin: PulsarAdmin, behind: Mapping[str, EntryPosition], timeout_s: float) -> dict[str, int]:
    """The publish time of each lagging partition's first unread entry (`behind`): one lookup each, as the
    query's progress report asks them (metadata/publish_times.py), all within `timeout_s` (a partition not
    answered by then has no time lag)."""
    return OldestUnread.once(admin, behind, timeout_s)


def source_options(args: argparse.Namespace, batch: CommittedBatch) -> SourceOptions:
    """The query's options as the command's arguments give them, parsed as a query parses its own."""
    raw: dict[str, str] = {}
    if args.options_file:
        with open(args.options_file, encoding="utf-8") as f:
            given = json.load(f)
        if not isinstance(given, dict):
            raise ValueError(f"--options-file {args.options_file}: expected a JSON object of option names and values.")
        raw.update({str(k): "" if v is None else str(v) for k, v in given.items()})
    for item in args.option:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--option {name or item!r}: expected name=value.")
        if is_secret_option(name):  # a command line is seen by every user of the host (ps) and kept in shell histories
            raise ValueError(f"--option {name}: a secret is not taken from the command line; give it in --options-file "
                             f"(a JSON object){' or the environment variable ' + PASSWORD_ENV if name.lower() == 'quotastorepassword' else ''}.")
        raw[name] = value
    if os.environ.get(PASSWORD_ENV) and not any(k.lower() == "quotastorepassword" for k in raw):
        raw["quotaStorePassword"] = os.environ[PASSWORD_ENV]
    for name, value in (("admin.url", args.admin_url), ("subscription", args.subscription),
                        ("quotaStatePath", args.quota_state_path), ("quotaStore", args.quota_store)):
        if value is not None:
            raw[name] = value
    if not any(k.lower() in _TOPIC_OPTIONS for k in raw):
        # The topics the committed offset names (a pattern's new topics only with --option topicsPattern=...).
        bases = dict.fromkeys(str(TopicName.parse(p).base) for p in sorted(batch.offset.positions, key=partition_sort_key))
        if not bases:
            raise ValueError(f"{batch.checkpoint}: the committed offset names no partition; give the query's "
                             "--option topic=... (or topics, topicsPattern).")
        raw["topics"] = ",".join(bases)
    return parse_options(raw, reads=False)  # the status asks the admin API only: service.url may be left out


def is_secret_option(name: str) -> bool:
    """quotaStorePassword, or an authentication setting that holds a secret (pulsar.client.authParams, ...)."""
    key = name.strip().lower()
    if key == "quotastorepassword":
        return True
    return any(key.startswith(s.prefix) and short_name(key, s.prefix) == s.key for s in SETTINGS if s.secret)


def table(report: Mapping[str, Any]) -> str:
    """The report for people: one row per partition, the totals, the quota buckets."""
    def pos(value: Mapping[str, int] | None) -> str:
        return "-" if value is None else f"{value['ledgerId']}:{value['entryId']}"

    def num(value: Any) -> str:
        return "-" if value is None else str(value)

    lines = [f"Checkpoint {report['checkpoint']}: batch {report['batchId']} committed"
             + (f", query {report['queryId']}" if report.get("queryId") else "") + f", subscription {report['subscription']}"]
    rows = [("PARTITION", "COMMITTED", "LATEST", "ENTRIES", "MESSAGES", "SECONDS")]
    rows += [(p, pos(r["committed"]), pos(r["latest"]), num(r["entriesBehind"]), num(r["messagesBehind"]), num(r["secondsBehind"]))
             for p, r in report["perPartition"].items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
              for row in rows]
    lines.append(f"Behind: {report['entriesBehindLatest']} entries (max {report['maxEntriesBehindLatest']}, avg "
                 f"{report['avgEntriesBehindLatest']}), {report['messagesBehindLatest']} messages, "
                 f"{num(report['secondsBehindLatest'])} s (oldest unread message); "
                 f"{report['partitionsBehind']} of {report['partitions']} partitions behind")
    lines += quota_table(report["quota"])
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pulsar_throttled_source.status",
                                     description="How far behind a pulsar-throttled query is, from its checkpoint (no Spark needed).")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpointLocation (a local path)")
    parser.add_argument("--admin-url", help="option admin.url, e.g. http://host:8080 (required here or in --option/--options-file)")
    parser.add_argument("--subscription", help="option subscription (its quota buckets)")
    parser.add_argument("--quota-state-path", help="option quotaStatePath (the SQLite quota store)")
    parser.add_argument("--quota-store", help=f"option quotaStore (redis://[user@]host:port/db; its password from the "
                                              f"environment variable {PASSWORD_ENV} or --options-file)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="any of the source's options but secrets, e.g. dispatchThrottlingRatePerTopicInMsg=1000; repeatable")
    parser.add_argument("--options-file", help="a JSON object of the source's options: where secrets go (pulsar.client.authParams, quotaStorePassword)")
    parser.add_argument("--source", type=int, help="which of the query's sources, when it reads pulsar-throttled twice")
    parser.add_argument("--timeout", type=float, default=LOOKUP_TIMEOUT_S, help="seconds for the publish-time lookups")
    parser.add_argument("--json", action="store_true", help="one JSON object, for machines")
    args = parser.parse_args(argv)
    try:
        batch = committed_batch(args.checkpoint, args.source)
        report = status(batch, source_options(args, batch), args.timeout)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (ValueError, OSError, AdminError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
