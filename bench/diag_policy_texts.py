"""Diagnostic (not in `make bench`, no test asserts it): what a master policy's check of the
Annotate_rows texts costs one stream (issue #57 goal 3), three ways interleaved, best of N: no
policy; a policy whose identity is allowed every table (`allow = ["%.%"]`), the texts read on the
segments' scan threads (SegmentCache.texts_wanted); the same policy with the scan threads' reads
held off (SegmentCache.annotations_ahead False: the stream reads them itself, as before).

`--grpc`: the production configuration, `master serve` processes (one per way) and one `slave run
--until-caught-up` process per run: its wall, the master's CPU meanwhile, the slave's own CPU.
Without it: one in-process stream (DumpService, no gRPC): wall, the process's CPU (the scan
threads too) and the stream thread's own CPU, the critical path the read ahead takes work off.

    python -m bench.diag_policy_texts bench/data/row-sysbench-8s-500mb [--repeat 3] [--grpc]
        [--replicate-do-db sbtest1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from bench.bench_dump import ROOT, Master, _free_port
from bench.bench_skip_policies import POLICY, _process_cpu
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.policy import MasterPolicy, PolicyEntry
from dumpfilter.master.service import DumpService
from dumpfilter.rules.policy_gates import PLAIN, Secret
from dumpfilter.rules.ruleset import RuleSet

WAYS = ("no_policy", "policy_read_ahead", "policy_stream_reads")
Figures = tuple[float, float, float]


class _StreamReadsMaster(Master):
    """`master serve` whose SegmentCache never reads the texts ahead (the stream reads them)."""

    def __init__(self, binlog_dir: Path, extra: tuple[str, ...] = ()):
        self.port = _free_port()
        argv = ["master", "serve", "--binlog-dir", str(binlog_dir), "--listen", f"127.0.0.1:{self.port}", *extra]
        code = ("import runpy, sys; import dumpfilter.master.read.segments as m; "
                "m.SegmentCache.annotations_ahead = property(lambda s: False, lambda s, v: None); "
                f"sys.argv = ['dumpfilter', *{argv!r}]; runpy.run_module('dumpfilter', run_name='__main__')")
        self.proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.DEVNULL)
        self.address = f"127.0.0.1:{self.port}"
        with grpc.insecure_channel(self.address) as channel:
            grpc.channel_ready_future(channel).result(timeout=30)


def _slave(master: Master, rules: list[str], work: Path, gated: bool) -> Figures:
    login = ["--user", "app", "--password", "pw"] if gated else []
    relay = work / f"relay-{time.monotonic_ns()}"
    before = _process_cpu(master.proc.pid)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", master.address,
                             "--server-id", "10", "--relay-log-dir", str(relay), "--until-caught-up",
                             "--lint-wait", "0", *rules, *login], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"slave run exited {os.waitstatus_to_exitcode(status)}")
    subprocess.run(["rm", "-rf", str(relay)], check=False)
    return wall, _process_cpu(master.proc.pid) - before, usage.ru_utime + usage.ru_stime


def grpc_figures(directory: Path, rules: list[str], repeat: int) -> dict[str, Figures]:
    best = {way: (float("inf"),) * 3 for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="diag-policy-") as tmp:
        policy = Path(tmp) / "policy.toml"
        policy.write_text(POLICY)
        policy.chmod(0o600)
        gated = ("--lint-max-mb", "0", "--policy", str(policy))
        masters = {"no_policy": Master(directory, ("--lint-max-mb", "0")),
                   "policy_read_ahead": Master(directory, gated),
                   "policy_stream_reads": _StreamReadsMaster(directory, gated)}
        try:
            for way, master in masters.items():  # the page cache warmed, not counted
                _slave(master, rules, Path(tmp), way != "no_policy")
            for _ in range(repeat):
                for way, master in masters.items():
                    got = _slave(master, rules, Path(tmp), way != "no_policy")
                    best[way] = tuple(min(a, b) for a, b in zip(best[way], got))  # type: ignore[assignment]
        finally:
            for master in masters.values():
                master.stop()
    return best


def _in_process(directory: Path, rules: RuleSet, way: str) -> Figures:
    policy = MasterPolicy({"app": PolicyEntry("app", ("%.%",), Secret(PLAIN, "pw"))}, None)
    svc = DumpService(directory, policy=None if way == "no_policy" else policy, lint_bytes=0)
    if way == "policy_stream_reads":
        svc.segments.annotations_ahead = False
    user, password = ("", "") if way == "no_policy" else ("app", "pw")
    svc.register(Registration(server_id=5, user=user, password=password, filters=(ChannelSpec(None, rules),)))
    wall, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
    for batch in svc.stream(5):
        if batch.caught_up:
            break
    figures = (time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - own)
    svc.segments.close()
    return figures


def in_process_figures(directory: Path, rules: RuleSet, repeat: int) -> dict[str, Figures]:
    best = {way: (float("inf"),) * 3 for way in WAYS}
    for _ in range(repeat):
        for way in WAYS:
            got = _in_process(directory, rules, way)
            best[way] = tuple(min(a, b) for a, b in zip(best[way], got))  # type: ignore[assignment]
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binlog_dir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--grpc", action="store_true")
    parser.add_argument("--replicate-do-db", action="append", default=[])
    args = parser.parse_args()
    if args.grpc:
        best = grpc_figures(args.binlog_dir, [f"--replicate-do-db={db}" for db in args.replicate_do_db], args.repeat)
        columns = "wall s, master CPU s, slave CPU s"
    else:
        best = in_process_figures(args.binlog_dir, RuleSet(do_db=tuple(args.replicate_do_db)), args.repeat)
        columns = "wall s, process CPU s, stream thread CPU s"
    print(f"rules {args.replicate_do_db or 'keep-all'}, best of {args.repeat} per column ({columns}):")
    for way in WAYS:
        print(f"  {way:20s} " + "  ".join(f"{x:.3f}" for x in best[way]))
    base = best["no_policy"]
    for way in WAYS[1:]:
        print(f"  {way}: no-policy/policy wall {base[0] / best[way][0]:.2f}x, "
              f"CPU {base[1] / best[way][1]:.2f}x, third column {base[2] / best[way][2]:.2f}x")


if __name__ == "__main__":
    main()
