"""`dumpfilter filter`: copy identity with no rules, series output across several inputs, flavor
from the FDE, the summary, errors."""

from __future__ import annotations

import json

import pytest

from dumpfilter.codec import EventType
from dumpfilter.binlogs import binlog_paths
from dumpfilter.cli.app import main
from tests.support.filtering import content_units, events_of, load, mariadb_binlog_reads

pytestmark = pytest.mark.fixtures


@pytest.fixture(scope="module")
def find(shared_fixtures):
    return lambda name: next(shared_fixtures.rglob(name))


@pytest.mark.parametrize("name", ["mariadb-bin.000001", "rpl_unfiltered_hidden_gcol.000001", "binlog.000693",
                                  "mysql-bin.sakila.gz", "mariadb-repl-bin.000007", "mysql-bin.aurora-padding"])
def test_no_rules_one_file_is_byte_identical(find, tmp_path, name):
    out = tmp_path / "out.bin"
    assert main(["filter", str(find(name)), "-o", str(out), "--summary", "none"]) == 0
    assert out.read_bytes() == load(find(name))


def test_relay_log_positions_are_not_renumbered(find, tmp_path):
    """A relay log's log_pos are the source's coordinates: filtering keeps them as they were."""
    src = find("rpl_unfiltered_hidden_gcol.000001")
    out = tmp_path / "out.bin"
    main(["filter", str(src), "-o", str(out), "--replicate-ignore-db=nothing_here", "--empty-transactions=drop",
          "--summary", "none"])
    before = {e.raw[19:]: e.log_pos for e in events_of(load(src))}
    after = events_of(out.read_bytes())
    assert any(e.log_pos not in (0, e.end_pos) for e in after)
    assert all(before[e.raw[19:]] == e.log_pos for e in after)


