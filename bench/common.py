"""Shared benchmark inputs and harness: large generated binlogs, cached under bench/data/; the
results files; `dumpfilter master serve` as a process of its own on free loopback ports."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from dumpfilter.binlogs import served_paths
from dumpfilter.errors import DumpFilterError
from dumpfilter.workload import WorkloadSpec, generate
from dumpfilter.lab.ports import free_port

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "data"
RESULTS_DIR = BENCH_DIR / "results"


class BenchSettingError(ValueError):
    """A benchmark setting (a DUMPFILTER_* variable, a benchmark's or workload's name) that cannot
    be used: `python -m bench` says it in one line and exits 2, before anything runs on it."""


def env_int(name: str, default: int) -> int:
    """The environment variable `name` as a whole number above 0 (a size, a count of rounds or
    slaves), `default` when unset."""
    return int(_env_number(name, default, int))


def env_float(name: str, default: float, zero_ok: bool = False) -> float:
    """The environment variable `name` as a number above 0 (seconds, a rate; or 0 too, `zero_ok`),
    `default` when unset."""
    return float(_env_number(name, default, float, zero_ok))


def _env_number(name: str, default: float, kind: type[int] | type[float], zero_ok: bool = False) -> float:
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value: float | None = kind(text.strip())
    except ValueError:
        value = None
    if value is None or not (0 <= value if zero_ok else 0 < value) or value == float("inf"):  # (nor NaN)
        least = "0 or more" if zero_ok else "above 0"
        raise BenchSettingError(f"{name}={text!r}: expected {'a whole number' if kind is int else 'a number'} {least}")
    return value


def env_binlog_dir(name: str) -> Path | None:
    """The environment variable `name` as a directory of binlog files (name.NNNNNN), None when unset."""
    text = os.environ.get(name)
    if not text:
        return None
    directory = Path(text).resolve()
    try:
        found = directory.is_dir() and bool(served_paths(directory))  # (what the master would serve)
    except DumpFilterError:
        found = False
    if not found:
        raise BenchSettingError(f"{name}={text!r}: expected a directory of binlog files (name.NNNNNN)")
    return directory


def target_mb() -> int:
    """Size of the big binlog: DUMPFILTER_BENCH_MB (default 500, as the issues ask)."""
    return env_int("DUMPFILTER_BENCH_MB", 500)


def row_binlog(mb: int | None = None, schemas: int = 8, flavor: str = "mariadb") -> Path:
    """A single ROW binlog file of about `mb` MB over `schemas` schemas (generated once)."""
    mb = target_mb() if mb is None else mb
    directory = DATA_DIR / f"row-{flavor}-{schemas}s-{mb}mb"
    done = directory / "DONE"
    if not done.exists():
        directory.mkdir(parents=True, exist_ok=True)
        # Bytes per transaction with these settings (measured): MariaDB's 510, MySQL's 378 (a MySQL
        # GTID event is larger, its Table_map and Rows events are smaller, it has no Annotate_rows).
        per_transaction = 510 if flavor == "mariadb" else 378
        spec = WorkloadSpec(seed=2387, schemas=schemas, tables_per_schema=4, binlog_format="row", flavor=flavor,
                            transactions=int(mb * 1e6 / per_transaction), rows_per_statement=3, statements_per_transaction=2,
                            max_binlog_size=1 << 40)
        started = time.perf_counter()
        paths = generate(spec, directory, "bench-bin")
        done.write_text(json.dumps({"files": [p.name for p in paths],
                                    "seconds": round(time.perf_counter() - started, 1)}))
    return sorted(directory.glob("bench-bin.0*"))[0]


def write_result(name: str, payload: dict) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
    return path


def best_of(fn, repeat: int = 3) -> tuple[float, object]:
    """(best wall time, last result) of `repeat` runs."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def process_cpu_s(pid: int) -> float:
    """A live process's CPU seconds so far (utime + stime, from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric(port: int, name: str) -> int | None:
    """A counter of a master's /metrics on `port` (None: not there)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
    return None


