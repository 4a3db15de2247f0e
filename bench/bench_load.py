"""Load (`python -m bench load`, part of `make bench`, issue #13): many slaves (32) stream from one
`dumpfilter master serve` while a real MariaDB primary takes a live write load into the binlog
directory the master tails. It reports the master's RSS and CPU over time, each slave's lag, and
checks every slave's relay log against the offline filter of its rules over the primary's binlog
at the end: identical, so nothing was lost and nothing duplicated.

The load is sysbench's oltp_write_only (throttled with --rate) on DUMPFILTER_LOAD_DBS databases
when sysbench is installed (`apt-get install sysbench`; `make bench` installs it), else a built-in
pymysql writer issuing the same transaction shape. Everything runs as separate processes (the
primary, each sysbench, the master, each slave), so the master's figures are its own.

Settings (environment):
  DUMPFILTER_LOAD_SECONDS  how long the load runs (default 60; 600 is issue #13's ten minutes)
  DUMPFILTER_LOAD_SLAVES   number of slaves (default 32)
  DUMPFILTER_LOAD_RATE     transactions per second per database (default 20)
  DUMPFILTER_LOAD_DBS      databases written, sb1..sbN, 4 tables each (default 4)
  DUMPFILTER_LOAD_FORMAT   the primary's binlog_format (default ROW)
  DUMPFILTER_LOAD_SAMPLE   seconds between samples (default 5)
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import env_float, env_int, write_result
from dumpfilter.codec import group_transactions
from dumpfilter.binlogs import TailingReader
from dumpfilter.binlogs.lint import units as binlog_units
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.transaction_filter import KEEP, KEPT, PARTIAL, TransactionFilter
from dumpfilter.lab.sandbox import MariaDBServer
from dumpfilter.codec.rename import rewrite_event

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# Eight rule shapes, cycled over the slaves: one database, a wild table, an ignored database,
# tables by name, a wild ignore, everything, a rewrite, and two databases.
def rule_sets(dbs: int) -> list[tuple[list[str], RuleSet]]:
    last = f"sb{dbs}"
    return [
        (["--replicate-do-db", "sb1"], RuleSet(do_db=("sb1",))),
        (["--replicate-wild-do-table", "sb%.sbtest1"], RuleSet(wild_do_table=("sb%.sbtest1",))),
        (["--replicate-ignore-db", last], RuleSet(ignore_db=(last,))),
        (["--replicate-do-table", "sb1.sbtest2", "--replicate-do-table", f"{last}.sbtest3"],
         RuleSet(do_table=("sb1.sbtest2", f"{last}.sbtest3"))),
        (["--replicate-wild-ignore-table", "%.sbtest4"], RuleSet(wild_ignore_table=("%.sbtest4",))),
        ([], RuleSet()),
        (["--replicate-rewrite-db", "sb1->copy1", "--replicate-do-db", "copy1"],
         RuleSet(rewrite_db=(("sb1", "copy1"),), do_db=("copy1",))),
        (["--replicate-do-db", "sb2", "--replicate-do-db", last], RuleSet(do_db=("sb2", last))),
    ]


# -- the load ---------------------------------------------------------------------------------
class SysbenchLoad:
    """sysbench oltp_write_only on each database, throttled; `transactions` after `wait()`."""

    def __init__(self, primary: MariaDBServer, dbs: list[str], rate: float, seconds: float, workdir: Path):
        self.primary, self.dbs, self.rate, self.seconds, self.workdir = primary, dbs, rate, seconds, workdir
        self.procs: list[tuple[subprocess.Popen, Path]] = []
        self.transactions = 0

    def _cmd(self, db: str, *extra: str) -> list[str]:
        return ["sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1",
                f"--mysql-port={self.primary.port}", "--mysql-user=root", f"--mysql-db={db}", "--tables=4",
                "--table-size=1000", *extra]

    def prepare(self) -> None:
        for db in self.dbs:
            subprocess.run(self._cmd(db, "prepare"), check=True, capture_output=True, timeout=300)

    def start(self) -> None:
        for db in self.dbs:
            log = self.workdir / f"sysbench-{db}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(self._cmd(db, "--threads=2", f"--rate={self.rate:g}",
                                                  f"--time={int(self.seconds)}", "--report-interval=0", "run"),
                                        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            self.procs.append((proc, log))

    def wait(self) -> None:
        for proc, log in self.procs:
            if proc.wait(self.seconds + 120) != 0:
                raise RuntimeError(f"sysbench exited with {proc.returncode}: {log.read_text()[-2000:]}")
            m = re.search(r"transactions:\s+(\d+)", log.read_text())
            self.transactions += int(m.group(1)) if m else 0

    name = "sysbench oltp_write_only"


class WriterLoad:
    """The fallback when sysbench is absent: one pymysql thread per database, each transaction an
    indexed UPDATE, a non-indexed UPDATE, a DELETE and an INSERT, as oltp_write_only does."""

    name = "built-in pymysql writer (sysbench not installed)"

    def __init__(self, primary: MariaDBServer, dbs: list[str], rate: float, seconds: float, workdir: Path):
        self.primary, self.dbs, self.rate, self.seconds = primary, dbs, rate, seconds
        self.threads: list[threading.Thread] = []
        self.transactions = 0
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()

    def prepare(self) -> None:
        for db in self.dbs:
            with self.primary.connect(db) as conn, conn.cursor() as cur:
                for t in range(1, 5):
                    cur.execute(f"CREATE TABLE sbtest{t} (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL DEFAULT 0,"
                                " c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))")
                    cur.executemany(f"INSERT INTO sbtest{t} (k, c, pad) VALUES (%s, %s, %s)",
                                    [(random.randint(1, 1000), "c" * 119, "p" * 59) for _ in range(1000)])

    def _run(self, db: str) -> None:
        rng = random.Random(db)
        try:
            with self.primary.connect(db, autocommit=False) as conn, conn.cursor() as cur:
                end = time.monotonic() + self.seconds
                next_at = time.monotonic()
                while next_at < end:
                    t, row = rng.randint(1, 4), rng.randint(1, 1000)
                    cur.execute(f"UPDATE sbtest{t} SET k = k + 1 WHERE id = %s", (row,))
                    cur.execute(f"UPDATE sbtest{t} SET c = %s WHERE id = %s", (f"{rng.random():.12f}" * 8, row))
                    cur.execute(f"DELETE FROM sbtest{t} WHERE id = %s", (row,))
                    cur.execute(f"INSERT INTO sbtest{t} (id, k, c, pad) VALUES (%s, %s, %s, %s)",
                                (row, rng.randint(1, 1000), "c" * 119, "p" * 59))
                    conn.commit()
                    with self._lock:
                        self.transactions += 1
                    next_at += rng.expovariate(self.rate)
                    time.sleep(max(0.0, next_at - time.monotonic()))
        except BaseException as exc:  # reported by wait()
            self.errors.append(exc)

    def start(self) -> None:
        self.threads = [threading.Thread(target=self._run, args=(db,), daemon=True) for db in self.dbs]
        for t in self.threads:
            t.start()

    def wait(self) -> None:
        for t in self.threads:
            t.join(self.seconds + 120)
        if self.errors:
            raise RuntimeError(f"the writer failed: {self.errors[0]!r}")


# -- processes and positions ------------------------------------------------------------------
def proc_cpu_rss(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS MB) of a live process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
    with open(f"/proc/{pid}/statm") as f:
        rss = int(f.read().split()[1]) * PAGE / 1e6
    return cpu, rss


class Offsets:
    """(file, pos) of the primary's binlog series as one offset: earlier files' sizes plus pos."""

    def __init__(self, primary: MariaDBServer):
        self.primary = primary

    def __call__(self, file: str, pos: int) -> int:
        total = 0
        for path in self.primary.binlog_files():
            if path.name == file:
                return total + pos
            total += path.stat().st_size
        return 0  # not written yet (a slave with no position)


@dataclass
class SlaveProc:
    server_id: int
    args: list[str]
    rules: RuleSet
    relay_dir: Path
    proc: subprocess.Popen | None = None
    log: Path | None = None
    lags_s: list[float] = field(default_factory=list)
    lags_bytes: list[int] = field(default_factory=list)

    def position(self) -> tuple[str, int] | None:
        try:
            data = json.loads((self.relay_dir / "relay-log.info").read_text())
        except (OSError, ValueError):
            return None
        return (data["master_file"], int(data["master_pos"])) if data.get("master_file") else None


def start_master(binlog_dir: Path, workdir: Path) -> tuple[subprocess.Popen, str, Path]:
    log = workdir / "master.log"
    out = open(log, "wb")
    proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(binlog_dir),
                             "--listen", "127.0.0.1:0", "--max-streams", "256"],
                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
    out.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = re.search(r"serving .* on (\S+:\d+)", log.read_text(errors="replace"))
        if m:
            return proc, m.group(1), log
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"master serve did not start: {log.read_text(errors='replace')[-2000:]}")


def start_slave(slave: SlaveProc, address: str, workdir: Path) -> None:
    slave.log = workdir / f"slave-{slave.server_id}.log"
    with open(slave.log, "wb") as out:
        slave.proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address,
                                       "--server-id", str(slave.server_id), "--relay-log-dir", str(slave.relay_dir),
                                       "--flavor", "mariadb", *slave.args], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      cwd=ROOT)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def kill_all(slaves: list[SlaveProc], master: subprocess.Popen | None) -> None:
    """SIGKILL the slaves and the master still running (a run that stopped half way)."""
    for slave in slaves:
        if slave.proc is not None:
            stop(slave.proc, signal.SIGKILL)
    if master is not None:
        stop(master, signal.SIGKILL)


# -- what each slave must hold ----------------------------------------------------------------
def relay_units(relay_dir: Path) -> list[tuple[bytes, ...]]:
    """The transactions in a slave's relay log, as tuples of raw event bytes (FDEs left out)."""
    events = [e for _, e in TailingReader(relay_dir)]
    return [tuple(e.raw for e in txn.events) for txn in group_transactions(events) if txn.kind != "control"]


