"""What shadow candidates cost a live master (`python -m bench shadow`, issue #80 goal 4: 64 candidates
at most 1.3x the master CPU of 8 streams alone), in the production configuration: `dumpfilter master
serve` as a process of its own, 8 `slave run --until-caught-up` processes (--replicate-do-db db1 ..
db8) over real gRPC. Two runs, each with a fresh master over the same binlog:
  streams   the 8 slaves alone;
  shadow    the same 8 slaves, the master started with `--shadow` 64 candidates (8 rule kinds x the 8
            schemas, the three skip policies among them), counted from the first file to the end.
Master CPU is its utime + stime from /proc, less what an idle master has spent once it listens (its
start), read when the 8 slaves are caught up and gone and (shadow) every candidate has counted to
the binlog's end (ListShadows). Lint is off in both (`--lint-max-mb 0`: lint runs in a process of
its own, not the master's). Each run is made DUMPFILTER_BENCH_REPEAT (2) times, interleaved; the
least CPU is kept. The binlog: DUMPFILTER_SHADOW_DIR (a real binlog over db1..db8, or over the
schemas DUMPFILTER_SHADOW_SCHEMA1..8, e.g. sbtest for a sysbench one, a
bench/data/ directory of bench.matrix), else the generated ROW binlog of DUMPFILTER_SHADOW_MB (100) MB
(bench.common.row_binlog). Figures go to bench/results/shadow.json."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from bench.common import process_cpu_s, row_binlog, serve_master, stop_process, write_result
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = 8
GOAL = 1.3
SCHEMA = os.environ.get("DUMPFILTER_SHADOW_SCHEMA", "db")  # the schemas are SCHEMA1..SCHEMA8
KINDS = (  # (rules, skip policy) per schema N: 8 kinds x 8 schemas = 64 candidates
    (("replicate-do-db={db}{n}",), "heartbeat"),
    (("replicate-do-db={db}{n}",), "placeholder"),
    (("replicate-do-db={db}{n}",), "empty-transaction"),
    (("replicate-ignore-db={db}{n}",), "heartbeat"),
    (("replicate-wild-do-table={db}{n}.%1",), "heartbeat"),
    (("replicate-wild-ignore-table={db}{n}.%2",), "placeholder"),
    (("replicate-do-table={db}{n}.t1", "replicate-do-table={db}{n}.t3"), "heartbeat"),
    (("replicate-do-db={db}{n}", "replicate-ignore-table={db}{n}.t1"), "empty-transaction"),
)


def candidates_toml() -> str:
    out = []
    for k, (rules, policy) in enumerate(KINDS):
        for n in range(1, SCHEMAS + 1):
            listed = ", ".join(f'"{r.format(db=SCHEMA, n=n)}"' for r in rules)
            out.append(f'[[slaves]]\nname = "k{k}-db{n}"\nserver_id = {1000 + 10 * k + n}\n'
                       f'skip_policy = "{policy}"\nrules = [{listed}]\n')
    return "\n".join(out)


def _all_counted(address: str, names: int) -> bool:
    with grpc.insecure_channel(address) as channel:
        reply = dump_pb2_grpc.DumpFilterStub(channel).ListShadows(dump_pb2.ListShadowsRequest(), timeout=30)
    ends = {(c.counted_to.file, c.counted_to.pos) for c in reply.candidates}
    return len(reply.candidates) == names and all(c.HasField("counted_to") for c in reply.candidates) \
        and len(ends) == 1 and _at_end(next(iter(ends)))


_END: tuple[str, int] = ("", 0)


def _at_end(pos: tuple[str, int]) -> bool:
    return pos == _END


def run(binlog_dir: Path, shadow: Path | None) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-shadow-"))
    options = ("--lint-max-mb", "0", *(("--shadow", str(shadow)) if shadow else ()))
    master, address, _ = serve_master(binlog_dir, *options, log=workdir / "master.log")
    procs: list[subprocess.Popen] = []
    try:
        started_cpu = process_cpu_s(master.pid)
        started = time.perf_counter()
        for n in range(1, SCHEMAS + 1):
            with open(workdir / f"slave{n}.log", "wb") as out:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address, "--server-id",
                     str(100 + n), "--relay-log-dir", str(workdir / f"relay{n}"), "--flavor", "mariadb",
                     "--until-caught-up", "--lint-wait", "0", "--replicate-do-db", f"{SCHEMA}{n}"],
                    cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        for n, proc in enumerate(procs, 1):
            if proc.wait() != 0:
                raise RuntimeError(f"slave {n} exited {proc.returncode}: {(workdir / f'slave{n}.log').read_text()[-400:]}")
        if shadow is not None:
            while not _all_counted(address, len(KINDS) * SCHEMAS):
                time.sleep(0.05)
        seconds = time.perf_counter() - started
        cpu = process_cpu_s(master.pid)
        with grpc.insecure_channel(address) as channel:
            stats = dump_pb2_grpc.DumpFilterStub(channel).Stats(dump_pb2.StatsRequest(), timeout=30)
        sent = sum(s.bytes_sent for s in stats.slaves)
        counted = sum(c.counts["bytes_all"] for c in stats.shadows)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stop_process(master)
        shutil.rmtree(workdir, ignore_errors=True)
    return {"master_cpu_s": round(cpu, 2), "start_cpu_s": round(started_cpu, 2), "seconds": round(seconds, 1),
            "mb_sent": round(sent / 1e6, 1), "candidates": len(stats.shadows), "mb_counted": round(counted / 1e6, 1)}


def idle_start_cpu(binlog_dir: Path) -> float:
    """What a master spends to start and settle with nothing to do (a candidates run's pass starts at once)."""
    master, _, _ = serve_master(binlog_dir, "--lint-max-mb", "0")
    try:
        time.sleep(1.0)
        return process_cpu_s(master.pid)
    finally:
        stop_process(master)


def main() -> dict:
    global _END
    given = os.environ.get("DUMPFILTER_SHADOW_DIR")
    binlog_dir = Path(given) if given else row_binlog(int(os.environ.get("DUMPFILTER_SHADOW_MB", "100"))).parent
    files = sorted(p for p in binlog_dir.iterdir() if p.suffix[1:].isdigit())
    _END = (files[-1].name, files[-1].stat().st_size)
    mb = sum(p.stat().st_size for p in files) / 1e6
    repeat = int(os.environ.get("DUMPFILTER_BENCH_REPEAT", "2"))
    with tempfile.TemporaryDirectory() as tmp:
        shadow = Path(tmp) / "candidates.toml"
        shadow.write_text(candidates_toml())
        idle = min(idle_start_cpu(binlog_dir) for _ in range(repeat))
        runs: dict[str, list[dict]] = {"streams": [], "shadow": []}
        for _ in range(repeat):
            runs["streams"].append(run(binlog_dir, None))
            runs["shadow"].append(run(binlog_dir, shadow))
    best = {kind: min(got, key=lambda r: r["master_cpu_s"]) for kind, got in runs.items()}
    work = {kind: max(r["master_cpu_s"] - idle, 1e-9) for kind, r in best.items()}
    ratio = work["shadow"] / work["streams"]
    result = {"binlog": str(binlog_dir), "binlog_mb": round(mb, 1), "idle_start_cpu_s": round(idle, 2),
              "runs": runs, "best": best, "ratio_64_candidates_over_8_streams": round(ratio, 2), "goal": GOAL}
    print(f"binlog {binlog_dir} ({mb:.0f} MB); master CPU less its start ({idle:.2f} s): 8 streams "
          f"{work['streams']:.2f} s, 8 streams + 64 shadow candidates {work['shadow']:.2f} s: {ratio:.2f}x "
          f"(goal <= {GOAL}x) {'MET' if ratio <= GOAL else 'NOT MET'}")
    write_result("shadow", result)
    return result


if __name__ == "__main__":
    main()
