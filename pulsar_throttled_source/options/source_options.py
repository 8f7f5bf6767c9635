"""What parsing produces: the frozen SourceOptions and the start and end position requests."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..admin_endpoint import AdminEndpoint, QuotaStoreEndpoint
from ..credentials import Credentials, TlsSettings
from ..positions import EntryPosition, MessagePosition
from ..quota_settings import AdaptiveConfig, QuotaConfig, Rate
from ..topics import TopicName

if TYPE_CHECKING:
    from ..read_task import ClientConfig
    from ..schemas.columns import ValueSchema

QuotaSource = Literal["options", "broker", "both"]
# Under quotas a read task's reader asks the broker for a sixteenth of its range at a time, which
# bounds what the broker reads past the range (reading.receiver_queue).
THROTTLED_READ_AHEAD_SHARE = 16


@dataclass(frozen=True)
class StartSpec:
    """Where a new query starts: 'earliest', 'latest', a publish time, or per-partition positions."""

    kind: Literal["earliest", "latest", "time", "positions"]
    time_ms: int | None = None
    # partition -> first entry (or, with a batchIndex, message) to read (inclusive), or "earliest"/"latest"
    positions: tuple[tuple[str, EntryPosition | MessagePosition | str], ...] = ()
    given: bool = False  # startingOffsets or startingTime was set (a batch query defaults to earliest)

    def inside_entries(self) -> dict[str, MessagePosition]:
        """The partitions whose position names a message inside an entry (a batchIndex past 0)."""
        return messages_inside_entries(self.positions)


@dataclass(frozen=True)
class EndSpec:
    """Where a batch query ends: 'latest', a publish time (the first message at or after it is not read),
    or per-partition positions (the first entry not read)."""

    kind: Literal["latest", "time", "positions"]
    # partition -> first entry (or, with a batchIndex, message) not read, or "latest"
    positions: tuple[tuple[str, EntryPosition | MessagePosition | str], ...] = ()
    given: bool = False  # endingOffsets or endingTime was set (only a batch query may set them)
    time_ms: int | None = None

    @property
    def option(self) -> str:
        """The option that set it, for messages."""
        return "endingTime" if self.kind == "time" else "endingOffsets"

    def inside_entries(self) -> dict[str, MessagePosition]:
        """The partitions whose end is a message inside an entry (a batchIndex past 0): read up to it."""
        return messages_inside_entries(self.positions)


def messages_inside_entries(positions: tuple[tuple[str, EntryPosition | MessagePosition | str], ...]) -> dict[str, MessagePosition]:
    """The positions that name a message inside an entry (a batchIndex past 0), by partition."""
    return {p: v for p, v in positions if isinstance(v, MessagePosition) and v.batch_index > 0}


@dataclass(frozen=True)
class SourceOptions:
    """Every option of one query, validated; shipped (pickled) to the executors with the reader."""

    service_url: str
    admin_url: str
    topics: tuple[TopicName, ...]
    topics_pattern: re.Pattern[str] | None
    pattern_namespace: str | None
    subscription: str
    start: StartSpec
    end: EndSpec  # batch queries only
    fail_on_data_loss: bool
    durable_subscription: bool
    poll_timeout_ms: int
    incomplete_chunk_wait_ms: int
    admin_timeout_ms: int
    admin_retry_timeout_ms: int
    metadata_refresh_ms: int
    max_entries_per_trigger: int | None
    max_messages_per_trigger: int | None  # maxMessagesPerTrigger (Kafka's maxOffsetsPerTrigger): planning/message_cap.py
    max_rows_per_arrow_batch: int
    max_entries_per_task: int
    small_batch_tasks: int  # smallBatchTasks: how many tasks a small micro-batch is packed into (planning/task_packing.py)
    max_tasks_per_trigger: int  # maxTasksPerTrigger: at most this many tasks per micro-batch (0: no limit)
    quota: QuotaConfig
    topic_rate: Rate
    subscription_rate: Rate
    quota_source: QuotaSource
    policy_refresh_ms: int
    quota_state_path: str
    quota_store: QuotaStoreEndpoint | None  # quotaStore, quotaStorePassword; None: the SQLite file at quota_state_path
    private_key_path: str | None
    public_key_path: str | None
    crypto_failure_action: str
    read_path: str  # readPath: auto, native or python
    decode_schema: bool
    corrupt_records: bool  # decodeErrorMode=permissive
    # client_kwargs may hold pass-through secrets (e.g. a TLS key password): kept out of repr too.
    client_kwargs: tuple[tuple[str, Any], ...] = field(repr=False)
    reader_kwargs: tuple[tuple[str, Any], ...]
    credentials: Credentials | None  # reads (both read paths); no secret in its repr
    admin_credentials: Credentials | None  # pulsar.admin.*, else the client's
    admin_tls: TlsSettings = TlsSettings()  # pulsar.admin.*, else the client's trust settings
    min_entries_per_trigger: int | None = None  # the trigger floor (planning/trigger_floor.py)
    max_trigger_delay_ms: int = 900_000
    progress_per_partition: bool = False  # the query progress report lists every partition (planning/progress.py)
    adaptive: AdaptiveConfig | None = None  # adaptiveThrottling=true: the controller's knobs (throttling.congestion)

    # -- what the options say to the pieces that connect: the one mapping of each ------------------
    @property
    def admin(self) -> AdminEndpoint:
        """The admin API endpoint, for planning's sessions and (in ClientConfig) read tasks'."""
        return AdminEndpoint(self.admin_url, self.admin_credentials, self.admin_tls, self.admin_timeout_ms)

    def read_task_config(self, value_schema: ValueSchema | None) -> ClientConfig:
        """What a read task needs of the query's options: how to connect, read and decode."""
        from ..read_task import ClientConfig  # the read task's type, loaded where a plan is made

        return ClientConfig(self.service_url, self.client_kwargs, self.reader_kwargs, self.credentials, self.poll_timeout_ms,
                            self.max_rows_per_arrow_batch, admin=self.admin, fail_on_data_loss=self.fail_on_data_loss,
                            incomplete_chunk_wait_ms=self.incomplete_chunk_wait_ms, private_key_path=self.private_key_path,
                            public_key_path=self.public_key_path, crypto_failure_action=self.crypto_failure_action,
                            value_schema=value_schema, read_path=self.read_path,
                            read_ahead_share=THROTTLED_READ_AHEAD_SHARE if self.throttled else 1)

    @property
    def has_option_quotas(self) -> bool:
        return not (self.quota.source.is_unlimited() and self.topic_rate.is_unlimited() and self.subscription_rate.is_unlimited())

    @property
    def uses_broker_quotas(self) -> bool:
        return self.quota_source in ("broker", "both")

    @property
    def throttled(self) -> bool:
        return self.uses_broker_quotas or (self.quota_source in ("options", "both") and self.has_option_quotas)
