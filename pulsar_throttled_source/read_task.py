"""What one read task carries from the driver to an executor: the planned entry range of one
partition (`PartitionRange`) and how to connect (`ClientConfig`). Spark pickles them into each
task, so everything a read needs travels inside; tokens never show in a repr.

Below planning (which builds them) and reading (which runs them), so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import InputPartition

from .positions import EntryPosition, EntryRuns
from .schemas.columns import ValueSchema
from .shared_types import AdminEndpoint

IDLE_CHECK_MS = 200  # how long a read waits before asking whether the broker has anything left to dispatch
READ_PATHS = ("auto", "native", "python")


@dataclass(frozen=True)
class ClientConfig:
    """How executors connect: travels to every task, never printed with its token. Built from the
    options in one place, SourceOptions.read_task_config."""

    service_url: str
    client_kwargs: tuple[tuple[str, Any], ...]
    reader_kwargs: tuple[tuple[str, Any], ...]
    auth_token: str | None = field(repr=False)
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

    def cache_key(self) -> tuple[Any, ...]:
        return (self.service_url, self.client_kwargs, self.auth_token)


@dataclass(frozen=True)
class PartitionRange(InputPartition):
    """Entries after `start` up to and including `end` of one partition (one Spark task).
    `runs` lists the planned entries ledger by ledger; None when planning could not see them."""

    partition: str
    partition_index: int
    start: EntryPosition
    end: EntryPosition
    entries: int
    config: ClientConfig
    runs: EntryRuns | None

    def __init__(self, partition: str, partition_index: int, start: EntryPosition, end: EntryPosition,
                 entries: int, config: ClientConfig, runs: EntryRuns | None = None) -> None:
        # InputPartition wants a `value`; a frozen dataclass needs object.__setattr__.
        for name, value in (("partition", partition), ("partition_index", partition_index), ("start", start),
                            ("end", end), ("entries", entries), ("config", config), ("runs", runs), ("value", None)):
            object.__setattr__(self, name, value)