def settle(busy_below: float = 0.25, within_s: float = 20.0) -> dict[str, float]:
    """Waits (at most `within_s`) until the machine's CPUs were busy less than `busy_below` of a
    second, so a figure does not start while the last one's processes wind down (64 slave
    processes take seconds to exit); returns the busy share it started at and the load average."""
    def busy_share() -> float:
        def ticks() -> tuple[int, int]:
            fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
            return sum(fields), fields[3] + fields[4]  # all, idle + iowait
        (all0, idle0), _ = ticks(), time.sleep(1.0)
        all1, idle1 = ticks()
        return 1.0 - (idle1 - idle0) / max(all1 - all0, 1)

    deadline, share = time.monotonic() + within_s, busy_share()
    while share >= busy_below and time.monotonic() < deadline:
        share = busy_share()
    return {"busy_share_at_start": round(share, 2), "loadavg_1min_at_start": round(os.getloadavg()[0], 2)}


def serve_master(binlog_dir: Path | str, *options: str, log: Path | None = None) -> tuple[subprocess.Popen, str, int]:
    """`dumpfilter master serve --binlog-dir DIR --listen ... --mysql-listen ... OPTIONS` as a
    process of its own (the production configuration): (process, gRPC address, MySQL port), once
    the MySQL port accepts connections (its stderr goes to `log`). Stop it with `stop_process`."""
    grpc_port, mysql_port = free_port(), free_port()
    with open(log or os.devnull, "ab") as err:
        proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir",
                                 str(binlog_dir), "--listen", f"127.0.0.1:{grpc_port}", "--mysql-listen",
                                 f"127.0.0.1:{mysql_port}", *options], cwd=BENCH_DIR.parent, stderr=err)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", mysql_port), timeout=1).close()
            return proc, f"127.0.0.1:{grpc_port}", mysql_port
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                stop_process(proc)
                raise RuntimeError("dumpfilter master did not start") from None
            time.sleep(0.1)


def stop_process(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) used so far by process `root` and every live descendant (the
    Spark driver JVM, its PySpark daemon and Python workers), from /proc; 0 where there is none."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def spark_cpu(spark) -> float:
    """This process's CPU and its Spark session's (driver JVM, Python workers) so far."""
    return time.process_time() + tree_cpu_s(spark.sparkContext._gateway.proc.pid)


WARM_MODULES = ("numpy", "dumpfilter.spark_jobs.tasks.segments", "dumpfilter.spark_jobs.tasks.bandwidth")


def warm_workers(sc, modules=WARM_MODULES) -> list[int]:
    """A warm session: one task per core, held long enough for each to get a Python worker of its
    own, imports what the jobs' tasks import (a fresh worker's first task spent about 0.15-0.3 s on
    it). Returns the workers' PIDs."""
    def load(_: int) -> int:
        import importlib
        import time

        for module in modules:
            importlib.import_module(module)
        time.sleep(0.3)
        return os.getpid()

    cores = sc.defaultParallelism
    return sorted(set(sc.parallelize(range(cores), cores).map(load).collect()))


@contextlib.contextmanager
def spark_bench_session(app: str, cores: int, cluster: bool = False):
    """A warm Spark session for a bench's Spark part: `local[cores]`, or (`cluster`) a real
    standalone cluster on loopback, pyspark's own Master and `cores` Workers of one core and 512m
    each (lab.spark_cluster). Yields (spark, cpu, start) where `cpu()` is the CPU so far of this
    process, the driver JVM, its Python workers and, on the cluster, the Master's, the Workers' and
    their executors'; `start` has the cluster's and the session's start, in seconds, apart."""
    from dumpfilter.lab.spark_cluster import StandaloneCluster
    from dumpfilter.spark_jobs.session import get_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with contextlib.ExitStack() as stack:
        start: dict = {"where": f"local[{cores}]"}
        master, pids = f"local[{cores}]", []
        if cluster:
            t0 = time.perf_counter()
            standalone = stack.enter_context(StandaloneCluster(workers=cores, cores=1, memory="512m"))
            start.update(where=f"standalone cluster, {cores} workers x 1 core, 512m",
                         cluster_start_s=round(time.perf_counter() - t0, 2))
            master, pids = standalone.url, standalone.pids()
        t0 = time.perf_counter()
        spark = get_session(app, master, {"spark.ui.enabled": "false", "spark.executor.memory": "512m"})
        stack.callback(spark.stop)
        warm_workers(spark.sparkContext)  # a Python worker per core, the tasks' modules imported
        start["spark_session_start_s"] = round(time.perf_counter() - t0, 2)

        def cpu() -> float:
            return spark_cpu(spark) + sum(tree_cpu_s(pid) for pid in pids)

        yield spark, cpu, start
