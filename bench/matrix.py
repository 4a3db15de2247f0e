"""`python -m bench matrix` (issue #80 goals 2 and 3): each figure of issue #80 on every workload of
the matrix, in the production configuration, the worst beside its goal. Each workload is a real
MariaDB's binlog, written once and cached under bench/data/:

  sysbench-row     sysbench's write-only transaction, ROW (bench.mixed_binlog)
  small-txn-row    one- and two-row transactions from stored procedures over 8 schemas, ROW
                   (bench.app_binlogs.small_txn_binlog)
  sysbench-mixed   sysbench's write-only transaction, MIXED (bench.mixed_binlog)
  realistic-mixed  sysbench plus row-logged UUID() and RAND() writes and cross-database
                   statements, MIXED (bench.app_binlogs.realistic_mixed_binlog)
  ddl-heavy        the realistic MIXED with 2% of its transactions DDL (scratch tables made,
                   altered, indexed and dropped), MIXED (bench.app_binlogs)
  utf8-mixed       an application writing UTF-8 text, MIXED (bench.utf8_binlog)

The figures, each from processes of their own (`dumpfilter master serve`, `slave run
--until-caught-up`, `experiment`, `filter`), over real gRPC, best of DUMPFILTER_BENCH_REPEAT (2)
interleaved runs after one warm-up stream per master, each started once the machine's CPUs are
quiet again (`bench.common.settle`: at most 20 s):

  policy       a heartbeat `replicate-do-db` stream under a master policy whose identity is
               allowed everything (`allow = ["%.%"]`), on the slave's own clock (first Dump
               request to caught up), as a ratio of the same stream without a policy (goal: >= 0.85);
  placeholder, empty-transaction
               each skip policy's stream as a ratio of the heartbeat stream (goal: >= 0.75), or
               its MB sent per second as a ratio of a keep-all stream's (goal: >= 0.8);
  rewrite      a `replicate-rewrite-db` slave's stream (its schema renamed, `replicate-do-db` the
               new name: the same transactions) as a ratio of the do-db stream (goal: >= 0.85, "at
               the others' speed");
  fanout8      master CPU per MB sent by 8 `replicate-do-db` slaves, one per schema, started
               together, against one keep-all slave's (goal: <= 1.3), best of FANOUT_REPEAT (5)
               rounds at least; beside it what the transport alone adds (the keep-all master's
               CPU plus what a bare gRPC server spends more to stream as many bytes to eight
               clients as to one, measured with fanout64's floors, over the keep-all master's);
  fanout64     the same for 64 slaves, eight per schema (best of FANOUT64_REPEAT, 2), against
               the transport's floor, measured right after each round (bench.grpc_floor: a
               bare gRPC server streaming 8x the binlog to 64 clients against once to one;
               goal: <= the floor + 0.15); beside it each round against its own floor (the
               median of the rounds' margins);
  rss_anon_mb  the master's peak private memory (RssAnon, sampled) over those runs (goal: < 300 MB);
  experiment24 `experiment --no-spark --no-charts` with those 8 rule sets under the three skip
               policies, against one `filter --replicate-do-db` pass (goal: <= 1.5).

    DUMPFILTER_MATRIX_MB=520 DUMPFILTER_MATRIX_WORKLOADS=small-txn-row,realistic-mixed \\
        .venv/bin/python -m bench matrix

A binlog under 500 MB is labelled a diagnostic (the project's rule for a reported figure). Results
go to bench/results/matrix.json."""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.bench_dump import Master
from bench.bench_skip_policies import POLICY, experiment_vs_filter, stream_seconds
from bench.common import BenchSettingError, env_int, settle, write_result

REPEAT = env_int("DUMPFILTER_BENCH_REPEAT", 2)
MB = env_int("DUMPFILTER_MATRIX_MB", 520)
SKIP_POLICIES = ("heartbeat", "placeholder", "empty-transaction")
GOALS = {"policy": (">=", 0.85), "rewrite": (">=", 0.85), "placeholder": (">=", 0.75),
         "empty-transaction": (">=", 0.75), "fanout8": ("<=", 1.3), "fanout64": ("<=", None),
         "rss_anon_mb": ("<", 300), "experiment24": ("<=", 1.5)}
SHORT_S, SHORT_REPEAT = 1.0, 5  # streams shorter than SHORT_S seconds: best of SHORT_REPEAT rounds
# The fan-out runs' rounds at least: a keep-all slave's master CPU moved by a fifth between two
# rounds on a quiet machine (2.52-2.99 s over 1 GB of sysbench ROW), and fanout8 divides by it.
# Session 101, within twenty minutes, the same build: one keep-all slave 1.87-2.40 s, eight
# 2.46-3.16 s (five runs each); three interleaved rounds 1.21-1.32x. Five rounds at least.
FANOUT_REPEAT = 5
FANOUT64_OVER_FLOOR = 0.15  # 64 slaves' CPU per MB sent at most the transport's floor + this
# 64 slaves' runs and their floor's, each the least of this many (session 84: measured once, a
# small-transaction run read 1.42x against a floor of 1.12x, the next 1.18x against 1.40x)
FANOUT64_REPEAT = 2


