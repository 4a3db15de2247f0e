"""`dumpfilter simulate --verify` on its built-in topology against its own streams run one after
another (`python -m bench simulate`): the same 13 streams (4 slaves, their other skip policies, the
rule-less one) through a `master serve` process and one `slave run --until-caught-up` process each,
in sequence, on the same generated binlog. The figure is the ratio of the two wall times, measured
in the same run (interleaved, best of DUMPFILTER_BENCH_REPEAT, default 2), and simulate's peak RSS
(its process and every child it waited for). Issue #28 asks for a ratio of 3 at most and under
200 MB; no test asserts either. Figures go to bench/results/simulate.json.

With DUMPFILTER_SIMULATE_BINLOGS (a directory of binlogs, e.g. bench/data/mixed-sysbench-8s-250mb),
it runs `simulate --verify` once on that binlog instead, with 4 slaves of sysbench rules each under
the 3 skip policies (13 streams, `TOPOLOGY`; with DUMPFILTER_SIMULATE_SLAVES=question, issue #60's
four slaves on bench.experimenter_question's binlogs), and gives every stream's time, the master's serving
time, verify's time and their ratio (issue #60 asks verify at most half the streaming time), and
the peak RSS (issue #60 asks under 500 MB). Figures go to bench/results/simulate_binlogs.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_dump import ROOT, Master
from bench.common import env_int, write_result
from dumpfilter.lab.simulate.orchestration import load_default_topology, plan_streams
from dumpfilter.lab.simulate.source import prepare_source


def stream_args(plan) -> list[str]:
    """`slave run` options that give one simulation stream the same rules and skip policy."""
    args = ["--server-id", str(plan.server_id), "--skip-policy", plan.skip_policy]
    spec = plan.spec
    if spec is None:
        return args
    for rule in spec.rule_text:
        args += ["--change-replication-filter", rule] if rule.upper().startswith("CHANGE ") else [f"--{rule}"]
    if spec.channel:
        args += ["--channel", spec.channel]
    return args + ["--filter-semantics", spec.settings.semantics, "--flavor", spec.settings.flavor]


def sequential_streams(binlog_dir: Path, plans, work: Path) -> float:
    """Wall seconds of every stream's `slave run` process, one after another (the master is up)."""
    master = Master(binlog_dir, ("--lint-max-mb", "0"))
    try:
        started = time.perf_counter()
        for n, plan in enumerate(plans):
            subprocess.run([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", master.address,
                            "--relay-log-dir", str(work / f"relay{n}"), "--until-caught-up", "--lint-wait", "0",
                            *stream_args(plan)], cwd=ROOT, check=True, stderr=subprocess.DEVNULL)
        return time.perf_counter() - started
    finally:
        master.stop()


