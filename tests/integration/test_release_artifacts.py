"""Issue 42: the release artifacts `make dist` builds, built once per test run the same way (the sdist,
the pure wheel built from it, the native manylinux wheels): each carries LICENSE and NOTICE, the pure wheel
holds exactly the runtime files (no development tool), the metadata has its classifiers, URLs and license,
the [native] extra pins the native distribution at the package's version, and twine accepts all of them.
Then, end to end: a fresh venv with only PySpark installs them from the folder (`--find-links`, offline) as
`pulsar-throttled-source[native]` and as `pulsar-throttled-source`, and a throttled query reads a topic
exactly once, its tasks on the native and on the Python read path. (test_wheel.py installs the pure wheel into
a runtime's Python; test_native_read.py reads through the native x86_64 wheel.)"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
from helpers import create_topic, produce
from packaging.markers import default_environment
from packaging.requirements import Requirement
from release_venv import fresh_runtime, pyspark_only_venv, wheelhouse
from runtime_wheel import ROOT, release_artifacts
from spark_class_archive import spark_env as spark_jvm_env
from trove_classifiers import classifiers as TROVE

import pulsar_throttled_source

VERSION = pulsar_throttled_source.__version__
REPOSITORY = "https://github.com/pulsar-throttled-source/pulsar-throttled-source"  # a placeholder (CHANGELOG.md)

# Every file the runtime wheel holds besides its .dist-info, by folder. A new module of the data source is
# added here; a development tool (like local_broker/ or tools/) stays out of the wheel (pyproject.toml).
RUNTIME_FILES = {
    "": "pyspark_pulsar_throttled.py",
    "pulsar_throttled_source": "__init__.py adaptive_throttle.py admin_endpoint.py backlog_values.py batch.py catch_up.py checkpoint_log.py console_log.py credentials.py data_loss_error.py datasource.py "
                               "offsets.py planner_wiring.py plots.py positions.py protobuf_wire.py py.typed query_progress.py quota_settings.py read_task.py retry.py "
                               "spark_support.py status.py status_quota.py stream.py stream_spark40.py stream_spark42.py topics.py",
    "pulsar_throttled_source/metadata": "__init__.py admin.py admin_answers.py admin_auth.py admin_hosts.py admin_http.py background_refresh.py catalog.py durable_cursor.py "
                                        "backlog_estimates.py backlog_sizes.py entry_headers.py layout.py lookup_scheduler.py max_read.py owner_redirects.py policies.py "
                                        "broker_metrics.py publish_times.py request_pool.py service_tls.py stress_readings.py uniform_batching.py window_pricing.py",
    "pulsar_throttled_source/metrics": "__init__.py latest_samples.py listener.py otel.py prometheus.py samples.py",
    "pulsar_throttled_source/options": "__init__.py aliases.py auth.py names.py parse.py passthrough.py query_kinds.py source_options.py spec.py start_end.py values.py",
    "pulsar_throttled_source/planning": "__init__.py admission.py batch_range.py data_loss.py micro_batch_planner.py progress.py "
                                        "message_cap.py read_limit.py "
                                        "start_positions.py task_packing.py task_ranges.py trigger_floor.py",
    "pulsar_throttled_source/reading": "__init__.py arrow_rows.py client_cache.py client_factories.py decoded_rows.py "
                                       "native_library.py native_read.py native_reader.py parked_readers.py python_read.py range_entries.py "
                                       "range_progress.py range_reader.py read.py read_errors.py read_path.py reader_calls.py reader_start.py receiver_queue.py task_lookup.py watch.py",
    "pulsar_throttled_source/schemas": "__init__.py avro_types.py columns.py decoders.py primitives.py schema_guard.py "
                                       "topic_schema.py",
    "pulsar_throttled_source/throttling": "__init__.py allocation.py buckets.py congestion.py controller.py demands.py engine.py headroom.py "
                                          "partition_plan.py publish_rates.py redis_store.py report.py signals.py "
                                          "sqlite_store.py store.py store_factory.py",
    "pulsar_throttled_source/writing": "__init__.py arrow_messages.py batch_cuts.py confirmations.py effectively_once.py message_columns.py native_sender.py native_task.py native_write.py payload_encoding.py "
                                       "payload_schema.py producer_settings.py producers.py recent_answers.py routing.py "
                                       "write_congestion.py write_options.py write_quota.py write_task.py writers.py",
}
ALLOWED = {f"{folder}/{name}".lstrip("/") for folder, names in RUNTIME_FILES.items() for name in names.split()}
DIST_INFO = {"METADATA", "WHEEL", "RECORD", "top_level.txt", "licenses/LICENSE", "licenses/NOTICE"}
NATIVE_FILES = {"pulsar_throttled_native/__init__.py", "pulsar_throttled_native/_pulsar_arrow_reader.abi3.so"}
ARCHES = ("x86_64", "aarch64")


@pytest.fixture(scope="module")
def dist() -> dict[str, Path]:
    """This run's release artifacts (runtime_wheel.release_artifacts: built once per run as `make dist` does)."""
    built = release_artifacts()
    return {name: built[name] for name in ("sdist", "wheel", *ARCHES)}  # type: ignore[misc]