def _workloads() -> dict[str, tuple[Callable[[], Path], list[str]]]:
    """Each workload's binlog file (made on first use) and its 8 schemas (the do-db slaves')."""
    from bench.app_binlogs import realistic_mixed_binlog, small_txn_binlog
    from bench.mixed_binlog import mixed_binlog
    from bench.utf8_binlog import utf8_binlog

    sysbench = [f"sbtest{k}" for k in range(1, 9)]
    return {
        "sysbench-row": (lambda: mixed_binlog(MB, fmt="ROW"), sysbench),
        "small-txn-row": (lambda: small_txn_binlog(MB), [f"db{k}" for k in range(1, 9)]),
        "sysbench-mixed": (lambda: mixed_binlog(MB, fmt="MIXED"), sysbench),
        "realistic-mixed": (lambda: realistic_mixed_binlog(MB), sysbench),
        # (bench.ddl_binlog's tenant-per-schema primary writes about 13 KB a second: 27 MB in 19
        # minutes here, so the matrix's DDL-heavy binlog is the realistic mix with 2% DDL)
        "ddl-heavy": (lambda: realistic_mixed_binlog(MB, ddl_share=0.02), sysbench),
        "utf8-mixed": (lambda: utf8_binlog(MB), [f"app{k}" for k in range(1, 5)] * 2),
    }


def _policy_and_skips(path: Path, schema: str) -> dict:
    """The policy's and each skip policy's ratio, on the slave's clock, best of REPEAT; beside each
    skip policy, its MB sent per second against a keep-all stream's (the issue's other measure)."""
    # (the rewrite and policy streams right after the heartbeat stream they are ratios of, in the
    # same state of the machine: the rewrite stream ran after the keep-all stream's relay log, the
    # binlog's size, was deleted)
    kinds = ("heartbeat", "rewrite", "gated", *SKIP_POLICIES[1:], "keep-all")
    clock = dict.fromkeys(kinds, float("inf"))
    master_cpu = dict.fromkeys(kinds, float("inf"))  # the master's CPU meanwhile, least over the rounds
    sent = dict.fromkeys(kinds, 0)
    each: dict[str, list[float]] = {kind: [] for kind in kinds}  # every round's clock, in round order
    with tempfile.TemporaryDirectory(prefix="bench-matrix-") as tmp:
        policy_file = Path(tmp) / "policy.toml"
        policy_file.write_text(POLICY)
        policy_file.chmod(0o600)
        plain = Master(path.parent, ("--lint-max-mb", "0"))
        gated = Master(path.parent, ("--lint-max-mb", "0", "--policy", str(policy_file)))
        try:
            stream_seconds(plain, "heartbeat", Path(tmp), db=schema)  # warm-up: both masters' caches
            stream_seconds(gated, "heartbeat", Path(tmp), gated=True, db=schema)
            # Streams of well under a second (sysbench MIXED's do-db streams take 0.1-0.2 s) move
            # most with the load: they are taken best of SHORT_REPEAT rounds.
            rounds, done = REPEAT, 0
            while done < rounds:
                done += 1
                for kind in kinds:
                    received: list[int] = []
                    got = stream_seconds(gated if kind == "gated" else plain,
                                         kind if kind in SKIP_POLICIES else "heartbeat", Path(tmp),
                                         gated=kind == "gated", db=None if kind == "keep-all" else schema,
                                         received=received, rewrite=f"{schema}_copy" if kind == "rewrite" else None)
                    sent[kind] = received[0] if received else 0
                    clock[kind] = min(clock[kind], got[3])
                    master_cpu[kind] = min(master_cpu[kind], got[2])
                    each[kind].append(got[3])
                    if kind == "keep-all":
                        # Its relay log (the binlog's size) was just deleted: the file system's
                        # journal and discards are done before the next stream, which was taken
                        # with them when it came next (the rewrite stream, 0.84x).
                        os.sync()
                        settle()
                if clock["heartbeat"] < SHORT_S:
                    rounds = max(REPEAT, SHORT_REPEAT)
        finally:
            plain.stop()
            gated.stop()
    heartbeat, keep_all = clock["heartbeat"], sent["keep-all"] / clock["keep-all"]
    out: dict = {"policy": heartbeat / clock["gated"], "rewrite": heartbeat / clock["rewrite"], "seconds": {k: round(v, 3) for k, v in clock.items()},
                 "mb_sent": {k: round(v / 1e6, 1) for k, v in sent.items()}, "rounds": each}
    # Beside each ratio of bests, the median of the rounds' own ratios (each stream against the
    # heartbeat stream of its round, minutes apart at most): a diagnostic of how far one fast or
    # slow round moves the figure (session 63: a rewrite ratio of 0.81x in one run, 1.02x the next).
    out["paired"] = {figure: statistics.median(h / r for h, r in zip(each["heartbeat"], each[kind]))
                     for figure, kind in (("policy", "gated"), ("rewrite", "rewrite"), *((k, k) for k in SKIP_POLICIES[1:]))}
    # Beside them, the master's own CPU for each stream against the heartbeat stream's (the least of
    # the rounds; a diagnostic, no goal): whether a ratio on the slave's clock that moved is the
    # master's doing or the slave's (session 98: a rewrite stream read 0.84x on the clock over UTF-8
    # MIXED while its master CPU was the heartbeat stream's).
    out["master_cpu"] = {figure: master_cpu[kind] / max(master_cpu["heartbeat"], 1e-9)
                         for figure, kind in (("policy", "gated"), ("rewrite", "rewrite"), *((k, k) for k in SKIP_POLICIES[1:]))}
    for kind in ("placeholder", "empty-transaction"):
        out[kind] = heartbeat / clock[kind]
        out[f"{kind}_per_mb_vs_keep_all"] = sent[kind] / clock[kind] / max(keep_all, 1e-9)
    return out