def simulate(out: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of `dumpfilter simulate --verify` with its defaults."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "simulate", "--verify", "--no-progress",
                             "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"simulate exited {proc.returncode}")
    return seconds, usage.ru_maxrss / 1024


# Four slaves of the sysbench binlogs' schemas (sbtest1..8, tables sbtest1..4), each also streamed
# under the two other skip policies: a database rule, wild table rules, an ignored database, an
# ignored table in every schema.
TOPOLOGY = """
[master]
binlogs = "{binlogs}"

[experiment]
master_vs_slave = true
skip_policies = ["heartbeat", "placeholder", "empty-transaction"]

[[slaves]]
name = "one-db"
server_id = 2
rules = ["replicate-do-db=sbtest1"]

[[slaves]]
name = "wild-two"
server_id = 3
rules = ["replicate-wild-do-table=sbtest2.%", "replicate-wild-do-table=sbtest3.sbtest1"]

[[slaves]]
name = "no-three"
server_id = 4
rules = ["replicate-ignore-db=sbtest3"]

[[slaves]]
name = "no-t1"
server_id = 5
rules = ["replicate-wild-ignore-table=sbtest%.sbtest1"]
skip_policy = "placeholder"
"""


# The slaves of issue #60's question (bench.experimenter_question's binlogs: shop, crm, analytics and
# logs): keep crm by database and by table, drop logs (its own policy empty-transaction), and the
# WL#2516 slave keeping shop. DUMPFILTER_SIMULATE_SLAVES=question picks them.
QUESTION_SLAVES = """
[[slaves]]
name = "crm-db"
server_id = 2
rules = ["replicate-do-db=crm"]

[[slaves]]
name = "crm-wild"
server_id = 3
rules = ["replicate-wild-do-table=crm.%"]

[[slaves]]
name = "nologs"
server_id = 4
rules = ["replicate-ignore-db=logs"]
skip_policy = "empty-transaction"

[[slaves]]
name = "shop-effective"
server_id = 5
rules = ["replicate-do-db=shop"]
filter_semantics = "effective"
skip_policy = "placeholder"
"""


def topology_text(binlogs: Path) -> str:
    """`TOPOLOGY` on `binlogs`, or its [master] and [experiment] with `QUESTION_SLAVES`."""
    text = TOPOLOGY.format(binlogs=binlogs.resolve())
    if os.environ.get("DUMPFILTER_SIMULATE_SLAVES") == "question":
        text = text[:text.index("[[slaves]]")] + QUESTION_SLAVES.lstrip()
    return text


def on_binlogs(binlogs: Path) -> dict:
    """simulate --verify on `binlogs` with `TOPOLOGY`: every stream's time, verify's, peak RSS."""
    load = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-simulate-"))
    try:
        topology = work / "topology.toml"
        topology.write_text(topology_text(binlogs))
        summary = work / "summary.json"
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "simulate", "--verify", "--no-progress",
                                 "--topology", str(topology), "--out", str(work / "out"), "--json", str(summary)],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"simulate exited {os.waitstatus_to_exitcode(status)}")
        report = json.loads(summary.read_text())  # report.json's document
    finally:
        shutil.rmtree(work, ignore_errors=True)
    served, verified = report["master"]["seconds"], report["master"]["verify_seconds"]
    result = {"binlogs": str(binlogs), "binlog_mb": round(report["source"]["bytes"] / 1e6, 1),
              "streams": report["master"]["streams"], "loadavg_1min_at_start": round(load, 2), "cpus": os.cpu_count(),
              "simulate_seconds": round(seconds, 2), "streaming_seconds": served, "verify_seconds": verified,
              "ratio_verify_vs_streaming": round(verified / served, 2) if served else None,
              "simulate_peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
              "stream_seconds": {f"{s['slave']} {s['skip_policy']}": s["wall_seconds"] for s in report["streams"]}}
    for key, value in result.items():
        print(f"{key:34} {value}")
    write_result("simulate_binlogs", result)
    return result


def main() -> dict:
    binlogs = os.environ.get("DUMPFILTER_SIMULATE_BINLOGS")
    if binlogs:
        return on_binlogs(Path(binlogs))
    repeat = env_int("DUMPFILTER_BENCH_REPEAT", 2)
    work = Path(tempfile.mkdtemp(prefix="bench-simulate-"))
    try:
        topology = load_default_topology()
        prepared = prepare_source(topology.source, work, log=lambda message: None)
        binlog_mb = prepared.total_bytes / 1e6
        plans = plan_streams(topology, work / "unused", everything=True)
        load = os.getloadavg()[0]
        runs = []
        for i in range(repeat):
            sequential = sequential_streams(prepared.directory, plans, work / f"seq{i}")
            seconds, rss = simulate(work / f"out{i}")
            runs.append((sequential, seconds, rss))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sequential = min(r[0] for r in runs)
    seconds = min(r[1] for r in runs)
    result = {"binlog_mb": round(binlog_mb, 2), "streams": len(plans), "repeat": repeat,
              "loadavg_1min_at_start": round(load, 2), "cpus": os.cpu_count(),
              "sequential_slave_run_seconds": round(sequential, 2),
              "simulate_verify_seconds": round(seconds, 2),
              "ratio_simulate_vs_sequential": round(seconds / sequential, 2),
              "ratio_per_run": [round(r[1] / r[0], 2) for r in runs],
              "simulate_peak_rss_mb": round(max(r[2] for r in runs), 1)}
    for key, value in result.items():
        print(f"{key:34} {value}")
    write_result("simulate", result)
    return result


if __name__ == "__main__":
    main()
