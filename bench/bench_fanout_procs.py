"""Fan-out in the production configuration (`python -m bench fanout_procs`, issue #42): `dumpfilter
master serve` as a process of its own over a real MariaDB's ROW binlog several times the master's
segment cache, and `slave run --until-caught-up` processes over real gRPC. Four runs (RUN_KINDS,
DUMPFILTER_FANOUT_SLAVES), each with a fresh master:
  1    one slave with no rules (keeps everything): the baseline;
  8    --replicate-do-db db1 .. db8, one each, started together (together they are sent what the one is);
  8s   the same eight started DUMPFILTER_FANOUT_STAGGER (0.5) s apart, so that their streams drift apart;
  64   --replicate-do-db db1 .. db8, eight slaves each, started together.
Master CPU is its utime + stime from /proc from before the first slave starts (once the master's
start-up work is done: `settled`) until the last one
is caught up and gone; its lint worker's (master/lint_jobs.py: a child process that lints each
registered rule set over the binlog) is counted apart, once lint is done, and added to it in the
`with lint` figures; its private memory is RssAnon sampled every 50 ms through the run (VmHWM,
also reported, counts the binlog pages it maps, which are the page cache's); MB sent is the sum
of the slaves' bytes_sent (Stats), segment scans the master's dumpfilter_segment_scans counter.
Each run but 64 is made DUMPFILTER_BENCH_REPEAT (2) times, interleaved; the run with the least
master CPU is kept and the medians are reported too (the machine is shared: CPU time grows with
the load). The goals are printed beside the floor measured in the same run: the CPU time of one
bare pass that maps the binlog afresh and touches each 4 KB page (what a master whose streams each
map the file pay per stream), and what a bare gRPC server costs to stream as many bytes to one
client and to eight (bench.grpc_floor). The page cache's state (DUMPFILTER_FANOUT_PAGE_CACHE, default
"small": 4 KB folios, as a server's appends leave them; "huge" and "cold" on request, see
PAGE_CACHE_STATES). Figures go to bench/results/fanout_procs.json.

The binlog (DUMPFILTER_FANOUT_PROCS_MB, default 520: bench/data/fanout-mariadb-520mb, about 7x all
the binlog pages the master keeps in its caches; or any directory of a real binlog over eight schemas,
DUMPFILTER_FANOUT_PROCS_DIR, e.g. bench/data/row-sysbench-8s-500mb: 1 GB of sysbench ROW over
sbtest1..sbtest8) is written once by a sandbox MariaDB primary (ROW,
files of 100 MB) taking small transactions in eight schemas at once from stored procedures, and
kept under bench/data/."""

from __future__ import annotations

import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc

from bench.common import (DATA_DIR, BenchSettingError, env_binlog_dir, env_float, env_int, free_port, metric, serve_master,
                          stop_process, write_result)
from bench.grpc_floor import floor_cpu
from dumpfilter.master.read.segments import CACHE_BYTES, RESIDENT_BYTES
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = 8
TICKS = os.sysconf("SC_CLK_TCK")

# The page cache's state for the binlog, which decides what a pass over it costs the master (its
# page faults, and handing pages back). Each state measured has runs of its own:
#   small  the binlog in the page cache in 4 KB folios: what a server's small appends leave
#          (checked on this kernel: a MariaDB's binlog after 30,000 commits), the warm case;
#   huge   in the page cache in 2 MB folios: what `master serve --binlog-huge-pages` leaves of
#          what it reads from disk (here read so by the bench, through a mapping that asks for
#          them), for every later pass of any slave;
#   cold   not in the page cache, read from disk by the master's first pass: the case of a binlog
#          larger than the page cache, and of older files the kernel let go.
PAGE_CACHE_STATES = ("small", "huge", "cold")
# Memory the eviction frees goes back to the host of a VM that reports free pages (this machine
# does, about 2 s later), and what is read into it then costs its first touch: waiting that long,
# every cold run reads into such memory, as a master long idle would, instead of some into
# memory still backed (the runs' CPU was bimodal). Harmless where nothing is reported.
SETTLE_S = 3.0
# More `master serve` options for every run (DUMPFILTER_FANOUT_MASTER_ARGS, split on spaces), e.g.
# --binlog-huge-pages.
MASTER_ARGS = tuple(os.environ.get("DUMPFILTER_FANOUT_MASTER_ARGS", "").split())