def _fanout(path: Path, schemas: list[str]) -> dict[str, float]:
    from bench import bench_fanout_procs as fanout
    from bench.grpc_floor import floor_cpu

    with tempfile.TemporaryDirectory(prefix="bench-matrix-fan-") as tmp:
        served = Path(tmp) / "binlog"
        served.mkdir()
        (served / path.name).symlink_to(path)
        best: dict[int, dict] = {}
        paired: list[float] = []  # each round's 8 slaves against its own keep-all slave, per MB sent
        for _ in range(max(REPEAT, FANOUT_REPEAT)):
            keep_all = None
            for rules in ([()], [("--replicate-do-db", db) for db in schemas]):
                settle()
                got = fanout.run(served, rules, 0.0)
                if len(rules) not in best or got["master_cpu_s"] < best[len(rules)]["master_cpu_s"]:
                    best[len(rules)] = got
                if keep_all is None:
                    keep_all = got
                else:
                    paired.append(got["master_cpu_ms_per_mb_sent"] / max(keep_all["master_cpu_ms_per_mb_sent"], 1e-9))
        # 64 slaves (eight per schema), best of FANOUT64_REPEAT: they are sent the binlog eight
        # times over. Their goal is the transport's own ratio (bench.grpc_floor: a bare gRPC server
        # streaming as many bytes to 64 clients against the binlog's bytes to one) +
        # FANOUT64_OVER_FLOOR, measured here as often.
        # Each round's floor is measured right after its 64 slaves: the machine's state moves the
        # master's and the floor's CPU alike from one minute to the next (session 90: the same
        # build's 64 slaves took 24.3-34.1 s over six runs), so each round is also read against
        # its own floor (`fanout64_margin`, the median of the rounds': beside the verdict).
        mb = path.stat().st_size >> 20
        # (and the bare server's eight clients, as many bytes in all as its one: what gRPC alone
        # adds when one slave becomes eight, `fanout8_floor`, printed beside fanout8; not its goal)
        runs64, floors, floors8 = [], [], []
        for _ in range(FANOUT64_REPEAT):
            settle()
            runs64.append(fanout.run(served, [("--replicate-do-db", db) for db in schemas * 8], 0.0))
            floors.append((floor_cpu(8 * mb, [64], 1)[64], floor_cpu(mb, [1], 1)[1]))
            floors8.append(floor_cpu(mb, [8], 1)[8])
        sixty_four = min(runs64, key=lambda r: r["master_cpu_s"])
    floor = min(f for f, _ in floors) / 8 / min(f for _, f in floors)
    one, eight = best[1], best[len(schemas)]
    per_mb = one["master_cpu_ms_per_mb_sent"]
    margins = [r["master_cpu_ms_per_mb_sent"] / max(per_mb, 1e-9) - f64 / 8 / max(f1, 1e-9)
               for r, (f64, f1) in zip(runs64, floors)]
    return {"fanout8": eight["master_cpu_ms_per_mb_sent"] / max(per_mb, 1e-9),
            "fanout8_floor": 1 + (min(floors8) - min(f for _, f in floors)) / max(one["master_cpu_s"], 1e-9),
            "fanout64": sixty_four["master_cpu_ms_per_mb_sent"] / max(per_mb, 1e-9), "fanout64_floor": floor,
            "fanout64_margin": statistics.median(margins),
            "fanout8_paired": statistics.median(paired),
            "rss_anon_mb": max(r["master_peak_rss_anon_mb"] for r in (one, eight, *runs64)),
            "fanout_runs": {"1": one, "8": eight, "64": sixty_four}}


