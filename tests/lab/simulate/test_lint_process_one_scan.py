"""simulate's lint process lints every distinct rule set of a topology over one compiled scan of the
binlog (binlogs.lint_scan), not one scan per rule set, and says for each what `dumpfilter lint` says."""

from __future__ import annotations

from dumpfilter.binlogs import lint_scan
from dumpfilter.binlogs.lint import lint_files
from dumpfilter.lab.simulate import lint_process
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.workload.generator import WorkloadSpec, generate


def test_every_rule_set_is_linted_over_one_scan(tmp_path, monkeypatch):
    paths = generate(WorkloadSpec(seed=5, transactions=400, schemas=3, flavor="mariadb", max_binlog_size=40_000),
                     tmp_path)
    assert len(paths) >= 2
    settings = Settings(flavor="mariadb")
    jobs = [(RuleSet(do_db=("db1",)), settings, None), (RuleSet(wild_do_table=("db2.t%",)), settings, None),
            (RuleSet(ignore_db=("db3",), rewrite_db=(("db1", "db9"),)), settings, None)]
    scanned: list[str] = []
    lint_file = lint_scan._lint_file

    def counted(path, *args):
        scanned.append(path.name)
        return lint_file(path, *args)

    monkeypatch.setattr(lint_scan, "_lint_file", counted)
    got = lint_process._lint([str(p) for p in paths], jobs)
    assert scanned == [p.name for p in paths]  # each file once, whatever the number of rule sets
    assert any(row["breaks"] for row in got)
    for (rules, rule_settings, _), row in zip(jobs, got):
        breaks = lint_files(paths, rules, rule_settings)
        assert row["breaks"] == len(breaks) and row["first"] == (breaks[0].to_json() if breaks else None)
        assert row["diverges"] == breaks.divergence.writes and row["divergence"] == breaks.divergence.to_json()
