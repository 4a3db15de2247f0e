"""The xdist schedule's input: which test files take longest, so `make test` starts them first.

`make test` hands whole files to its workers (`--dist loadfile`, `--no-loadscope-reorder`): by
default xdist would queue the files with the most tests first, which puts the slow files of a few
tests (a MariaDB primary with its replicas, a Spark cluster, a Rust client's cargo build) last, and
one of them then runs alone on one worker while the others are idle. tests/conftest.py sorts the
collection by these costs, the costliest first (longest processing time first); every file not
listed keeps its collection order after them. Order only: no test is added, dropped or changed.

Seconds per file (setup + call + teardown, summed over its tests) from a `--durations=0` run of
the whole suite on two workers while other work loaded the machine (session 56, 4,822 s wall for
9,456 s of test time): only their order matters. Refresh with
`pytest -n 2 --dist loadfile --durations=0` and `python -m tests.support.schedule LOG`.
"""

from __future__ import annotations

import re
import sys
from collections import Counter

# files of 30 s or more in that run, costliest first
COSTS: dict[str, int] = {
    "tests/master/test_third_party_clients.py": 655,
    "tests/rules/test_lint_generated_workload.py": 647,
    "tests/binlogs/test_statement_path.py": 441,
    "tests/rules/test_lint_real_replica.py": 366,
    "tests/cli/test_hostile_side_files.py": 274,
    "tests/rules/test_lint_divergence_real_replica.py": 248,
    "tests/cli/test_sigterm.py": 245,
    "tests/binlogs/test_real_replicas.py": 198,
    "tests/fuzz/test_fuzz_decoders.py": 195,
    "tests/master/test_effective_statement_keys.py": 181,
    "tests/binlogs/test_lint_scan.py": 159,
    "tests/cli/test_interrupts_and_outputs.py": 149,
    "tests/slave/test_crash_resume.py": 130,
    "tests/fuzz/test_atheris.py": 124,
    "tests/master/test_hostile_files.py": 122,
    "tests/binlogs/test_hostile_inputs.py": 121,
    "tests/spark_jobs/test_split_segments.py": 116,
    "tests/spark_jobs/test_loopback_master.py": 111,
    "tests/core/test_statement_keys.py": 111,
    "tests/spark_jobs/test_standalone_cluster.py": 111,
    "tests/master/test_file_ends.py": 107,
    "tests/lab/verify/test_verify_builtin.py": 105,
    "tests/core/test_statement_facts.py": 101,
    "tests/master/test_metrics_auth.py": 98,
    "tests/master/test_mysql_endpoint.py": 96,
    "tests/slave/test_receive_paths.py": 81,
    "tests/rules/test_schema_model.py": 80,
    "tests/spark_jobs/test_split_reference.py": 79,
    "tests/spark_jobs/test_experiment_compiled.py": 77,
    "tests/test_layout.py": 75,
    "tests/lab/test_sandbox.py": 75,
    "tests/rules/test_ddl_shortcuts.py": 70,
    "tests/master/test_source_tier.py": 68,
    "tests/master/test_fast_path.py": 67,
    "tests/fuzz/test_fuzz_rules.py": 60,
    "tests/core/test_scanner_differential.py": 60,
    "tests/fuzz/test_fuzz_statement_keys.py": 59,
    "tests/rules/test_sql_tokens.py": 58,
    "tests/master/test_mysql_hostile.py": 58,
    "tests/master/test_source_mysql_primary.py": 55,
    "tests/fuzz/test_fuzz_mysql_auth.py": 55,
    "tests/binlogs/test_lint_key_verdicts.py": 51,
    "tests/spark_jobs/test_experiment_minutes.py": 51,
    "tests/spark_jobs/test_experiment_is_simulate.py": 51,
    "tests/codec/test_properties.py": 51,
    "tests/spark_jobs/test_split_compiled.py": 49,
    "tests/master/test_statement_keys_stream.py": 48,
    "tests/rules/test_policy_body_reader.py": 46,
    "tests/cli/test_output_convention.py": 45,
    "tests/lab/simulate/test_simulate_verify.py": 44,
    "tests/master/test_replica_gtid_after_skipped_tail.py": 43,
    "tests/lab/simulate/test_verify_compiled.py": 42,
    "tests/master/test_hostile_probe_live.py": 41,
    "tests/fuzz/test_fuzz_rpc.py": 40,
    "tests/master/test_dump_stream.py": 40,
    "tests/binlogs/test_rewrite_assembly.py": 40,
    "tests/master/test_policy_property.py": 39,
    "tests/master/test_kept_segments.py": 38,
    "tests/lab/simulate/test_report_marks.py": 38,
    "tests/master/test_mysql_gtid_client.py": 38,
    "tests/cli/test_long_dotted_keys.py": 36,
    "tests/binlogs/test_declined_statements.py": 35,
    "tests/cli/test_hostile_toml.py": 35,
    "tests/master/test_login_flood.py": 34,
    "tests/master/test_source_retention.py": 34,
    "tests/lab/verify/test_verify_real_replicas.py": 33,
    "tests/cli/test_interrupt_sweep.py": 33,
    "tests/master/test_mysql_linear.py": 32,
    "tests/core/test_plain_statement.py": 32,
    "tests/cli/test_experiment_progress.py": 32,
    "tests/master/test_source_mysql_mid_file.py": 32,
    "tests/cli/test_operator_cli.py": 31,
    "tests/master/test_lint_worker_restart.py": 31,
    "tests/master/test_statement_words.py": 30,
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
            if seconds >= 30:
                print(f'    "{path}": {round(seconds)},')
