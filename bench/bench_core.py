"""The compiled core beside its peers (`python -m bench core`): one table over the same >= 500 MB
ROW binlog of 8 schemas (DUMPFILTER_BENCH_MB), every figure measured in this run, each ratio
against a baseline measured in this run too, never a fixed threshold:

- `cat FILE > /dev/null` and the compiled bare header hop (the scanner's baseline);
- the scanner's walk with CRC32 verified (goal >= 0.5x the hop), a run of events per CRC and,
  for comparison, one event per CRC; and its unit grouping;
- `mariadb-binlog FILE` and `mariadb-binlog --database=db3 FILE`, to /dev/null;
- the pure-Python walk + decide loop (header hop, Table_map names, one cached decision each);
- `dumpfilter filter --replicate-do-db=db3` writing the filtered binlog (goals >= 3x
  mariadb-binlog --database, >= 4x the Python loop), timed as a whole command;
- a bare grpcio stream of the file's bytes in the master's batch size over loopback, and
  dumpfilter end to end (master -> gRPC -> slave relay log, one slave, do-db), from bench_dump:
  timed from the slave process's spawn (its start-up included), and from its Register (as the
  bare stream is timed from its first call: the path master -> gRPC -> relay log alone);
- python-mysql-replication's `only_schemas` beside dumpfilter on a live MariaDB's binlog (from
  bench_vs_pymysqlreplication; a server's own binlog of the same workload's shape, smaller than
  the file above: DUMPFILTER_PMR_TRANSACTIONS), when the `bench` extra is installed.

CPU-bound rows are timed best-of-N, interleaved round by round so that a ratio compares runs
made under the same machine load. Results: a table on stdout and bench/results/core.json.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path

import grpc

from bench.bench_filter import baseline_loop, engine, interleaved, row_file
from bench.common import env_int, target_mb, write_result
from dumpfilter.codec.scanner import Scanner, type_mask
from dumpfilter import _core
from dumpfilter.master.service import BATCH_BYTES  # the master's batch size: the bare stream's message size

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = env_int("DUMPFILTER_BENCH_REPEAT", 3)


def _mariadb_binlog() -> str | None:
    for name in ("mariadb-binlog", "mysqlbinlog"):
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if found:
            return found
    return None


def _run(cmd: list[str], **kwargs) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kwargs)
    return time.perf_counter() - started


def _scan_walk(data: bytes, batch_crc: bool = True) -> int:
    scanner = Scanner("bench", verify_checksums=True)
    scanner.core.batch_crc = batch_crc  # False: every event's CRC32 on its own (the earlier walk)
    _, stop, error = scanner.walk(data, 4, 0, type_mask(()))
    assert error is None and stop == len(data)
    return scanner.core.events_walked


def _scan_units(data: bytes) -> int:
    scanner = Scanner("bench", verify_checksums=True)
    scan = scanner.units(data, 4, 0, at_eof=True)
    assert scan.error is None
    return len(scan.units)


def _bare_grpc(data: bytes) -> float:
    """A bare grpcio server streaming `data` in BATCH_BYTES messages (no protobuf, no
    processing) to a client on loopback that only receives them: the transport's ceiling."""
    def stream(request, context):
        for at in range(0, len(data), BATCH_BYTES):
            yield data[at : at + BATCH_BYTES]

    handler = grpc.method_handlers_generic_handler(
        "bench.Bare", {"Stream": grpc.unary_stream_rpc_method_handler(stream)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 64 << 20)]) as ch:
            call = ch.unary_stream("/bench.Bare/Stream")
            started = time.perf_counter()
            total = sum(len(m) for m in call(b""))
            elapsed = time.perf_counter() - started
        assert total == len(data)
        return elapsed
    finally:
        server.stop(0)


def _end_to_end(path: Path) -> dict:
    """bench_dump.s one-slave scenario (master and slave as processes) on the same file, best of ROUNDS."""
    from bench import bench_dump

    return bench_dump.best(path.parent, ["db3"], ROUNDS)


def _vs_python_mysql_replication() -> dict:
    """bench_vs_pymysqlreplication's figures, or {} without python-mysql-replication or MariaDB."""
    from bench import bench_vs_pymysqlreplication as vs

    if not vs.available() or not _mariadb_binlog():
        print("python-mysql-replication or MariaDB missing (make bench installs both): its rows are left out")
        return {}
    return vs.measure()