def test_several_inputs_make_a_series(find, tmp_path, capsys):
    inputs = [str(find(f"mariadb-repl-bin.00000{i}")) for i in (5, 6, 7)]
    out = tmp_path / "series"
    rc = main(["filter", *inputs, "--out", str(out), "--replicate-ignore-table=sbtest-repl.sbtest1",
               "--max-binlog-size", "40000", "--json"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["files_in"] == 3 and summary["flavor"] == "mariadb"
    files = binlog_paths(out)
    assert [p.name for p in files] == [f"mariadb-repl-bin.{i:06d}" for i in range(1, len(files) + 1)]
    assert len(files) >= 3 and (out / "mariadb-repl-bin.index").exists()
    source_gtids = [u.gtid for name in inputs for u in content_units(load(__import__("pathlib").Path(name)))]
    out_gtids = []
    previous_last = "0-10-262580"  # the GTID_LIST of the first input
    for i, path in enumerate(files):
        events = events_of(path.read_bytes())
        assert events[0].type_code == EventType.FORMAT_DESCRIPTION
        assert events[1].type_code == EventType.MARIADB_GTID_LIST
        assert str(events[1].gtid_set) == previous_last  # the output's own state, file by file
        assert not any(e.type_code == EventType.BINLOG_CHECKPOINT for e in events)  # input names dropped
        if i + 1 < len(files):
            assert events[-1].type_code == EventType.ROTATE and events[-1].rotate == (4, files[i + 1].name)
        units = content_units(path.read_bytes())
        out_gtids += [u.gtid for u in units]
        previous_last = units[-1].gtid
        assert all(e.log_pos in (0, e.end_pos) for e in events)
    assert out_gtids == source_gtids
    assert summary["partial"] > 0


def test_flavor_defaults_to_the_binlog_server(find, tmp_path, capsys):
    """MariaDB compares table and wild rules case-insensitively whatever lower_case_table_names
    (filter-semantics §8): `SBTEST-REPL.%` matches `sbtest-repl.sbtest1` only as MariaDB."""
    src = str(find("mariadb-repl-bin.000005"))
    results = {}
    for flavor in (None, "mariadb", "mysql"):
        args = ["filter", src, "-o", str(tmp_path / f"{flavor}.bin"), "--replicate-wild-ignore-table=SBTEST-REPL.%",
                "--json"] + ([f"--flavor={flavor}"] if flavor else [])
        assert main(args) == 0
        results[flavor] = json.loads(capsys.readouterr().out)
    assert results[None]["flavor"] == "mariadb"
    assert results[None]["emptied"] == results["mariadb"]["emptied"] == 87
    assert results["mysql"]["emptied"] == 0 and results["mysql"]["kept"] == 87


def test_plain_summary(find, tmp_path, capsys):
    main(["filter", str(find("mysql-bin.checksum-crc32")), "-o", str(tmp_path / "o.bin"),
          "--replicate-do-db=auth", "--summary", "plain"])
    err = capsys.readouterr().err
    assert "rules (mysql replica): replicate-do-db=auth" in err
    assert "events: 303 in" in err and "transactions: 60 in" in err and "52 skipped (52 written as empty transactions)" in err


def test_change_replication_filter_text(find, tmp_path, capsys):
    main(["filter", str(find("mysql-bin.checksum-crc32")), "-o", str(tmp_path / "o.bin"), "--json",
          "--change-replication-filter", "CHANGE REPLICATION FILTER REPLICATE_WILD_DO_TABLE = ('auth.%')"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["emptied"] > 0 and summary["kept"] > 0
    tables = {e.table_map[1] for e in events_of((tmp_path / "o.bin").read_bytes()) if e.type_code == EventType.TABLE_MAP}
    assert tables == {"auth"}


def test_bad_rule_is_an_error(find, tmp_path, capsys):
    rc = main(["filter", str(find("log.bin")), "-o", str(tmp_path / "o.bin"), "--replicate-do-table=nodot"])
    assert rc == 2 and "nodot" in capsys.readouterr().err


def test_missing_input_is_an_error(tmp_path, capsys):
    rc = main(["filter", str(tmp_path / "nope.bin"), "-o", str(tmp_path / "o.bin")])
    assert rc == 2 and "no such file" in capsys.readouterr().err


@pytest.mark.mariadb
def test_series_output_reads_in_mariadb_binlog(find, tmp_path):
    inputs = [str(find(f"mariadb-repl-bin.00000{i}")) for i in (5, 6)]
    out = tmp_path / "s"
    assert main(["filter", *inputs, "--out", str(out), "--replicate-ignore-table=sbtest-repl.sbtest2",
                 "--max-binlog-size", "30000", "--summary", "none"]) == 0
    paths = binlog_paths(out)
    assert len(paths) > 2  # 130 KB of input rotated at 30 KB
    for path in paths:
        mariadb_binlog_reads(path)


def test_series_starts_a_new_file_when_the_format_changes(find, tmp_path):
    """A 5.7 binlog then an 8.0 one: their FDEs differ (post-header lengths), so the 8.0 events go
    to a new output file opened with the 8.0 FDE, and the first file rotates to it."""
    first, second = find("log.bin"), find("binlog.000733")
    out = tmp_path / "s"
    assert main(["filter", str(first), str(second), "--out", str(out), "--basename", "mixed-bin",
                 "--replicate-ignore-db=nothing", "--summary", "none"]) == 0
    files = binlog_paths(out)
    assert [p.name for p in files] == ["mixed-bin.000001", "mixed-bin.000002"]
    one, two = (events_of(p.read_bytes()) for p in files)
    assert one[0].fmt.server_version.startswith("5.7") and two[0].fmt.server_version.startswith("8.0")
    assert one[-1].type_code == EventType.ROTATE and one[-1].rotate == (4, "mixed-bin.000002")
    assert [u.gtid for u in content_units(files[0].read_bytes())] == [u.gtid for u in content_units(load(first))]
    assert [u.gtid for u in content_units(files[1].read_bytes())] == [u.gtid for u in content_units(load(second))]
    # the second file's Previous_GTIDs carries what the first file wrote
    previous = next(e for e in two if e.type_code == EventType.PREVIOUS_GTIDS)
    assert "e3e2a4ee-b6dc-11ea-8bcf-0242ac150002:1-3" in str(previous.gtid_set)
