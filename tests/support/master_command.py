"""A real `dumpfilter master serve` process for the tests: started on a free loopback port (its
address once it says it serves), stopped with SIGTERM (it must drain and end by itself, status 143)."""

from __future__ import annotations

import signal
import subprocess
import sys
from dumpfilter.lab.ports import free_port


def serve_master(binlog_dir, *args: str, prefix=(), **popen) -> tuple[subprocess.Popen, str]:
    """`master serve --binlog-dir DIR ARGS`, run behind `prefix` (a wrapper command) with the
    Popen options given; returns it once it prints that it serves. `proc.head` keeps what it
    printed up to there."""
    port = free_port()
    proc = subprocess.Popen([*prefix, sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir",
                             str(binlog_dir), "--listen", f"127.0.0.1:{port}", *args], stderr=subprocess.PIPE,
                            text=True, **popen)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "serving" in line:
            proc.head = "".join(lines)
            return proc, f"127.0.0.1:{port}"
    proc.wait()
    raise AssertionError(f"master serve ended ({proc.returncode}): {''.join(lines)}")


def wait_mysql_endpoint(proc: subprocess.Popen) -> None:
    """Reads `serve_master`'s process on until its --mysql-listen endpoint listens: it starts after
    gRPC's "serving", and a client that connects once (pymysql, mariadb-binlog) would race it.
    What it reads is added to `proc.head`."""
    for line in proc.stderr:
        proc.head += line
        if "MySQL protocol for real replicas" in line:
            return
    raise AssertionError(f"master serve ended before its MySQL endpoint listened: {proc.head}")


def master_status(address: str) -> str:
    """What `dumpfilter master status --master ADDRESS` prints (it must succeed)."""
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "status", "--master", address],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout


def stop_master(proc: subprocess.Popen) -> str:
    """SIGTERM; the master must drain and end by itself, with status 143 (128 + SIGTERM, as every
    command ends at SIGTERM). Returns all it printed."""
    proc.send_signal(signal.SIGTERM)
    try:  # read its stderr meanwhile: a master whose pipe filled up would wait on the test
        _out, rest = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, rest = proc.communicate()
        raise AssertionError(f"master serve did not end within 30 s of SIGTERM: {proc.head}{rest}") from None
    assert proc.returncode == 143, proc.head + rest
    return proc.head + rest
