"""Benchmark: the Spark split (local[N], default 2 cores) of >= 4 binlog files against the
single-process split (`--no-spark`) of the same files, in the same run; checks that every run's
output is byte-identical and writes bench/results/split.json.

    .venv/bin/python -m bench.bench_split [--transactions N] [--files N] [--repeat N] [--cores N]
                                          [--chunk-bytes BYTES] [--keep-input DIR]

The two splits alternate, `--repeat` times each (default 3); best-of and median are reported,
with the load average before each run: on a 2-core machine shared with other work only runs on
an idle machine mean anything. The Spark time is measured on a warm session: the session is
started and a first small job run before timing (that start-up is reported separately, as a
cluster would already be up). The first timed Spark run also warms the Python workers (imports);
best-of therefore reflects a warm session. The ratio is reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dumpfilter.workload import WorkloadSpec, generate  # noqa: E402
from dumpfilter.spark_jobs.tasks.local import split_local  # noqa: E402
from dumpfilter.spark_jobs.tasks.routing import SplitConfig  # noqa: E402


def _same(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir())
    return names == sorted(p.name for p in b.iterdir()) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def _inputs(args, work: Path) -> tuple[list[Path], float]:
    """`--files` binlog files of about equal size (generated, or reused from --keep-input)."""
    target = Path(args.keep_input) if args.keep_input else work / "in"
    stamp = target / "SPEC.json"
    wanted = {"transactions": args.transactions, "files": args.files, "seed": 7}
    if stamp.exists() and json.loads(stamp.read_text()) == wanted:
        return sorted(target.glob("master-bin.0*")), 0.0
    shutil.rmtree(target, ignore_errors=True)
    t0 = time.perf_counter()
    spec = WorkloadSpec(seed=7, schemas=6, tables_per_schema=4, transactions=args.transactions,
                        binlog_format="row", flavor="mariadb", cross_db_share=0.1)
    first = generate(spec, work / "gen", "master-bin")
    total = sum(p.stat().st_size for p in first)
    shutil.rmtree(work / "gen")
    spec = WorkloadSpec(**{**spec.__dict__, "max_binlog_size": total // args.files + 1})
    paths = generate(spec, target, "master-bin")
    stamp.write_text(json.dumps(wanted))
    return paths, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=120_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chunk-bytes", type=int, default=0, help="0: whole files (default)")
    parser.add_argument("--keep-input", metavar="DIR", help="generate the input here once and reuse it")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-split-"))
    chunk_bytes = args.chunk_bytes or None
    try:
        paths, gen_s = _inputs(args, work)
        size = sum(p.stat().st_size for p in paths)
        src = paths[0].parent
        config = SplitConfig()

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from dumpfilter.spark_jobs.session import get_session
        from dumpfilter.spark_jobs.split_by_schema import split_spark

        t0 = time.perf_counter()
        spark = get_session("bench-split", f"local[{args.cores}]", {"spark.ui.enabled": "false"})
        spark.sparkContext.parallelize(range(args.cores), args.cores).map(lambda x: x).collect()  # warm workers
        session_s = time.perf_counter() - t0

        runs = []
        identical = True
        for i in range(args.repeat):
            for d in ("local", "spark"):
                shutil.rmtree(work / d, ignore_errors=True)
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            split_local([src], work / "local", config, chunk_bytes=chunk_bytes)
            local_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            split_spark(spark, [src], work / "spark", config, chunk_bytes=chunk_bytes)
            spark_s = time.perf_counter() - t0
            same = _same(work / "local", work / "spark")
            identical &= same
            runs.append({"single_process_s": round(local_s, 3), "spark_s": round(spark_s, 3),
                         "ratio": round(local_s / spark_s, 2), "load_1min": round(load, 2), "identical": same})
            print(f"run {i + 1}: single process {local_s:.2f}s, Spark {spark_s:.2f}s, "
                  f"ratio {local_s / spark_s:.2f}, load {load:.2f}, identical {same}", flush=True)
        spark.stop()
        best_local = min(r["single_process_s"] for r in runs)
        best_spark = min(r["spark_s"] for r in runs)
        result = {
            "benchmark": f"split by schema: Spark local[{args.cores}] vs single process",
            "input_files": len(paths), "input_bytes": size, "transactions": args.transactions,
            "chunk_bytes": chunk_bytes,
            "outputs": len(list((work / "local").glob("*.index"))),
            "single_process_best_s": best_local, "spark_best_s": best_spark,
            "ratio_best_of": round(best_local / best_spark, 2),
            "ratio_median": round(statistics.median(r["ratio"] for r in runs), 2),
            "ratio_best_run": max(r["ratio"] for r in runs),
            "spark_session_start_s": round(session_s, 2),
            "ratio_including_session_start": round(best_local / (best_spark + session_s), 2),
            "identical_output": identical, "runs": runs, "generate_s": round(gen_s, 2),
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "command": "python -m bench.bench_split " + " ".join(argv if argv is not None else sys.argv[1:]),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "split.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    print(f"Spark local[{args.cores}] vs single process, best of {args.repeat}: "
          f"{best_local:.2f}s / {best_spark:.2f}s = {result['ratio_best_of']}x "
          f"(session start-up {session_s:.1f}s not included; identical output: {identical})")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
