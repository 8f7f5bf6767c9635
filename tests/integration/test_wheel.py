"""Issue 15: the package as users get it, a wheel installed into a Python that already has its
Spark runtime. pip must not touch the runtime's PySpark, and `format("pulsar-throttled")` must
work with no register call, from a directory that has nothing of the repo in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from helpers import create_topic, produce

ROOT = Path(__file__).resolve().parents[2]

JOB = textwrap.dedent("""
    import json, sys
    import pulsar_throttled_source
    from pyspark.sql import SparkSession

    service_url, admin_url, topic, checkpoint = sys.argv[1:5]
    spark = (SparkSession.builder.master("local[2]").appName("wheel-check")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.format("pulsar-throttled")  # no spark.dataSource.register(...) call
          .option("service.url", service_url).option("admin.url", admin_url).option("topic", topic)
          .option("startingOffsets", "earliest").option("throttlingMode", "batch")
          .option("dispatchThrottlingRatePerTopicInMsg", "4").option("quotaStatePath", checkpoint + ".quota")
          .load())
    query = (df.writeStream.format("memory").queryName("wheel_rows").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    values = [bytes(r.value).decode() for r in spark.sql("select value from wheel_rows").collect()]
    batches = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
    print("RESULT " + json.dumps({"module": pulsar_throttled_source.__file__, "values": values, "batches": batches}))
    spark.stop()
""")


def build_wheel(out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(out)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("pulsar_throttled_source-*.whl")
    return wheel


def runtime_python(home: Path) -> Path:
    """A fresh venv standing for a Spark runtime's Python: it sees the test venv's installed
    libraries (PySpark, pulsar-client, ...) through a path file, but not the repo, whose editable
    install is a .pth there and path files are not followed from a directory a path file adds."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120)
    python = home / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "runtime_libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_wheel_leaves_the_runtime_pyspark_alone(wheel):
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        requires = [line for line in z.read(name).decode().splitlines() if line.startswith("Requires-Dist:")]
    pyspark = [line for line in requires if "pyspark" in line.lower()]
    unconditional = [line for line in pyspark if "extra ==" not in line]
    assert not unconditional, f"installing the wheel would install or replace PySpark: {unconditional}"
    assert any(line.endswith('extra == "spark"') for line in pyspark), requires


def test_installed_wheel_reads_a_topic_with_no_register_call(wheel, broker, admin, pulsar_client, unique, tmp_path):
    python = runtime_python(tmp_path / "runtime")
    # Into a Python that already has PySpark and the other libraries: pip resolves the dependencies
    # against what is there and installs only the wheel (nothing from the index).
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]

    topic = create_topic(admin, f"wheel-{unique}", 2)
    sent = produce(pulsar_client, topic, 100, batch=5, prefix="w")  # 10 entries per partition
    workdir = tmp_path / "elsewhere"  # nothing of the repo on the path: the job runs from here
    workdir.mkdir()
    (workdir / "job.py").write_text(JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
    done = subprocess.run([str(python), "job.py", broker.service_url, broker.admin_url, topic, str(tmp_path / "chk")],
                          capture_output=True, text=True, timeout=300, cwd=workdir, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.split("RESULT ", 1)[1])

    assert Path(result["module"]).is_relative_to(tmp_path / "runtime"), result["module"]
    delivered = Counter(result["values"])
    assert delivered == Counter(s.payload.decode() for s in sent)
    assert result["batches"] >= 3, "10 entries per partition at 4 entries per period: the quota still applies"
