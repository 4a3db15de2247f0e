"""By-schema split of a MIXED binlog that opens with statements of no default database (sysbench's
prepare: `INSERT INTO sbtest1.sbtest1 VALUES ...` sent with no `USE`): before any table or keyed
statement made a schema output, the core has no output to answer for them, and must leave them to
Python, which writes them to the unassigned output (MySQL's statement rule: a statement is routed
by its default database). The core once took such a unit and routed it to no output: lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from dumpfilter.codec.constants import EventType
from dumpfilter.codec.encode import build_event, format_description, mariadb_gtid_body, query_body, xid_body
from dumpfilter.codec.reader import BinlogReader
from dumpfilter.codec.writer import BinlogWriter
from dumpfilter.spark_jobs.tasks import compiled
from dumpfilter.spark_jobs.tasks.local import split_local
from dumpfilter.spark_jobs.tasks.routing import config_from_maps


def _binlog(path: Path, units: list[tuple[str, str]]) -> Path:
    """A MariaDB MIXED binlog: one GTID, Query, XID unit per (default db, statement)."""
    fde = format_description("10.11.6-MariaDB-log")
    fmt = fde.fmt
    with open(path, "wb") as out:
        writer = BinlogWriter(out, fde)
        for seq, (db, sql) in enumerate(units, start=1):
            writer.write_transaction([build_event(EventType.MARIADB_GTID, mariadb_gtid_body(seq), fmt=fmt),
                                      build_event(EventType.QUERY, query_body(sql, db), fmt=fmt),
                                      build_event(EventType.XID, xid_body(seq), fmt=fmt)])
    return path


def _statements(directory: Path) -> dict[str, list[str]]:
    """Each output's Query texts, by its index name."""
    found: dict[str, list[str]] = {}
    for index in sorted(directory.glob("*-bin.index")):
        texts = found.setdefault(index.name.removesuffix("-bin.index"), [])
        for name in index.read_text().split():
            with open(directory / Path(name).name, "rb") as f:
                texts += [e.query.sql for e in BinlogReader(f, name) if e.type_code == EventType.QUERY]
    return found


@pytest.mark.parametrize("units", [
    [("", "INSERT INTO db1.t VALUES (1)"), ("", "INSERT INTO db2.t VALUES (2)")],  # no output ever made by keys
    [("", "INSERT INTO db1.t VALUES (1)"), ("db1", "UPDATE t SET a = 1"), ("", "INSERT INTO db2.t VALUES (2)")],
])
def test_statements_of_no_default_database_reach_the_unassigned_output(tmp_path, monkeypatch, units):
    binlog = _binlog(tmp_path / "master-bin.000001", units)
    split_local([binlog], tmp_path / "core", config_from_maps([]))
    core_route = compiled.split_route
    monkeypatch.setattr(compiled, "split_route", lambda *args, **kw: core_route(*args[:6], **kw))  # Python routes statements
    split_local([binlog], tmp_path / "python", config_from_maps([]))
    by_core, by_python = _statements(tmp_path / "core"), _statements(tmp_path / "python")
    assert by_core == by_python
    unassigned = [sql for db, sql in units if not db]
    assert [sql for sql in by_core.get("unassigned", []) if sql in unassigned] == unassigned
