"""The master's statement path end to end (issue #43, `python -m bench statement_dump`): how fast
`dumpfilter master serve` brings a slave up to date over a real MariaDB MIXED binlog (and the
STATEMENT one of the same workload, bench.mixed_binlog) against a real MariaDB ROW binlog, in the
same run. For each binlog, with a fresh master each time:

  grpc     one `slave run --replicate-do-db DB --until-caught-up` over gRPC: MB/s of source binlog
           from the slave's Register (the master's Stats) to its exit;
  replica  one real MariaDB replica behind `--mysql-listen` (its rule from a `--replicas` file:
           `replicate-wild-do-table=sbtest1.%` for the sysbench binlogs, whose `CREATE TABLE
           sbtest1.t` has no default database and is not replicated under do-db; do-db for ROW): MB/s from START SLAVE until its IO thread has read the whole binlog
           (`io`: what the master sends it), and until its SQL thread has applied it (`applied`:
           the replica's own apply speed counts there, not only the master's);
  direct   the peer: the same replica with the same rule, filtering for itself behind a real
           MariaDB primary that serves the same binlog files, until its IO thread has read them
           (`direct_replica_io`; `replica_io_vs_direct`: how much sooner the replica behind the
           master is there).

DB keeps one schema of eight (db1 of the ROW fan-out binlog, sbtest1 of the sysbench ones). Each
measure is the best of DUMPFILTER_BENCH_REPEAT (2) runs. The ratio MIXED/ROW and STATEMENT/ROW of
each figure is reported; inputs under 500 MB are labelled diagnostic. Figures go to bench/results/statement_dump.json."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from bench.common import DATA_DIR, env_float, env_int, serve_master, stop_process, write_result
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
REPEAT = env_int("DUMPFILTER_BENCH_REPEAT", 2)
REPLICA_ID = 21
INPUTS = (("ROW", "fanout-mariadb-520mb", "db1"), ("MIXED", "mixed-sysbench-8s-220mb", "sbtest1"),
          ("STATEMENT", "statement-sysbench-8s-220mb", "sbtest1"))
# The replica's rule per input: the sysbench binlogs create their tables with no default database
# (not replicated under do-db); the ROW one runs procedures created in each schema (replicated
# under a table rule: a statement naming no table passes table rules, and db2 is not there).
REPLICA_RULE = {"db1": "replicate-do-db=db1", "sbtest1": "replicate-wild-do-table=sbtest1.%"}


def _served(source: Path, tmp: Path) -> tuple[Path, list[Path]]:
    """A directory of links to `source`'s binlog files, with an index (what the master serves)."""
    files = sorted(p for p in source.iterdir() if p.name[-1].isdigit() and p.name.rsplit(".", 1)[-1].isdigit())
    served = tmp / "binlogs"
    served.mkdir()
    for p in files:
        (served / p.name).symlink_to(p.resolve())
    (served / (files[0].name.rsplit(".", 1)[0] + ".index")).write_text("".join(f"./{p.name}\n" for p in files))
    return served, files


def _stats(address: str) -> list:
    with grpc.insecure_channel(address) as channel:
        return list(dump_pb2_grpc.DumpFilterStub(channel).Stats(dump_pb2.StatsRequest(), timeout=10).slaves)


def grpc_run(source: Path, db: str, tmp: Path) -> dict:
    served, _ = _served(source, tmp)
    master, address, _port = serve_master(served)
    try:
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address,
                               "--server-id", "100", "--relay-log-dir", str(tmp / "relay"), "--replicate-do-db", db,
                               "--until-caught-up", "--lint-wait", "0"], cwd=ROOT, stdout=subprocess.DEVNULL)
        ended = time.time()
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"slave exited {proc.returncode}")
        stats = _stats(address)
    finally:
        stop_process(master)
    registered = min(dt.datetime.fromisoformat(s.registered_at).timestamp() for s in stats)
    return {"seconds": round(seconds, 2), "stream_seconds": round(ended - registered, 2)}


