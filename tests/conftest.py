"""Session fixtures: one real Pulsar standalone broker and one local SparkSession per test run."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    with LocalBroker(data_dir=tmp_path_factory.mktemp("pulsar"), max_entries_per_ledger=TEST_ENTRIES_PER_LEDGER,
                     broker_config=TEST_BROKER_CONFIG) as b:  # stopped however the tests end
        yield b


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
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]


# The longest test files first (seconds each in a two-worker CI run): `make test`'s xdist workers take
# whole files in collection order, so a long file collected last would end the run on one worker.
LONGEST_FIRST = ("test_source.py", "test_faults.py", "test_pipeline.py", "test_throttling.py", "test_auth.py", "test_schemas.py", "test_schema_types.py",
                 "test_bad_input.py", "test_transactions.py", "test_chunked.py", "test_cluster.py",
                 "test_spark_versions.py", "test_notebook.py", "test_restarts.py", "test_redis_quota_store.py", "test_connect.py",
                 "test_wheel.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its order
