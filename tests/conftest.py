"""Session fixtures: one real Pulsar standalone broker and one local SparkSession per test run."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Each worker (and the Spark and Python processes it starts) gets its own temp directory, so
    # that defaults living there (the quota state file) are not shared by two workers' queries.
    import atexit
    import shutil
    import tempfile

    tempfile.tempdir = os.environ["TMPDIR"] = tempfile.mkdtemp(prefix=f"pulsar-throttled-{os.environ['PYTEST_XDIST_WORKER']}-")
    atexit.register(shutil.rmtree, tempfile.tempdir, True)

# Every Spark application of the suite, the session SparkSession below too, inherits its Spark home and JVM options
# from these variables (tests/spark_class_archive.py): the suite's copy of this PySpark's Spark home, whose Python
# workers import PySpark compiled, not from its zip (tests/suite_spark_home.py), C1 only (a short application at
# load ~6 ran in 12-16 s instead of 24-34 s) and the class-data archive of its jars, which halves a driver JVM's
# start-up CPU. Applications that run another PySpark (the compat lines', the release test's) set their own.
from importlib.util import find_spec  # noqa: E402

from spark_class_archive import spark_env as spark_jvm_env  # noqa: E402
from suite_spark_home import suite_spark_home  # noqa: E402

_pyspark = find_spec("pyspark")  # where it is, without importing it into every run (unit runs too)
assert _pyspark is not None and _pyspark.origin is not None, "PySpark is not installed in this venv"
os.environ.update(spark_jvm_env(Path(sys.executable), suite_spark_home(Path(_pyspark.origin).parent)))
os.environ.pop("SPARK_CONF_DIR", None)  # a developer's own Spark conf stays out (and its directory would void the archive)

from pulsar_throttled_source.local_broker import LocalBroker  # noqa: E402

# Small ledgers so that every test topic spans several of them (rollover paths get exercised).
TEST_ENTRIES_PER_LEDGER = 50
# Real-topic features on the shared broker: transactions, and a small message limit so that
# chunked messages (payloads over it) stay small enough for fast tests. Every broker the tests
# start uses this limit (SAME_MESSAGE_LIMIT): the C++ client keeps one max message size per process,
# the last one a broker announced, so a chunked producer would otherwise cut its chunks to another
# broker's 5 MB and send a 300 KB frame that the session broker refuses (CI run 11: a send hung).
MAX_MESSAGE_SIZE = 131072
SAME_MESSAGE_LIMIT = {"maxMessageSize": str(MAX_MESSAGE_SIZE)}
TEST_BROKER_CONFIG = {"transactionCoordinatorEnabled": "true", **SAME_MESSAGE_LIMIT}
# Every broker JVM of the suite, the session broker's too: C1 only. It starts a module's own broker in about two thirds
# of the time, and the suite is CPU-bound on 2 cores, where C2's compiles cost more than they win back even in the
# session broker that serves the whole run: test_throttling, test_sink, test_source and test_schema_types on 2 workers
# took 260 and 274 s with the default JIT, 215 and 215 s with a C1 session broker (its CPU 87 -> 42 s); then with the
# session SparkSession's JIT alternated (ABBA): default 275 and 223 s, C1 197 and 193 s (its JVM's CPU 122-169 -> 74-76 s).
TEST_BROKER_JVM = ["-XX:TieredStopAtLevel=1"]


def _session_broker(data_dir: str | Path) -> LocalBroker:
    return LocalBroker(data_dir=data_dir, max_entries_per_ledger=TEST_ENTRIES_PER_LEDGER, broker_config=TEST_BROKER_CONFIG,
                       jvm_options=TEST_BROKER_JVM)


# With xdist (`make test`: -n 2), the controller starts the one session broker before the workers
# start and both use it: a broker per worker cost a second JVM start and its idle CPU beside the
# first, on 2 cores (~60 worker-seconds of a ~15-minute suite). Every test makes its own topics
# (and namespaces where it changes namespace policies), so the workers' tests do not meet.
SHARED_BROKER = "shared_broker"
_SHARED_KEY = pytest.StashKey[tuple[LocalBroker, str]]()


def pytest_configure(config: pytest.Config) -> None:
    controller = not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("xdist")
    if controller and config.getoption("numprocesses", None):
        import tempfile

        data_dir = tempfile.mkdtemp(prefix="pulsar-shared-broker-")
        broker = _session_broker(data_dir)
        broker.start()
        config.stash[_SHARED_KEY] = (broker, data_dir)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # xdist: what each worker is told when it starts
    shared = node.config.stash.get(_SHARED_KEY, None)
    if shared is not None:
        assert shared[0].info is not None
        node.workerinput[SHARED_BROKER] = shared[0].info.to_json()


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the run's controller (or a run without workers)
        from runtime_wheel import remove_artifacts

        remove_artifacts()
    shared = config.stash.get(_SHARED_KEY, None)
    if shared is not None:
        import shutil

        shared[0].stop()
        shutil.rmtree(shared[1], ignore_errors=True)


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    shared = getattr(request.config, "workerinput", {}).get(SHARED_BROKER)
    if shared is not None:  # the controller's broker: started and stopped there
        from pulsar_throttled_source.local_broker.data_dir_state import BrokerInfo

        attached = LocalBroker()
        attached.info = BrokerInfo(**json.loads(shared))
        yield attached
        return
    with _session_broker(tmp_path_factory.mktemp("pulsar")) as b:  # stopped however the tests end
        yield b


@pytest.fixture(scope="module")
def pulsar_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real local cluster (local_broker/cluster.py): ZooKeeper, 3 bookies, 2 brokers and a proxy, each its own process
    on its own 127.0.0.N address, ensembles of 2, for test_pulsar_cluster.py (every test on it is in that one file):
    started by its first test, stopped when the file is done. It was session-scoped: its seven idle JVMs then went on
    using CPU for the rest of a worker's run (process accounting over a whole run: ~140 s of CPU in ~820 s alive,
    the file itself taking ~130 s). The session broker's message limit (a client process keeps one) and small ledgers.
    Its start time is printed (`-s`) and counted in the first test's setup."""
    import time

    from pulsar_throttled_source.local_broker.cluster import ClusterSettings, LocalCluster

    settings = ClusterSettings(max_entries_per_ledger=TEST_ENTRIES_PER_LEDGER, broker_extra=tuple(SAME_MESSAGE_LIMIT.items()))
    cluster = LocalCluster(tmp_path_factory.mktemp("pulsar-cluster"), settings)
    started = time.monotonic()
    try:
        cluster.start()
        print(f"\nlocal cluster ready in {time.monotonic() - started:.1f} s: {cluster.info}")
        yield cluster
    finally:  # however the tests end; its data is thrown away, so no graceful stop (~5 s)
        cluster.stop(graceful=False)


