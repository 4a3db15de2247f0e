"""The xdist schedule's input: which test files take longest, so `make test` starts them first.

`make test` hands whole files to its workers (`--dist loadfile`, `--no-loadscope-reorder`): by
default xdist would queue the files with the most tests first, which puts the slow files of a few
tests (a MariaDB primary with its replicas, a Spark cluster, a Rust client's cargo build) last, and
one of them then runs alone on one worker while the others are idle. tests/conftest.py sorts the
collection by these costs, the costliest first (longest processing time first); every file not
listed keeps its collection order after them. Order only: no test is added, dropped or changed.

Seconds per file (setup + call + teardown, summed over its tests) from a `--durations=0` run of
the whole suite on two workers with CI=true (session 96, 1,033 s wall for 2,004 s of test time):
only their order matters. Refresh with
`pytest -n 2 --dist loadfile --durations=0` and `python -m tests.support.schedule LOG`.
"""

from __future__ import annotations

import re
import sys
from collections import Counter

# files of 15 s or more in that run, costliest first
COSTS: dict[str, int] = {
    "tests/binlogs/test_statement_path.py": 82,
    "tests/fuzz/test_atheris.py": 81,
    "tests/cli/test_sigterm.py": 66,
    "tests/spark_jobs/test_standalone_cluster.py": 58,
    "tests/fuzz/test_fuzz_statement_keys.py": 44,
    "tests/binlogs/test_lint_scan.py": 38,
    "tests/cli/test_hostile_side_files.py": 36,
    "tests/fuzz/test_fuzz_rpc.py": 34,
    "tests/fuzz/test_fuzz_mysql_auth.py": 34,
    "tests/core/test_statement_keys.py": 32,
    "tests/rules/test_policy_body_reader.py": 30,
    "tests/master/test_fast_path.py": 30,
    "tests/spark_jobs/test_split_segments.py": 30,
    "tests/spark_jobs/test_loopback_master.py": 28,
    "tests/master/test_login_flood.py": 27,
    "tests/spark_jobs/test_experiment_is_simulate.py": 25,
    "tests/core/test_statement_facts.py": 24,
    "tests/master/test_mysql_hostile.py": 24,
    "tests/fuzz/test_fuzz_decoders.py": 24,
    "tests/slave/test_receive_paths.py": 23,
    "tests/master/test_mysql_endpoint.py": 22,
    "tests/master/test_hostile_files.py": 22,
    "tests/rules/test_lint_generated_workload.py": 21,
    "tests/master/test_source_tier.py": 21,
    "tests/binlogs/test_hostile_inputs.py": 21,
    "tests/master/test_mysql_rewrite_db.py": 19,
    "tests/master/test_login_fairness.py": 18,
    "tests/spark_jobs/test_experiment_compiled.py": 17,
    "tests/test_layout.py": 17,
    "tests/master/test_replica_gtid_after_skipped_tail.py": 16,
    "tests/master/test_source_failover_tries.py": 16,
    "tests/cli/test_interrupts_and_outputs.py": 16,
    "tests/fuzz/test_fuzz_rules.py": 16,
    "tests/master/test_file_ends.py": 15,
    "tests/bench/test_soak.py": 15,
}


def cost(nodeid: str) -> int:
    """A test's file's cost (0 when the file is not listed)."""
    return COSTS.get(nodeid.partition("::")[0], 0)


def file_costs(durations_log: str) -> Counter[str]:
    """Seconds per file from the lines `--durations=0` prints (`12.34s call tests/x.py::test_y`)."""
    totals: Counter[str] = Counter()
    for seconds, nodeid in re.findall(r"^([0-9.]+)s (?:setup|call|teardown)\s+(\S+)", durations_log, re.M):
        totals[nodeid.partition("::")[0]] += float(seconds)
    return totals


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as log:
        for path, seconds in file_costs(log.read()).most_common():
            if seconds >= 15:
                print(f'    "{path}": {round(seconds)},')
