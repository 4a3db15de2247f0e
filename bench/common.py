"""Shared benchmark inputs: large generated binlogs, cached under bench/data/."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from dumpfilter.workload import WorkloadSpec, generate

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "data"
RESULTS_DIR = BENCH_DIR / "results"


def target_mb() -> int:
    """Size of the big binlog: DUMPFILTER_BENCH_MB (default 500, as the issues ask)."""
    return int(os.environ.get("DUMPFILTER_BENCH_MB", "500"))


def row_binlog(mb: int | None = None, schemas: int = 8, flavor: str = "mariadb") -> Path:
    """A single ROW binlog file of about `mb` MB over `schemas` schemas (generated once)."""
    mb = target_mb() if mb is None else mb
    directory = DATA_DIR / f"row-{flavor}-{schemas}s-{mb}mb"
    done = directory / "DONE"
    if not done.exists():
        directory.mkdir(parents=True, exist_ok=True)
        # About 510 bytes per transaction with these settings (measured).
        spec = WorkloadSpec(seed=2387, schemas=schemas, tables_per_schema=4, binlog_format="row", flavor=flavor,
                            transactions=int(mb * 1e6 / 510), rows_per_statement=3, statements_per_transaction=2,
                            max_binlog_size=1 << 40)
        started = time.perf_counter()
        paths = generate(spec, directory, "bench-bin")
        done.write_text(json.dumps({"files": [p.name for p in paths],
                                    "seconds": round(time.perf_counter() - started, 1)}))
    return sorted(directory.glob("bench-bin.0*"))[0]


def write_result(name: str, payload: dict) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
    return path


def best_of(fn, repeat: int = 3) -> tuple[float, object]:
    """(best wall time, last result) of `repeat` runs."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result
