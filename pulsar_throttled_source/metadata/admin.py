"""The admin API lookups the source makes: partitions, ledgers (internal stats), publish stats,
dispatch-rate policies, the transaction buffer, single entries' metadata, message ids by time,
and the durable subscription's cursor. The HTTP plumbing (credentials, errors, retries) is in
`admin_http`; calls only tests and benchmarks make are in tests/topic_admin.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..positions import BEFORE_EARLIEST, EntryPosition
from ..topics import TopicName, namespace_rest_path
from .admin_http import AdminError, AdminHttp, TopicNotFound

if TYPE_CHECKING:
    from ..options.source_options import SourceOptions
    from ..read_task import ClientConfig

# Topic stats without their per-producer and per-consumer lists (only the counters are read): less
# to send and parse per partition (bench/README.md, "Figures behind the code"); brokers older than these parameters
# (apache/pulsar#21200, 2023) ignore them, as the REST API ignores any unknown one.
LEAN_STATS = {"excludePublishers": "true", "excludeConsumers": "true"}


QUICK_CHECK_S = 5.0


class PulsarAdmin(AdminHttp):
    """Lookups on one admin API endpoint; every method raises AdminError (TopicNotFound where said)."""

    @classmethod
    def for_planning(cls, options: SourceOptions) -> PulsarAdmin:
        """The driver's session: lookups retried for adminRetryTimeoutMs once the API has answered."""
        return cls.at(options.admin, retry_timeout_s=options.admin_retry_timeout_ms / 1000.0)

    @classmethod
    def for_read_task(cls, cfg: ClientConfig) -> PulsarAdmin:
        """A read task's session: lookups ride through a broker restart for as long as a read would
        wait (pollTimeoutMs), on a URL the driver planned with (known good: a failure there is an
        outage, not a wrong URL)."""
        return cls.at(cfg.admin, retry_timeout_s=cfg.poll_timeout_ms / 1000.0, known_good=True)

    @classmethod
    def for_quick_checks(cls, cfg: ClientConfig) -> PulsarAdmin:
        """A read task's session for checks made while it waits on something else (is the topic
        gone?): one attempt, a few seconds at most; what it cannot answer is asked again later."""
        quick = replace(cfg.admin, timeout_ms=min(cfg.admin.timeout_ms, int(QUICK_CHECK_S * 1000)))
        return cls.at(quick, retry_timeout_s=0.0, known_good=True)

    # -- topics -----------------------------------------------------------------------------
    def partition_count(self, topic: TopicName) -> int:
        """Partitions of a partitioned topic; 0 for a non-partitioned topic. Raises TopicNotFound."""
        missing = f"Topic {topic} does not exist (neither partitioned nor non-partitioned) on {self.base}."
        meta = self.call("GET", f"{topic.rest_path}/partitions", f"reading the partitions of {topic}",
                         params={"checkAllowAutoCreation": "false"}, not_found=missing)
        count = int(meta.get("partitions", 0)) if meta else 0
        if count == 0 and not self.topic_exists(topic):
            raise TopicNotFound(missing)
        return count

    def topic_exists(self, topic: TopicName) -> bool:
        """Whether a non-partitioned topic exists: asked of the topic itself, which a role granted
        'consume' on that topic alone may do (listing its namespace needs a grant on the namespace)."""
        try:
            self.internal_stats(topic)
        except TopicNotFound:
            return False
        return True

    def list_topics(self, namespace: str) -> list[str]:
        """All persistent topics of a namespace, partitions listed individually."""
        return list(self.call("GET", f"persistent/{namespace_rest_path(namespace)}", f"listing the topics of namespace {namespace}",
                              not_found=f"Namespace {namespace} does not exist on {self.base}.", expect=list))

    def internal_stats(self, partition: TopicName) -> dict[str, Any]:
        return self.call("GET", f"{partition.rest_path}/internalStats", f"reading the ledgers of {partition}",
                         not_found=f"Topic {partition} does not exist on {self.base}.", expect="ledgers")

    def partitioned_internal_stats(self, topic: TopicName) -> dict[str, dict[str, Any]]:
        """internalStats of every partition of a partitioned topic in one request."""
        body = self.call("GET", f"{topic.rest_path}/partitioned-internalStats", f"reading the ledgers of {topic}",
                         not_found=f"Topic {topic} does not exist on {self.base}.", expect="partitions")
        found = dict(body["partitions"] or {})
        count = int((body.get("metadata") or {}).get("partitions", 0) or 0)
        for i in range(count):
            name = topic.partition(i)
            if not isinstance(found.get(str(name)), dict) or "ledgers" not in found[str(name)]:
                # A partition the broker could not load just now (it is starting or stopping) is left
                # out of the answer: ask for it alone, so it is retried rather than taken as gone.
                try:
                    found[str(name)] = self.internal_stats(name)
                except TopicNotFound:
                    found.pop(str(name), None)
        return found

    def create_subscription(self, partition: TopicName, subscription: str, consumed_up_to: EntryPosition) -> None:
        """A durable subscription on one partition whose cursor has consumed everything up to and
        including `consumed_up_to`; an existing subscription is left as it is."""
        try:
            self.call("PUT", f"{partition.rest_path}/subscription/{quote(subscription, safe='')}",
                      f"creating subscription {subscription} on {partition}", json=_cursor_body(partition, consumed_up_to))
        except AdminError as e:
            if "already exists" not in str(e):
                raise

    def mark_consumed(self, partition: TopicName, subscription: str, up_to: EntryPosition) -> None:
        """Move a subscription's cursor so that every entry up to and including `up_to` is consumed."""
        self.call("POST", f"{partition.rest_path}/subscription/{quote(subscription, safe='')}/resetcursor",
                  f"moving subscription {subscription} of {partition} past {up_to}", json=_cursor_body(partition, up_to))

    def max_read_position(self, partition: TopicName) -> str | None:
        """The transaction buffer's max read position ("ledger:entry") while a transaction is open on the
        partition (the broker dispatches nothing past it), else None. Without an open transaction the
        position can lag the newest entries (it is refreshed lazily), so it is not a limit then.
        Raises TransactionsDisabled."""
        body = self.call("GET", f"transactions/transactionBufferStats/{partition.rest_path.split('/', 1)[1]}",
                         f"reading the transaction buffer of {partition}", api="v3",
                         not_found=f"Topic {partition} does not exist on {self.base}.", expect="maxReadPosition")
        return str(body["maxReadPosition"]) if int(body.get("ongoingTxnSize") or 0) > 0 else None

    def stats(self, partition: TopicName) -> dict[str, Any]:
        return self.call("GET", f"{partition.rest_path}/stats", f"reading the stats of {partition}", params=LEAN_STATS,
                         not_found=f"Topic {partition} does not exist on {self.base}.")

    def partitioned_stats(self, topic: TopicName) -> dict[str, dict[str, Any]]:
        body = self.call("GET", f"{topic.rest_path}/partitioned-stats", f"reading the stats of {topic}",
                         params={"perPartition": "true", **LEAN_STATS},
                         not_found=f"Topic {topic} does not exist on {self.base}.", expect="partitions")
        return dict(body["partitions"] or {})

    def entry_headers(self, partition: TopicName, ledger_id: int, entry_id: int) -> dict[str, str] | None:
        """The broker's metadata headers of one stored entry (chunk, transaction, encryption), or None
        when it is no longer stored. HEAD: the broker reads the entry but only headers travel."""
        try:
            return self.call("HEAD", f"{partition.rest_path}/ledger/{ledger_id}/entry/{entry_id}",
                             f"reading the metadata of entry {ledger_id}:{entry_id} of {partition}", not_found="gone")
        except TopicNotFound:
            return None

    def message_id_by_timestamp(self, partition: TopicName, timestamp_ms: int) -> dict[str, Any]:
        return self.call("GET", f"{partition.rest_path}/messageid/{timestamp_ms}",
                         f"finding the first message of {partition} published at or after {timestamp_ms}",
                         not_found=f"No message of {partition} was published at or after {timestamp_ms}.")

    # -- schemas ----------------------------------------------------------------------------
    def topic_schema(self, topic: TopicName, version: int | None = None) -> dict[str, Any] | None:
        """The topic's schema (`type`, `data`, `version`, `properties`), its latest or the given
        version; None when the topic has no schema (or never had that version)."""
        base = topic.base
        path = f"schemas/{namespace_rest_path(base.namespace_name)}/{quote(base.local, safe='')}/schema"
        what = f"reading the schema of {base}" + (f" (version {version})" if version is not None else "")
        try:
            return self.call("GET", path if version is None else f"{path}/{version}", what, not_found="none", expect="type")
        except TopicNotFound:
            return None

    def deduplication_enabled(self, topic: TopicName) -> bool:
        """Whether the broker deduplicates messages on `topic` (its applied policy: topic > namespace > broker)."""
        answer = self.call("GET", f"{topic.rest_path}/deduplicationEnabled", f"reading whether {topic} deduplicates",
                           params={"applied": "true"}, not_found=f"Topic {topic} does not exist on {self.base}.")
        return answer is True or str(answer).lower() == "true"

    # -- dispatch-rate policies -------------------------------------------------------------
    def dispatch_rate(self, topic: TopicName, applied: bool = True) -> dict[str, Any] | None:
        return self.call("GET", f"{topic.rest_path}/dispatchRate", f"reading the dispatch rate of {topic}",
                         params={"applied": str(applied).lower()}, not_found=f"Topic {topic} does not exist on {self.base}.")

    def subscription_dispatch_rate(self, topic: TopicName, applied: bool = True) -> dict[str, Any] | None:
        return self.call("GET", f"{topic.rest_path}/subscriptionDispatchRate", f"reading the subscription dispatch rate of {topic}",
                         params={"applied": str(applied).lower()}, not_found=f"Topic {topic} does not exist on {self.base}.")


def _cursor_body(partition: TopicName, consumed_up_to: EntryPosition) -> dict[str, int]:
    """The broker places a cursor's read position at the given id (mark-delete just before it), so
    the entry after the last consumed one is sent; past a ledger's end the broker moves on itself."""
    if consumed_up_to == BEFORE_EARLIEST:
        return {"ledgerId": -1, "entryId": -1, "partitionIndex": partition.partition_index}
    return {"ledgerId": consumed_up_to.ledger_id, "entryId": consumed_up_to.entry_id + 1, "partitionIndex": partition.partition_index}

