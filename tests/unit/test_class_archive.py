"""The broker's class-data archive (local_broker/class_archive.py): keyed by jars and Java, written whole or not at all."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pulsar_throttled_source.local_broker import class_archive


def _jars(tmp_path: Path, *names: str) -> Path:
    lib = tmp_path / "lib"
    lib.mkdir(exist_ok=True)
    for name in names:
        (lib / name).write_bytes(b"jar")
    return lib


def test_the_archive_is_keyed_by_the_jar_set_and_the_java_binary(tmp_path):
    java = tmp_path / "java"
    java.write_text("#!/bin/sh\n")
    lib = _jars(tmp_path, "a.jar", "b.jar")
    first = class_archive.archive_path(tmp_path / "cache", lib, str(java))
    assert first == class_archive.archive_path(tmp_path / "cache", lib, str(java))  # stable
    assert first.parent == tmp_path / "cache" / "class-archive" and first.suffix == ".jsa"
    _jars(tmp_path, "c.jar")
    assert class_archive.archive_path(tmp_path / "cache", lib, str(java)) != first  # another jar set
    other_java = tmp_path / "java17"
    other_java.write_text("#!/bin/sh\n# another build\n")
    assert class_archive.archive_path(tmp_path / "cache", lib, str(other_java)) != class_archive.archive_path(
        tmp_path / "cache", lib, str(java))
    spark = class_archive.archive_path(tmp_path / "cache", lib, str(java), kind="spark")  # the suite's Spark JVMs'
    assert spark.parent == first.parent and spark.name.startswith("spark-") and first.name.startswith("broker-")


def test_a_start_uses_the_archive_only_once_it_exists(tmp_path):
    archive = tmp_path / "broker-x.jsa"
    assert class_archive.use_flags(archive) == []
    archive.write_bytes(b"archive")
    assert class_archive.use_flags(archive) == [f"-XX:SharedArchiveFile={archive}"]


def test_make_writes_under_another_name_and_renames_once_the_jvm_has_exited(tmp_path):
    archive = tmp_path / "cache" / "broker-x.jsa"
    calls = []

    def start_and_stop(options: list[str], data: Path) -> None:
        (flag,) = options
        assert flag.startswith("-XX:ArchiveClassesAtExit=")
        partial = Path(flag.split("=", 1)[1])
        assert partial != archive and partial.parent == archive.parent and data.is_dir()
        assert not archive.exists()  # a start in the meantime maps nothing half-written
        partial.write_bytes(b"classes")
        calls.append(partial)

    assert class_archive.make(archive, start_and_stop) is True
    assert archive.read_bytes() == b"classes" and not calls[0].exists()
    assert class_archive.make(archive, start_and_stop) is False and len(calls) == 1  # made once


def test_make_leaves_no_archive_when_the_jvm_wrote_none(tmp_path):
    archive = tmp_path / "broker-x.jsa"
    assert class_archive.make(archive, lambda options, data: None) is False
    assert not archive.exists()


def test_the_suites_spark_archives_of_jar_directories_that_are_gone_are_removed(tmp_path):
    from spark_class_archive import prune_orphans

    archives = tmp_path / "class-archive"
    archives.mkdir()
    kept_jars, gone_jars = tmp_path / "venv-a" / "jars", tmp_path / "venv-b" / "jars"
    kept_jars.mkdir(parents=True)
    for name, jars in (("spark-kept", kept_jars), ("spark-gone", gone_jars)):
        (archives / f"{name}.jsa").write_bytes(b"archive")
        (archives / f"{name}.jars").write_text(str(jars))
    (archives / "broker-x.jsa").write_bytes(b"the broker's: not ours to prune")
    assert prune_orphans(tmp_path) == [archives / "spark-gone.jsa"]
    assert sorted(p.name for p in archives.iterdir()) == ["broker-x.jsa", "spark-kept.jars", "spark-kept.jsa"]


def test_the_suites_spark_home_is_a_lasting_copy_of_a_pysparks_bin_sbin_and_jars_without_its_python_zip(tmp_path):
    from suite_spark_home import suite_spark_home

    pyspark = tmp_path / "venv" / "pyspark"
    for name, body in (("jars/spark-core_2.13-4.3.0.jar", b"core"), ("jars/py4j.jar", b"p"), ("bin/spark-submit", b"#!"),
                       ("sbin/spark-daemon.sh", b"#!"), ("python/lib/pyspark.zip", b"zip"), ("sql/__init__.py", b"")):
        (pyspark / name).parent.mkdir(parents=True, exist_ok=True)
        (pyspark / name).write_bytes(body)
    cache = tmp_path / "cache"
    home = suite_spark_home(pyspark, cache)
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()) == [
        "bin/spark-submit", "jars/py4j.jar", "jars/spark-core_2.13-4.3.0.jar", "sbin/spark-daemon.sh"]
    assert (home / "jars" / "py4j.jar").stat().st_mtime_ns == (pyspark / "jars" / "py4j.jar").stat().st_mtime_ns
    made = (home / "jars" / "py4j.jar").stat().st_mtime_ns
    shutil.rmtree(tmp_path / "venv")  # a clean clone's venv, gone after its run: the copy and its file times stay
    again = tmp_path / "clone" / "pyspark"
    shutil.copytree(home, again)  # another venv of the same PySpark: the same jars, newer file times
    os.utime(again / "jars" / "py4j.jar")
    assert suite_spark_home(again, cache) == home and (home / "jars" / "py4j.jar").stat().st_mtime_ns == made
    (again / "jars" / "spark-core_2.13-4.3.0.jar").write_bytes(b"another build")  # another jar set: another home
    assert suite_spark_home(again, cache) != home
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []  # no partial copy left