def filtered_units(paths: list[Path], rules: RuleSet) -> list[tuple[str, tuple[bytes, ...]]]:
    """The offline filter's answer for a heartbeat-policy slave: (file name, transaction) of the
    kept and partly kept transactions, with the slave's rewrite-db applied."""
    engine = RuleEngine(rules, Settings(flavor="mariadb"))
    tf = TransactionFilter(engine, empty_transactions=KEEP)

    def rename(db: str, table: str) -> tuple[str, str, bool]:  # (codec.rename's form: the table too)
        new, changed = engine.rewrite_db(db)
        return new, table, changed

    out = []
    for name, txn in binlog_units(paths):
        if txn.kind == "control":
            continue
        result = tf.filter(txn)
        if result.outcome in (KEPT, PARTIAL) and result.events:
            out.append((name, tuple(rewrite_event(e, rename).raw for e in result.events)))
    return out


def expected_units(paths: list[Path], rules: RuleSet) -> list[tuple[bytes, ...]]:
    """filtered_units without the file names."""
    return [unit for _, unit in filtered_units(paths, rules)]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the run ----------------------------------------------------------------------------------
def run(seconds: float, n_slaves: int, rate: float, n_dbs: int, binlog_format: str, sample: float) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="dumpfilter-load-"))
    dbs = [f"sb{i}" for i in range(1, n_dbs + 1)]
    shapes = rule_sets(n_dbs)
    slaves = [SlaveProc(100 + i, shapes[i % len(shapes)][0], shapes[i % len(shapes)][1], workdir / f"relay-{i}")
              for i in range(n_slaves)]
    primary = MariaDBServer("load-primary", server_id=1, binlog_format=binlog_format,
                            options=["--max-binlog-size=8M", "--max-connections=100"])
    master = None
    result: dict = {}
    try:
        primary.start()
        for db in dbs:
            primary.execute(f"CREATE DATABASE {db}")
        load_cls = SysbenchLoad if shutil.which("sysbench") else WriterLoad
        load = load_cls(primary, dbs, rate, seconds, workdir)
        load.prepare()
        offset = Offsets(primary)
        master, address, master_log = start_master(primary.binlog_dir, workdir)
        started = time.monotonic()
        for slave in slaves:  # all at once: their registrations arrive together
            start_slave(slave, address, workdir)
        load.start()
        history: list[tuple[float, int]] = []  # (time, primary offset)
        load_start = offset(*primary.master_position())  # what sysbench prepared: the slaves' backlog
        warm = None  # first sample at which every slave had read the backlog
        samples = []
        cpu0, _ = proc_cpu_rss(master.pid)
        end = started + seconds
        while True:
            now = time.monotonic()
            p_file, p_pos = primary.master_position()
            p_off = offset(p_file, p_pos)
            history.append((now, p_off))
            cpu, rss = proc_cpu_rss(master.pid)
            lag_s, lag_b, offsets = [], [], []
            for slave in slaves:
                if slave.proc.poll() is not None:
                    raise RuntimeError(f"slave {slave.server_id} exited with {slave.proc.returncode}: "
                                       f"{slave.log.read_text(errors='replace')[-2000:]}")
                pos = slave.position()
                s_off = offset(*pos) if pos else 0
                offsets.append(s_off)
                # Lag in time: the slave holds all the primary had written at the latest sample
                # whose end it has reached; lag is the time since then (0 when it has the end).
                reached = [t for t, off in history if off <= s_off]
                lag = 0.0 if s_off >= p_off else now - (reached[-1] if reached else started)
                lag_s.append(lag)
                lag_b.append(max(0, p_off - s_off))
                slave.lags_s.append(lag)
                slave.lags_bytes.append(max(0, p_off - s_off))
            if warm is None and min(offsets) >= load_start:
                warm = len(samples)
            samples.append({"t": round(now - started, 1), "master_rss_mb": round(rss, 1),
                            "master_cpu_s": round(cpu - cpu0, 2), "primary_mb": round(p_off / 1e6, 2),
                            "max_lag_s": round(max(lag_s), 1), "max_lag_bytes": max(lag_b)})
            print(f"  t={now - started:6.0f}s primary={p_off / 1e6:7.2f} MB master rss={rss:6.1f} MB "
                  f"cpu={cpu - cpu0:7.1f}s max lag={max(lag_s):5.1f}s/{max(lag_b):>9} B", flush=True)
            if now >= end:
                break
            time.sleep(max(0.0, min(sample, end - time.monotonic())))
        load.wait()
        # Drain: every slave reaches the primary's final end.
        final = offset(*primary.master_position())
        drain_started = time.monotonic()
        while True:
            behind = [s for s in slaves if (offset(*s.position()) if s.position() else 0) < final]
            if not behind:
                break
            if time.monotonic() - drain_started > 300:
                raise RuntimeError(f"{len(behind)} slaves did not catch up within 300 s of the load's end")
            time.sleep(0.5)
        drain = time.monotonic() - drain_started
        cpu_end, rss_end = proc_cpu_rss(master.pid)
        wall = time.monotonic() - started
        for slave in slaves:
            stop(slave.proc)  # SIGTERM, taken as Ctrl-C: a bench run with `&` has SIGINT ignored
        stop(master)
        # Nothing lost, nothing duplicated: each relay log against the offline filter.
        paths = primary.binlog_files()
        want = {}
        mismatched = []
        for slave in slaves:
            key = slave.rules
            if key not in want:
                want[key] = expected_units(paths, key)
            got = relay_units(slave.relay_dir)
            if got != want[key]:
                mismatched.append({"server_id": slave.server_id, "units": len(got), "expected": len(want[key])})
        rss = [s["master_rss_mb"] for s in samples]
        warm = len(samples) - 1 if warm is None else max(warm, 1)
        half = max((len(samples) + warm) // 2, warm + 1)  # the steady part's two halves
        steady = [lag for slave in slaves for lag in slave.lags_s[warm:]]
        result = {
            "load": load.name, "seconds": seconds, "slaves": n_slaves, "databases": n_dbs,
            "rate_per_db_tps": rate, "binlog_format": binlog_format, "transactions": load.transactions,
            "tps": round(load.transactions / seconds, 1), "binlog_mb": round(final / 1e6, 1),
            "binlog_file_count": len(paths),
            "master_rss_mb_first_half_max": max(rss[warm:half] or rss),
            "master_rss_mb_second_half_max": max(rss[half:] or rss),
            "master_rss_mb_end": round(rss_end, 1),
            "master_cpu_s": round(cpu_end - cpu0, 1), "master_cpu_cores_avg": round((cpu_end - cpu0) / wall, 2),
            "lag_s_p50": round(percentile(steady, 0.5), 1), "lag_s_p99": round(percentile(steady, 0.99), 1),
            "lag_s_max": round(max(steady or [0.0]), 1),
            "lag_bytes_max": max((b for s in slaves for b in s.lags_bytes[warm:]), default=0),
            "warmup_s": samples[min(warm, len(samples) - 1)]["t"], "drain_s": round(drain, 1),
            "loadavg_1m_end": round(os.getloadavg()[0], 1),
            "slaves_identical": n_slaves - len(mismatched), "mismatched": mismatched,
            "per_slave": [{"server_id": s.server_id, "rules": " ".join(s.args) or "(none)",
                           "lag_s_p50": round(percentile(s.lags_s[warm:], 0.5), 1),
                           "lag_s_max": round(max(s.lags_s[warm:] or [0.0]), 1)} for s in slaves],
            "samples": samples,
        }
        result["rss_flat"] = result["master_rss_mb_second_half_max"] <= 1.2 * result["master_rss_mb_first_half_max"] + 10
        first = [lag for s in slaves for lag in s.lags_s[warm:half]] or [0.0]
        second = [lag for s in slaves for lag in s.lags_s[half:]] or [0.0]
        result["lag_bounded"] = max(second) <= 2 * max(first) + 2 * sample
        return result
    finally:
        kill_all(slaves, master)
        primary.stop()
        if not os.environ.get("DUMPFILTER_LOAD_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)
        elif result:
            print(f"  kept {workdir}")


def main() -> dict:
    seconds = env_float("DUMPFILTER_LOAD_SECONDS", 60)
    result = run(seconds, env_int("DUMPFILTER_LOAD_SLAVES", 32), env_float("DUMPFILTER_LOAD_RATE", 20),
                 env_int("DUMPFILTER_LOAD_DBS", 4), os.environ.get("DUMPFILTER_LOAD_FORMAT", "ROW"),
                 env_float("DUMPFILTER_LOAD_SAMPLE", 5))
    for key, value in result.items():
        if key not in ("samples", "per_slave"):
            print(f"{key:32} {value}")
    write_result("load", result)
    if result["mismatched"]:
        raise AssertionError(f"{len(result['mismatched'])} slaves' relay logs differ from the offline filter")
    return result


if __name__ == "__main__":
    main()
