"""Benchmark (not a test): does a real replica behind dumpfilter keep up? A sandbox MariaDB primary
runs sysbench oltp_write_only; one real replica reads it directly, another through
`dumpfilter master serve --mysql-listen` (the master tailing the primary's binlog). Both are
sampled every 0.25 s: Seconds_Behind_Master, the primary bytes not yet executed, and the time
from a primary commit to the replica applying it (a beat row inserted every 0.2 s on the primary,
watched for on each replica). After the load, the time each replica takes to catch up.

    .venv/bin/python -m bench.bench_replica_lag     # DUMPFILTER_LAG_SECONDS=30 DUMPFILTER_LAG_THREADS=4

Needs mariadbd and sysbench on PATH (/usr/sbin too). Figures go to bench/results/replica_lag.json.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time

from bench.common import env_float, env_int, serve_master, stop_process, write_result

from dumpfilter.lab.sandbox import MariaDBServer, make_replica, replica_status

SECONDS = env_float("DUMPFILTER_LAG_SECONDS", 30)
THREADS = env_int("DUMPFILTER_LAG_THREADS", 4)


def _sysbench(primary: MariaDBServer, command: str, seconds: float = 0) -> None:
    cmd = ["sysbench", "oltp_write_only", "--mysql-host=127.0.0.1", f"--mysql-port={primary.port}",
           "--mysql-user=root", "--mysql-db=sbtest", "--db-driver=mysql", "--tables=4", "--table-size=10000",
           f"--threads={THREADS}", f"--time={int(seconds)}", "--report-interval=0", command]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class Watch:
    """Samples one replica: lag figures, and when each beat row appeared."""

    def __init__(self, name: str, primary: MariaDBServer, replica: MariaDBServer):
        self.name, self.primary, self.replica = name, primary, replica
        self.seconds_behind: list[int] = []
        self.bytes_behind: list[int] = []
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._status, daemon=True),
                        threading.Thread(target=self._beats, daemon=True)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _status(self) -> None:
        while not self.stop.wait(0.25):
            status = replica_status(self.replica)
            if status.get("Seconds_Behind_Master") is not None:
                self.seconds_behind.append(int(status["Seconds_Behind_Master"]))
            file, pos = self.primary.master_position()
            if status.get("Relay_Master_Log_File") == file:
                self.bytes_behind.append(max(0, pos - int(status.get("Exec_Master_Log_Pos") or 0)))

    def _beats(self) -> None:
        conn = self.replica.connect()
        with conn.cursor() as cur:
            while not self.stop.wait(0.02):
                try:
                    cur.execute("SELECT COALESCE(MAX(id), 0) FROM lag.beats")
                except Exception:
                    continue
                top = cur.fetchone()[0]
                now = time.time()
                for i in range(max(self.seen, default=0) + 1, (top or 0) + 1):
                    self.seen[i] = now
        conn.close()


def _summary(watch: Watch, sent: dict[int, float], caught_up_seconds: float) -> dict:
    delays = sorted(max(0.0, watch.seen[i] - sent[i]) for i in sent if i in watch.seen)
    pick = (lambda q: round(delays[min(len(delays) - 1, int(q * len(delays)))], 3)) if delays else (lambda q: None)
    return {"seconds_behind_master_max": max(watch.seconds_behind, default=None),
            "seconds_behind_master_mean": round(statistics.mean(watch.seconds_behind), 2) if watch.seconds_behind else None,
            "bytes_behind_max": max(watch.bytes_behind, default=None),
            "bytes_behind_mean": round(statistics.mean(watch.bytes_behind)) if watch.bytes_behind else None,
            "commit_to_apply_p50_s": pick(0.5), "commit_to_apply_p95_s": pick(0.95),
            "commit_to_apply_max_s": round(delays[-1], 3) if delays else None,
            "beats_seen": len(delays), "beats_sent": len(sent), "catch_up_after_load_s": round(caught_up_seconds, 2)}


def _caught_up(primary: MariaDBServer, replica: MariaDBServer, timeout: float = 300) -> float:
    started = time.monotonic()
    target = primary.query("SELECT MAX(id) AS n FROM lag.beats")[0]["n"]
    while time.monotonic() - started < timeout:
        rows = replica.query("SELECT MAX(id) AS n FROM lag.beats")
        if rows and rows[0]["n"] == target:
            return time.monotonic() - started
        time.sleep(0.05)
    return float("inf")


def main() -> None:
    if shutil.which("sysbench") is None:
        raise RuntimeError("sysbench is not on PATH (apt-get install sysbench)")
    os.environ["PATH"] = "/usr/sbin:" + os.environ.get("PATH", "")
    servers = [MariaDBServer("lag-primary", server_id=1), MariaDBServer("lag-direct", server_id=2, log_bin=False),
               MariaDBServer("lag-dumpfilter", server_id=3, log_bin=False)]
    master = None
    try:
        for server in servers:
            server.start()
        primary, direct, behind = servers
        primary.execute(["CREATE DATABASE sbtest", "CREATE DATABASE lag",
                         "CREATE TABLE lag.beats (id INT PRIMARY KEY, at DOUBLE)"])
        make_replica(primary, direct)
        master, _grpc, port = serve_master(primary.binlog_dir)
        behind.execute(["CHANGE MASTER TO MASTER_HOST='127.0.0.1', "
                        f"MASTER_PORT={port}, MASTER_USER='repl', MASTER_PASSWORD='x', MASTER_USE_GTID=slave_pos, "
                        "MASTER_CONNECT_RETRY=1", "START SLAVE"])
        _sysbench(primary, "prepare")
        primary.execute("INSERT INTO lag.beats VALUES (0, 0)")  # both replicas hold the prepared tables
        for replica in (direct, behind):
            _caught_up(primary, replica)
        watches = [Watch("direct", primary, direct), Watch("dumpfilter", primary, behind)]
        for watch in watches:
            watch.start()
        sent: dict[int, float] = {}
        stop = threading.Event()

        def beats() -> None:
            conn = primary.connect()
            i = 0
            with conn.cursor() as cur:
                while not stop.wait(0.2):
                    i += 1
                    sent[i] = time.time()
                    cur.execute("INSERT INTO lag.beats VALUES (%s, %s)", (i, sent[i]))
            conn.close()

        beat = threading.Thread(target=beats, daemon=True)
        beat.start()
        started = time.time()
        _sysbench(primary, "run", SECONDS)
        stop.set()
        beat.join()
        load_seconds = time.time() - started
        catch_up = {watch.name: _caught_up(primary, watch.replica) for watch in watches}
        time.sleep(0.5)
        for watch in watches:
            watch.stop.set()
        file, pos = primary.master_position()
        payload = {"sysbench": f"oltp_write_only, {THREADS} threads, {SECONDS:.0f} s, 4 tables x 10000 rows",
                   "load_seconds": round(load_seconds, 1), "primary_binlog_end": f"{file}:{pos}",
                   "load_average_at_start": os.getloadavg()[0]}
        for watch in watches:
            payload[watch.name] = _summary(watch, sent, catch_up[watch.name])
        path = write_result("replica_lag", payload)
        for name in ("direct", "dumpfilter"):
            s = payload[name]
            print(f"{name:>10}: Seconds_Behind_Master max {s['seconds_behind_master_max']} mean "
                  f"{s['seconds_behind_master_mean']}; bytes behind max {s['bytes_behind_max']} mean "
                  f"{s['bytes_behind_mean']}; commit->apply p50 {s['commit_to_apply_p50_s']} s p95 "
                  f"{s['commit_to_apply_p95_s']} s max {s['commit_to_apply_max_s']} s; caught up "
                  f"{s['catch_up_after_load_s']} s after the load")
        print(f"results: {path}")
    finally:
        stop_process(master)
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
