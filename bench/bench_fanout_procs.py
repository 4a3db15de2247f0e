"""Fan-out in the production configuration (`python -m bench fanout_procs`, issue #30 goals 2 and
3): `dumpfilter master serve` as a process of its own over a real MariaDB's ROW binlog several
times the master's segment cache, and `slave run` processes over real gRPC, started
DUMPFILTER_FANOUT_STAGGER (0.5) s apart so that their streams drift apart as they do in
production. Three runs, each with a fresh master:
  1 slave    no rules (keeps everything): the baseline;
  8 slaves   --replicate-do-db db1 .. db8, one each (together they are sent what the one is);
  64 slaves  --replicate-do-db db1 .. db8, eight slaves each.
Master CPU is its utime + stime from /proc from before the first slave starts until the last one
is caught up and gone, peak RSS its VmHWM, MB sent the sum of the slaves' bytes_sent (Stats),
segment scans the master's dumpfilter_segment_scans counter. The 1- and 8-slave runs are made
DUMPFILTER_BENCH_REPEAT (2) times, interleaved, the 64-slave run once; the run with the least
master CPU is kept (the machine is shared: CPU time too grows with the load).
All of it is measured for each state of the binlog in the page cache (DUMPFILTER_FANOUT_PAGE_CACHE,
default "small,huge,cold"; the 64-slave run in the first only), since the pages' folios decide
what a pass costs the master in faults: "small", in the page cache in 4 KB folios, as a server's
small appends leave it; "huge", in 2 MB folios, as --binlog-huge-pages leaves what it reads;
"cold", out of it, read from disk by the master (see PAGE_CACHE_STATES).
Reported: cpu_ratio_8_vs_1 (goal <= 1.3) from the least CPU of each count, and the same from the
medians (this machine's CPU time for one run varies by 20% from run to run: the median is the
steadier figure once there are three or more), cpu_per_mb_ratio_64_vs_8 (goal <= 1.3), peak RSS
(goal < 300 MB in every run), and the binlog against all the binlog pages the master may hold
(its segment cache and its kept pages' budget: the issue asks for at least 5x). Figures go to
bench/results/fanout_procs.json.

The binlog (DUMPFILTER_FANOUT_PROCS_MB, default 640: at least 5x all the binlog pages the master
may hold, its 32 MB segment cache and its 40 MB of kept pages; 256 was 2x them when those were 96 MB)
is written once by a sandbox MariaDB primary (ROW, files of 100 MB) taking small transactions
in eight schemas at once from stored procedures, and kept under bench/data/."""

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
import urllib.request
from pathlib import Path

import grpc

