"""Where a query starts and where a batch query ends: startingOffsets / startingTime and endingOffsets /
endingTime, each pair exclusive, positions given as JSON per partition (an entry, or a message inside a batched
entry with batchIndex)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..positions import EntryPosition, MessagePosition
from ..topics import TopicName
from . import aliases, values
from .source_options import EndSpec, StartSpec
from .spec import BY_NAME

Opts = Mapping[str, str]


def start_spec(opts: Opts) -> StartSpec:
    """startingTime, or startingOffsets (earliest, latest or JSON positions), never both."""
    if values.is_set(opts, "startingOffsets") and values.is_set(opts, "startingTime"):
        raise ValueError("Options 'startingOffsets' and 'startingTime' are exclusive; set only one of them.")
    if values.is_set(opts, "startingTime"):
        return StartSpec("time", time_ms=values.integer(opts, "startingTime"), given=True)
    text = str(opts.get(BY_NAME["startingOffsets"].key) or BY_NAME["startingOffsets"].default).strip()
    if text.lower() in ("earliest", "latest"):
        return StartSpec(text.lower(), given=values.is_set(opts, "startingOffsets"))  # type: ignore[arg-type]
    spec = _positions_json("startingOffsets", text, "'earliest', 'latest'", 0)
    return StartSpec("positions", positions=tuple(_start_position(partition, value) for partition, value in spec.items()), given=True)


def end_spec(opts: Opts) -> EndSpec:
    """endingOffsets (latest, or JSON positions: the first entry not read) or endingTime; batch queries only."""
    given = values.is_set(opts, "endingOffsets")
    if given and values.is_set(opts, "endingTime"):
        raise ValueError("Options 'endingOffsets' and 'endingTime' are exclusive; set only one of them.")
    if values.is_set(opts, "endingTime"):
        return EndSpec("time", time_ms=values.integer(opts, "endingTime"), given=True)
    text = str(opts.get(BY_NAME["endingOffsets"].key) or BY_NAME["endingOffsets"].default).strip()
    if text.lower() == "latest":
        return EndSpec("latest", given=given)
    spec = _positions_json("endingOffsets", text, "'latest'", 40)
    return EndSpec("positions", positions=tuple(_start_position(p, v, "endingOffsets") for p, v in spec.items()), given=True)


def _positions_json(option: str, text: str, keywords: str, example_entry: int) -> dict[str, object]:
    """startingOffsets' or endingOffsets' JSON: a non-empty object of partition names to positions."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"Option '{option}': not {keywords} or valid JSON ({e.msg} at position {e.pos}); expected e.g. "
                         f"{{\"persistent://public/default/t-partition-0\": {{\"ledgerId\": 12, \"entryId\": {example_entry}}}}}.") from None
    if not isinstance(spec, dict) or not spec:
        raise ValueError(f"Option '{option}': the JSON must be a non-empty object mapping partition topic names to positions.")
    return spec


def _start_position(partition: str, value: object,
                    option: str = "startingOffsets") -> tuple[str, EntryPosition | MessagePosition | str]:
    name = str(TopicName.parse(partition, option))
    words = ("earliest", "latest") if option == "startingOffsets" else ("latest",)
    if isinstance(value, str) and value.lower() in words:
        return name, value.lower()
    if isinstance(value, int) and value in (-2, -1)[-len(words):]:  # Kafka-style shorthands: -2 earliest, -1 latest
        return name, "earliest" if value == -2 else "latest"
    allowed = " / ".join(f'"{w}"' for w in words)
    where = f"Option '{option}' for partition {name}"
    # A batchIndex names a message inside a batched entry, as a Pulsar message id does (pulsar-spark's positions).
    batch_index = value.get("batchIndex") if isinstance(value, dict) else None
    entry_part = {k: v for k, v in value.items() if k != "batchIndex"} if isinstance(value, dict) else value
    try:
        position = EntryPosition.from_json(entry_part, where)
    except ValueError as e:
        raise ValueError(f"{e}; or {allowed}. A position may add \"batchIndex\": <int> (a message inside a batched entry)."
                         + aliases.foreign_position(value, option)) from None
    if position.entry_id < 0 or position.ledger_id < 0:
        raise ValueError(f"{where}: ledgerId and entryId must be >= 0 (or {allowed}).")
    if batch_index is None:
        return name, position
    if not isinstance(batch_index, int) or isinstance(batch_index, bool) or batch_index < 0:
        raise ValueError(f"{where}: batchIndex must be an integer >= 0 (the message's index in its batched entry), got {batch_index!r}.")
    return name, MessagePosition(position.ledger_id, position.entry_id, batch_index)
