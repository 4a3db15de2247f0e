"""Benchmark of the gRPC dump path (not a test): on a generated ≥ 500 MB ROW binlog over 8
schemas with do-db keeping one, one slave end to end (master → loopback gRPC → relay log) in
MB/s of source binlog (timed from the slave's spawn, and from its Register to its exit), wire bytes against kept bytes + heartbeats, master CPU for 8 slaves with
distinct rules against 1, and the master's peak RSS.

    .venv/bin/python -m bench.bench_dump          # DUMPFILTER_BENCH_MB=100 for a quick run

The input is bench.common's generated file when it is complete, else (for sizes above 60 MB)
bench_filter's valid file tiled from the 60 MB one. Each scenario runs DUMPFILTER_BENCH_REPEAT
times (default 2); the best run is reported (CPU from /proc for the master, rusage for the
slaves), with the load average at the start. Figures go to bench/results/dump.json.
"""

from __future__ import annotations

import datetime as dt
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from bench.common import env_int, process_cpu_s, row_binlog, target_mb, write_result

from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.lab.ports import free_port

ROOT = Path(__file__).resolve().parents[1]


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Master:
    def __init__(self, binlog_dir: Path, extra: tuple[str, ...] = ()):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir",
                                      str(binlog_dir), "--listen", f"127.0.0.1:{self.port}", *extra], cwd=ROOT,
                                     stderr=subprocess.DEVNULL)
        self.address = f"127.0.0.1:{self.port}"
        with grpc.insecure_channel(self.address) as channel:
            grpc.channel_ready_future(channel).result(timeout=30)

    def stats(self) -> list:
        with grpc.insecure_channel(self.address) as channel:
            return list(dump_pb2_grpc.DumpFilterStub(channel).Stats(dump_pb2.StatsRequest(), timeout=10).slaves)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_slaves(master: Master, dbs: list[str], workdir: Path) -> tuple[float, float]:
    """Runs one slave process per database to caught-up: (seconds from their spawn, the wall
    clock when the last one exited)."""
    procs = []
    started = time.perf_counter()
    for n, db in enumerate(dbs):
        relay = workdir / f"relay{n}"
        procs.append(subprocess.Popen([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", master.address,
                                       "--server-id", str(100 + n), "--relay-log-dir", str(relay),
                                       "--replicate-do-db", db, "--until-caught-up",
                                       # caught up is the end: not the wait for the master's lint
                                       # verdict (made at Register for a binlog of 64 MiB or less)
                                       "--lint-wait", "0"], cwd=ROOT))
    for proc in procs:
        if proc.wait() != 0:
            raise SystemExit(f"slave exited {proc.returncode}")
    return time.perf_counter() - started, time.time()


def scenario(binlog_dir: Path, dbs: list[str], extra: tuple[str, ...] = ()) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-dump-"))
    master = Master(binlog_dir, extra)
    try:
        cpu0 = process_cpu_s(master.proc.pid)
        slaves0 = _children_cpu()
        seconds, ended = run_slaves(master, dbs, workdir)
        cpu = process_cpu_s(master.proc.pid) - cpu0
        slaves_cpu = _children_cpu() - slaves0
        rss = _peak_rss_mb(master.proc.pid)
        stats = master.stats()
    finally:
        master.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    # From the first Register the master saw (the slaves' process start-up and imports are behind
    # them) to the last slave's exit (its relay log synced): the path master -> gRPC -> relay log.
    registered = min(dt.datetime.fromisoformat(s.registered_at).timestamp() for s in stats)
    return {"slaves": len(dbs), "seconds": round(seconds, 2), "stream_seconds": round(ended - registered, 2),
            "master_cpu_seconds": round(cpu, 2),
            "slaves_cpu_seconds": round(slaves_cpu, 2), "master_peak_rss_mb": round(rss, 1), "stats": stats}


def best(binlog_dir: Path, dbs: list[str], repeat: int, extra: tuple[str, ...] = ()) -> dict:
    """The run with the least master CPU; wall time and peak RSS are the best and worst seen."""
    runs = [scenario(binlog_dir, dbs, extra) for _ in range(repeat)]
    out = min(runs, key=lambda r: r["master_cpu_seconds"])
    out["seconds"] = min(r["seconds"] for r in runs)
    out["stream_seconds"] = min(r["stream_seconds"] for r in runs)
    out["slaves_cpu_seconds"] = min(r["slaves_cpu_seconds"] for r in runs)
    out["master_peak_rss_mb"] = max(r["master_peak_rss_mb"] for r in runs)
    return out


def input_binlog() -> Path:
    mb = target_mb()
    if mb > 60 and not (ROOT / "bench" / "data" / f"row-mariadb-8s-{mb}mb" / "DONE").exists():
        from bench.bench_filter import tiled_row_file

        return tiled_row_file(mb)
    return row_binlog(schemas=8)


def main() -> dict:
    path = input_binlog()
    binlog_dir = path.parent
    size = sum(p.stat().st_size for p in binlog_dir.glob("bench-bin.0*"))
    mb = size / 1e6
    repeat = env_int("DUMPFILTER_BENCH_REPEAT", 2)
    load = os.getloadavg()[0]
    one = best(binlog_dir, ["db1"], repeat)
    s = one["stats"][0]
    wire = s.bytes_sent
    kept_plus_hb = s.kept_bytes + s.heartbeat_bytes
    eight = best(binlog_dir, [f"db{i}" for i in range(1, 9)], repeat)
    unverified = best(binlog_dir, ["db1"], repeat, ("--no-verify-checksums",))
    result = {
        "input": str(path.relative_to(ROOT)),
        "binlog_mb": round(mb, 1),
        "repeat": repeat, "loadavg_1min_at_start": round(load, 2), "cpus": os.cpu_count(),
        "one_slave_seconds": one["seconds"],
        "one_slave_mb_per_s": round(mb / one["seconds"], 1),
        "one_slave_stream_seconds": one["stream_seconds"],
        "one_slave_stream_mb_per_s": round(mb / one["stream_seconds"], 1),
        "master_mb_per_cpu_s_1_slave": round(mb / max(one["master_cpu_seconds"], 1e-9), 1),
        "one_slave_mb_per_s_master_no_crc_check": round(mb / unverified["seconds"], 1),
        "slave_cpu_s_1_slave": one["slaves_cpu_seconds"],
        "wire_bytes": wire, "kept_bytes": s.kept_bytes, "heartbeat_bytes": s.heartbeat_bytes,
        "heartbeats": s.heartbeats,
        "wire_over_kept_plus_heartbeats": round(wire / kept_plus_hb, 4),
        "master_cpu_1_slave_s": one["master_cpu_seconds"],
        "master_cpu_8_slaves_s": eight["master_cpu_seconds"],
        "cpu_ratio_8_vs_1": round(eight["master_cpu_seconds"] / max(one["master_cpu_seconds"], 1e-9), 2),
        "eight_slaves_seconds": eight["seconds"],
        "master_peak_rss_mb_1": one["master_peak_rss_mb"],
        "master_peak_rss_mb_8": eight["master_peak_rss_mb"],
    }
    for key, value in result.items():
        print(f"{key:34} {value}")
    write_result(os.environ.get("DUMPFILTER_BENCH_RESULT", "dump"), result)
    return result


if __name__ == "__main__":
    main()
