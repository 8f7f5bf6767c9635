"""Driver side: the schema of each topic a running query comes to read, against the columns the
query was defined with. A pattern query's columns are fixed when it is defined, but topics
matching the pattern appear later; a topic whose schema is of another type than the query decodes
would give payloads the query cannot read, so the query stops naming it, before any of its
messages is planned (rather than failing on its first message, or reading garbage into columns).
Schema versions of the same type are fine: each message is decoded from its writer's version."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..topics import TopicName
from .columns import ValueSchema
from .topic_schema import describe, schema_from_info

if TYPE_CHECKING:
    from ..metadata.admin import PulsarAdmin

log = logging.getLogger("pulsar_throttled_source")


class SchemaMismatch(ValueError):
    """A topic the query reads carries a schema of another type than the query's columns."""


class TopicSchemaGuard:
    """Checks each topic once, the first time the query sees it (one admin request per topic).
    A topic without a schema yet, on a query that decodes, is asked again at later refreshes: its
    first producer may not have connected yet."""

    def __init__(self, admin: PulsarAdmin, query_schema: ValueSchema | None) -> None:
        self._admin = admin
        self._query = query_schema  # None: the raw layout
        self._checked: set[TopicName] = set()

    def check(self, topics: Iterable[TopicName]) -> None:
        for topic in topics:
            if topic in self._checked:
                continue
            found = schema_from_info(self._admin.topic_schema(topic), False)
            if self._query is None:
                self._checked.add(topic)
                if found.kind != "NONE":
                    log.warning("Topic %s carries schema type %s, but this query reads raw bytes: its columns were fixed when it "
                                "was defined, when its topics carried no schema. Define the query again to decode it.",
                                topic, describe(found, definition=False))
                continue
            if found.kind == "NONE":
                continue
            if not same_type(found, self._query):
                # Not marked checked: every later refresh (the catalog's background one fails, then the
                # planning call's own) refuses it again, before any of its entries is planned.
                raise SchemaMismatch(
                    f"Topic {topic} carries schema type {describe(found, definition=False)}, but this query decodes "
                    f"{describe(self._query, definition=False)} (the schema its topics carried when it was defined): its "
                    "payloads cannot become this query's columns. Read it in a query of its own, or read every topic "
                    "with decodeSchema=false.")
            self._checked.add(topic)


def same_type(a: ValueSchema, b: ValueSchema) -> bool:
    """Whether payloads of schema `a` decode into the columns of `b` (versions of a record differ)."""
    return (a.kind, a.key_kind, a.value_kind, a.separated) == (b.kind, b.key_kind, b.value_kind, b.separated)
