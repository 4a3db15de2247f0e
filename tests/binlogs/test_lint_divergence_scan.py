"""Silent divergence (issue #60 goal 1) through every way lint reads a binlog: the compiled scan
that feeds the Linter only the units that may matter (`lint_files`, `lint_many` for `experiment
--candidates`) and the master's following lint (`look_together`) find the same divergent writes
as the Linter fed every unit (tests.oracles.lint), on statement-logged cross-database workloads."""

from __future__ import annotations

import pytest

from dumpfilter.binlogs.lint import FollowingLint, lint_files, lint_many, look_together, new_linter
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.workload import WorkloadSpec, generate
from tests.oracles.lint import reference_lint

RULES = [RuleSet(do_db=("db1",)), RuleSet(ignore_db=("db2",)), RuleSet(do_db=("db1", "db2")),
         RuleSet(wild_do_table=("db1.%",)), RuleSet(do_table=("db1.t1",)), RuleSet(rewrite_db=(("db1", "db1_rw"),)),
         RuleSet(do_db=("db1",), rewrite_db=(("db2", "db1"),))]


def _writes(breaks) -> list[tuple]:
    return [(g.rule, g.kind, g.count, [(w.file, w.pos) for w in g.writes])
            for g in breaks.divergence.groups.values()]


@pytest.mark.parametrize("fmt", ["statement", "mixed"])
def test_every_reader_finds_the_divergence_the_linter_finds(tmp_path, fmt):
    paths = generate(WorkloadSpec(seed=11, schemas=3, tables_per_schema=2, transactions=400, binlog_format=fmt,
                                  flavor="mariadb", ddl_share=0.0, cross_db_share=0.4, max_binlog_size=30_000),
                     tmp_path)
    settings = Settings(flavor="mariadb")
    many = lint_many(paths, [(rules, settings) for rules in RULES])
    found_any = False
    for rules, together in zip(RULES, many):
        want = reference_lint(paths, rules, settings)
        alone = lint_files(paths, rules, settings)
        assert _writes(alone) == _writes(together) == _writes(want), rules
        following = FollowingLint(new_linter(rules, settings))
        look = look_together([following], [(p, p.stat().st_size) for p in paths], 1 << 30)[0]
        assert look.caught_up and look.diverges == want.divergence.writes
        found_any |= want.divergence.writes > 0
        if rules.wild_do_table or rules.do_table:  # table rules test the written table in both formats
            assert want.divergence.writes == 0
    assert found_any
