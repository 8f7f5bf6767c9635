"""Issues 5 and 39: notebooks/quickstart.ipynb runs headless against the real broker and local Spark, on every
supported Spark line at once: the venv's PySpark (4.3) and the compat venvs' 4.0.5 and 4.1.4
(tests/compat_venvs.py), each in a kernel of its own venv running today's checkout; the 4.0 one reads an existing
topic the test wrote (the notebook's `topic` setting), the others create theirs. Its watch cell reads the
documented progress fields on each, and its live plot cell draws with the plots helper."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import nbformat
from compat_venvs import ROOT, VERSIONS, compat_python
from helpers import create_topic, produce
from nbclient import NotebookClient
from spark_class_archive import spark_env as spark_jvm_env

NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"


def register_kernel(jupyter_dir: Path, name: str, python: Path, env: dict[str, str]) -> None:
    """A kernelspec running `python` (a venv's), found through JUPYTER_PATH."""
    spec = jupyter_dir / "kernels" / name
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"pulsar-throttled ({name})", "language": "python", "env": env,
    }))


def with_watch_seconds(nb, seconds: int):
    """The notebook with a parameter cell after its settings, as papermill injects one: three Spark
    applications at once on a busy 2-core machine may need more than the 90 s the watch cell waits by default."""
    settings = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "WATCH_SECONDS = " in c.source)
    nb.cells.insert(settings + 1, nbformat.v4.new_code_cell(f"WATCH_SECONDS = {seconds}  # injected by test_notebook.py"))
    return nb


def text_of(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


EXISTING = "4.0.5"  # this line's notebook reads a topic the test wrote (PULSAR_TOPIC), as a user's own topic


def test_quickstart_notebook_runs_on_every_spark_line(broker, admin, pulsar_client, tmp_path, monkeypatch, unique):
    jupyter = tmp_path / "jupyter"
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter))
    # The notebook's settings cell reads these, so it reuses the session broker instead of starting one.
    monkeypatch.setenv("PULSAR_SERVICE_URL", broker.service_url)
    monkeypatch.setenv("PULSAR_ADMIN_URL", broker.admin_url)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    # The same backlog as the notebook writes for itself: 2,000 messages of ~100 bytes, 10 per entry, 2 partitions.
    existing = create_topic(admin, f"notebook-existing-{unique}", 2)
    produce(pulsar_client, existing, 2000, batch=10, payload_size=100, prefix="order")
    kernels = {"4.3": "pulsar-throttled-venv"}
    register_kernel(jupyter, kernels["4.3"], Path(sys.executable), {})
    for version in VERSIONS:
        python = compat_python(version)
        kernels[version] = f"pulsar-throttled-{version}"
        # The compat venvs hold PySpark and the dependencies, not the package: the checkout on PYTHONPATH.
        register_kernel(jupyter, kernels[version], python, {
            "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python), "PYTHONPATH": str(ROOT),
            "VIRTUAL_ENV": str(python.parent.parent), "PATH": f"{python.parent}:{os.environ.get('PATH', '')}",
            **spark_jvm_env(python),  # this line's class archive
            **({"PULSAR_TOPIC": existing} if version == EXISTING else {})})

    notebooks = {version: with_watch_seconds(nbformat.read(NOTEBOOK, as_version=4), 240) for version in kernels}

    async def run_all() -> None:
        # All at once: their time goes mostly to Spark's start and to waiting out quota windows.
        await asyncio.gather(*[
            NotebookClient(nb, kernel_name=kernels[version], timeout=300,
                           resources={"metadata": {"path": str(tmp_path)}}).async_execute()
            for version, nb in notebooks.items()])

    asyncio.run(run_all())
    failed = {}
    for version, nb in notebooks.items():
        try:
            check(version, nb, broker.service_url)
        except AssertionError as e:
            failed[version] = str(e)
    assert not failed, "\n\n".join(f"PySpark {v}: {e}" for v, e in failed.items())


def check(version: str, nb, service_url: str) -> None:
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "skipping the install" in text_of(code[0]), version
    assert "local broker" not in text_of(code[1]) and service_url in text_of(code[1]), version
    shown = [m.group(1) for c in code for m in [re.search(r"^Spark (\S+)$", text_of(c), re.M)] if m]
    assert len(shown) == 1 and shown[0].startswith(version), (version, shown)
    watched = next(text_of(c) for c in code if "Read " in text_of(c))
    read = re.search(r"Read (\d+) messages in (\d+) micro-batches; largest micro-batch (\d+) entries \(quota (\d+)\)", watched)
    assert read, (version, watched)
    messages, batches, largest, quota = map(int, read.groups())
    assert messages == 2000 and batches >= 5 and largest <= quota == 40, (version, watched)
    # Each micro-batch's line shows the lag from the progress report: behind until the last, then 0, held by the topic quota.
    lines = [l.split() for l in watched.splitlines() if re.match(r"\s*\d+ ", l)]
    backlog = [int(l[5]) for l in lines]
    assert backlog == sorted(backlog, reverse=True) and backlog[-1] == 0 and backlog[0] > 0, (version, watched)
    assert all(l[7] == "topic" for l in lines if int(l[5]) > 0), (version, watched)
    seconds = [float(l[6]) for l in lines if int(l[5]) > 0 and l[6] != "?"]  # "?": publish time not known yet
    assert seconds and all(s > 0 for s in seconds), (version, watched)
    # The batch-query cell reads the whole topic once: every message the notebook sent.
    inspected = next(text_of(c) for c in code if "Batch query:" in text_of(c))
    assert re.search(r"Batch query: 2000 messages in ", inspected), (version, inspected)
    # The catch-up cell: the 1,000 messages sent after the watched run, in throttled micro-batches, then stopped.
    caught = next(text_of(c) for c in code if "Caught up (" in text_of(c))
    run = re.search(r"Caught up \((\w+) trigger\): (\d+) new messages in (\d+) micro-batches, largest (\d+) messages; "
                    r"the query has stopped: True", caught)
    assert run, (version, caught)
    # Admission control (AvailableNow reading several throttled batches) came with PySpark 4.2.
    assert run.group(1) == ("availableNow" if version == "4.3" else "processingTime"), (version, caught)
    if version == EXISTING:  # the notebook writes nothing to a topic of the user's: nothing new to catch up on
        assert "(existing)" in text_of(code[1]) and int(run.group(2)) == 0, (version, caught)
    else:
        assert int(run.group(2)) == 1000 and int(run.group(3)) >= 2 and int(run.group(4)) <= 400, (version, caught)
    # The write cell: the batch query's topic (its 2,000 messages, read to the end it had at load()), upper-cased, into a second topic under a write quota, read back.
    # A topic of the user's: nothing written (no topic created beside it).
    wrote = next(text_of(c) for c in code if "Wrote " in text_of(c))
    if version == EXISTING:
        assert "Wrote nothing: the notebook reads an existing topic of yours" in wrote, (version, wrote)
    else:
        assert re.search(r"Wrote 2000 messages to \S+ in [\d.]+ s \(write quota 1000 a second per partition\); the first: b'ORDER-",
                         wrote), (version, wrote)
    plot = next(c for c in code if "plot_progress(" in c.source)
    assert [o for o in plot.get("outputs", []) if "image/png" in o.get("data", {})], (version, plot.get("outputs"))
    assert "stopped" in text_of(code[-1]), version
