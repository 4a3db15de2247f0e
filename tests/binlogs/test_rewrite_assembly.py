"""`filter --replicate-rewrite-db` on the compiled assembly (issue #80): the core renames each
kept unit's databases (core rename_db) as the names the Python path met say, so that only a unit
naming a database for the first time, a unit kept in part and a MySQL unit emptied with a name
to change go through Python (a MySQL unit kept whole is renamed with its GTID's transaction_length
made anew); the output is the one the reference path writes (every unit
framed by TransactionFilter, each event renamed by the same writer), byte for byte. A real replica
applies it as slave-side filtering (tests/binlogs/test_real_replicas.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dumpfilter.binlogs import filtering
from dumpfilter.binlogs.sinks import FileSink
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.renamer import applied_names, event_renamer
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.transaction_filter import TransactionFilter
from dumpfilter.workload import WorkloadSpec, generate

RULES = [RuleSet(rewrite_db=(("db1", "x1"),)),
         RuleSet(do_db=("x1", "db3"), rewrite_db=(("db1", "x1"), ("db2", "a_much_longer_name_2"))),
         RuleSet(wild_do_table=("x%.%",), rewrite_db=(("db1", "x1"), ("db4", "x4")))]


def _filter(paths: list[Path], out: Path, rules: RuleSet, compiled: bool) -> tuple[bytes, int]:
    """`filter`'s output of `paths` under `rules` (renamed as its --replicate-rewrite-db writes
    them), by the compiled assembly or (compiled False) by the Python path alone; and the units
    the walk left to Python."""
    settings = Settings(flavor="mariadb")
    engine = RuleEngine(rules, settings)
    renamer = event_renamer(engine, rules, settings)
    assert renamer is not None
    applied = applied_names(engine, rules, settings) if compiled else None
    stepped = []
    real = filtering._FileWalk.step

    def step(self: filtering._FileWalk, at: int) -> int:
        stepped.append(at)
        return real(self, at)

    filtering._FileWalk.step = step  # type: ignore[method-assign]
    try:
        filtering.filter_files(paths, TransactionFilter(engine), FileSink(out), rename=renamer, applied=applied)
    finally:
        filtering._FileWalk.step = real  # type: ignore[method-assign]
    return out.read_bytes(), len(stepped)


@pytest.mark.parametrize("fmt", ["row", "mixed", "statement"])
@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_a_renaming_filter_writes_by_the_assembly(tmp_path, fmt, flavor):
    paths = generate(WorkloadSpec(seed=9, schemas=4, transactions=1500, binlog_format=fmt, flavor=flavor,
                                  ddl_share=0.03, max_binlog_size=1 << 30), tmp_path / "binlog")
    for n, rules in enumerate(RULES):
        compiled, by_python = _filter(paths, tmp_path / f"c{n}.bin", rules, True)
        reference, all_units = _filter(paths, tmp_path / f"r{n}.bin", rules, False)
        assert compiled == reference, (fmt, flavor, rules)
        # Python's: a unit kept in part (a tenth of the generated transactions write two schemas),
        # a MySQL unit whose name changes (its GTID length), a name met for the first time; the
        # Python path alone took every unit.
        if flavor == "mariadb" or not (rules.do_db or rules.wild_do_table):
            # (a MySQL unit emptied with a name to change keeps its BEGIN, which Python renames)
            assert by_python < all_units / 5, (by_python, all_units, rules)
