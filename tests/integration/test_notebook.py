"""Issue 5: notebooks/quickstart.ipynb runs headless against the real broker and local Spark."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from pulsar_throttled_source.spark_support import has_admission_control

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"
KERNEL = "pulsar-throttled-venv"


def register_kernel(jupyter_dir: Path) -> None:
    """A kernelspec running this interpreter (the venv's), found through JUPYTER_PATH."""
    spec = jupyter_dir / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "pulsar-throttled (venv)", "language": "python",
    }))


def text_of(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def test_quickstart_notebook_runs_against_the_session_broker(broker, tmp_path, monkeypatch):
    register_kernel(tmp_path / "jupyter")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # The notebook's settings cell reads these, so it reuses the session broker instead of starting one.
    monkeypatch.setenv("PULSAR_SERVICE_URL", broker.service_url)
    monkeypatch.setenv("PULSAR_ADMIN_URL", broker.admin_url)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)

    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, kernel_name=KERNEL, timeout=150, resources={"metadata": {"path": str(tmp_path)}}).execute()

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "skipping the install" in text_of(code[0])
    assert "local broker" not in text_of(code[1]) and broker.service_url in text_of(code[1])
    watched = next(text_of(c) for c in code if "Read " in text_of(c))
    read = re.search(r"Read (\d+) messages in (\d+) micro-batches; largest micro-batch (\d+) entries \(quota (\d+)\)", watched)
    assert read, watched
    messages, batches, largest, quota = map(int, read.groups())
    assert messages == 2000 and batches >= 5 and largest <= quota == 40
    # The batch-query cell reads the whole topic once: every message the notebook sent.
    inspected = next(text_of(c) for c in code if "Batch query:" in text_of(c))
    assert re.search(r"Batch query: 2000 messages in ", inspected), inspected
    # The catch-up cell: the 1,000 messages sent after the watched run, in throttled micro-batches, then stopped.
    caught = next(text_of(c) for c in code if "Caught up (" in text_of(c))
    run = re.search(r"Caught up \((\w+) trigger\): (\d+) new messages in (\d+) micro-batches, largest (\d+) messages; "
                    r"the query has stopped: True", caught)
    assert run, caught
    assert run.group(1) == ("availableNow" if has_admission_control() else "processingTime")
    assert int(run.group(2)) == 1000 and int(run.group(3)) >= 2 and int(run.group(4)) <= 400  # 40 entries of 10 a batch
    images = [o for c in code for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert images, "the plot cell shows no image"
    assert "stopped" in text_of(code[-1])