def _experiment(path: Path, schemas: list[str]) -> dict:
    # Both commands take a second or two here: best of SHORT_REPEAT, as the short streams are
    # (a single run moved 1.1x -> 2.2x with the load).
    started = settle()  # not while the 64 slaves of `_fanout` still exit: experiment runs on both cores
    got = experiment_vs_filter(path, schemas, max(REPEAT, SHORT_REPEAT))
    return {"experiment24": got["experiment_vs_filter"], "experiment_seconds": got["seconds"], "experiment_started": started}


def _met(name: str, value: float, got: dict | None = None) -> bool:
    """Whether `value` meets its goal; a skip policy's also by its MB sent per second against a
    keep-all stream's (at least 0.8x: the issue's alternative, for a policy that sends more)."""
    sense, goal = GOALS[name]
    if got is not None and got.get(f"{name}_per_mb_vs_keep_all", 0.0) >= 0.8:
        return True
    if goal is None:  # fanout64: against the floor measured in the same run
        goal = (got or {}).get("fanout64_floor", 0.0) + FANOUT64_OVER_FLOOR
    return value >= goal if sense == ">=" else value < goal if sense == "<" else value <= goal


def _shown(figure: str, value: float, got: dict) -> str:
    """A figure as the matrix prints it: a ratio, MB of memory, the floor beside fanout64."""
    if figure == "rss_anon_mb":
        return f"{value:.0f} MB"
    per_mb = got.get(f"{figure}_per_mb_vs_keep_all")
    beside = "" if per_mb is None else f" ({per_mb:.2f}x a keep-all stream per MB sent)"
    if figure == "fanout64":
        beside = f" (the transport's floor {got['fanout64_floor']:.2f}x)"
    if figure == "fanout8" and "fanout8_floor" in got:
        beside = f" (gRPC's own part alone would make {got['fanout8_floor']:.2f}x)"
    return f"{value:.2f}x{beside}"


def main() -> dict:
    wanted = [w.strip() for w in os.environ.get("DUMPFILTER_MATRIX_WORKLOADS", "").split(",") if w.strip()]
    workloads = _workloads()
    if unknown := [w for w in wanted if w not in workloads]:
        raise BenchSettingError(f"DUMPFILTER_MATRIX_WORKLOADS: no workload named {', '.join(unknown)} "
                                f"(known: {', '.join(workloads)})")
    results: dict[str, dict] = {}
    for name, (make, schemas) in workloads.items():
        if wanted and name not in wanted:
            continue
        path = make()
        size = path.stat().st_size
        got: dict = {"binlog_mb": round(size / 1e6, 1)}
        got["started"] = settle()
        got.update(_policy_and_skips(path, schemas[0]))
        got.update(_fanout(path, schemas))
        got.update(_experiment(path, schemas))
        results[name] = got
        label = "" if size >= 500e6 else " (diagnostic: under 500 MB)"
        print(f"{name}, {got['binlog_mb']} MB{label}: " + ", ".join(
            f"{figure} {_shown(figure, got[figure], got)}{'' if _met(figure, got[figure], got) else ' (MISSED)'}"
            for figure in GOALS),
            flush=True)
        paired = {**got["paired"], "fanout8": got["fanout8_paired"]}
        print("  the median of each round's own ratio: " + ", ".join(f"{k} {v:.2f}x" for k, v in paired.items())
              + f"; fanout64 over its round's own floor {got['fanout64_margin']:+.2f}x (goal <= "
              f"+{FANOUT64_OVER_FLOOR})", flush=True)
        print("  the master's CPU for each stream against the heartbeat stream's (a diagnostic): "
              + ", ".join(f"{k} {v:.2f}x" for k, v in got["master_cpu"].items()), flush=True)
    if results:
        print("worst over the workloads, against each goal:")
        for figure, (sense, goal) in GOALS.items():
            values = {w: r[figure] for w, r in results.items()}
            # (a workload that misses comes first: a skip policy's figure is met by either of two
            # measures, so the lowest of one is not always the one that misses)
            missed = [w for w, r in results.items() if not _met(figure, r[figure], r)]
            worst = (min if sense == ">=" else max)(missed or values, key=values.__getitem__)
            aim = f"the floor + {FANOUT64_OVER_FLOOR}" if goal is None else f"{goal}{'' if figure == 'rss_anon_mb' else 'x'}"
            print(f"  {figure:18} {_shown(figure, values[worst], results[worst])} on {worst} (goal {sense} {aim}): "
                  f"{'met' if all(_met(figure, r[figure], r) for r in results.values()) else 'missed'}")
    write_result("matrix", results)
    return results


if __name__ == "__main__":
    main()