def _end(path: Path) -> int:
    """Where a replica's position ends in the binlog's last file: its size, less a closing Stop
    event (the master does not send one; a server writes it when it shuts down)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        for stop in (23, 19):  # with and without its CRC32
            if size >= 4 + stop:
                f.seek(size - stop)
                head = f.read(19)
                if head[4] == 3 and int.from_bytes(head[9:13], "little") == stop:
                    return size - stop
    return size


def _past(file: str | None, pos, end_file: str, end_pos: int) -> bool:
    """Whether a replica's (file, position) is at the binlog's end: past its last byte, or in the
    file its last Rotate names (a file copied after FLUSH LOGS ends with one)."""
    return bool(file) and (file > end_file or (file == end_file and int(pos or 0) >= end_pos))


def replica_run(source: Path, db: str, tmp: Path, timeout: float = env_float("DUMPFILTER_REPLICA_TIMEOUT", 300)) -> dict:
    from dumpfilter.lab.sandbox import MariaDBServer, replica_status

    served, files = _served(source, tmp)
    end_file, end_pos = files[-1].name, _end(files[-1])
    topology = tmp / "replicas.toml"
    topology.write_text(f'[[slaves]]\nname = "bench"\nserver_id = {REPLICA_ID}\nflavor = "mariadb"\n'
                        f'rules = ["{REPLICA_RULE[db]}"]\n')
    master, _address, port = serve_master(served, "--replicas", str(topology))
    replica = MariaDBServer("stmt-replica", server_id=REPLICA_ID, log_bin=False)
    try:
        replica.start()
        replica.execute([f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='repl', "
                         f"MASTER_PASSWORD='x', MASTER_LOG_FILE='{files[0].name}', MASTER_LOG_POS=4, "
                         "MASTER_USE_GTID=no, MASTER_CONNECT_RETRY=1"])
        started = time.perf_counter()
        replica.execute("START SLAVE")
        io = applied = None
        error = ""
        s: dict = {}
        while time.perf_counter() - started < timeout:
            s = replica_status(replica)
            now = time.perf_counter() - started
            if io is None and _past(s.get("Master_Log_File"), s.get("Read_Master_Log_Pos"), end_file, end_pos):
                io = now
            if _past(s.get("Relay_Master_Log_File"), s.get("Exec_Master_Log_Pos"), end_file, end_pos):
                applied = now
                break
            error = s.get("Last_SQL_Error") or s.get("Last_IO_Error") or ""
            if error and s.get("Slave_SQL_Running") == "No":
                break
            time.sleep(0.05)
    finally:
        replica.stop()
        stop_process(master)
        last = {k: s.get(k) for k in ("Master_Log_File", "Read_Master_Log_Pos", "Relay_Master_Log_File",
                                      "Exec_Master_Log_Pos")}
    return {"io_seconds": None if io is None else round(io, 2),
            "applied_seconds": None if applied is None else round(applied, 2), "error": error[:200],
            "last_status": last}


def direct_replica_run(source: Path, db: str, tmp: Path,
                       timeout: float = env_float("DUMPFILTER_REPLICA_TIMEOUT", 300)) -> dict:
    """The peer of `replica_run`: the same replica with the same rule, filtering for itself
    behind a real MariaDB primary that serves the same binlog files (put in place of its own
    while it is down, so that its dump thread reads exactly these bytes): its IO thread reads
    every byte. Only until the IO thread is at the end (its SQL thread, filtering every event
    itself, took 214 s to apply the 220 MB MIXED binlog where the one behind the master took
    23-40 s)."""
    from dumpfilter.lab.sandbox import MariaDBServer, replica_status

    del tmp  # the primary's datadir holds the copies
    files = sorted(p for p in source.iterdir() if p.name[-1].isdigit() and p.name.rsplit(".", 1)[-1].isdigit())
    end_file, end_pos = files[-1].name, _end(files[-1])
    primary = MariaDBServer("stmt-direct-primary", server_id=1)
    rule = REPLICA_RULE[db].split("=", 1)
    replica = MariaDBServer("stmt-direct-replica", server_id=REPLICA_ID, log_bin=False,
                            options=[f"--{rule[0]}={rule[1]}"])
    s: dict = {}
    try:
        primary.start()

        def put_in_place() -> None:
            for old in primary.binlog_files():
                old.unlink()
            for p in files:
                shutil.copyfile(p, primary.datadir / p.name)
            Path(f"{primary.binlog_basename}.index").write_text("".join(f"./{p.name}\n" for p in files))

        primary.restart(put_in_place)
        replica.start()
        replica.execute([f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, "
                         f"MASTER_USER='{primary.repl_user}', MASTER_PASSWORD='{primary.repl_password}', "
                         f"MASTER_LOG_FILE='{files[0].name}', MASTER_LOG_POS=4, MASTER_USE_GTID=no, "
                         "MASTER_CONNECT_RETRY=1"])
        started = time.perf_counter()
        replica.execute("START SLAVE")
        io = None
        error = ""
        while time.perf_counter() - started < timeout:
            s = replica_status(replica)
            if _past(s.get("Master_Log_File"), s.get("Read_Master_Log_Pos"), end_file, end_pos):
                io = time.perf_counter() - started
                break
            error = s.get("Last_IO_Error") or ""
            if error and s.get("Slave_IO_Running") == "No":
                break
            time.sleep(0.05)
    finally:
        replica.stop()
        primary.stop()
    return {"io_seconds": None if io is None else round(io, 2), "error": error[:200]}


def _best(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return min(values) if values else None


def measure(source: Path, db: str) -> dict:
    mb = sum(p.stat().st_size for p in source.iterdir() if p.name[-1].isdigit()) / 1e6
    grpc_runs, replica_runs, direct_runs = [], [], []
    for _ in range(REPEAT):
        for runs, fn in ((grpc_runs, grpc_run), (replica_runs, replica_run), (direct_runs, direct_replica_run)):
            tmp = Path(tempfile.mkdtemp(prefix="bench-stmt-"))
            try:
                runs.append(fn(source, db, tmp))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    out = {"binlog_mb": round(mb, 1), "diagnostic": mb < 500, "keeps": db}
    for name, runs, key in (("grpc", grpc_runs, "stream_seconds"), ("grpc_from_spawn", grpc_runs, "seconds"),
                            ("replica_io", replica_runs, "io_seconds"),
                            ("replica_applied", replica_runs, "applied_seconds"),
                            ("direct_replica_io", direct_runs, "io_seconds")):
        seconds = _best(runs, key)
        out[f"{name}_s"] = seconds
        out[f"{name}_mb_per_s"] = None if not seconds else round(mb / seconds, 1)
    if out["replica_io_s"] and out["direct_replica_io_s"]:  # the same replica, filtering for itself
        out["replica_io_vs_direct"] = round(out["direct_replica_io_s"] / out["replica_io_s"], 2)
    out["replica_errors"] = sorted({r["error"] for r in replica_runs + direct_runs if r["error"]})
    return out


def main() -> dict:
    os.environ["PATH"] = "/usr/sbin:" + os.environ.get("PATH", "")
    results: dict = {"repeat": REPEAT, "loadavg_1min_at_start": round(os.getloadavg()[0], 2)}
    for fmt, name, db in INPUTS:
        source = DATA_DIR / name
        if not (source / "DONE").exists():
            results[fmt] = {"skipped": f"bench/data/{name} is not written (no DONE file)"}
            continue
        results[fmt] = measure(source, db)
    row = results.get("ROW", {})
    for fmt in ("MIXED", "STATEMENT"):
        r = results.get(fmt, {})
        for key in ("grpc_mb_per_s", "replica_io_mb_per_s", "replica_applied_mb_per_s"):
            if r.get(key) and row.get(key):
                r[f"{key.removesuffix('_mb_per_s')}_vs_row"] = round(r[key] / row[key], 2)
    for fmt, _, _ in INPUTS:
        print(f"{fmt:>9}: {json.dumps(results[fmt])}")
    write_result("statement_dump", results)
    return results


if __name__ == "__main__":
    main()
