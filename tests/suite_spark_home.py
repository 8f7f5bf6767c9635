"""The Spark home the suite's applications run from: a per-machine copy of a pip-installed PySpark's bin, sbin and
jars (hard links where the file system allows), keyed by its version and jar set, without python/lib. The same
PySpark: its Python side comes from the venv as before, its JVM from the same jars. Two reasons, both measured:

- Spark puts SPARK_HOME/python/lib/pyspark.zip first on every Python worker's path (PythonUtils.sparkPythonPath),
  and modules imported from a zip are compiled from source in every process, never cached: importing
  pyspark.worker and the streaming source runner took 0.8 s of CPU from the zip, 0.3 s from site-packages. A run
  starts ~750 such processes (each Spark application's daemon workers, a runner per streaming query). Without the
  zip they import the same PySpark from the venv's site-packages, compiled once.
- A Java class-data archive (spark_class_archive.py) is valid only for the jar paths and file times it was made
  with, so a clean clone's new venv needed its own (~35 s of every CI run); this copy's paths and times stay, so
  its archive serves every clone with the same PySpark.

Made by `make test` (tests/spark_class_archive.py) and, if missing, by conftest; a partial copy is never seen
(made under a temporary name, then renamed). Not pruned: its hard links share a venv's files (and uv's cache's);
once none does, it holds ~0.5 GB per PySpark version, and removing ~/.cache/pulsar-throttled-source/spark-home is
safe (the next run makes it again)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

CACHE = Path.home() / ".cache" / "pulsar-throttled-source" / "spark-home"
PARTS = ("bin", "sbin", "jars")  # what Spark's launcher scripts and JVMs read from a Spark home (no conf: pip has none)


def _key(pyspark_dir: Path) -> str:
    # Jar names carry Spark's version; names and sizes tell two PySpark installations apart without reading ~0.5 GB
    jars = sorted((p.name, p.stat().st_size) for p in (pyspark_dir / "jars").glob("*.jar"))
    return hashlib.sha256(repr(jars).encode()).hexdigest()[:16]


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)  # the same inode: no space, and its file times stay the copy's for good
    except OSError:
        shutil.copy2(source, target)  # another file system: a copy with the same file times


def suite_spark_home(pyspark_dir: Path, cache: Path = CACHE) -> Path:
    """The suite's Spark home for the PySpark installed at `pyspark_dir` (pip's SPARK_HOME), made unless it exists."""
    home = cache / _key(pyspark_dir)
    if home.is_dir():
        return home
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=cache))
    partial.chmod(0o755)  # mkdtemp makes it private
    try:
        for part in PARTS:
            shutil.copytree(pyspark_dir / part, partial / part, copy_function=_link_or_copy)
        try:
            os.rename(partial, home)
        except OSError:  # another process made it first: theirs is the same
            if not home.is_dir():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return home
