"""What PySpark hands the sink's writers: the sink's data source under another name ("pulsar-throttled-probe"), whose
writers note the type of the first item their write() gets (pyarrow's RecordBatch, or a Row) in a file under the
option `probeDir`, then write exactly as the sink does (the same writer object, its class extended by one method).

Made by a function, so cloudpickle ships the classes by value: the Python workers need not import tests/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def probe_source() -> type:
    from pulsar_throttled_source.datasource import PulsarThrottledDataSource

    def probed(writer: Any, directory: str) -> Any:
        base = type(writer)

        def write(self: Any, iterator: Any) -> Any:
            import itertools
            import uuid

            first = next(iterator, None)
            (Path(directory) / uuid.uuid4().hex).write_text(type(first).__name__)
            return base.write(self, iterator if first is None else itertools.chain([first], iterator))

        writer.__class__ = type(f"Probed{base.__name__}", (base,), {"write": write})
        return writer

    class ProbeSource(PulsarThrottledDataSource):
        @classmethod
        def name(cls) -> str:
            return "pulsar-throttled-probe"

        def _probe_dir(self) -> str:
            directory = next(v for k, v in self.options.items() if k.lower() == "probedir")
            self.options = {k: v for k, v in self.options.items() if k.lower() != "probedir"}
            return str(directory)

        def writer(self, schema: Any, overwrite: bool) -> Any:
            directory = self._probe_dir()
            return probed(super().writer(schema, overwrite), directory)

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:  # noqa: N802 (Spark's name)
            directory = self._probe_dir()
            return probed(super().streamWriter(schema, overwrite), directory)

    return ProbeSource


def inputs_seen(directory: Path) -> list[str]:
    """The type names the probed writers' tasks got first, one per task that got any input."""
    return sorted(p.read_text() for p in directory.iterdir())
