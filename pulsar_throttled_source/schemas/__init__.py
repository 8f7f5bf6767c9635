"""Pulsar schemas as Spark columns: what a topic's schema is (driver, admin API), which columns it
gives (Avro types to Arrow and Spark types), and how read tasks decode payloads into them."""
