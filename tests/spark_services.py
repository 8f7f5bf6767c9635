"""Spark's own long-running processes for tests of where users run the source: a standalone
cluster (master and worker) and a Spark Connect server, each started from the PySpark the tests
use (`spark-class`, `spark-submit` in its bin directory) and stopped with everything they spawned."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

BIN = Path(sys.executable).parent  # pip's PySpark puts spark-class and spark-submit beside python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_env() -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1"}


def python_errors(log: str) -> str:
    """The Python traceback(s) in a spark-submit log, without the JVM's INFO lines and stack frames."""
    lines = [line for line in log.splitlines() if " INFO " not in line and not line.lstrip().startswith("at ")]
    return "\n".join(lines)[-6000:]


class SparkService:
    """One JVM process (master, worker or Connect server), its log in `log_path`."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name, self.log_path = name, log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(list(argv), stdout=self._log, stderr=subprocess.STDOUT, env=env or spark_env(),
                                        start_new_session=True, cwd=cwd)

    def wait_for_port(self, port: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}):\n{self.log()[-3000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.3)
        raise TimeoutError(f"{self.name} did not listen on {port} within {timeout_s} s:\n{self.log()[-3000:]}")

    def wait_for_log(self, text: str, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} never logged {text!r}:\n{self.log()[-3000:]}")
            time.sleep(0.3)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM to the process group (the JVM and the executors or Python workers it spawned)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self._log.close()


def start_standalone_cluster(log_dir: Path, cores: int = 2, memory: str = "1g") -> tuple[str, list[SparkService]]:
    """A master and one worker; returns the master URL and the services (worker first, to stop first)."""
    port = free_port()
    master = SparkService("master", [str(BIN / "spark-class"), "org.apache.spark.deploy.master.Master", "--host",
                                     "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())], log_dir)
    try:
        master.wait_for_port(port)
    except Exception:
        master.stop()
        raise
    url = f"spark://127.0.0.1:{port}"
    worker = SparkService("worker", [str(BIN / "spark-class"), "org.apache.spark.deploy.worker.Worker", url, "--host",
                                     "127.0.0.1", "--cores", str(cores), "--memory", memory, "--webui-port",
                                     str(free_port())], log_dir)
    try:
        master.wait_for_log("Registering worker")
    except Exception:
        worker.stop()
        master.stop()
        raise
    return url, [worker, master]


def start_connect_server(log_dir: Path, python: Path | None = None) -> tuple[str, SparkService]:
    """A Spark Connect server (local[2]); its Python (planner and read tasks) is `python` when given,
    run from `log_dir`, with nothing of the repo on its path."""
    port = free_port()
    env = spark_env()
    if python is not None:
        env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
    server = SparkService("connect-server", [
        str(BIN / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "spark-internal"], log_dir, env=env, cwd=log_dir)
    try:
        server.wait_for_port(port)
    except Exception:
        server.stop()
        raise
    return f"sc://127.0.0.1:{port}", server
