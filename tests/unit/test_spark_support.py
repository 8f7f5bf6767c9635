"""Where the package cannot run (a PySpark before 4.0, or a 5.x), it says so in
one clear error, and its auto-registration module never breaks other `pyspark_*` data sources:
Spark's lookup imports them all in one go and skips every one when any import fails."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from pulsar_throttled_source.spark_support import UnsupportedSparkError, check_spark, has_admission_control

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("version", ["4.0.0", "4.0.5", "4.1.4", "4.2.0", "4.3.0", "4.9.1.dev0"])
def test_supported_versions_pass(version):
    check_spark(version)


@pytest.mark.parametrize("version", ["3.5.3", "3.4.0", "5.0.0"])
def test_other_versions_fail_naming_the_version_found_and_what_is_supported(version):
    with pytest.raises(UnsupportedSparkError) as err:
        check_spark(version)
    assert f"PySpark {version}" in str(err.value) and "4.0 or newer" in str(err.value)


@pytest.fixture
def detect(monkeypatch):
    """has_admission_control, asked afresh (it is cached), with PySpark's modules patched by the test."""
    has_admission_control.cache_clear()
    yield has_admission_control
    has_admission_control.cache_clear()


def fake_pyspark(monkeypatch, latest_offset, streaming: dict | None) -> None:
    """PySpark's reader base with `latest_offset`; its streaming datasource module holding `streaming`
    (None: no such module, as on 4.0/4.1)."""
    base = types.ModuleType("pyspark.sql.datasource")
    base.DataSourceStreamReader = type("DataSourceStreamReader", (), {"latestOffset": latest_offset})
    monkeypatch.setitem(sys.modules, "pyspark.sql.datasource", base)
    module = None if streaming is None else types.ModuleType("pyspark.sql.streaming.datasource")
    for name, value in (streaming or {}).items():
        setattr(module, name, value)
    monkeypatch.setitem(sys.modules, "pyspark.sql.streaming.datasource", module)


ADMISSION = {"ReadLimit": object, "ReadMaxRows": object, "SupportsTriggerAvailableNow": object}


def test_admission_control_is_this_pysparks(detect):
    import pyspark.sql.streaming.datasource  # noqa: F401  (the test venv's PySpark is 4.2+)

    assert detect() is True


def test_admission_control_is_detected_by_feature_whatever_the_version_says(detect, monkeypatch):
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", "4.0.5")  # a runtime that backports it: still used
    fake_pyspark(monkeypatch, lambda self, start, limit: {}, ADMISSION)
    assert detect() is True


@pytest.mark.parametrize(("latest_offset", "streaming", "why"), [
    (lambda self: {}, None, "4.0/4.1: no read limits, latestOffset() without arguments"),
    (lambda self, start, limit: {}, None, "no module of read limits"),
    (lambda self: {}, ADMISSION, "read limits, but the runner's reader base takes none"),
    (lambda self, start, limit: {}, {"ReadLimit": object, "ReadMaxRows": object}, "no AvailableNow mixin"),
])
def test_without_every_feature_there_is_no_admission_control(detect, monkeypatch, latest_offset, streaming, why):
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", "4.3.0")  # the version number is not what decides
    fake_pyspark(monkeypatch, latest_offset, streaming)
    assert detect() is False, why


def run(code: str, extra_path: Path | None = None) -> str:
    env_path = [str(ROOT)] + ([str(extra_path)] if extra_path else [])
    script = f"import sys; sys.path[:0] = {env_path!r}\n" + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_on_an_older_pyspark_the_source_registers_and_fails_with_the_reason_when_used():
    out = run("""
        import pyspark
        pyspark.__version__ = "3.5.3"  # as on Databricks 15 LTS
        import pyspark_pulsar_throttled as hook
        from pulsar_throttled_source.spark_support import UnsupportedSparkError
        print(hook.DefaultSource.name())
        try:
            hook.DefaultSource({"topic": "t"})
        except UnsupportedSparkError as e:
            print("raised:", e)
    """)
    name, raised = out.strip().splitlines()
    assert name == "pulsar-throttled"
    assert "PySpark 3.5.3" in raised and "4.0 or newer" in raised


def test_spark_lookup_still_registers_another_source_when_ours_cannot_import(tmp_path):
    (tmp_path / "pyspark_zz_other.py").write_text(textwrap.dedent("""
        from pyspark.sql.datasource import DataSource
        class DefaultSource(DataSource):
            @classmethod
            def name(cls):
                return "zz-other"
    """))
    out = run("""
        import io, sys
        from pyspark.sql.worker import lookup_data_sources
        # Our package cannot import here (as on a PySpark without Python data sources).
        sys.modules["pulsar_throttled_source.datasource"] = None
        out = io.BytesIO()
        lookup_data_sources._main(io.BytesIO(), out)
        sys.stdout.write(out.getvalue().hex())
    """, tmp_path)
    data = io.BytesIO(bytes.fromhex(out))
    names = []
    for _ in range(struct.unpack(">i", data.read(4))[0]):
        names.append(data.read(struct.unpack(">i", data.read(4))[0]).decode())
        data.read(struct.unpack(">i", data.read(4))[0])  # the pickled class
    assert "zz-other" in names and "pulsar-throttled" in names


def test_the_read_path_can_be_shipped_by_value_with_a_live_client_cached():
    """Where the package is not installed on the workers, users ship it by value
    (`cloudpickle.register_pickle_by_value`): nothing in the read path may hold an unpicklable
    module global (a lock, a live client)."""
    out = run("""
        import pulsar_throttled_source
        from pyspark import cloudpickle
        from pulsar_throttled_source.reading import client_cache
        from pulsar_throttled_source.reading.read import read_range
        from pulsar_throttled_source.read_task import ClientConfig

        config = ClientConfig(service_url="pulsar://127.0.0.1:1", client_kwargs=(), reader_kwargs=(), credentials=None,
                              poll_timeout_ms=1000, max_rows_per_batch=10)
        live = client_cache.client_for(config)  # the driver process has used the cache
        cloudpickle.register_pickle_by_value(pulsar_throttled_source)
        shipped = cloudpickle.loads(cloudpickle.dumps(read_range))
        python_path = shipped.__globals__["read_path_for"].__globals__["PYTHON_PATH"]
        cache = python_path.close.__globals__["drop_client"].__globals__["_CACHE"]
        print("RESULT", type(cache).__name__, len(cache._clients), client_cache.client_for(config) is live)
    """)
    (result,) = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert result.split() == ["RESULT", "ClientCache", "0", "True"]
