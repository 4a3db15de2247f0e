"""A table rule that can match no table (`replicate-wild-do-table=db.`, `replicate-do-table=db.`) is
accepted, as mysqld accepts it, and lint says so (issue #44 item 5): in `dumpfilter lint`'s output
and JSON, in simulate's lint cell, and in `master status`' Lint, where a stream that saves 100%
with no break predicted would otherwise look perfect."""

from __future__ import annotations

import json

import pytest

from dumpfilter.cli.app import main
from dumpfilter.rules.ruleset import RuleSet
from tests.rules.test_lint_cases import Build


@pytest.fixture
def binlog(tmp_path):
    return Build("mariadb").q("CREATE DATABASE shop").q("CREATE TABLE t1 (a int)", db="shop") \
        .q("INSERT INTO t1 VALUES (1)", db="shop").write(tmp_path / "master-bin.000001")


def test_lint_says_a_wild_rule_keeps_no_table(binlog, capsys):
    assert main(["lint", str(binlog), "--replicate-wild-do-table", "shop."]) == 0  # no break: advice only
    out = capsys.readouterr().out
    assert "replicate-wild-do-table=shop. keeps no table: did you mean `shop.%`?" in out
    assert "no break predicted" in out


def test_lint_json_carries_the_warning_for_a_do_table_rule(binlog, capsys):
    assert main(["lint", str(binlog), "--replicate-do-table", "shop.", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["breaks"] == []
    assert result["warnings"] == ["replicate-do-table=shop. keeps no table: did you mean "
                                  "`replicate-wild-do-table=shop.%`?"]


def test_rules_that_name_tables_say_nothing(binlog, capsys):
    from dumpfilter.rules.lint_rules import rule_warnings

    main(["lint", str(binlog), "--replicate-wild-do-table", "shop.%", "--json"])
    assert json.loads(capsys.readouterr().out)["warnings"] == []
    assert rule_warnings(RuleSet(do_table=("shop.t1",), wild_ignore_table=("%.tmp%",))) == []


def test_each_empty_side_and_the_ignore_rules():
    from dumpfilter.rules.lint_rules import rule_warnings

    assert rule_warnings(RuleSet(wild_do_table=(".t%",), wild_ignore_table=("db.",))) == [
        "replicate-wild-do-table=.t% keeps no table: did you mean `%.t%`?",
        "replicate-wild-ignore-table=db. ignores no table: did you mean `db.%`?"]


def test_simulates_lint_cell_and_explanation_say_it():
    from dumpfilter.lab.simulate.lint_process import LintProcess
    from dumpfilter.lab.simulate.report import lint_cell, lint_explanation
    from dumpfilter.rules.ruleset import Settings

    build = Build("mariadb").q("CREATE DATABASE shop").q("CREATE TABLE t1 (a int)", db="shop")
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = build.write(Path(tmp) / "master-bin.000001")
        (lint,) = LintProcess([path], [(RuleSet(wild_do_table=("shop.",)), Settings(flavor="mariadb"), None)]
                              ).results().values()
    assert lint["warnings"] == ["replicate-wild-do-table=shop. keeps no table: did you mean `shop.%`?"]
    row = {"lint": lint}
    assert lint_cell(row) == "no break; keeps no table"
    assert "keeps no table: did you mean `shop.%`?" in lint_explanation(row)


def test_master_status_lint_cell_says_it():
    from dumpfilter.cli.commands.master import _lint_cell
    from dumpfilter.master.lint_jobs import DONE, _Follower

    follower = _Follower(("k",), (RuleSet(wild_do_table=("shop.",)), None, None, None, True))
    follower.state = DONE
    warnings = follower.warnings()
    assert warnings == ["lint: replicate-wild-do-table=shop. keeps no table: did you mean `shop.%`?"]
    row = {"Lint": "done", "Lint_warnings": warnings, "Lint_position": "master-bin.000001:4", "Lint_breaks": 0}
    assert _lint_cell(row) == "no break up to master-bin.000001:4; keeps no table"
    assert _lint_cell({**row, "Lint_warnings": []}) == "no break up to master-bin.000001:4"


@pytest.mark.grpc
@pytest.mark.timeout(180)
def test_a_registered_slave_is_told_and_stats_show_it(tmp_path, master_factory):
    """Through a real master: the Register-time lint job's warnings, as `master status` reads them."""
    import grpc

    from tests.master.test_register_lint import _binlog, _lint, _register, _stub

    master, address = master_factory(_binlog(tmp_path))
    with grpc.insecure_channel(address) as channel:
        stub = _stub(channel)
        _register(stub, 5, "shop.")
        state, warnings = _lint(stub, 5)
    assert state == "done"
    assert warnings[0] == "lint: replicate-wild-do-table=shop. keeps no table: did you mean `shop.%`?"
