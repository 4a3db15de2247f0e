"""`python -m bench` (make bench): runs every benchmark module that is present, in order."""

from __future__ import annotations

import importlib
import sys

from bench.common import BenchSettingError

MODULES = ("bench.bench_core", "bench.bench_skip_policies", "bench.bench_mysql_format", "bench.bench_fanout", "bench.bench_fanout_procs", "bench.bench_codec", "bench.bench_filter", "bench.bench_dump", "bench.bench_vs_pymysqlreplication",
           "bench.bench_split", "bench.bench_experiment", "bench.bench_load", "bench.bench_replica_lag", "bench.bench_statement_dump", "bench.bench_latency", "bench.bench_simulate",
           "bench.bench_soak", "bench.bench_flood", "bench.experimenter_question", "bench.bench_readers", "bench.bench_startup", "bench.bench_schema_load",
           "bench.utf8_binlog", "bench.matrix", "bench.bench_shadow")


# Shown in bench_core's table already: run on their own only when asked for by name.
IN_CORE = {"vs_pymysqlreplication"}
# Ten minutes of a live primary (issue #32): run only when asked for by name (`python -m bench soak`).
ON_REQUEST = IN_CORE | {"soak"}


def main(argv: list[str]) -> int:
    """Runs the benchmarks named in `argv` (all but ON_REQUEST's when none): 1 if one failed; 2, in
    one line, for a name no benchmark has or a setting one cannot use (BenchSettingError)."""
    shorts = {name.rsplit(".", 1)[1].removeprefix("bench_"): name for name in MODULES}
    wanted = set(argv) or None
    if unknown := sorted((wanted or set()) - shorts.keys()):
        print(f"bench: no benchmark named {', '.join(unknown)} (known: {', '.join(shorts)})", file=sys.stderr)
        return 2
    failed = []
    for short, name in shorts.items():
        if wanted and short not in wanted or not wanted and short in ON_REQUEST:
            continue
        try:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name == name:
                    continue
                raise
            print(f"== {short} ==", flush=True)
            module.main()
        except BenchSettingError as exc:  # (at import too: module-level settings)
            print(f"bench {short}: {exc}", file=sys.stderr)
            return 2
        except Exception as exc:  # keep going: one broken benchmark must not hide the others
            print(f"{short}: FAILED: {exc!r}", file=sys.stderr)
            failed.append(short)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