# Per transaction: one INSERT of three rows into one of four tables, and one UPDATE of a row of
# another: about 1 KB of binlog (GTID, two Annotate_rows, two Table_maps, two rows events, XID).
_PROCEDURE = """
CREATE PROCEDURE fill(n INT, seed INT)
BEGIN
  DECLARE i INT DEFAULT 0;
  WHILE i < n DO
    START TRANSACTION;
    CASE (seed + i) % 4
      WHEN 0 THEN INSERT INTO t1 (k, pad) VALUES (seed + i, REPEAT('a', 90)), (i, REPEAT('b', 70)), (i + 1, 'c');
      WHEN 1 THEN INSERT INTO t2 (k, pad) VALUES (seed + i, REPEAT('d', 90)), (i, REPEAT('e', 70)), (i + 1, 'f');
      WHEN 2 THEN INSERT INTO t3 (k, pad) VALUES (seed + i, REPEAT('g', 90)), (i, REPEAT('h', 70)), (i + 1, 'i');
      ELSE INSERT INTO t4 (k, pad) VALUES (seed + i, REPEAT('j', 90)), (i, REPEAT('k', 70)), (i + 1, 'l');
    END CASE;
    UPDATE t0 SET k = k + 1, pad = REPEAT('u', 40 + i % 40) WHERE id = 1 + i % 64;
    COMMIT;
    SET i = i + 1;
  END WHILE;
END"""


