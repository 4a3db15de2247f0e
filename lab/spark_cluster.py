"""A real Spark standalone cluster on loopback: pyspark's own `spark-class` Master and Workers.

What the tests and `make bench` submit `split` and `experiment` to with `--spark-master
spark://127.0.0.1:PORT`: one Master and N Workers, each a JVM of its own started from the jars
pyspark ships (no Spark distribution needed), every port on 127.0.0.1, logs and work directories
under one temporary directory, and every process stopped by its PID on exit (a worker's executors
are its children, in its process group).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

from dumpfilter.errors import DumpFilterError
from dumpfilter.children import dies_with_parent
from dumpfilter.lab.ports import free_port


class ClusterError(DumpFilterError):
    """The standalone cluster did not come up (its log's last line says why)."""


def spark_home() -> Path:
    """pyspark's installed tree: its `bin/spark-class` and `jars/` are a Spark distribution's."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    """`with StandaloneCluster(workers=2) as cluster:` ... `cluster.url` is the master's URL.

    Each worker offers `cores` cores and `memory` of executor memory. The Master's web UI (its
    JSON at `/json/`) is how readiness is known: every worker registered and ALIVE."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g", *, start_timeout: float = 120.0):
        self.workers, self.cores, self.memory = workers, cores, memory
        self.start_timeout = start_timeout
        self.dir = Path(tempfile.mkdtemp(prefix="dumpfilter-spark-"))
        self.port, self.ui_port = free_port(), free_port()
        self.processes: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []  # each process's log file, closed with it in stop()

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_LOG_DIR": str(self.dir / "logs"), "SPARK_WORKER_DIR": str(self.dir / "work"),
                "SPARK_NO_DAEMONIZE": "1"}

    def _spawn(self, name: str, *args: str) -> None:
        log = open(self.dir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process, in stop()
        proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=self._env(),
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=dies_with_parent())
        self.processes.append(proc)
        self._logs.append(log)

    def status(self) -> dict[str, Any]:
        """The Master's own view (its web UI's JSON): workers, cores, running applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as reply:
            status: dict[str, Any] = json.load(reply)  # a JSON object
        return status

    def alive_workers(self) -> int:
        try:
            return int(self.status().get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def start(self) -> StandaloneCluster:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for k in range(self.workers):
            work = self.dir / f"worker-{k}"
            work.mkdir(exist_ok=True)
            self._spawn(f"worker-{k}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()),
                        "--port", str(free_port()), "--work-dir", str(work), self.url)
        deadline = time.monotonic() + self.start_timeout
        while self.alive_workers() < self.workers:
            dead = [p for p in self.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = self._last_line(self.processes.index(dead[0]) if dead else 0)
                self.stop()
                raise ClusterError(f"Spark standalone cluster did not start ({self.alive_workers()} of "
                                   f"{self.workers} workers alive): {why}")
            time.sleep(0.2)
        return self

    def _last_line(self, index: int) -> str:
        names = ["master", *(f"worker-{k}" for k in range(self.workers))]
        try:
            lines = (self.dir / f"{names[index]}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1] if lines else "empty log"

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def stop(self) -> None:
        """SIGTERM to each process group (a worker's executors with it), SIGKILL to what stays."""
        for proc in reversed(self.processes):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc, log in zip(reversed(self.processes), reversed(self._logs)):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
        self.processes.clear()
        self._logs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
