"""What one read task carries from the driver to an executor: the planned entry range of one
partition (`PartitionRange`), or several read in turn (`PackedRanges`), and how to connect
(`ClientConfig`). Spark pickles them into each task, so everything a read needs travels inside;
tokens never show in a repr.

Below planning (which builds them) and reading (which runs them), so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import InputPartition

from .admin_endpoint import AdminEndpoint
from .credentials import Credentials
from .positions import EntryPosition, EntryRuns, MessageBound
from .schemas.columns import ValueSchema

IDLE_CHECK_MS = 200  # how long a read waits before asking whether the broker has anything left to dispatch
READ_PATHS = ("auto", "native", "python")


@dataclass(frozen=True)
class ClientSettings:
    """What a client is created with, the same on both read paths (reading.client_factories.python_client,
    reading.native_reader.create_client): the pulsar.client.* settings, TLS among them, and the client's own
    authentication plugin with its parameters (None: no credentials). Shows neither in its repr."""

    service_url: str
    settings: tuple[tuple[str, Any], ...] = field(repr=False)
    auth: tuple[str, str] | None = field(repr=False)  # (plugin, parameters), as pulsar-client-cpp's factory takes them


@dataclass(frozen=True)
class ClientConfig:
    """How executors connect: travels to every task, never printed with its token. Built from the
    options in one place, SourceOptions.read_task_config."""

    service_url: str
    # pulsar.client.* settings: out of the repr (every PartitionRange's), as out of SourceOptions': what a
    # pass-through setting holds is the user's, and a repr reaches logs and errors.
    client_kwargs: tuple[tuple[str, Any], ...] = field(repr=False)
    reader_kwargs: tuple[tuple[str, Any], ...]
    credentials: Credentials | None  # shows no secret in its repr
    poll_timeout_ms: int
    max_rows_per_batch: int
    # Read tasks look up the metadata of entries the reader never saw (chunks, markers) here.
    admin: AdminEndpoint = AdminEndpoint()
    fail_on_data_loss: bool = True
    incomplete_chunk_wait_ms: int = 60_000
    private_key_path: str | None = None
    public_key_path: str | None = None
    crypto_failure_action: str = "fail"
    value_schema: ValueSchema | None = None  # the topic schema payloads are decoded with (None: raw bytes)
    read_path: str = "auto"  # option readPath: one of READ_PATHS
    # A reader's receiver queue holds 1/read_ahead_share of its range (reading.receiver_queue): 16 under
    # quotas, which protect the bookies from reads past the range; 1 unthrottled, for read speed.
    read_ahead_share: int = 1

    def cache_key(self) -> tuple[Any, ...]:
        return (self.service_url, self.client_kwargs, self.credentials)

    def client_settings(self) -> ClientSettings:
        credentials = self.credentials
        auth = (credentials.plugin, credentials.client_params()) if credentials else None
        return ClientSettings(self.service_url, self.client_kwargs, auth)


@dataclass(frozen=True)
class PartitionRange(InputPartition):
    """Entries after `start` up to and including `end` of one partition (one Spark task).
    `runs` lists the planned entries ledger by ledger; None when planning could not see them.

    A batch query's range may start or end inside a batched entry (startingOffsets/endingOffsets with a
    batchIndex): its tasks still read whole entries, and drop the messages of entry `first_message[:2]`
    before index `first_message[2]`, and those of entry `end_message[:2]` from index `end_message[2]` on.
    A stream's range does the same where maxMessagesPerTrigger cut its start or end offset inside an entry (offsets.py).

    `msgs_per_entry`: the planner's estimate of the partition's messages per entry (1.0 when unknown), and
    `entry_bytes` the range's average stored bytes per entry (0.0 when unknown): the broker counts a reader's
    permits in messages, so its receiver queue is sized in them, within a budget of bytes (reading/receiver_queue.py)."""

    partition: str
    partition_index: int
    start: EntryPosition
    end: EntryPosition
    entries: int
    config: ClientConfig
    runs: EntryRuns | None
    first_message: MessageBound | None
    end_message: MessageBound | None
    msgs_per_entry: float
    entry_bytes: float

    def __init__(self, partition: str, partition_index: int, start: EntryPosition, end: EntryPosition,
                 entries: int, config: ClientConfig, runs: EntryRuns | None = None,
                 first_message: MessageBound | None = None, end_message: MessageBound | None = None,
                 msgs_per_entry: float = 1.0, entry_bytes: float = 0.0) -> None:
        # InputPartition wants a `value`; a frozen dataclass needs object.__setattr__.
        for name, value in (("partition", partition), ("partition_index", partition_index), ("start", start),
                            ("end", end), ("entries", entries), ("config", config), ("runs", runs),
                            ("first_message", first_message), ("end_message", end_message),
                            ("msgs_per_entry", msgs_per_entry), ("entry_bytes", entry_bytes), ("value", None)):
            object.__setattr__(self, name, value)

    def inside_entries(self, first_message: MessageBound | None, end_message: MessageBound | None) -> PartitionRange:
        """This range, starting and ending at these messages (None: on an entry boundary)."""
        return PartitionRange(self.partition, self.partition_index, self.start, self.end, self.entries, self.config,
                              self.runs, first_message, end_message, self.msgs_per_entry, self.entry_bytes)


@dataclass(frozen=True)
class PackedRanges(InputPartition):
    """Several planned ranges read in turn by one Spark task, into one Arrow stream (planning/task_packing.py):
    a micro-batch (a small one, or any under maxTasksPerTrigger) pays a task's fixed costs (Spark's Python runner, ~120 ms a task) once per core rather
    than once per partition. Each range is read exactly as it would be alone (reading/read.py); a retried task
    reads them all again, and Spark drops the failed attempt's rows."""

    ranges: tuple[PartitionRange, ...]

    def __init__(self, ranges: tuple[PartitionRange, ...]) -> None:
        object.__setattr__(self, "ranges", tuple(ranges))
        object.__setattr__(self, "value", None)


ReadTask = PartitionRange | PackedRanges  # what partitions() hands Spark for one task


def ranges_of(task: ReadTask) -> tuple[PartitionRange, ...]:
    """The ranges a task reads, in order."""
    return task.ranges if isinstance(task, PackedRanges) else (task,)
