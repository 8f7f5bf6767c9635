"""Driver side: which columns a query has, from the schemas its topics carry (admin API, when the
query is defined). Every topic of one query must carry the same schema, or none; a schema type
this source does not decode yet keeps the raw layout, with a WARN naming it."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..topics import TopicName
from .columns import DECODED_KINDS, ValueSchema

if TYPE_CHECKING:
    from ..metadata.admin import PulsarAdmin
    from ..options.model import SourceOptions

log = logging.getLogger("pulsar_throttled_source")

RAW_KINDS = ("NONE", "BYTES")  # no schema to decode: the payload is the value


def value_schema_of(admin: PulsarAdmin, topics: Sequence[TopicName], corrupt_records: bool) -> ValueSchema | None:
    """The decoding for these topics' latest schema; None for the raw layout (no schema, or one
    not decoded here). Raises ValueError when the topics disagree."""
    found: dict[str, tuple[str, str]] = {}  # topic -> (type, definition)
    for topic in topics:
        info = admin.topic_schema(topic)
        kind = str(info.get("type", "NONE")).upper() if info else "NONE"
        kind = "NONE" if kind in RAW_KINDS else kind  # no schema and BYTES read the same
        found[str(topic.base)] = (kind, str(info.get("data") or "") if info else "")
    if not found:
        return None  # a pattern that matches nothing yet: raw bytes
    kinds = {kind for kind, _ in found.values()}
    if len(kinds) > 1 or len({_canonical(kind, data) for kind, data in found.values()}) > 1:
        listed = "; ".join(f"{topic}: {kind}" + (f" {_short(data)}" if data else "") for topic, (kind, data) in sorted(found.items()))
        raise ValueError(f"The topics of this query carry different schemas ({listed}); one query decodes one "
                         "schema. Read them in separate queries, or set decodeSchema=false to read every payload as bytes.")
    kind, definition = next(iter(found.values()))
    if kind in RAW_KINDS:
        return None
    if kind not in DECODED_KINDS:
        log.warning("Topic(s) %s carry a %s schema, which this source does not decode yet: payloads are read as raw "
                    "bytes in the 'value' column (decodeSchema=false says so explicitly).", ", ".join(sorted(found)), kind)
        return None
    schema = ValueSchema(kind, definition if kind != "STRING" else "", corrupt_records)
    _ = schema.arrow_schema  # an unsupported construct or a clashing field fails here, at load
    return schema


def _canonical(kind: str, data: str) -> str:
    try:
        return kind + json.dumps(json.loads(data), sort_keys=True) if data else kind
    except ValueError:
        return kind + data


def _short(data: str) -> str:
    return data if len(data) <= 80 else data[:77] + "..."


def value_schema_for(options: SourceOptions) -> ValueSchema | None:
    """The decoding of a query's topics as they are now (None: raw bytes, or decodeSchema=false)."""
    if not options.decode_schema:
        return None
    from ..metadata.admin import PulsarAdmin
    from ..metadata.catalog import current_topics

    o = options
    admin = PulsarAdmin.for_planning(o)
    try:
        return value_schema_of(admin, current_topics(admin, o.topics, o.topics_pattern, o.pattern_namespace), o.corrupt_records)
    finally:
        admin.close()
