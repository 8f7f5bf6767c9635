"""Executor side: the rows of one read task over a topic with a schema, as Arrow record batches in
the query's columns (schemas/columns.py): the decoded fields, then the metadata columns.

A payload that cannot be decoded fails the task naming its message (decodeErrorMode=failfast), or
becomes a row with null fields and its bytes in __corruptRecord (permissive). A message with
a null value (a tombstone) is a row with null fields: it is neither dropped nor an error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ..read_task import ClientConfig
from ..schemas.columns import RECORD_KINDS, ValueSchema
from ..schemas.decoders import DecodeError, PayloadDecoder
from ..topics import TopicName
from .arrow_rows import Columns, metadata_arrays
from .native_reader import ExportedBatch

# Writer schemas by (admin URL, topic, version), for the life of the worker process: a schema
# version never changes once registered.
_WRITER_SCHEMAS: dict[tuple[str, str, int], str | None] = {}


STRUCT_KINDS = (*RECORD_KINDS, "KEY_VALUE")  # rows are dicts, one column per top-level field


class UndecodablePayload(RuntimeError):
    """decodeErrorMode=failfast: the message that could not be decoded, and why."""


def decoder_for(partition: str, cfg: ClientConfig) -> PayloadDecoder:
    assert cfg.value_schema is not None
    topic = TopicName.parse(partition).base

    def writer_schema(version: int) -> str | None:
        key = (cfg.admin.url, str(topic), version)
        if key not in _WRITER_SCHEMAS:
            from ..metadata.admin import PulsarAdmin

            admin = PulsarAdmin.for_read_task(cfg)
            try:
                info = admin.topic_schema(topic, version)
            finally:
                admin.close()
            _WRITER_SCHEMAS[key] = str(info.get("data") or "") if info else None
        return _WRITER_SCHEMAS[key]

    return PayloadDecoder(cfg.value_schema, writer_schema)


class DecodedColumns(Columns):
    """The messages of one Arrow batch of decoded rows: the raw columns (the payloads stay in
    `value`), plus each payload decoded when the batch is built."""

    __slots__ = ("_decoder", "_partition", "_schema")

    def __init__(self, decoder: PayloadDecoder, partition: str) -> None:
        super().__init__()
        self._decoder = decoder
        self._partition = partition
        self._schema: ValueSchema = decoder.schema

    def to_batch(self, partition: str, partition_index: int) -> pa.RecordBatch:
        msgs = self.msgs

        def describe(i: int) -> str:
            mid = msgs[i].message_id()
            return f"{mid.ledger_id()}:{mid.entry_id()}:{mid.batch_index()}"

        decoded, corrupt = decode_payloads(self._decoder, self._partition, self.values(), self._field("partition_key"),
                                           self._field("int_schema_version"), describe)
        return decoded_batch(self._schema, decoded, corrupt, metadata_arrays(self, partition, partition_index))


def decode_payloads(decoder: PayloadDecoder, partition: str, payloads: list[bytes | None], keys: list[str],
                    versions: list[int], describe: Callable[[int], str]) -> tuple[list[Any], list[bytes | None]]:
    """Each payload decoded (None: a null value, a row of null fields; a SEPARATED KeyValue keeps its
    key), and the payloads that could not be (permissive) or the error naming the message (failfast)."""
    schema = decoder.schema
    decoded: list[Any] = []
    corrupt: list[bytes | None] = []
    for i, (payload, key, version) in enumerate(zip(payloads, keys, versions, strict=True)):
        value: Any = None
        bad = None
        try:
            value = decoder.decode(payload, version, key)
        except DecodeError as e:
            if not schema.corrupt_records:
                raise UndecodablePayload(
                    f"Cannot decode message {describe(i)} of {partition} "
                    f"with the topic's {schema.kind} schema ({e}). Set decodeErrorMode=permissive to keep such "
                    "payloads in the __corruptRecord column, or decodeSchema=false to read raw bytes.") from None
            bad = payload if payload is not None else b""
        decoded.append(value)
        corrupt.append(bad)
    return decoded, corrupt


def decoded_batch(schema: ValueSchema, decoded: list[Any], corrupt: list[bytes | None],
                  metadata: list[pa.Array]) -> pa.RecordBatch:
    """The query's columns: the decoded fields, the metadata columns, __corruptRecord if asked."""
    if schema.kind in STRUCT_KINDS:
        # One pass in Arrow over the rows' dicts (a None row: null fields), then one column per
        # field: cheaper than a Python pass per field (bench/README.md, "Figures behind the code").
        value_columns = pa.array(decoded, schema.column_type).flatten()
    else:
        value_columns = [pa.array(decoded, schema.column_type)]
    columns = [*value_columns, *metadata]
    if schema.corrupt_records:
        columns.append(pa.array(corrupt, pa.binary()))
    return pa.RecordBatch.from_arrays(columns, schema=schema.arrow_schema)


def decode_native_batch(exported: ExportedBatch, decoder: PayloadDecoder, partition: str, partition_index: int) -> pa.RecordBatch:
    """The rows of one batch of the native read path, decoded from its value column."""
    ids = exported.message_ids()

    def describe(i: int) -> str:
        import pulsar

        mid = pulsar.MessageId.deserialize(ids[i].as_py())
        return f"{mid.ledger_id()}:{mid.entry_id()}:{mid.batch_index()}"

    keys = [k or "" for k in exported.keys().to_pylist()]  # the client reports "no key" as ""
    decoded, corrupt = decode_payloads(decoder, partition, exported.values().to_pylist(), keys,
                                       exported.schema_versions().to_pylist(), describe)
    return decoded_batch(decoder.schema, decoded, corrupt, exported.metadata_arrays(partition, partition_index))
