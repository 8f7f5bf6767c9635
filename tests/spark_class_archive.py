"""The JVM options of every Spark application the suite starts, and a class-data-sharing archive (Java's AppCDS)
per PySpark installation that makes each of their starts cheaper: the suite is CPU-bound on 2 cores and starts
dozens of Spark JVMs (each worker's session, spark-submit jobs, notebook kernels, the compat lines' jobs, the
standalone cluster's, Spark Connect's). Measured on the test machine: a short local application's JVM took 10 s
of CPU and 9.5 s to run, 5 s and 5 s with the archive.

Both reach every driver through SPARK_SUBMIT_OPTS (spark-submit adds it to a client-mode driver's JVM, pyspark's
gateway included) and the standalone cluster's daemons through SPARK_DAEMON_JAVA_OPTS; executors get C1 from the
driver's conf (spark.executor.defaultJavaOptions as a system property). Not through a spark-defaults.conf: Spark
puts its conf directory on the JVM's class path before its jars, and Java 17 neither writes nor maps an archive
whose class path has a non-empty directory before the last one it loaded from.

An archive is made once per machine, Spark home and Java (under ~/.cache, as the broker's), by
spark_archive_workload.py run with -XX:ArchiveClassesAtExit, and removed once its jars are gone; `make test` makes
them before the tests (for the main venv's PySpark, the compat lines', the release test's). Each PySpark but the
release test's runs from the suite's lasting copy of its Spark home (suite_spark_home.py), so a clean clone's new
venv finds its archive made.
A JVM whose class path does not match its archive, or that finds none, starts as without it, silently (CDS
logging off); a failure to make one is said and the run goes on. Run directly: python tests/spark_class_archive.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from suite_spark_home import suite_spark_home

from pulsar_throttled_source.local_broker import class_archive

HERE = Path(__file__).parent
CACHE = Path.home() / ".cache" / "pulsar-throttled-source"  # the compat venvs' and the broker jars' too
C1 = "-XX:TieredStopAtLevel=1"  # as every broker of the suite (conftest.TEST_BROKER_JVM): C2's compiles cost more than they win back
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a mismatched archive would say so on the driver's stdout


def pyspark_dir(python: Path) -> Path:
    """The pyspark package directory (pip's SPARK_HOME) that `python` imports."""
    out = subprocess.run([str(python), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    return Path(out.strip())


def spark_java() -> str:
    """The java Spark's launcher runs (bin/spark-class: JAVA_HOME's, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else (shutil.which("java") or "java")


def archive_for(spark_home: Path) -> Path:
    return class_archive.archive_path(CACHE, spark_home / "jars", spark_java(), kind="spark")


def spark_home_of(python: Path, spark_home: Path | None = None) -> Path:
    """`spark_home`, else the suite's copy of `python`'s PySpark's (suite_spark_home.py)."""
    return spark_home or suite_spark_home(pyspark_dir(python))


def spark_env(python: Path, spark_home: Path | None = None) -> dict[str, str]:
    """The variables that give a Spark application started with `python`'s PySpark the suite's Spark home
    (SPARK_HOME: `spark_home`, else the suite's copy of that PySpark's) and JVM options: C1 and the home's archive
    if made, for drivers (SPARK_SUBMIT_OPTS, executors on C1 through their conf) and for the standalone cluster's
    master and worker (SPARK_DAEMON_JAVA_OPTS)."""
    home = spark_home_of(python, spark_home)
    jvm = " ".join([C1, *class_archive.use_flags(archive_for(home)), QUIET])
    return {"SPARK_HOME": str(home), "SPARK_SUBMIT_OPTS": f"{jvm} -Dspark.executor.defaultJavaOptions={C1}",
            "SPARK_DAEMON_JAVA_OPTS": jvm}


def make(python: Path, spark_home: Path | None = None) -> Path | None:
    """The archive of the Spark home `python`'s PySpark runs from in the suite (spark_home_of), made unless it
    exists; None if Java wrote none."""
    home = spark_home_of(python, spark_home)
    archive = archive_for(home)

    def run_workload(options: list[str], workdir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", "VIRTUAL_ENV")}
        env.update(SPARK_SUBMIT_OPTS=" ".join([C1, *options]), PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python),
                   SPARK_HOME=str(home))
        done = subprocess.run([str(python), str(HERE / "spark_archive_workload.py"), str(workdir)], env=env, cwd=workdir,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"The class archive's workload failed on {python}:\n{done.stderr[-4000:]}")

    if class_archive.make(archive, run_workload):
        archive.with_suffix(".jars").write_text(str(home / "jars"))  # whose it is, for prune_orphans
    return archive if archive.is_file() else None


def prune_orphans(cache: Path = CACHE) -> list[Path]:
    """Remove the archives of jar directories that are gone (a removed Spark home copy or venv): each is ~150 MB
    and keyed by its jars' path, so nothing else maps it."""
    removed = []
    for owner in (cache / "class-archive").glob("spark-*.jars"):
        if not Path(owner.read_text()).is_dir():
            owner.with_suffix(".jsa").unlink(missing_ok=True)
            owner.unlink()
            removed.append(owner.with_suffix(".jsa"))
    return removed


def main() -> None:
    from compat_venvs import VERSIONS, compat_python
    from release_venv import pyspark_only_venv

    for gone in prune_orphans():
        print(f"Removed {gone} (its PySpark is gone)", file=sys.stderr)
    made = [(Path(sys.executable), None), *((compat_python(v), None) for v in VERSIONS),
            (Path(sys.executable), pyspark_only_venv() / "pyspark")]  # the release test's PySpark, the same version

    def made_or_said(python: Path, spark_home: Path | None) -> Path | None:
        try:
            return make(python, spark_home)
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:  # only slower without it: say so, go on
            print(f"No class archive for {spark_home or python}'s Spark (its JVMs start without one): {e}", file=sys.stderr)
            return None

    with ThreadPoolExecutor(2) as pool:  # two at once on 2 cores: each is mostly one JVM's start
        for archive in pool.map(lambda args: made_or_said(*args), made):
            print(archive)


if __name__ == "__main__":
    main()