@pytest.fixture(scope="session")
def admin(broker: LocalBroker):
    from topic_admin import TopicAdmin

    a = TopicAdmin(broker.admin_url)
    yield a
    a.close()


@pytest.fixture(scope="session")
def pulsar_client(broker: LocalBroker):
    import logging

    import pulsar

    logger = logging.getLogger("pulsar-test-client")
    logger.setLevel(logging.WARNING)
    client = pulsar.Client(broker.service_url, logger=logger)
    yield client
    client.close()


@pytest.fixture(scope="session")
def txn_jvm(broker: LocalBroker):
    """One java/TxnProducer.java for the session's transactional writes (test_transactions, test_batch_query,
    test_native_read): each start of it costs seconds (Java's launcher compiles the file, then the client starts);
    tests move it to their own topics with on(topic)."""
    from java_producer import TxnProducer

    producer = TxnProducer(broker.service_url)
    yield producer
    producer.close()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pulsar-throttled-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .config("spark.driver.memory", "2g")
        # A crashed Python worker (a native library fault) then says where it crashed.
        .config("spark.python.worker.faulthandler.enabled", "true")
        # A StackOverflowError (seen once: java.util.regex in a stream execution thread) then shows its
        # whole stack, down to the caller; the default keeps only the top 1,024 frames.
        .config("spark.driver.extraJavaOptions", "-XX:MaxJavaStackTraceDepth=100000")
        # C1 only and the class archive, from SPARK_SUBMIT_OPTS (above), as every Spark application of the suite.
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def key_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """An RSA key pair for end-to-end encrypted topics: (public key file, private key file)."""
    import subprocess

    d = tmp_path_factory.mktemp("keys")
    private, public = d / "private.pem", d / "public.pem"
    subprocess.run(["openssl", "genrsa", "-out", str(private), "2048"], check=True, capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(private), "-pubout", "-out", str(public)], check=True, capture_output=True)
    return str(public), str(private)


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]


# The suite's order (the longest files first, from the last whole-suite run's own record) and its timing report.
from suite_timing import (  # noqa: E402,F401
    pytest_collection_modifyitems,
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
