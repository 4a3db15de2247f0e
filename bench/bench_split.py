"""Benchmark: the Spark split (local[2]) of >= 4 binlog files against the single-process split of
the same files; checks the outputs are identical and writes bench/results/split.json.

    .venv/bin/python -m bench.bench_split [--transactions N] [--files N]

The Spark time is measured on a warm session (started, and a first small job run, before timing):
session start-up is reported separately, as a cluster would already be up. Timings on a 2-core
machine shared with other work are noisy; the ratio is reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from binlog_workload import WorkloadSpec, generate  # noqa: E402
from spark_jobs.core.local import split_local  # noqa: E402
from spark_jobs.core.routing import SplitConfig  # noqa: E402


def _same(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir())
    return names == sorted(p.name for p in b.iterdir()) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=120_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-split-"))
    try:
        spec = WorkloadSpec(seed=7, schemas=6, tables_per_schema=4, transactions=args.transactions,
                            binlog_format="row", flavor="mariadb", cross_db_share=0.1)
        t0 = time.perf_counter()
        first = generate(spec, work / "gen", "master-bin")
        total = sum(p.stat().st_size for p in first)
        shutil.rmtree(work / "gen")
        spec = WorkloadSpec(**{**spec.__dict__, "max_binlog_size": total // args.files + 1})
        paths = generate(spec, work / "in", "master-bin")
        gen_s = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in paths)
        config = SplitConfig()

        t0 = time.perf_counter()
        split_local([work / "in"], work / "local", config, chunk_bytes=None)
        local_s = time.perf_counter() - t0

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from spark_jobs.session import get_session
        from spark_jobs.split_by_schema import split_spark

        t0 = time.perf_counter()
        spark = get_session("bench-split", f"local[{args.cores}]", {"spark.ui.enabled": "false"})
        spark.sparkContext.parallelize(range(args.cores), args.cores).map(lambda x: x).collect()  # warm workers
        session_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        split_spark(spark, [work / "in"], work / "spark", config, chunk_bytes=None)
        spark_s = time.perf_counter() - t0
        spark.stop()
        identical = _same(work / "local", work / "spark")
        result = {
            "benchmark": "split by schema: Spark local[%d] vs single process" % args.cores,
            "input_files": len(paths), "input_bytes": size, "transactions": args.transactions,
            "outputs": len(list((work / "local").glob("*.index"))),
            "single_process_s": round(local_s, 2), "spark_s": round(spark_s, 2),
            "spark_session_start_s": round(session_s, 2),
            "ratio": round(local_s / spark_s, 2),
            "ratio_including_session_start": round(local_s / (spark_s + session_s), 2),
            "identical_output": identical, "generate_s": round(gen_s, 2),
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "command": "python -m bench.bench_split " + " ".join(argv or sys.argv[1:]),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "split.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
