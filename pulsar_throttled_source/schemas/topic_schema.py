"""Driver side: which columns a query has, from the schemas its topics carry (admin API, when the
query is defined). Every topic of one query must carry the same schema, or none; a schema type
this source does not decode (PROTOBUF, PROTOBUF_NATIVE, AUTO_*) keeps the raw layout, with a WARN
naming it."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..topics import TopicName
from .columns import DECODED_KINDS, PART_KINDS, RECORD_KINDS, ValueSchema

if TYPE_CHECKING:
    from ..metadata.admin import PulsarAdmin
    from ..options.source_options import SourceOptions

log = logging.getLogger("pulsar_throttled_source")

RAW_KINDS = ("NONE", "BYTES")  # no schema to decode: the payload is the value


def value_schema_of(admin: PulsarAdmin, topics: Sequence[TopicName], corrupt_records: bool) -> ValueSchema | None:
    """The decoding for these topics' latest schema; None for the raw layout (no schema, or one
    not decoded here). Raises ValueError when the topics disagree."""
    found = {str(topic.base): schema_from_info(admin.topic_schema(topic), corrupt_records) for topic in topics}
    if not found:
        return None  # a pattern that matches nothing yet: raw bytes
    if len(set(found.values())) > 1:
        listed = "; ".join(f"{topic}: {describe(schema)}" for topic, schema in sorted(found.items()))
        raise ValueError(f"The topics of this query carry different schemas ({listed}); one query decodes one "
                         "schema. Read them in separate queries, or set decodeSchema=false to read every payload as bytes.")
    schema = next(iter(found.values()))
    if schema.kind == "NONE":
        return None
    if not decodable(schema):
        log.warning("Topic(s) %s carry a %s schema, which this source does not decode yet: payloads are read as raw "
                    "bytes in the 'value' column (decodeSchema=false says so explicitly).", ", ".join(sorted(found)),
                    describe(schema, definition=False))
        return None
    _ = schema.arrow_schema  # an unsupported construct or a clashing field fails here, at load
    return schema


def schema_from_info(info: dict[str, Any] | None, corrupt_records: bool) -> ValueSchema:
    """A topic's schema as the admin API gives it ({type, data, properties}; None: no schema), with
    its definition in a canonical form, so two topics with the same schema compare equal."""
    kind = str(info.get("type", "NONE")).upper() if info else "NONE"
    if kind in RAW_KINDS:
        return ValueSchema("NONE")  # no schema and BYTES read the same
    data = _canonical(str(info.get("data") or "")) if info else ""
    if kind == "STRING":
        return ValueSchema(kind, "", corrupt_records)
    if kind != "KEY_VALUE":
        return ValueSchema(kind, data, corrupt_records)
    props = (info or {}).get("properties") or {}
    key_kind, value_kind = (str(props.get(f"{side}.schema.type", "BYTES")).upper().replace("NONE", "BYTES") for side in ("key", "value"))
    return ValueSchema(kind, data, corrupt_records, key_kind, value_kind,
                       separated=str(props.get("kv.encoding.type", "INLINE")).upper() == "SEPARATED")


def decodable(schema: ValueSchema) -> bool:
    if schema.kind == "KEY_VALUE":
        return schema.key_kind in PART_KINDS and schema.value_kind in PART_KINDS
    return schema.kind in DECODED_KINDS


def describe(schema: ValueSchema, definition: bool = True) -> str:
    """A schema for an error message: its type, a KeyValue's sides and encoding, then its definition."""
    kind = schema.kind
    if kind == "KEY_VALUE":
        kind = f"KEY_VALUE<{schema.key_kind}, {schema.value_kind}> {'SEPARATED' if schema.separated else 'INLINE'}"
        definition = definition and RECORD_KINDS.count(schema.key_kind) + RECORD_KINDS.count(schema.value_kind) > 0
    return kind + (f" {_short(schema.definition)}" if definition and schema.definition else "")


def _canonical(data: str) -> str:
    try:
        return json.dumps(json.loads(data), sort_keys=True) if data else ""
    except ValueError:
        return data


def _short(data: str) -> str:
    return data if len(data) <= 80 else data[:77] + "..."


def value_schema_for(options: SourceOptions) -> ValueSchema | None:
    """The decoding of a query's topics as they are now (None: raw bytes, or decodeSchema=false). The one admin
    session load() opens: named topics are checked to exist here too, so a missing one fails at load()."""
    from ..metadata.admin import PulsarAdmin
    from ..metadata.catalog import check_topics_exist, current_topics

    o = options
    admin = PulsarAdmin.for_planning(o)
    try:
        if o.topics_pattern is None:
            check_topics_exist(admin, o.topics)
        if not o.decode_schema:
            return None
        return value_schema_of(admin, current_topics(admin, o.topics, o.topics_pattern, o.pattern_namespace), o.corrupt_records)
    finally:
        admin.close()
