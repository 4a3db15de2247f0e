"""Issue #41: one rewriter and the order of its names. `lint` folds under
lower_case_table_names before it rewrites (BUG#37656, rpl_rewrite_db_filter), as `explain` and
the replica do; `explain --json` names where the rows land; `filter` writes the rewritten names
unless told not to; the endpoint's position keeper brings a replica's count back."""

from __future__ import annotations

import io
import json

import pytest

from dumpfilter.cli.app import main
from dumpfilter.codec import BinlogReader, EventType
from dumpfilter.codec.rename import PositionKeeper, rewrite_event

from tests.rules.test_lint_cases import Build


def _bug37656(tmp_path):
    build = Build()
    build.q("CREATE TABLE T1 (a INT)", "B37656").q("INSERT INTO T1 VALUES (1)", "B37656").rows("B37656", "T1", 1)
    return build.write(tmp_path / "bin.000001")


def test_lint_folds_before_it_rewrites(tmp_path, capsys):
    path = _bug37656(tmp_path)
    schema = tmp_path / "replica.sql"
    schema.write_text("CREATE DATABASE bug37656;\n")
    argv = ["lint", str(path), "--lower-case-table-names", "1", "--replicate-rewrite-db=b37656->bug37656",
            "--replica-schema", str(schema), "--json"]
    assert main(argv) == 0, capsys.readouterr().out
    assert json.loads(capsys.readouterr().out) == {"breaks": [], "warnings": [], "divergence": {"writes": 0, "rules": []}}
    # Without the folding the rule matches nothing: the replica has no B37656 (1049), as lint says.
    assert main([*argv[:3], "0", *argv[4:]]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["breaks"][0]["errno"] == 1049 and "B37656" in report["breaks"][0]["message"]


def test_explain_json_names_where_the_rows_land(capsys):
    assert main(["explain", "--replicate-rewrite-db=mysqltest_from->mysqltest_to", "--sql",
                 "INSERT INTO a VALUES (1)", "--current-db", "mysqltest_from", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tables"] == ["mysqltest_from.a"] and doc["rewritten_tables"] == ["mysqltest_to.a"]
    assert main(["explain", "--replicate-rewrite-db=b37656->bug37656", "--lower-case-table-names", "1",
                 "--table", "B37656.T1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rewritten_tables"] == ["bug37656.t1"]


def _names(path):
    out = []
    with open(path, "rb") as f:
        for event in BinlogReader(f, str(path)):
            if event.type_code in (EventType.QUERY, EventType.TABLE_MAP) and event.db:
                out.append(event.db)
    return out


def test_filter_writes_the_rewritten_names_unless_told_not_to(tmp_path):
    path = _bug37656(tmp_path)
    rules = ["--lower-case-table-names", "1", "--replicate-rewrite-db=b37656->bug37656", "--summary", "none"]
    assert main(["filter", str(path), "-o", str(tmp_path / "out"), *rules]) == 0
    assert set(_names(tmp_path / "out")) == {"bug37656"}
    assert main(["filter", str(path), "-o", str(tmp_path / "kept"), *rules, "--no-rewrite-db"]) == 0
    assert set(_names(tmp_path / "kept")) == {"B37656"}
    # The output's positions are its own: every log_pos is its event's end in the file.
    with open(tmp_path / "out", "rb") as f:
        assert all(e.log_pos == e.pos + e.size for e in BinlogReader(f, "out"))


def test_the_position_keeper_brings_a_grown_count_back():
    """A longer name carries a replica's count past the master's (it adds the event's size, jumps
    only forward): after the batch it is sent a Rotate to the master's position, then the FDE."""
    build = Build()
    build.q("INSERT INTO t VALUES (1)", "s1").q("INSERT INTO t VALUES (2)", "s1")
    events = list(BinlogReader(io.BytesIO(build.bytes()), "bin.000001"))
    longer = "a_database_with_a_much_longer_name"

    def rename(event):
        return rewrite_event(event, lambda db, table: (longer, table, True) if db == "s1" else (db, table, False))

    keeper = PositionKeeper(rename, file="bin.000001", pos=4, server_id=1)
    sent = list(keeper.events(events))
    assert [e.db for e in sent if e.type_code == EventType.QUERY] == [longer] * 4
    rotate, fde = sent[-2:]
    assert rotate.type_code == EventType.ROTATE and rotate.rotate == (events[-1].log_pos, "bin.000001")
    assert fde.type_code == EventType.FORMAT_DESCRIPTION and fde.log_pos == 0
    assert keeper.counted == events[-1].log_pos
    # Names that do not grow leave the count the master's: nothing is added.
    same = PositionKeeper(lambda e: e, file="bin.000001", pos=4, server_id=1)
    assert len(list(same.events(events))) == len(events)


@pytest.mark.grpc
def test_master_and_slave_with_the_same_rewrite_rewrite_once(tmp_path, master_factory):
    """`slave run` rewrites what it relays itself; the gRPC master sends the master's names (the
    slave registers the same rules): with chained rules db1->db2, db2->db3 a name rewritten twice
    would land in db3."""
    from dumpfilter.codec import EventType
    from dumpfilter.binlogs import TailingReader
    from dumpfilter.rules.parse import StartupFilters
    from dumpfilter.workload.generator import WorkloadSpec, generate
    from tests.support.dump_helpers import run_slave

    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    generate(WorkloadSpec(seed=3, schemas=1, transactions=40, binlog_format="mixed"), binlogs)
    _, address = master_factory(binlogs)
    rules = StartupFilters.from_options([("replicate-rewrite-db", "db1->db2"),
                                         ("replicate-rewrite-db", "db2->db3")]).global_rules
    run_slave(address, tmp_path / "relay", 11, rules=rules)
    maps, defaults = set(), set()
    for _, event in TailingReader(tmp_path / "relay"):
        if event.type_code == EventType.TABLE_MAP:
            maps.add(event.table_map[1])
        elif event.is_query and event.db:
            defaults.add(event.db)
    assert maps == {"db2"} and "db2" in defaults and "db3" not in defaults, (maps, defaults)