def main() -> dict:
    mb = target_mb()
    path = row_file(mb)
    size = path.stat().st_size
    data = path.read_bytes()
    decide = engine([("replicate-do-db", "db3")]).table_kept
    tool = _mariadb_binlog()
    with tempfile.TemporaryDirectory(prefix="dumpfilter-core-") as tmp:
        out = Path(tmp, "out.bin")
        cli = [sys.executable, "-m", "dumpfilter", "filter", str(path), "-o", str(out), "--replicate-do-db=db3"]
        fns = {
            "cat FILE > /dev/null": lambda: _run(["cat", str(path)]),
            "compiled header hop (no CRC)": lambda: _core.hop(data, 4),
            "scanner walk, CRC32 verified": lambda: _scan_walk(data),
            "scanner walk, CRC32 verified one event at a time": lambda: _scan_walk(data, False),
            "scanner units (grouping, names), CRC32 verified": lambda: _scan_units(data),
            "pure-Python walk + decide loop": lambda: baseline_loop(path, decide),
            "dumpfilter filter --replicate-do-db=db3 (writes)": lambda: _run(cli, cwd=ROOT),
            "bare grpcio stream (1 MB messages, loopback)": lambda: _bare_grpc(data),
        }
        if tool:
            fns["mariadb-binlog FILE > /dev/null"] = lambda: _run([tool, str(path)])
            fns["mariadb-binlog --database=db3 FILE > /dev/null"] = lambda: _run([tool, "--database=db3", str(path)])
        best = interleaved(fns, ROUNDS)
    times = {name: t if name != "bare grpcio stream (1 MB messages, loopback)" else r for name, (t, r) in best.items()}
    e2e = _end_to_end(path)
    spawn_name = "dumpfilter end to end, 1 slave, from its process spawn"
    stream_name = "dumpfilter end to end, 1 slave, from its Register"
    times[spawn_name] = e2e["seconds"]
    times[stream_name] = e2e["stream_seconds"]
    hop = times["compiled header hop (no CRC)"]
    ours = times["dumpfilter filter --replicate-do-db=db3 (writes)"]
    rows = []
    print(f"input: {path} ({size / 1e6:.0f} MB), best of {ROUNDS} interleaved rounds")
    print(f"{'what':<62} {'s':>8} {'MB/s':>9}")
    for name, t in times.items():
        rows.append({"what": name, "seconds": round(t, 3), "mb_per_s": round(size / 1e6 / t, 1)})
        print(f"{name:<62} {t:8.3f} {size / 1e6 / t:9.1f}")
    ratios = {
        "scanner walk with CRC / compiled hop (goal >= 0.5)": hop / times["scanner walk, CRC32 verified"],
        "filter vs pure-Python walk+decide (goal >= 4)": times["pure-Python walk + decide loop"] / ours,
    }
    if tool:
        ratios["filter vs mariadb-binlog --database (goal >= 3)"] = \
            times["mariadb-binlog --database=db3 FILE > /dev/null"] / ours
    bare = times["bare grpcio stream (1 MB messages, loopback)"]
    ratios["end to end from spawn vs bare grpcio stream (goal >= 0.7)"] = bare / times[spawn_name]
    ratios["end to end from Register vs bare grpcio stream (goal >= 0.7)"] = bare / times[stream_name]
    pmr = _vs_python_mysql_replication()
    if pmr:
        mb = pmr["server_binlog_mb"]
        print(f"on a live MariaDB's binlog ({mb:.1f} MB, one schema of 8 kept):")
        for name, key in (("python-mysql-replication only_schemas", "python_mysql_replication_s"),
                          ("dumpfilter end to end, slave process spawned in the timing", "dumpfilter_s"),
                          ("dumpfilter end to end, slave in process (as python-mysql-replication)",
                           "dumpfilter_in_process_s")):
            rows.append({"what": name, "seconds": pmr[key], "mb_per_s": round(mb / pmr[key], 1), "input_mb": mb})
            print(f"{name:<62} {pmr[key]:8.3f} {mb / pmr[key]:9.1f}")
        ratios["end to end in process vs python-mysql-replication (goal >= 12)"] = pmr["speedup_in_process"]
        ratios["end to end from spawn vs python-mysql-replication"] = pmr["speedup"]
    for name, value in ratios.items():
        print(f"{name:<62} {value:8.2f}x")
    e2e.pop("stats", None)
    result = {"input_mb": round(size / 1e6, 1), "rounds": ROUNDS, "rows": rows,
              "ratios": {k: round(v, 3) for k, v in ratios.items()}, "end_to_end": e2e}
    write_result("core", result)
    return result


if __name__ == "__main__":
    main()