def wheel_files(wheel: Path) -> tuple[set[str], dict[str, bytes]]:
    """The wheel's files outside its .dist-info, and its .dist-info files by name within it."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = {n.split(".dist-info/", 1)[1]: z.read(n) for n in names if ".dist-info/" in n}
    return {n for n in names if ".dist-info/" not in n}, info


def sdist_files(sdist: Path) -> dict[str, bytes]:
    with tarfile.open(sdist) as t:
        return {m.name.split("/", 1)[1]: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}


def metadata(raw: bytes) -> Message:
    return Parser().parsestr(raw.decode())


def test_the_wheel_holds_exactly_the_runtime_files(dist):
    files, info = wheel_files(dist["wheel"])
    assert not files - ALLOWED, (f"files in the wheel that are not the data source's: {sorted(files - ALLOWED)}. A development "
                                 "tool stays out of the wheel (pyproject.toml); a new runtime module goes into RUNTIME_FILES")
    assert not ALLOWED - files, f"runtime files missing from the wheel: {sorted(ALLOWED - files)}"
    assert set(info) == DIST_INFO, sorted(info)  # no entry_points.txt: no console script (the local broker's is gone)


def test_every_artifact_carries_license_and_notice(dist):
    license_, notice = (ROOT / "LICENSE").read_bytes(), (ROOT / "NOTICE").read_bytes()
    assert b"Apache License\n                           Version 2.0, January 2004" in license_
    assert (ROOT / "native" / "LICENSE").read_bytes() == license_
    for name in ("wheel", *ARCHES):
        _, info = wheel_files(dist[name])
        assert info["licenses/LICENSE"] == license_, name
        own_notice = notice if name == "wheel" else (ROOT / "native" / "NOTICE").read_bytes()
        assert info["licenses/NOTICE"] == own_notice, name
        assert metadata(info["METADATA"]).get_all("License-File") == ["LICENSE", "NOTICE"], name
    files = sdist_files(dist["sdist"])
    assert files["LICENSE"] == license_ and files["NOTICE"] == notice
    assert metadata(files["PKG-INFO"]).get_all("License-File") == ["LICENSE", "NOTICE"]


def test_the_sdist_builds_the_wheel_and_holds_no_development_tool(dist):
    files = set(sdist_files(dist["sdist"]))
    sources = {n for n in files if n.startswith(("pulsar_throttled_source/", "pyspark_pulsar_throttled"))}
    assert sources == ALLOWED, sorted(sources ^ ALLOWED)  # the package's files, exactly the wheel's
    assert {"README.md", "CHANGELOG.md", "LICENSE", "NOTICE", "pyproject.toml", "setup.py", "PKG-INFO"} <= files, sorted(files)
    others = {n for n in files - sources if "/" in n and not n.startswith("pulsar_throttled_source.egg-info/")}
    assert not others, f"the sdist holds more than the runtime package: {sorted(others)}"  # tools/, tests/, native/, ...


def test_the_metadata_has_its_classifiers_urls_and_license(dist):
    _, info = wheel_files(dist["wheel"])
    meta = metadata(info["METADATA"])
    assert meta["Name"] == "pulsar-throttled-source" and meta["Version"] == VERSION
    assert meta["License-Expression"] == "Apache-2.0"
    classifiers = meta.get_all("Classifier")
    assert not set(classifiers) - TROVE, f"not trove classifiers (PyPI refuses an upload with them): {set(classifiers) - TROVE}"
    for expected in ("Programming Language :: Python :: 3.10", "Programming Language :: Python :: 3.11",
                     "Programming Language :: Python :: 3.12", "Programming Language :: Python :: 3.13", "Typing :: Typed"):
        assert expected in classifiers, classifiers
    assert [c for c in classifiers if c.startswith("Development Status ::")], classifiers
    assert [c for c in classifiers if c.startswith("Topic ::")], classifiers
    assert not [c for c in classifiers if c.startswith("License ::")], classifiers  # PEP 639: the expression says it
    assert meta["Requires-Python"] == ">=3.10"
    urls = dict(line.split(", ", 1) for line in meta.get_all("Project-URL"))
    assert set(urls) == {"Homepage", "Documentation", "Repository", "Issues", "Changelog"}, urls
    assert all(url.startswith(REPOSITORY) for url in urls.values()), urls
    assert {"pyspark", "pulsar", "structured-streaming"} <= set(meta["Keywords"].split(",")), meta["Keywords"]
    for arch in ARCHES:
        _, native = wheel_files(dist[arch])
        native_meta = metadata(native["METADATA"])
        assert native_meta["Version"] == VERSION and native_meta["License-Expression"] == "Apache-2.0", arch
        assert not set(native_meta.get_all("Classifier")) - TROVE, arch
        assert wheel_files(dist[arch])[0] == NATIVE_FILES, arch


def test_the_native_extra_pins_the_native_wheels_where_they_exist(dist):
    _, info = wheel_files(dist["wheel"])
    meta = metadata(info["METADATA"])
    assert "native" in meta.get_all("Provides-Extra")
    requires = [Requirement(line) for line in meta.get_all("Requires-Dist")]
    native = [r for r in requires if r.marker is not None and r.marker.evaluate({"extra": "native"})
              and not r.marker.evaluate({"extra": ""})]
    assert [(r.name, str(r.specifier)) for r in native] == [("pulsar-throttled-source-native", f"=={VERSION}")], requires
    (requirement,) = native
    assert not [r for r in requires if r.name == "pulsar-throttled-source-native" and r not in native]  # only in the extra

    def wanted(**where: str) -> bool:
        return requirement.marker.evaluate({**default_environment(), "extra": "native", **where})

    linux = {"sys_platform": "linux", "platform_python_implementation": "CPython"}
    for arch in ARCHES:  # where a wheel exists, the extra installs it (and with it, never a compiler)
        assert wanted(**linux, platform_machine=arch), arch
        assert requirement.specifier.contains(metadata(wheel_files(dist[arch])[1]["METADATA"])["Version"]), arch
    for elsewhere in ({**linux, "platform_machine": "ppc64le"}, {**linux, "platform_machine": "x86_64", "platform_python_implementation": "PyPy"},
                      {"sys_platform": "darwin", "platform_machine": "arm64"}, {"sys_platform": "win32", "platform_machine": "AMD64"}):
        assert not wanted(**elsewhere), elsewhere  # no wheel there: the Python path, and pip still installs the package


def test_twine_accepts_every_artifact(dist):
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.values())],
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == len(dist), checked.stdout



PER_TRIGGER = 50  # maxEntriesPerTrigger of release_job.py: entries (here, messages) per micro-batch at most
# read path: requirement, at this version: pip takes a development version (main's: 0.2.0.dev0) only when no release
# is in sight or when asked for by its number (or --pre); docs/install.md, "A development build".
INSTALLS = {"native": f"pulsar-throttled-source[native]=={VERSION}", "python": f"pulsar-throttled-source=={VERSION}"}
PLANNED = {"native": "Read tasks read with the native read path (readPath=auto)",
           "python": "Read tasks read with the Python read path (readPath=auto): the package pulsar-throttled-source-native "
                     "is not installed"}
TASK_FALLBACK = "Reading with the Python read path (readPath=auto): the package pulsar-throttled-source-native is not installed."


@pytest.mark.skipif(platform.machine() not in ARCHES or sys.platform != "linux", reason="native wheels are built for Linux x86_64 and aarch64")
def test_installed_from_the_folder_a_throttled_query_reads_exactly_once_on_each_read_path(
        dist, broker, admin, pulsar_client, unique, tmp_path):
    """Two fresh runtimes (each sees only a cached venv's PySpark: tests/release_venv.py) install from the folder,
    one `pulsar-throttled-source[native]`, one `pulsar-throttled-source`; their queries run at the same time
    (their time goes mostly to starting Spark and its Python workers)."""
    began = time.monotonic()
    folder = dist["wheel"].parent  # what `make dist` leaves in dist/: the sdist, the pure wheel, the native wheels
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in dist.values())
    pythons, installs = {}, {}
    for path, requirement in INSTALLS.items():  # both at once, while the topics are written
        pythons[path] = fresh_runtime(tmp_path / path / "runtime")
        installs[path] = subprocess.Popen([sys.executable, "-m", "pip", "--python", str(pythons[path]), "install", "-q",
                                           "--no-index", "--find-links", str(folder), "--find-links", str(wheelhouse()),
                                           requirement], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    topics = {path: create_topic(admin, f"release-{unique}-{path}", 2) for path in INSTALLS}
    sent_to = {path: produce(pulsar_client, topic, 240) for path, topic in topics.items()}  # one message per entry
    for path, install in installs.items():
        try:
            said, _ = install.communicate(timeout=300)
        finally:
            install.kill()
        assert install.returncode == 0, f"pip install {INSTALLS[path]}:\n{said}"
    jobs = {}
    for path, python in pythons.items():
        topic, sent = topics[path], sent_to[path]
        workdir = tmp_path / path / "job"
        workdir.mkdir()
        job = shutil.copy(Path(__file__).parent / "release_job.py", workdir)  # run from outside the checkout
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python), SPARK_LOCAL_IP="127.0.0.1",
                   **spark_jvm_env(python, pyspark_only_venv() / "pyspark"))  # the class archive of the runtime's PySpark
        jobs[path] = (sent, subprocess.Popen([str(python), job, broker.service_url, broker.admin_url, topic, str(workdir),
                                              str(PER_TRIGGER)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                             env=env, cwd=workdir))
    installed_at = time.monotonic()
    for path, (sent, job) in jobs.items():
        try:
            out, err = job.communicate(timeout=300)
        finally:
            job.kill()
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert job.returncode == 0 and lines, f"{path}:\n{out[-3000:]}{err[-6000:]}"
        result = json.loads(lines[0].removeprefix("RESULT "))
        assert Path(result["package"]).is_relative_to(tmp_path / path / "runtime"), result["package"]  # the installed one
        assert result["native_installed"] == (path == "native"), (path, result)
        delivered = [value for batch in result["batches"] for value in batch]
        assert sorted(delivered) == sorted(s.payload.decode() for s in sent), f"{path}: not exactly once"
        sizes = [len(batch) for batch in result["batches"]]
        assert len(sizes) >= len(sent) // PER_TRIGGER and max(sizes) <= PER_TRIGGER, (path, sizes)  # throttled
        # Which path the tasks took: the planner says which they will take, and a task falling back says why
        # (once per worker process; that WARN reaches the job's stderr, as the Python path's run shows).
        assert PLANNED[path] in err, f"{path}:\n{err[-6000:]}"
        assert (TASK_FALLBACK in err) == (path == "python"), f"{path}:\n{err[-6000:]}"
        assert ("Reading with the Python read path" in err) == (path == "python"), f"{path}:\n{err[-6000:]}"  # for no reason
        timings = [line for line in err.splitlines() if line.startswith(("Spark session ready", "batch "))]
        print(f"{INSTALLS[path]}: {timings}")
    print(f"installs {installed_at - began:.1f} s, jobs {time.monotonic() - installed_at:.1f} s")
