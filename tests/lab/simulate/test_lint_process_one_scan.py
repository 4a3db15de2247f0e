"""simulate's lint process (the master's lint worker program, run as its child) lints every distinct
rule set of a topology over one read of the binlog (`look_together`: one compiled scan for all), and
says for each what `dumpfilter lint` says, a replica schema given by its source included."""

from __future__ import annotations

from dumpfilter.binlogs.lint import lint_files
from dumpfilter.lab.simulate.lint_process import LintProcess
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import load_schema
from dumpfilter.workload.generator import WorkloadSpec, generate


def test_every_rule_set_is_linted_as_lint_says(tmp_path):
    paths = generate(WorkloadSpec(seed=5, transactions=400, schemas=3, flavor="mariadb", max_binlog_size=40_000),
                     tmp_path / "binlog")
    assert len(paths) >= 2
    replica = tmp_path / "replica.sql"
    replica.write_text("CREATE DATABASE db2;\n")
    settings = Settings(flavor="mariadb")
    jobs = [(RuleSet(do_db=("db1",)), settings, None), (RuleSet(wild_do_table=("db2.t%",)), settings, None),
            (RuleSet(wild_do_table=("db2.t%",)), settings, str(replica)),
            (RuleSet(ignore_db=("db3",), rewrite_db=(("db1", "db9"),)), settings, None)]
    got = LintProcess(paths, [*jobs, jobs[0]]).results()
    assert list(got) == jobs and any(row["breaks"] for row in got.values())
    for (rules, rule_settings, source), row in got.items():
        breaks = lint_files(paths, rules, rule_settings,
                            replica_schema=load_schema(source, "replica_schema") if source else None)
        assert row["breaks"] == len(breaks) and row["first"] == (breaks[0].to_json() if breaks else None)
        assert row["diverges"] == breaks.divergence.writes and row["divergence"] == breaks.divergence.to_json()