def real_binlog(mb: int) -> Path:
    """The binlog directory of a real MariaDB primary after about `mb` MB of small transactions in
    db1..db8 (written once, then kept under bench/data/)."""
    directory = DATA_DIR / f"fanout-mariadb-{mb}mb"
    if (directory / "DONE").exists():
        return directory
    from dumpfilter.lab.sandbox import MariaDBServer

    started = time.perf_counter()
    primary = MariaDBServer("fanout-primary", server_id=1, options=(
        "--max-binlog-size=100M", "--innodb-flush-log-at-trx-commit=0", "--innodb-buffer-pool-size=256M"))
    primary.start()
    try:
        for d in range(1, SCHEMAS + 1):
            primary.execute(f"CREATE DATABASE db{d}")
            tables = [f"CREATE TABLE t{t} (id INT AUTO_INCREMENT PRIMARY KEY, k INT, pad VARCHAR(100))"
                      for t in range(5)]
            primary.execute([*tables, "INSERT INTO t0 (k, pad) SELECT seq, 'x' FROM seq_1_to_64", _PROCEDURE],
                            db=f"db{d}")

        def size() -> int:
            return sum(p.stat().st_size for p in primary.binlog_files())

        def writer(d: int) -> None:
            with primary.connect(f"db{d}") as conn, conn.cursor() as cur:
                seed = 0
                while size() < mb * 1e6:
                    cur.execute("CALL fill(2000, %s)", (seed,))
                    seed += 2000

        threads = [threading.Thread(target=writer, args=(d,)) for d in range(1, SCHEMAS + 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        files = primary.binlog_files()
        primary.stop(keep=True)  # the server closes its last file (its FDE's in-use flag cleared)
        tmp = directory.with_name(directory.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for path in files:
            shutil.copyfile(path, tmp / path.name)
        (tmp / f"{files[0].name.rsplit('.', 1)[0]}.index").write_text("".join(f"./{p.name}\n" for p in files))
        (tmp / "DONE").write_text(json.dumps({"files": [p.name for p in files],
                                              "seconds": round(time.perf_counter() - started, 1)}))
        shutil.rmtree(directory, ignore_errors=True)
        tmp.rename(directory)
    finally:
        root = primary.root
        primary.stop()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
    return directory


def _cpu(pid: int) -> tuple[float, float, int]:
    """(user, system) CPU seconds and minor page faults of a live process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS, int(fields[7])


def settled(pid: int, quiet: float = 0.3, limit: float = 20.0) -> None:
    """Waits until the process `pid` has used less than 10 ms of CPU over `quiet` seconds (at
    most `limit` s): a master serving is measured once its start-up work (`DumpService.warm_up`:
    the directory watch, the rules' patterns, the statement parser's import) is done, which
    every run would otherwise count as part of its slaves' cost."""
    deadline = time.monotonic() + limit
    before = sum(_cpu(pid)[:2])
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = sum(_cpu(pid)[:2])
        if now - before < 0.01:
            return
        before = now


def _lint_worker(pid: int) -> int | None:
    """The master's lint worker process (master/lint_jobs.py: a child started at the first
    Register, which reads the binlog for every rule set registered), or None before it exists."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid and b"lint_jobs" in (stat.parent / "cmdline").read_bytes():
                return int(stat.parent.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def _lint_done(address: str) -> bool:
    """Whether the master's lint at Register has read the binlog for every registered slave."""
    with grpc.insecure_channel(address) as channel:
        slaves = dump_pb2_grpc.DumpFilterStub(channel).Stats(dump_pb2.StatsRequest(), timeout=30).slaves
    return all(s.lint_state != "pending" for s in slaves)


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _rss_anon_mb(pid: int) -> float:
    """The process's private memory now (RssAnon: its heap, not the file pages it maps)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return 0.0


class _AnonSampler(threading.Thread):
    """Samples a process's RssAnon every SAMPLE_S seconds until stopped; `peak` is the most seen.
    (VmHWM counts the binlog pages the master maps too, which are the page cache's.)"""

    SAMPLE_S = 0.05

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self._done = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            try:
                self.peak = max(self.peak, _rss_anon_mb(self.pid))
            except OSError:
                return
            self._done.wait(self.SAMPLE_S)

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak


def touch_pass_s(binlog_dir: Path) -> float:
    """The floor a pass over the binlog's pages sets (issue #42): the CPU time of one bare pass that
    maps each file afresh and reads a byte of every 4 KB page, then unmaps it. A master whose
    streams each map the file anew pays this once per stream; one that shares its mappings, once."""
    t0 = time.thread_time()
    for path in _binlog_files(binlog_dir):
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
        try:
            for offset in range(0, len(m), 4096):
                m[offset]
        finally:
            m.close()
    return time.thread_time() - t0


def run(binlog_dir: Path, rules: list[tuple[str, ...]], stagger: float) -> dict:
    """One master and len(rules) `slave run --until-caught-up` processes started `stagger` s apart."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    metrics_port = free_port()
    master, address, _ = serve_master(binlog_dir, "--metrics-port", str(metrics_port), *MASTER_ARGS,
                                      log=workdir / "master.log")
    procs: list[subprocess.Popen] = []
    sampler = _AnonSampler(master.pid)
    sampler.start()
    try:
        settled(master.pid)
        cpu0 = _cpu(master.pid)
        started = time.perf_counter()
        for n, args in enumerate(rules):
            if n:
                time.sleep(stagger)
            with open(workdir / f"slave{n}.log", "wb") as out:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address, "--server-id",
                     str(100 + n), "--relay-log-dir", str(workdir / f"relay{n}"), "--flavor", "mariadb",
                     "--until-caught-up", "--lint-wait", "0", *args],
                    cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        for n, proc in enumerate(procs):
            if proc.wait() != 0:
                raise RuntimeError(f"slave {n} exited {proc.returncode}: "
                                   f"{(workdir / f'slave{n}.log').read_text()[-400:]}")
        seconds = time.perf_counter() - started
        cpu1 = _cpu(master.pid)
        rss = _peak_rss_mb(master.pid)
        anon = sampler.stop()
        with grpc.insecure_channel(address) as channel:
            stats = dump_pb2_grpc.DumpFilterStub(channel).Stats(dump_pb2.StatsRequest(), timeout=30).slaves
            sent = sum(s.bytes_sent for s in stats)
        # The lint worker goes on after the slaves are gone: its CPU is counted once every
        # registered rule set is linted (its share of the run's work, wherever it falls).
        deadline = time.monotonic() + LINT_WAIT_S
        while not _lint_done(address) and time.monotonic() < deadline:
            time.sleep(0.1)
        lint_pid = _lint_worker(master.pid)
        lint_cpu = sum(_cpu(lint_pid)[:2]) if lint_pid is not None else 0.0
        lint_done = _lint_done(address)
        scans = metric(metrics_port, "dumpfilter_segment_scans_total")
        hits = metric(metrics_port, "dumpfilter_segment_hits_total")
        kept_hits = metric(metrics_port, "dumpfilter_segment_kept_hits_total")
    finally:
        sampler.stop()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stop_process(master)
        shutil.rmtree(workdir, ignore_errors=True)
    cpu = cpu1[0] + cpu1[1] - cpu0[0] - cpu0[1]
    return {"slaves": len(rules), "master_cpu_s": round(cpu, 2),
            "lint_worker_cpu_s": round(lint_cpu, 2), "lint_done": lint_done,
            "master_with_lint_cpu_s": round(cpu + lint_cpu, 2),
            "master_sys_s": round(cpu1[1] - cpu0[1], 2), "master_minor_faults": cpu1[2] - cpu0[2], "mb_sent": round(sent / 1e6, 1),
            "master_cpu_ms_per_mb_sent": round(1000 * cpu / max(sent / 1e6, 1e-9), 2),
            "master_peak_rss_mb": round(rss, 1), "master_peak_rss_anon_mb": round(anon, 1), "seconds": round(seconds, 1), "segment_scans": scans,
            "segment_hits": hits, "segment_kept_hits": kept_hits}


def _binlog_files(binlog_dir: Path) -> list[Path]:
    return sorted(binlog_dir.glob("*-bin.0*"))


def _evict(binlog_dir: Path) -> None:
    """The binlog's pages out of the page cache (they are clean: POSIX_FADV_DONTNEED drops them)."""
    for path in _binlog_files(binlog_dir):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _small_folios(binlog_dir: Path) -> None:
    """The binlog in the page cache in 4 KB folios: evicted, then read back a page at a time with
    read ahead off (a read with read ahead would bring larger folios)."""
    _evict(binlog_dir)
    for path in _binlog_files(binlog_dir):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            for offset in range(0, os.fstat(fd).st_size, 4096):
                os.pread(fd, 1, offset)
        finally:
            os.close(fd)


def _huge_folios(binlog_dir: Path) -> None:
    """The binlog in the page cache in 2 MB folios: evicted, then read back through a mapping of
    each whole file that asks for huge pages (MADV_HUGEPAGE), a byte of each page touched: on a VM
    whose free memory went back to its host, the first touch of memory costs the toucher (about
    0.8 s of CPU for these 648 MB here), which is paid here, once, and not by a run's master."""
    _evict(binlog_dir)
    for path in _binlog_files(binlog_dir):
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
        try:
            try:
                m.madvise(mmap.MADV_HUGEPAGE)
            except (AttributeError, OSError):  # no transparent huge pages here: the kernel's own folios
                print("huge: this kernel refuses MADV_HUGEPAGE; the state is the kernel's own folios", flush=True)
            for offset in range(0, len(m), 4096):
                m[offset]
        finally:
            m.close()


# The runs (DUMPFILTER_FANOUT_SLAVES, default all four), each with a master of its own:
#   1    one slave keeping everything: the baseline;
#   8    eight --replicate-do-db slaves (db1..db8) started together (issue #42 goal 1);
#   8s   the same eight started STAGGER (0.5) s apart (goal 2);
#   64   64 do-db slaves, eight per schema, started together (goal 3: CPU per MB sent).
RUN_KINDS = ("1", "8", "8s", "64")
GOAL_RATIO = 1.3
GOAL_64_OVER_FLOOR = 0.15  # 64 slaves' CPU per MB over one slave's, at most this over the transport's (issue #59)
GOAL_ANON_MB = 300
LINT_WAIT_S = 300.0  # the most a run waits for the master's lint at Register to finish


# The binlog's schemas' name before their number: db1..db8 in real_binlog's, sbtest1..sbtest8 in a
# sysbench one (bench.mixed_binlog's, e.g. DUMPFILTER_FANOUT_PROCS_DIR=bench/data/row-sysbench-8s-500mb).
SCHEMA_PREFIX = "db"


def _rules(kind: str) -> list[tuple[str, ...]]:
    count = int(kind.rstrip("s"))
    return [()] if count == 1 else [("--replicate-do-db", f"{SCHEMA_PREFIX}{n % SCHEMAS + 1}") for n in range(count)]


def measure(binlog_dir: Path, kinds: list[str], repeat: int, stagger: float, state: str) -> dict:
    """The runs for one page-cache state: each kind DUMPFILTER_BENCH_REPEAT times, interleaved
    (64 once), the page cache put in `state` first (before every run for `cold`: a run reads the
    binlog back). The run with the least master CPU is kept, and the medians are reported too."""
    runs: dict[str, dict] = {}
    cpus: dict[str, list[float]] = {}
    if state in ("small", "huge"):  # a run leaves the folios it found
        (_small_folios if state == "small" else _huge_folios)(binlog_dir)
    for attempt in range(repeat):
        for kind in kinds:
            if kind == "64" and attempt:  # 64 slaves take a while: once
                continue
            if state == "cold":
                _evict(binlog_dir)
                time.sleep(SETTLE_S)
            got = run(binlog_dir, _rules(kind), stagger if kind.endswith("s") else 0.0)
            print(f"{state:5} {kind:>3} slaves: {got}", flush=True)
            cpus.setdefault(kind, []).append(got["master_cpu_s"])
            if kind not in runs or got["master_cpu_s"] < runs[kind]["master_cpu_s"]:
                runs[kind] = got
    result: dict = {"runs": runs, "master_cpu_s_all": cpus}
    if "1" in runs:
        one, one_median = runs["1"]["master_cpu_s"], statistics.median(cpus["1"])
        for kind in ("8", "8s"):
            if kind in runs:
                result[f"cpu_ratio_{kind}_vs_1"] = round(runs[kind]["master_cpu_s"] / max(one, 1e-9), 2)
                result[f"cpu_ratio_{kind}_vs_1_median"] = round(statistics.median(cpus[kind]) / max(one_median, 1e-9), 2)
                result[f"cpu_with_lint_ratio_{kind}_vs_1"] = round(
                    runs[kind]["master_with_lint_cpu_s"] / max(runs["1"]["master_with_lint_cpu_s"], 1e-9), 2)
        if "64" in runs:
            result["cpu_per_mb_ratio_64_vs_1"] = round(
                runs["64"]["master_cpu_ms_per_mb_sent"] / max(runs["1"]["master_cpu_ms_per_mb_sent"], 1e-9), 2)
    result["master_peak_rss_anon_mb"] = max(r["master_peak_rss_anon_mb"] for r in runs.values())
    result["master_peak_rss_mb"] = max(r["master_peak_rss_mb"] for r in runs.values())
    return result


def _goals(state: str, got: dict, floor_s: float, transport: dict[int, float]) -> list[str]:
    """The issue's goals beside what this run measured, the floor of a bare touch pass, and what
    bare gRPC costs (bench.grpc_floor) to stream the binlog's bytes to one client and to eight."""
    lines = []
    one = got["runs"].get("1", {}).get("master_cpu_s")
    for kind, what in (("8", "8 do-db slaves together / 1 keep-all"), ("8s", "8 do-db slaves 0.5 s apart / 1 keep-all")):
        key = f"cpu_ratio_{kind}_vs_1"
        if key in got:
            met = "met" if got[key] <= GOAL_RATIO else "NOT met"
            lines.append(f"{state} goal {what}: {got[key]} (median {got[key + '_median']}) <= {GOAL_RATIO}: {met}")
            lint = got["runs"][kind]
            lines.append(f"{state}   with the lint worker's CPU (lint at Register, a child process): "
                         f"{got['cpu_with_lint_' + key[4:]]} ({lint['master_with_lint_cpu_s']} s, of which lint "
                         f"{lint['lint_worker_cpu_s']} s{'' if lint['lint_done'] else ', lint not finished'})")
    if "cpu_per_mb_ratio_64_vs_1" in got:
        r = got["cpu_per_mb_ratio_64_vs_1"]
        if 64 in transport:  # issue #59: within GOAL_64_OVER_FLOOR of the transport's own ratio
            floor = transport[64] / 8 / transport[1]
            lines.append(f"{state} goal 64 do-db slaves, CPU per MB sent / 1 keep-all's: {r} <= the floor {floor:.2f} "
                         f"+ {GOAL_64_OVER_FLOOR}: {'met' if r <= floor + GOAL_64_OVER_FLOOR else 'NOT met'}")
            lines.append(f"{state} floor: bare gRPC, 8x the binlog's bytes to 64 clients together, CPU per MB / to 1 "
                         f"client's: {floor:.2f} (the transport alone, 1 MiB replies)")
        else:
            lines.append(f"{state} 64 do-db slaves, CPU per MB sent / 1 keep-all's: {r} (no floor measured)")
    anon = got["master_peak_rss_anon_mb"]
    lines.append(f"{state} goal master RssAnon peak (sampled): {anon} MB < {GOAL_ANON_MB}: "
                 f"{'met' if anon < GOAL_ANON_MB else 'NOT met'}")
    if one:
        lines.append(f"{state} floor: a bare touch pass (fresh mapping, 4 KB pages) {floor_s:.3f} s = "
                     f"{floor_s / one:.2f} of one slave's master CPU; 7 more such passes would make 8 vs 1 "
                     f">= {1 + 7 * floor_s / one:.2f}")
        lines.append(f"{state} floor: bare gRPC, the binlog's bytes to 1 client {transport[1]:.2f} s of server CPU, "
                     f"to 8 together {transport[8]:.2f} s: the transport alone makes 8 vs 1 "
                     f"{1 + (transport[8] - transport[1]) / one:.2f}; the rest is the master's own")
    return lines


def main() -> dict:
    mb = env_int("DUMPFILTER_FANOUT_PROCS_MB", 520)
    stagger = env_float("DUMPFILTER_FANOUT_STAGGER", 0.5, zero_ok=True)
    kinds = os.environ.get("DUMPFILTER_FANOUT_SLAVES", ",".join(RUN_KINDS)).split(",")
    states = os.environ.get("DUMPFILTER_FANOUT_PAGE_CACHE", "small").split(",")
    unknown = sorted(set(states) - set(PAGE_CACHE_STATES)) + sorted(set(kinds) - set(RUN_KINDS))
    if unknown:
        raise BenchSettingError(f"DUMPFILTER_FANOUT_PAGE_CACHE / _SLAVES: unknown {', '.join(unknown)} "
                         f"(known: {', '.join(PAGE_CACHE_STATES)}; {', '.join(RUN_KINDS)})")
    binlog_dir = env_binlog_dir("DUMPFILTER_FANOUT_PROCS_DIR") or real_binlog(mb)
    if "sysbench" in binlog_dir.name:
        global SCHEMA_PREFIX
        SCHEMA_PREFIX = "sbtest"
    size = sum(p.stat().st_size for p in _binlog_files(binlog_dir))
    load = os.getloadavg()[0]
    repeat = env_int("DUMPFILTER_BENCH_REPEAT", 2)
    _small_folios(binlog_dir)
    floor_s = min(touch_pass_s(binlog_dir) for _ in range(3))  # in the same run as the goals
    transport = floor_cpu(size >> 20, [1, 8], repeat)
    if "64" in kinds:  # the 64 slaves are sent the binlog eight times over (eight per schema)
        transport[64] = floor_cpu(8 * (size >> 20), [64], 1)[64]
    result = {"binlog_mb": round(size / 1e6, 1), "cache_mb": round(CACHE_BYTES / 1e6, 1),
              "binlog_vs_page_caches": round(size / (CACHE_BYTES + RESIDENT_BYTES), 2),
              "touch_pass_s": round(floor_s, 3),
              "bare_grpc_cpu_1_client_s": round(transport[1], 3), "bare_grpc_cpu_8_clients_s": round(transport[8], 3),
              "bare_grpc_cpu_64_clients_8x_bytes_s": round(transport[64], 3) if 64 in transport else None,
              "stagger_s": stagger, "loadavg_1min_at_start": round(load, 2), "master_args": list(MASTER_ARGS),
              "page_cache": {}}
    for n, state in enumerate(states):  # the 64-slave run in the first state only
        result["page_cache"][state] = measure(binlog_dir, kinds if n == 0 else [k for k in kinds if k != "64"],
                                              repeat, stagger, state)
    for key in ("binlog_mb", "cache_mb", "binlog_vs_page_caches", "touch_pass_s", "bare_grpc_cpu_1_client_s",
                "bare_grpc_cpu_8_clients_s", "loadavg_1min_at_start"):
        print(f"{key:34} {result[key]}")
    for state, got in result["page_cache"].items():
        for line in _goals(state, got, floor_s, transport):
            print(line)
    write_result("fanout_procs", result)
    return result


if __name__ == "__main__":
    main()
