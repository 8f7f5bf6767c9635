"""Entry headers as a real broker (Pulsar 4.0 standalone) answered HEAD .../ledger/L/entry/E, each
for a topic holding that one entry, with the ledger size the broker reported for it (internalStats
currentLedgerSize): recorded from the Python client's producers."""

from __future__ import annotations

import pytest

from pulsar_throttled_source.metadata.entry_headers import EntryHeaders

RECORDED = [  # (what the producer wrote, ledger size, headers)
    ('batched 50x100', 5438, {'X-Pulsar-PROPERTY': '{}', 'X-Pulsar-publish-time': '2026-11-24T00:22:02.041Z', 'X-Pulsar-num-batch-message': '50', 'X-Pulsar-batch-size': '5410', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-11', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '5400'}),
    ('batched 400x100', 43511, {'X-Pulsar-PROPERTY': '{}', 'X-Pulsar-publish-time': '2026-11-24T00:22:02.256Z', 'X-Pulsar-num-batch-message': '400', 'X-Pulsar-batch-size': '43482', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-12', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '0'}),
    ('batched keyed props', 2413, {'X-Pulsar-PROPERTY': '{}', 'X-Pulsar-publish-time': '2026-11-24T00:22:02.607Z', 'X-Pulsar-num-batch-message': '20', 'X-Pulsar-batch-size': '2385', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-13', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '2375'}),
    ('batched zstd', 175, {'X-Pulsar-PROPERTY': '{}', 'X-Pulsar-publish-time': '2026-11-24T00:22:02.965Z', 'X-Pulsar-num-batch-message': '30', 'X-Pulsar-batch-size': '142', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-14', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-compression': 'ZSTD', 'X-Pulsar-uncompressed-size': '3840', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '3840'}),
    ('batched long producer name', 15081, {'X-Pulsar-PROPERTY': '{}', 'X-Pulsar-publish-time': '2026-11-24T00:22:03.056Z', 'X-Pulsar-num-batch-message': '3', 'X-Pulsar-batch-size': '15037', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'a-much-longer-producer-name-xyz', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '0'}),
    ('single 1234', 1270, {'X-Pulsar-PROPERTY': '{}', 'X-Pulsar-publish-time': '2026-11-24T00:22:03.161Z', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-15', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '1234'}),
    ('single key props event', 78, {'X-Pulsar-PROPERTY': '{"p1":"v1","p2":"v2"}', 'X-Pulsar-publish-time': '2026-11-24T00:22:03.283Z', 'X-Pulsar-event-time': '2026-11-24T00:22:03.283Z', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-16', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-partition-key': 'key', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '10'}),
    ('single ordering key', 91, {'X-Pulsar-PROPERTY': '{}', 'X-Pulsar-publish-time': '2026-11-24T00:22:03.382Z', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-17', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-Base64-ordering-key': 'b2s=', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '50'}),
    ('single empty', 44, {'X-Pulsar-PROPERTY': '{"x":"y"}', 'X-Pulsar-publish-time': '2026-11-24T00:22:03.497Z', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-18', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '0'}),
    ('single lz4', 63, {'X-Pulsar-PROPERTY': '{}', 'X-Pulsar-publish-time': '2026-11-24T00:22:03.674Z', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-19', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-compression': 'LZ4', 'X-Pulsar-uncompressed-size': '3000', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '3000'}),
    ('single 100k', 100036, {'X-Pulsar-PROPERTY': '{}', 'X-Pulsar-publish-time': '2026-11-24T00:22:03.812Z', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-20', 'X-Pulsar-sequence-id': '0', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '0'}),
    ('single seq 300', 137, {'X-Pulsar-PROPERTY': '{}', 'X-Pulsar-publish-time': '2026-11-24T00:22:03.96Z', 'X-Pulsar-Is-Encrypted': 'false', 'X-Pulsar-producer-name': 'standalone-0-21', 'X-Pulsar-sequence-id': '300', 'X-Pulsar-txn-uncommitted': 'false', 'Content-Length': '100'}),
]


@pytest.mark.parametrize(("written", "size", "headers"), RECORDED, ids=[r[0] for r in RECORDED])
def test_stored_size_is_the_ledger_size_or_unknown(written: str, size: int, headers: dict[str, str]) -> None:
    unknown = {"single empty", "single lz4", "single 100k"}  # streamed/empty body, compressed single message
    assert EntryHeaders.parse(headers).stored_bytes == (None if written in unknown else size)


def test_encrypted_entries_are_not_sized_from_their_headers() -> None:
    headers = dict(RECORDED[0][2], **{"X-Pulsar-Is-Encrypted": "true"})
    assert EntryHeaders.parse(headers).stored_bytes is None and EntryHeaders.parse(headers).messages == 50


def test_a_reader_is_handed_a_batch_whole_a_chunked_message_once_and_no_marker() -> None:
    assert EntryHeaders.parse({"X-Pulsar-num-batch-message": "10"}).messages == 10
    assert EntryHeaders.parse({}).messages == 1
    assert EntryHeaders.parse({"x-pulsar-chunk-id": "0", "x-pulsar-num-chunks-from-msg": "3"}).messages == 1
    assert EntryHeaders.parse({"x-pulsar-chunk-id": "2", "x-pulsar-num-chunks-from-msg": "3"}).messages == 0
    assert EntryHeaders.parse({"X-Pulsar-marker-type": "20"}).messages == 0
    assert EntryHeaders.parse({"X-Pulsar-txn-aborted": "true", "X-Pulsar-num-batch-message": "5"}).messages == 0


@pytest.mark.parametrize(("headers", "messages", "never_dispatched"), [
    ({"X-PULSAR-TXN-ABORTED": " True "}, 0, True),  # any case of name and value: parsed once, the same everywhere
    ({"x-pulsar-marker-type": "7"}, 0, True),
    ({"X-Pulsar-chunk-id": "1", "X-Pulsar-num-chunks-from-msg": "3"}, 0, True),
    ({"X-Pulsar-chunk-id": "0", "X-Pulsar-num-chunks-from-msg": "3"}, 1, False),
    ({"X-Pulsar-num-batch-message": "5"}, 5, False),
])
def test_the_planner_and_the_read_task_read_one_parse_of_the_headers(headers, messages, never_dispatched) -> None:
    parsed = EntryHeaders.parse(headers)
    assert parsed.messages == messages
    # What a read task concludes of an entry it never saw: not a plain entry still to come.
    assert (parsed.marker or parsed.aborted or parsed.chunk_id > 0) == never_dispatched