from bench.common import DATA_DIR, free_port, serve_master, stop_process, write_result
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


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _metric(port: int, name: str) -> int | None:
    """A counter of the master's /metrics (None: not there)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
    return None


def run(binlog_dir: Path, rules: list[tuple[str, ...]], stagger: float) -> dict:
    """One master and len(rules) `slave run --until-caught-up` processes started `stagger` s apart."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    metrics_port = free_port()
    master, address, _ = serve_master(binlog_dir, "--metrics-port", str(metrics_port), *MASTER_ARGS,
                                      log=workdir / "master.log")
    procs: list[subprocess.Popen] = []
    try:
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
        with grpc.insecure_channel(address) as channel:
            stats = dump_pb2_grpc.DumpFilterStub(channel).Stats(dump_pb2.StatsRequest(), timeout=30).slaves
            sent = sum(s.bytes_sent for s in stats)
        scans = _metric(metrics_port, "dumpfilter_segment_scans_total")
        hits = _metric(metrics_port, "dumpfilter_segment_hits_total")
        kept_hits = _metric(metrics_port, "dumpfilter_segment_kept_hits_total")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stop_process(master)
        shutil.rmtree(workdir, ignore_errors=True)
    cpu = cpu1[0] + cpu1[1] - cpu0[0] - cpu0[1]
    return {"slaves": len(rules), "master_cpu_s": round(cpu, 2),
            "master_sys_s": round(cpu1[1] - cpu0[1], 2), "master_minor_faults": cpu1[2] - cpu0[2], "mb_sent": round(sent / 1e6, 1),
            "master_cpu_ms_per_mb_sent": round(1000 * cpu / max(sent / 1e6, 1e-9), 2),
            "master_peak_rss_mb": round(rss, 1), "seconds": round(seconds, 1), "segment_scans": scans,
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


def measure(binlog_dir: Path, counts: list[int], repeat: int, stagger: float, state: str) -> dict:
    """The runs for one page-cache state: each count DUMPFILTER_BENCH_REPEAT times, interleaved
    (counts above 8 once), the page cache put in `state` first (before every run for `cold`:
    a run reads the binlog back)."""
    runs: dict[int, dict] = {}
    cpus: dict[int, list[float]] = {}
    if state in ("small", "huge"):  # a run leaves the folios it found
        (_small_folios if state == "small" else _huge_folios)(binlog_dir)
    for attempt in range(repeat):  # interleaved; the run with the least master CPU is kept
        for count in counts:
            if count > 8 and attempt:  # 64 slaves take a minute: once
                continue
            if state == "cold":
                _evict(binlog_dir)
                time.sleep(SETTLE_S)
            rules = [()] if count == 1 else [("--replicate-do-db", f"db{n % SCHEMAS + 1}") for n in range(count)]
            got = run(binlog_dir, rules, stagger)
            print(f"{state:5} {count:3} slaves: {got}", flush=True)
            cpus.setdefault(count, []).append(got["master_cpu_s"])
            if count not in runs or got["master_cpu_s"] < runs[count]["master_cpu_s"]:
                runs[count] = got
    result: dict = {"runs": {str(k): v for k, v in runs.items()}}
    if 1 in runs and 8 in runs:
        result["cpu_ratio_8_vs_1"] = round(runs[8]["master_cpu_s"] / max(runs[1]["master_cpu_s"], 1e-9), 2)
        result["cpu_ratio_8_vs_1_median"] = round(
            statistics.median(cpus[8]) / max(statistics.median(cpus[1]), 1e-9), 2)
        result["master_cpu_s_all"] = {"1": cpus[1], "8": cpus[8]}
        result["master_minor_faults_8_vs_1"] = [runs[8]["master_minor_faults"], runs[1]["master_minor_faults"]]
    if 8 in runs and 64 in runs:
        result["cpu_per_mb_ratio_64_vs_8"] = round(
            runs[64]["master_cpu_ms_per_mb_sent"] / max(runs[8]["master_cpu_ms_per_mb_sent"], 1e-9), 2)
    result["master_peak_rss_mb"] = max(r["master_peak_rss_mb"] for r in runs.values())  # of the runs kept
    return result


def main() -> dict:
    mb = int(os.environ.get("DUMPFILTER_FANOUT_PROCS_MB", "640"))
    stagger = float(os.environ.get("DUMPFILTER_FANOUT_STAGGER", "0.5"))
    counts = [int(c) for c in os.environ.get("DUMPFILTER_FANOUT_SLAVES", "1,8,64").split(",")]
    states = os.environ.get("DUMPFILTER_FANOUT_PAGE_CACHE", ",".join(PAGE_CACHE_STATES)).split(",")
    unknown = sorted(set(states) - set(PAGE_CACHE_STATES))
    if unknown:
        raise SystemExit(f"DUMPFILTER_FANOUT_PAGE_CACHE: unknown state(s) {', '.join(unknown)} "
                         f"(known: {', '.join(PAGE_CACHE_STATES)})")
    binlog_dir = real_binlog(mb)
    size = sum(p.stat().st_size for p in _binlog_files(binlog_dir))
    load = os.getloadavg()[0]
    repeat = int(os.environ.get("DUMPFILTER_BENCH_REPEAT", "2"))
    result = {"binlog_mb": round(size / 1e6, 1), "cache_mb": round(CACHE_BYTES / 1e6, 1),
              "binlog_vs_page_caches": round(size / (CACHE_BYTES + RESIDENT_BYTES), 2),
              "stagger_s": stagger, "loadavg_1min_at_start": round(load, 2), "master_args": list(MASTER_ARGS),
              "page_cache": {}}
    for n, state in enumerate(states):  # the 64-slave run in the first state only
        result["page_cache"][state] = measure(binlog_dir, counts if n == 0 else [c for c in counts if c <= 8],
                                              repeat, stagger, state)
    for key in ("binlog_mb", "cache_mb", "binlog_vs_page_caches"):
        print(f"{key:34} {result[key]}")
    for state, got in result["page_cache"].items():
        for key in ("cpu_ratio_8_vs_1", "cpu_ratio_8_vs_1_median", "master_minor_faults_8_vs_1",
                    "cpu_per_mb_ratio_64_vs_8", "master_peak_rss_mb"):
            if key in got:
                print(f"{state + ' ' + key:34} {got[key]}")
    write_result("fanout_procs", result)
    return result


if __name__ == "__main__":
    main()
