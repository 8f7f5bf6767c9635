"""Read where a query stands from its checkpoint, without Spark: the end offset of the newest committed
micro-batch (the status command, status.py).

Spark's checkpoint layout (the same on every supported line):

    <checkpointLocation>/offsets/<batchId>   v1
                                             {"batchWatermarkMs": ..., "batchTimestampMs": ..., "conf": {...}}
                                             <source 0's end offset JSON>      one line per source, "-" for none
                                             ...
    <checkpointLocation>/commits/<batchId>   written once the batch's sink committed it

A batch is committed when both files exist; the newest such batch's end offset is what a restarted
query starts after (a newer batch without a commit file is planned but re-run on restart). This
source's offset is the line that parses as a SourceOffset (offsets.py); a checkpoint whose committed
batch holds none is another source's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .offsets import SourceOffset

VOID_OFFSET = "-"  # Spark's line for a source without an offset in that batch
EXPECTED = ("a Structured Streaming checkpointLocation of a query reading format(\"pulsar-throttled\"), "
            "holding offsets/<batchId> and commits/<batchId> files")


class CheckpointError(ValueError):
    """A checkpoint the status command cannot read; the message names the directory and what was expected."""


@dataclass(frozen=True)
class CommittedBatch:
    checkpoint: Path
    batch_id: int
    source: int  # the source's index among the query's sources (its line in the offset file)
    offset: SourceOffset


def _batch_ids(folder: Path) -> set[int]:
    """The batch ids of a log folder (digit-named files; Spark's .tmp and .crc files are not batches)."""
    if not folder.is_dir():
        return set()
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit() and p.is_file()}


def committed_batch(checkpoint: str | Path, source: int | None = None) -> CommittedBatch:
    """The newest committed batch's end offset of this source in `checkpoint`; `source`: which of the
    query's sources (None: the only one of this source). Raises CheckpointError."""
    root = Path(checkpoint)
    if not root.is_dir():
        raise CheckpointError(f"No checkpoint at {root}: the directory does not exist. Expected {EXPECTED}.")
    if not (root / "offsets").is_dir():
        raise CheckpointError(f"{root} is not a streaming query's checkpoint: it has no offsets/ folder. Expected {EXPECTED}.")
    planned = _batch_ids(root / "offsets")
    committed = planned & _batch_ids(root / "commits")
    if not committed:
        found = f"offsets/ holds batch {max(planned)}" if planned else "offsets/ is empty"
        raise CheckpointError(f"{root}: no micro-batch is committed yet ({found}, commits/ has no matching batch): the query "
                              "has not finished its first batch, so it has no committed position to report. Expected "
                              "commits/<batchId> beside offsets/<batchId> (Spark writes it once the batch's sink committed).")
    batch_id = max(committed)
    where = root / "offsets" / str(batch_id)
    lines = where.read_text(encoding="utf-8").splitlines()
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise CheckpointError(f"{where} is not one of Spark's offset files (expected a version line, the batch's metadata "
                              f"and one offset line per source). Expected {EXPECTED}.")
    offsets = lines[2:]
    ours: dict[int, SourceOffset] = {}
    for index, line in enumerate(offsets):
        if line.strip() == VOID_OFFSET:
            continue
        try:
            ours[index] = SourceOffset.from_json(json.loads(line), f"{where} (source {index})")
        except ValueError:
            continue  # another source's offset
    if source is not None:
        if source not in ours:
            raise CheckpointError(f"{where}: source {source} of the query is not a pulsar-throttled source (the offset "
                                  f"file holds {len(offsets)} source offset(s); this source's: {sorted(ours) or 'none'}).")
        return CommittedBatch(root, batch_id, source, ours[source])
    if not ours:
        shown = offsets[0][:160] + ("..." if len(offsets[0]) > 160 else "") if offsets else ""
        raise CheckpointError(f"{root} is a checkpoint of another source: its committed batch {batch_id} (offsets/{batch_id}) "
                              f"holds no offset of the pulsar-throttled source (partitions mapped to {{\"ledgerId\": L, "
                              f"\"entryId\": E}}); found {shown!r}. Expected {EXPECTED}.")
    if len(ours) > 1:
        raise CheckpointError(f"{where}: the query reads pulsar-throttled in sources {sorted(ours)}; say which one with --source.")
    index = next(iter(ours))
    return CommittedBatch(root, batch_id, index, ours[index])
