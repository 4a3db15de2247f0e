"""Benchmark (not a test): the latency dumpfilter adds on a live primary (issue #30, goal 1). A
sandbox MariaDB primary takes about 400 small transactions a second in one schema (`bulk`) and a
beat row every 50 ms in another (`beat`; each row carries its commit time, the primary's NOW(6)).
Three readers, in the same run:

- direct: a real MariaDB replica of the primary;
- endpoint: a real MariaDB replica of `dumpfilter master serve --binlog-dir <the primary's binlog
  dir> --mysql-listen` (a process of its own), whose rules keep only the beat schema;
- slave run: `dumpfilter slave run --replicate-do-db beat` (a process of its own) on the same
  master's gRPC port.

On each replica a trigger (slave_run_triggers_for_rbr) records SYSDATE(6) as its SQL thread
applies a beat row: commit -> apply, with nothing polling the replicas. For `slave run` a
process of the bench's watches its relay-log.info (inotify) and notes when the recorded GTID
state first covers a beat's GTID: commit -> relay log durable (relay-log.info is written only
after the relay bytes are fsync'd). The added latency is each dumpfilter path's percentile minus the direct
replica's, from the same beats of the same run. The slave's figure is to the moment it found the
relay bytes on disk (relay-log.info's committed_at, MySQL's LAST_QUEUED_TRANSACTION_END_QUEUE_TIMESTAMP),
as the replicas' is to the moment their SQL thread applied the row (in the replica, by a trigger);
the watch's own wake-up is printed as a row of its own, not charged to the slave.

    .venv/bin/python -m bench latency      # DUMPFILTER_LATENCY_SECONDS=20 DUMPFILTER_LATENCY_TPS=400

Needs mariadbd (/usr/sbin too). Figures go to bench/results/latency.json.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import env_float, env_int, serve_master, stop_process, write_result

from dumpfilter.binlogs.watch import DirectoryWatch
from dumpfilter.errors import PositionError
from dumpfilter.lab.sandbox import MariaDBServer, make_replica, replica_status
from dumpfilter.slave.info_file import info_text, read_info, write_in_place

SECONDS = env_float("DUMPFILTER_LATENCY_SECONDS", 20)
TPS = env_int("DUMPFILTER_LATENCY_TPS", 400)
BEAT_EVERY = 0.05
WARMUP_BEATS = 10  # the first beats (the streams' first batches, the slave's first relay file) are left out
REPLICA_OPTIONS = ["--slave-run-triggers-for-rbr=YES"]
TRIGGER = ("CREATE TRIGGER beat.applied_at AFTER INSERT ON beat.beats FOR EACH ROW "
           "INSERT INTO beat.applied VALUES (NEW.id, UNIX_TIMESTAMP(SYSDATE(6)))")


def _paced(primary: MariaDBServer, stop: threading.Event, every: float, write) -> int:
    """`write(cursor, i)` for i = 1, 2, ... every `every` seconds (paced by the clock, not by
    sleeps added up) on one autocommit connection, until `stop`; the number written."""
    conn = primary.connect()
    i, started = 0, time.monotonic()
    with conn.cursor() as cur:
        while not stop.is_set():
            i += 1
            write(cur, i)
            ahead = started + i * every - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    conn.close()
    return i


def _load(primary: MariaDBServer, stop: threading.Event, counts: dict) -> None:
    """About TPS small autocommit transactions a second in `bulk`."""
    counts["load"] = _paced(primary, stop, 1 / TPS,
                            lambda cur, i: cur.execute("INSERT INTO bulk.t (v) VALUES (%s)", (i,)))


def _beats(primary: MariaDBServer, stop: threading.Event, beats: dict[int, tuple[float, int]]) -> None:
    """A beat row every BEAT_EVERY s: id -> (commit time, the GTID sequence number it got)."""
    def beat(cur, i: int) -> None:
        cur.execute("INSERT INTO beat.beats VALUES (%s, UNIX_TIMESTAMP(NOW(6)))", (i,))
        cur.execute("SELECT at, @@last_gtid FROM beat.beats WHERE id = %s", (i,))
        at, gtid = cur.fetchone()
        beats[i] = (float(at), int(gtid.rsplit("-", 1)[1]))

    _paced(primary, stop, BEAT_EVERY, beat)


class RelayWatch:
    """When relay-log.info first records each GTID sequence number (domain 0), seen by a process
    of its own (`watch_relay_info`): woken by inotify as the slave writes relay-log.info. Not a thread of this one, whose load threads would hold the GIL while the watch's
    wake-up waits for it (up to the interpreter's 5 ms switch interval), a delay of the bench's,
    not of the slave's."""

    def __init__(self, relay_dir: Path, out: Path):
        self.out = out
        self.proc = subprocess.Popen([sys.executable, "-c", "import sys; from bench.bench_latency import "
                                      "watch_relay_info as w; w(sys.argv[1], sys.argv[2])", str(relay_dir), str(out)],
                                     cwd=Path(__file__).resolve().parents[1])

    def durable(self) -> list[tuple[float, float, int]]:
        """(time seen, committed_at, highest seq_no recorded) so far."""
        try:
            lines = self.out.read_text().splitlines()
        except OSError:
            return []
        return [(float(t), float(c), int(seq)) for t, c, seq in (line.split() for line in lines if line.count(" ") == 2)]

    def delays(self, beats: dict[int, tuple[float, int]], seen: bool = False) -> dict[int, float]:
        """Beat -> seconds from its commit to the first relay-log.info covering it: to when the
        slave found its relay bytes on disk (its committed_at, MySQL's
        LAST_QUEUED_TRANSACTION_END_QUEUE_TIMESTAMP), or (`seen`) to when this watch read it."""
        durable = self.durable()
        out = {}
        for i, (at, seq) in beats.items():
            first = next((t if seen else c for t, c, top in durable if top >= seq), None)
            if first is not None:
                out[i] = first - at
        return out

    def close(self) -> None:
        stop_process(self.proc)


def watch_relay_info(relay_dir: str, out: str) -> None:
    """The watching process: a line "time committed_at seq_no" to `out` each time relay-log.info
    records a higher GTID sequence number (domain 0), until terminated. A version it did not see
    (overwritten before it looked) counts from the later one: later, never earlier."""
    relay, wake, last = Path(relay_dir), threading.Event(), -1
    watch = DirectoryWatch(relay)
    watch.add(wake)
    with open(out, "a", buffering=1) as f:
        while True:
            watch.wait(wake, 1.0)
            now = time.time()
            try:
                info = read_info(relay) or {}
            except (OSError, PositionError):  # none yet, or caught in the middle of a write
                continue
            state = info.get("gtid_state", "")
            seqs = [int(g.rsplit("-", 1)[1]) for g in state.split(",") if g.startswith("0-")]
            if seqs and seqs[0] > last:
                last = seqs[0]
                f.write(f"{now} {info.get('committed_at') or now} {last}\n")


def _commit_cost(directory: Path, samples: int = 40) -> list[float]:
    """What recording a relay position costs on this disk, measured beside the slave's relay log
    before the load, as the slave does it: the fsync of bytes appended to a file, then a small
    file written over in place (relay-log.info; made durable itself by a checkpoint once a
    second, off the path). A durable path cannot be faster than this; the direct replica
    (innodb_flush_log_at_trx_commit=0, no binlog) fsyncs nothing."""
    costs = []
    data, info = directory / "cost.data", directory / "cost.info"
    text = info_text({"gtid_state": "0-1-1", "pad": "x" * 700})
    with open(data, "ab") as f:
        for _ in range(samples):
            started = time.perf_counter()
            f.write(b"x" * 300)
            f.flush()
            os.fsync(f.fileno())
            write_in_place(info, text)
            costs.append(time.perf_counter() - started)
            time.sleep(BEAT_EVERY)
    data.unlink()
    info.unlink()
    return costs


def _cpu_seconds(proc: subprocess.Popen) -> float:
    """User + system CPU seconds of a running process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _applied(replica: MariaDBServer, beats: dict) -> dict[int, float]:
    return {r["id"]: float(r["at"]) - beats[r["id"]][0]
            for r in replica.query("SELECT id, at FROM beat.applied") if r["id"] in beats}


def _wait(what: str, done, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.1)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _topology(path: Path) -> Path:
    path.write_text('[[slaves]]\nname = "endpoint"\nserver_id = 3\nflavor = "mariadb"\nskip_policy = "heartbeat"\n'
                    'rules = ["replicate-do-db=beat"]\n')
    return path


def main() -> None:
    os.environ["PATH"] = "/usr/sbin:" + os.environ.get("PATH", "")
    if shutil.which("mariadbd") is None:
        raise RuntimeError("mariadbd is not on PATH (make system-deps)")
    work = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    servers = [MariaDBServer("lat-primary", server_id=1),
               MariaDBServer("lat-direct", server_id=2, log_bin=False, options=REPLICA_OPTIONS),
               MariaDBServer("lat-endpoint", server_id=3, log_bin=False, options=REPLICA_OPTIONS)]
    master = slave = watch = None
    try:
        for server in servers:
            server.start()
        primary, direct, behind = servers
        primary.execute(["CREATE DATABASE bulk", "CREATE TABLE bulk.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
                         "CREATE DATABASE beat"])
        # In `beat` as the default database: replicate-do-db judges a statement by it (MySQL's rule).
        primary.execute(["CREATE TABLE beats (id INT PRIMARY KEY, at DOUBLE)",
                         "CREATE TABLE applied (id INT PRIMARY KEY, at DOUBLE)"], db="beat")
        make_replica(primary, direct)
        master, grpc_address, port = serve_master(primary.binlog_dir, "--replicas", str(_topology(work / "r.toml")),
                                                  log=work / "master.log")
        behind.execute(["CHANGE MASTER TO MASTER_HOST='127.0.0.1', "
                        f"MASTER_PORT={port}, MASTER_USER='repl', MASTER_PASSWORD='x', MASTER_USE_GTID=slave_pos, "
                        "MASTER_CONNECT_RETRY=1", "START SLAVE"])
        relay = work / "relay"
        relay.mkdir()
        watch = RelayWatch(relay, work / "durable.txt")
        slave = subprocess.Popen([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", grpc_address,
                                  "--server-id", "4", "--relay-log-dir", str(relay), "--replicate-do-db", "beat"],
                                 cwd=Path(__file__).resolve().parents[1], stderr=open(work / "slave.log", "ab"))
        for replica in (direct, behind):
            _wait(f"{replica.name} has beat.applied",
                  lambda r=replica: r.query("SELECT COUNT(*) AS n FROM information_schema.tables "
                                            "WHERE table_schema = 'beat' AND table_name = 'applied'")[0]["n"] == 1)
            replica.execute(TRIGGER)
        _wait("slave run records a position", lambda: (relay / "relay-log.info").exists())
        stop = threading.Event()
        beats: dict[int, tuple[float, int]] = {}
        counts: dict[str, int] = {}
        threads = [threading.Thread(target=_load, args=(primary, stop, counts), daemon=True),
                   threading.Thread(target=_beats, args=(primary, stop, beats), daemon=True)]
        cost = _commit_cost(work)
        load_at_start = os.getloadavg()[0]
        cpu_before = {"master": _cpu_seconds(master), "slave run": _cpu_seconds(slave)}
        started = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(SECONDS)
        stop.set()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        cpu = {name: round((_cpu_seconds(p) - cpu_before[name]) / elapsed, 3)
               for name, p in (("master", master), ("slave run", slave))}
        last = max(beats)
        for replica in (direct, behind):
            _wait(f"{replica.name} applies every beat",
                  lambda r=replica: (r.query("SELECT MAX(id) AS n FROM beat.applied")[0]["n"] or 0) >= last)
        _wait("slave run records every beat", lambda: len(watch.delays(beats)) == len(beats))
        measured = {i: v for i, v in beats.items() if i > WARMUP_BEATS}
        paths = {"direct replica (commit -> apply)": _applied(direct, measured),
                 "replica via --mysql-listen (commit -> apply)": _applied(behind, measured),
                 "slave run (commit -> relay log durable)": watch.delays(measured),
                 "slave run, seen by a watching process": watch.delays(measured, seen=True)}
        base = list(paths["direct replica (commit -> apply)"].values())
        base50, base99 = _pct(base, 0.5), _pct(base, 0.99)
        rows = {}
        for name, delays in paths.items():
            values = list(delays.values())
            p50, p99 = _pct(values, 0.5), _pct(values, 0.99)
            rows[name] = {"beats": len(values), "p50_ms": round(p50 * 1e3, 2), "p99_ms": round(p99 * 1e3, 2),
                          "max_ms": round(max(values) * 1e3, 2),
                          "added_p50_ms": round((p50 - base50) * 1e3, 2), "added_p99_ms": round((p99 - base99) * 1e3, 2),
                          "ratio_p50": round(p50 / base50, 2) if base50 > 0 else None,
                          "ratio_p99": round(p99 / base99, 2) if base99 > 0 else None}
        payload = {"load": f"{counts.get('load', 0) / elapsed:.0f} tx/s in `bulk` + a beat row every "
                           f"{BEAT_EVERY * 1e3:.0f} ms in `beat`, {elapsed:.0f} s",
                   "load_average_at_start": round(load_at_start, 2), "paths": rows,
                   "cpu_cores_during_load": cpu,
                   "disk_commit_cost_ms": {"p50": round(_pct(cost, 0.5) * 1e3, 2), "p99": round(_pct(cost, 0.99) * 1e3, 2)}}
        path = write_result("latency", payload)
        print(f"load: {payload['load']}; load average at start {load_at_start:.2f}")
        print(f"{'path':<46} {'beats':>5} {'p50 ms':>7} {'p99 ms':>7} {'+p50 ms':>8} {'+p99 ms':>8} "
              f"{'x p50':>6} {'x p99':>6}")
        for name, r in rows.items():
            print(f"{name:<46} {r['beats']:>5} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {r['added_p50_ms']:>8.2f} "
                  f"{r['added_p99_ms']:>8.2f} {r['ratio_p50'] or 0:>6.2f} {r['ratio_p99'] or 0:>6.2f}")
        floor = payload["disk_commit_cost_ms"]
        print(f"this disk's cost of recording a position (fsync data, then the info written over), "
              f"before the load: p50 {floor['p50']:.2f} ms, p99 {floor['p99']:.2f} ms")
        print(f"CPU during the load (cores): master serve {cpu['master']:.3f}, slave run {cpu['slave run']:.3f}")
        print(f"results: {path}")
    except Exception:
        for server in servers[1:]:
            if server.running:
                status = replica_status(server)
                print(f"--- {server.name}: IO {status.get('Slave_IO_Running')} {status.get('Last_IO_Error')!r}; "
                      f"SQL {status.get('Slave_SQL_Running')} {status.get('Last_SQL_Error')!r}", file=sys.stderr)
        for log in work.glob("*.log"):
            print(f"--- {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]), file=sys.stderr)
        raise
    finally:
        if watch is not None:
            watch.close()
        stop_process(slave)
        stop_process(master)
        for server in servers:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
