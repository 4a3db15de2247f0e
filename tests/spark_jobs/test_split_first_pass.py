"""Split's first pass (`chunks.schema_statements`): the compiled walk hands Python only the Query
events whose text may be a schema statement (the core's sql::query_for_python). Every statement
`is_schema_statement` accepts must still reach the schema model, and a bad binlog must still
stop the pass with one line naming the file and the offset."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dumpfilter.codec import BinlogReader, EventType
from dumpfilter.codec import encode as enc
from dumpfilter.codec.constants import MAGIC
from dumpfilter.codec.scanner import Scanner
from dumpfilter.errors import BinlogError, ChecksumError, MalformedEventError, TruncatedBinlogError
from dumpfilter.rules.ruleset import Settings
from dumpfilter.rules.schema import is_schema_statement
from dumpfilter.spark_jobs.tasks.chunks import Chunk, schema_statements
from dumpfilter.spark_jobs.tasks.local import split_local
from dumpfilter.spark_jobs.tasks.routing import config_from_maps
from tests.rules.test_lint_cases import Build
from tests.spark_jobs.helpers import series_events
from tests.oracles.chunk_units import read_units

VERSIONS = {"mariadb": "10.11.6-MariaDB-log", "mysql": "8.0.36"}
BLANKS = ["", " ", "  \t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\xa0", "\u3000", "\ufeff"]
OPENERS = ["", "/* x */ ", "/**/", "/*/ */ ", "/*!50003 ", "/*!40101 x*/ ", "/*!999999 */", "/*! ", "-- c\n",
           "#c\n", "/* unclosed "]
SCHEMA_VERBS = ["CREATE", "ALTER", "DROP", "RENAME"]
OTHER_VERBS = ["INSERT", "UPDATE", "DELETE", "REPLACE", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "XA", "SET",
               "SELECT", "DO", "TRUNCATE", "GRANT", "WITH", "START", "CHECK", "SHOW", "OPTIMIZE", "CREA", "DR", "RE",
               "REN", "ALTERX", "DROPS", "ſET", "İNSERT"]
AFTER = ["", " ", "(", "/", "/*!50000 ", "/*!50000 TE*/ ", "/*!50003 ATE*/", "*/ ", "_", "$", "1", "é", "\x00",
         "`", ";", "\udcff", "\n"]
TAILS = ["", "TABLE t (a int)", "DATABASE db", "TABLE a TO b", "INTO t VALUES (1)", "t SET a = 1", "TRIGGER tr",
         "@a = 1", "*/ TABLE t (a int)"]


def _case(word: str, flips: list[bool]) -> str:
    return "".join(c.swapcase() if flip else c for c, flip in zip(word, flips + [False] * len(word)))


# Half the verbs a schema verb, half the texts without a comment first: what the core must never
# pass over comes up often, however few examples run.
_structured = st.builds(lambda blank, opener, verb, flips, after, tail: blank + opener + _case(verb, flips) + after + tail,
                        st.one_of(st.just(""), st.sampled_from(BLANKS)), st.one_of(st.just(""), st.sampled_from(OPENERS)),
                        st.one_of(st.sampled_from(SCHEMA_VERBS), st.sampled_from(OTHER_VERBS)),
                        st.lists(st.booleans(), max_size=8), st.sampled_from(AFTER), st.sampled_from(TAILS))
_raw = st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape"))
TEXTS = st.one_of(_structured, _raw, st.tuples(_structured, _raw).map("".join), st.tuples(_raw, _structured).map("".join))


def binlog(texts: list[tuple[str, bool]], flavor: str = "mariadb", *, checksum: bool = True) -> bytes:
    """The magic, an FDE and a Query per (sql, compressed) (a Query_compressed where asked)."""
    fde = enc.format_description(VERSIONS[flavor], checksum=checksum)
    out = bytearray(MAGIC + fde.raw)
    for sql, compressed in texts:
        t = EventType.QUERY_COMPRESSED if compressed else EventType.QUERY
        out += enc.build_event(t, enc.query_body(sql, "db", compressed=compressed), fmt=fde.fmt).raw
    return bytes(out)


def candidates(data: bytes) -> set[int]:
    offsets, stop, error = Scanner("<test>").schema_candidates(data, 4, 0)
    assert error is None and stop == len(data)
    return set(offsets.tolist())


@given(st.lists(st.tuples(TEXTS, st.booleans()), min_size=1, max_size=8), st.sampled_from(["mariadb", "mysql"]),
       st.booleans())
def test_every_schema_statement_is_a_candidate(texts, flavor, checksum):
    if flavor == "mysql":  # (Query_compressed is MariaDB's)
        texts = [(sql, False) for sql, _ in texts]
    data = binlog(texts, flavor, checksum=checksum)
    found = candidates(data)
    queries = [e for e in BinlogReader(_Bytes(data)) if e.is_query]
    assert len(queries) == len(texts)
    missed = [e.query.sql for e in queries if is_schema_statement(e.query.sql) and e.pos not in found]
    assert not missed


def test_dml_and_framing_never_reach_python():
    # The point of the core's part: a workload's DML, BEGIN and COMMIT stay in the core.
    texts = [("BEGIN", False), ("INSERT INTO t VALUES (1)", False), ("update t set a = 2", True), ("COMMIT", False),
             ("CREATE TABLE t (a int)", False), ("/* x */ DROP TABLE t", True), ("XA END 'x'", False)]
    data = binlog(texts)
    queries = [e for e in BinlogReader(_Bytes(data)) if e.is_query]
    fde_at = 4
    assert candidates(data) == {fde_at, queries[4].pos, queries[5].pos}


class _Bytes:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def read(self, n: int = -1) -> bytes:
        chunk = self.data[self.at:] if n < 0 else self.data[self.at:self.at + n]
        self.at += len(chunk)
        return chunk


# ------------------------------------------------------------------------------ the schema model
UPDATE = "UPDATE t1 LEFT JOIN t4 ON t1.a = t4.c SET d = 0"


@pytest.mark.parametrize("ddl", [("/* x */ CREATE TABLE t1 (a int, b int)", "/*!40101 CREATE TABLE t4 (c int, d int) */"),
                                 ("\n/*!50003 CREATE*/ TABLE t1 (a int, b int)", "/**/create table t4 (c int, d int)")])
def test_ddl_behind_comments_reaches_the_model_of_the_next_file(tmp_path, ddl):
    # BUG#37051 (tests/spark_jobs/test_split_schema_model.py): with replicate-ignore-table=db.t1
    # the UPDATE updates t4 only (the one with column d) and a replica applies it. The second file
    # starts from the first pass's model: had the pass missed the commented CREATEs, t1 and t4
    # would be unknown, every joined table would count as updated, and the UPDATE would be dropped.
    first = Build("mariadb").q("CREATE DATABASE db")
    for sql in ddl:
        first.q(sql, db="db", ddl=True)
    second = Build("mariadb")
    second.seq = first.seq
    second.q("INSERT INTO t1 VALUES (1, 2)", db="db").q(UPDATE, db="db")
    files = [first.write(tmp_path / "in-bin.000001"), second.write(tmp_path / "in-bin.000002")]
    config = config_from_maps(["keep=replicate-ignore-table=db.t1"], Settings(flavor="mariadb"))
    split_local(files, tmp_path / "out", config)
    assert UPDATE in [e.sql for e in series_events(tmp_path / "out", "keep") if e.is_query]
    assert UPDATE not in [e.sql for e in series_events(tmp_path / "out", "unassigned") if e.is_query]


# ------------------------------------------------------------------------------ errors
def _write(tmp_path: Path, data: bytes | bytearray) -> str:
    path = tmp_path / "bad-bin.000001"
    path.write_bytes(data)
    return str(path)


def _first_pass(path: str, **kw) -> list:
    return list(schema_statements(Chunk(0, path), **kw))


def _one_line(exc: BinlogError, path: str, offset: int) -> None:
    assert (exc.path, exc.offset) == (path, offset)
    assert str(exc).startswith(f"{path} at byte {offset}: ") and "\n" not in str(exc)


def test_a_truncated_binlog_stops_the_pass_as_the_routing_read_does(tmp_path):
    data = binlog([("BEGIN", False), ("INSERT INTO t VALUES (1)", False)])
    for cut in (len(data) - 3, len(data) - 30):
        path = _write(tmp_path, data[:cut])
        with pytest.raises(TruncatedBinlogError) as got:
            _first_pass(path)
        with pytest.raises(TruncatedBinlogError) as routing:
            list(read_units(Chunk(0, path)))
        assert str(got.value) == str(routing.value)
        _one_line(got.value, path, routing.value.offset)


def test_a_bad_checksum_on_a_query_python_never_sees_is_still_found(tmp_path):
    data = bytearray(binlog([("CREATE TABLE t (a int)", False), ("INSERT INTO t VALUES (1)", False)]))
    at = len(data) - 8
    data[at] ^= 0xFF  # in the INSERT's text
    path = _write(tmp_path, data)
    with pytest.raises(ChecksumError) as got:
        _first_pass(path)
    insert_pos = [e.pos for e in BinlogReader(_Bytes(bytes(data)), verify_checksums=False)][-1]
    _one_line(got.value, path, insert_pos)
    assert _first_pass(path, verify_checksums=False) == [("CREATE TABLE t (a int)", "db")]


@pytest.mark.parametrize("field, value", [(8, 200), (11, 0xFF)])  # db_len, status_vars_len past the event
def test_a_malformed_query_python_never_sees_is_still_refused(tmp_path, field, value):
    data = bytearray(binlog([("INSERT INTO t VALUES (1)", False)], checksum=False))
    insert_pos = len(data) - len(enc.build_event(EventType.QUERY, enc.query_body("INSERT INTO t VALUES (1)", "db"),
                                                 fmt=None).raw)
    data[insert_pos + 19 + field] = value
    path = _write(tmp_path, data)
    with pytest.raises(MalformedEventError) as got:
        _first_pass(path)
    _one_line(got.value, path, insert_pos)
    assert "malformed QUERY event" in str(got.value)


def test_a_compressed_query_that_does_not_decompress_is_refused(tmp_path):
    fde = enc.format_description(VERSIONS["mariadb"])
    # The header says 5 bytes; the stream holds 24.
    body = enc.query_body("", "db") + b"\x81\x05" + zlib.compress(b"INSERT INTO t VALUES (1)")
    event = enc.build_event(EventType.QUERY_COMPRESSED, body, fmt=fde.fmt).raw
    path = _write(tmp_path, MAGIC + fde.raw + event)
    with pytest.raises(MalformedEventError) as got:
        _first_pass(path)
    _one_line(got.value, path, 4 + len(fde.raw))
