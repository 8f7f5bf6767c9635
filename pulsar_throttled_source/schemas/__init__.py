"""Pulsar schemas as Spark columns: what a topic's schema is (driver, admin API), which columns it
gives (Avro types to Arrow and Spark types), and how read tasks decode payloads into them.

- ``topic_schema``: which columns a query has, from its topics' schemas (at load).
- ``columns``: the columns, declared once: the raw layout and a schema's.
- ``avro_types``: Avro types as Arrow and Spark types; ``primitives``: primitive payloads.
- ``decoders``: payloads of any schema version into the query's columns (read tasks).
- ``schema_guard``: the schema of topics a pattern matches later, checked against the query's columns.
"""
