"""Issue #14: the master keeps one schema model per binlog series, versioned by position
(docs/schema-model.md). Slaves at different positions share it and each decides with the schema as
it was just before the statement: a slave far behind never sees DDL the slave ahead has passed, and
a slave that starts late still sees the DDL written before its start. Each statement is read once."""

from __future__ import annotations

from pathlib import Path

from dumpfilter.binlogs.files import write_index
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.ruleset import Settings
from tests.rules.test_lint_cases import Build
from tests.support.filtering import events_of

MARIADB = Settings(flavor="mariadb")
U1 = "UPDATE t1 LEFT JOIN t4 ON t1.a = t4.c SET d = 0"        # d is t4's: t4 is the updated table
U2 = "UPDATE t1 LEFT JOIN t4 ON t1.a = t4.c SET d = 1"        # after the ALTERs d is t1's
T1 = "UPDATE t1 JOIN t2 ON t1.a = t2.b SET t1.a = 5"          # before the trigger: t1 only
T2 = "UPDATE t1 JOIN t2 ON t1.a = t2.b SET t1.a = 6"          # after it: t1 and audit (MariaDB)
PADDING = 40  # statements between the interesting ones: with tiny segments, many segments


def _binlog(directory: Path) -> Path:
    build = Build("mariadb").q("CREATE DATABASE db")
    build.q("CREATE TABLE t1 (a int, b int)", db="db").q("CREATE TABLE t4 (c int, d int)", db="db")
    build.q("CREATE TABLE t2 (b int)", db="db").q("CREATE TABLE audit (x int)", db="db")
    for i in range(PADDING):
        build.q(f"INSERT INTO t2 VALUES ({i})", db="db")
    build.q(U1, db="db").q(T1, db="db")
    for i in range(PADDING):
        build.q(f"INSERT INTO t2 VALUES ({i})", db="db")
    build.q("ALTER TABLE t4 DROP COLUMN d", db="db").q("ALTER TABLE t1 ADD COLUMN d int", db="db")
    build.q("CREATE TRIGGER tr AFTER UPDATE ON t1 FOR EACH ROW INSERT INTO audit VALUES (NEW.a)", db="db")
    for i in range(PADDING):
        build.q(f"INSERT INTO t2 VALUES ({i})", db="db")
    build.q(U2, db="db").q(T2, db="db")
    directory.mkdir(parents=True, exist_ok=True)
    path = build.write(directory / "master-bin.000001")
    write_index(directory / "master-bin.index", [path.name])
    return path


def _rules(*options: str):
    return StartupFilters.from_options([tuple(o.split("=", 1)) for o in options]).for_channel("")


def _register(svc: DumpService, server_id: int, *options: str) -> None:
    svc.register(Registration(server_id=server_id, filters=(ChannelSpec(None, _rules(*options)),), settings=MARIADB))


def _received(svc: DumpService, server_id: int, start=None) -> list[str]:
    data = bytearray()
    for batch in svc.stream(server_id, start=start):
        data += batch.events
        if batch.caught_up:
            break
    return [event.sql for event in events_of(b"\xfebin" + bytes(data)) if event.is_query]


def _tiny_cache(directory: Path) -> DumpService:
    # Segments of ~one unit and a cache of a few: a slave behind re-reads (and re-decides) units.
    return DumpService(directory, segment_bytes=256, cache_bytes=2048)


# replicate-ignore-table=db.t1: U1 updates t4 (kept); U2, T1 and T2 update t1 (skipped).
# replicate-ignore-table=db.audit: U1 and T1 are kept; U2 and T2 update t1 after CREATE TRIGGER tr, which
# writes audit (MariaDB counts the tables triggers write): skipped.
OPTIONS = ("replicate-ignore-table=db.t1", "replicate-ignore-table=db.audit")
EXPECTED = {OPTIONS[0]: ({U1}, {U2, T1, T2}), OPTIONS[1]: ({U1, T1}, {U2, T2})}


def test_a_slave_behind_decides_with_the_schema_of_its_own_position(tmp_path):
    _binlog(tmp_path / "binlogs")
    for option, (kept, skipped) in EXPECTED.items():
        svc = _tiny_cache(tmp_path / "binlogs")
        _register(svc, 1, option)
        _register(svc, 2, option)  # same rules: the same rule engine
        ahead = _received(svc, 1)
        behind = _received(svc, 2)  # after slave 1 reached the end (engine and model past every DDL)
        for got in (ahead, behind):
            assert kept <= set(got), (option, kept - set(got))
            assert not skipped & set(got), (option, skipped & set(got))
        assert svc.segments.reads > 10  # the units were read (and decided) again for slave 2


def test_a_slave_that_starts_after_the_ddl_sees_it(tmp_path):
    path = _binlog(tmp_path / "binlogs")
    u1_at = next(e.pos for e in events_of(path.read_bytes()) if e.is_query and e.sql == U1)
    gtid_before = [e.pos for e in events_of(path.read_bytes()) if e.pos < u1_at][-1]  # U1's unit start
    for option, (kept, skipped) in EXPECTED.items():
        svc = _tiny_cache(tmp_path / "binlogs")
        _register(svc, 3, option)
        got = set(_received(svc, 3, start=(path.name, gtid_before)))
        assert "CREATE TABLE t4 (c int, d int)" not in got  # it started after the DDL ...
        assert kept <= got and not skipped & got, option  # ... and still placed d by it


def test_each_statement_is_read_once_whatever_the_number_of_slaves(tmp_path):
    path = _binlog(tmp_path / "binlogs")
    queries = sum(1 for e in events_of(path.read_bytes()) if e.is_query)
    svc = _tiny_cache(tmp_path / "binlogs")
    options = [OPTIONS[0], OPTIONS[1], "replicate-do-db=db", "replicate-wild-ignore-table=db.t%"]
    for server_id, option in enumerate(options, 1):
        _register(svc, server_id, option)
    for server_id in range(1, len(options) + 1):
        _received(svc, server_id)
    assert 0 < svc.timeline.statements_read <= queries
    assert svc.timeline.logged == 8  # CREATE DATABASE, 4 CREATE TABLE, 2 ALTER, CREATE TRIGGER
    assert len({id(state.engine.timeline) for state in (s.state for s in svc.slaves.values())}) == 1
