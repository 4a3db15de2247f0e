"""MySQL-format binlogs on the compiled walk (issue #57): every consumer that took a MySQL unit the
per-unit Python way took all of them (a GTID decoded per unit, a transaction_length rewritten per
unit), so a MySQL binlog ran at a few MB/s where a MariaDB one runs at GB/s. On a generated MySQL
8.0 ROW binlog of DUMPFILTER_BENCH_MB (default 500) MB over 8 schemas (bench.common.row_binlog:
no MySQL server exists on these machines), each a process of its own, best of
DUMPFILTER_BENCH_REPEAT (default 2):

* `filter --replicate-do-db=db1` (7/8 of the units written as empty transactions) and one that
  keeps every unit (`--replicate-ignore-db=nothing`): the second is the ceiling;
* `split --no-spark` by schema;
* a `replicate-do-db=db1` slave (`slave run --until-caught-up`, its relay log written) against
  `master serve`, under each skip policy, as the heartbeat stream's ratio;
* `SHOW BINARY LOG STATUS`'s first answer for the file (its executed GTID set walked), in process
  (diagnostic: no network).

No test asserts any of it. Results: bench/results/mysql_format.json."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_dump import ROOT, Master
from bench.bench_skip_policies import stream_seconds
from bench.common import env_int, row_binlog, target_mb, write_result
from dumpfilter.binlogs.gtid_start import BinlogStatus
from dumpfilter.skip_policy import NAMES as POLICIES

REPEAT = env_int("DUMPFILTER_BENCH_REPEAT", 2)


def _process_seconds(args: list[str], out: Path) -> float:
    """The best wall time of `dumpfilter *args`, each run writing into a fresh `out` (named last)."""
    best = float("inf")
    for n in range(REPEAT):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dumpfilter", *args, str(out) + str(n)], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> dict:
    path = row_binlog(flavor="mysql")
    size = path.stat().st_size
    label = "" if size >= 500e6 else " (diagnostic: under 500 MB)"
    mb = size / 1e6
    result: dict = {"binlog_mb": round(mb, 1), "target_mb": target_mb()}
    with tempfile.TemporaryDirectory(prefix="bench-mysql-") as tmp:
        out = Path(tmp)
        seconds = {
            "filter_do_db": _process_seconds(["filter", str(path), "--replicate-do-db=db1", "-o"], out / "f.bin"),
            "filter_keep_all": _process_seconds(["filter", str(path), "--replicate-ignore-db=nothing", "-o"],
                                                out / "k.bin"),
            "split": _process_seconds(["split", "--no-spark", str(path), "--out"], out / "split"),
        }
        master = Master(path.parent, ("--lint-max-mb", "0"))
        try:
            streams = {policy: float("inf") for policy in POLICIES}
            for _ in range(REPEAT):
                for policy in POLICIES:
                    streams[policy] = min(streams[policy], stream_seconds(master, policy, out, db="db1")[0])
        finally:
            master.stop()
    started = time.perf_counter()
    status = BinlogStatus().of([path])
    seconds["binlog_status_first"] = time.perf_counter() - started
    assert status is not None and status[2] is not None, "a MySQL file's status has its executed set"
    result["seconds"] = {k: round(v, 3) for k, v in seconds.items()}
    result["mb_per_s"] = {k: round(mb / v, 1) for k, v in seconds.items() if k != "binlog_status_first"}
    result["streams_mb_per_s"] = {p: round(mb / t, 1) for p, t in streams.items()}
    result["streams_vs_heartbeat"] = {p: round(streams["heartbeat"] / t, 2) for p, t in streams.items()}
    print(f"MySQL-format ROW binlog {result['binlog_mb']} MB{label}: "
          + ", ".join(f"{k} {v} MB/s" for k, v in result["mb_per_s"].items()))
    print("  do-db slave streams: " + ", ".join(
        f"{p} {result['streams_mb_per_s'][p]} MB/s ({result['streams_vs_heartbeat'][p]}x)" for p in POLICIES))
    print(f"  SHOW BINARY LOG STATUS, first answer (in process, diagnostic): {result['seconds']['binlog_status_first']} s")
    write_result("mysql_format", result)
    return result


if __name__ == "__main__":
    main()
