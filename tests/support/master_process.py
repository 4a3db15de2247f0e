"""`dumpfilter master serve` as a process of its own, for tests that need the real command line,
its options and its stderr: a hostile client that freezes the master's interpreter must not
freeze the test that watches it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from dumpfilter.lab.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ServedMaster:
    proc: subprocess.Popen
    grpc_address: str
    mysql_port: int
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def health(self, timeout: float) -> bool:
        """A gRPC health check answered SERVING within `timeout` seconds: the master's Python
        threads are being scheduled."""
        with grpc.insecure_channel(self.grpc_address) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
            except grpc.RpcError:
                return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def serve_master(binlog_dir: Path | str, log: Path, *options: str) -> ServedMaster:
    """Start `dumpfilter master serve` on free loopback ports (gRPC and --mysql-listen) with
    `options`; return once both answer."""
    grpc_port, mysql_port = free_port(), free_port()
    cmd = [sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(binlog_dir),
           "--listen", f"127.0.0.1:{grpc_port}", "--mysql-listen", f"127.0.0.1:{mysql_port}", *options]
    with open(log, "ab") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
    served = ServedMaster(proc, f"127.0.0.1:{grpc_port}", mysql_port, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"master exited with {proc.returncode}:\n{served.log_text()}")
        if "MySQL protocol for real replicas" in served.log_text() and served.health(timeout=2):
            return served
        time.sleep(0.1)
    served.stop()
    raise AssertionError(f"master did not start:\n{served.log_text()}")
