"""Fuzz target (issue #43): the compiled statement keys and the assembly's statement path.

* `_core.statement_key` over arbitrary bytes (never a panic: None or a key), and over statement
  text built from the DML grammar's words in any order, where any key it reads must be what the
  Python parser reads (tests/core/test_statement_keys.py's check).
* `filter` over mutated statement-logged workloads (MariaDB and MySQL, bytes flipped, cut): the
  keys path raises only the project's errors, and where the file still reads, writes what the
  reference path (every statement decided on its own) writes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dumpfilter import _core
from tests.support.filtering import filter_bytes
from dumpfilter.errors import DumpFilterError
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.transaction_filter import TransactionFilter
from dumpfilter.workload import WorkloadSpec, generate
from tests.core.test_statement_keys import check
from tests.binlogs.test_statement_path import PerStatement
from tests.fuzz.fuzz_support import FUZZ, FUZZ_CHEAP, TARGET_TIMEOUT, only_project_errors

pytestmark = pytest.mark.timeout(TARGET_TIMEOUT)

WORDS = ["INSERT", "REPLACE", "UPDATE", "DELETE", "INTO", "FROM", "SET", "VALUES", "VALUE", "WHERE", "ORDER",
         "LIMIT", "IGNORE", "LOW_PRIORITY", "QUICK", "DELAYED", "SELECT", "t", "db", "`a``b`", "`", ".", "(", ")",
         ";", "#", "--", "/*", "*/", "$", "é", "'", "=", ",", "1"]


@FUZZ_CHEAP
@given(st.binary(max_size=200))
def test_any_bytes_give_a_key_or_none(raw):
    key = _core.statement_key(raw)
    assert key is None or (key.kind in (_core.KIND_INSERT, _core.KIND_REPLACE, _core.KIND_UPDATE, _core.KIND_DELETE)
                           and key.table)


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(["", " ", "\t", "\x1c", "\n"])), max_size=14),
       st.sampled_from(["db", ""]))
def test_word_soup_keys_agree_with_the_parser(words, db):
    check("".join(w + s for w, s in words), db)


_FILES: dict[str, bytes] = {}


def _workload(flavor: str) -> bytes:
    if flavor not in _FILES:
        with tempfile.TemporaryDirectory() as tmp:
            spec = WorkloadSpec(seed=431, schemas=3, tables_per_schema=2, transactions=40, binlog_format="mixed",
                                flavor=flavor, ddl_share=0.1, cross_db_share=0.3, statements_per_transaction=3)
            _FILES[flavor] = Path(generate(spec, tmp, "f")[0]).read_bytes()
    return _FILES[flavor]


def _filtered(data: bytes, decider, flavor: str):
    try:
        out, stats = filter_bytes(data, TransactionFilter(decider), verify_checksums=False)
        return out, stats.as_dict()
    except DumpFilterError as exc:
        return type(exc).__name__


@FUZZ
@given(st.sampled_from(["mariadb", "mysql"]), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)),
                                                       min_size=1, max_size=4), st.integers(0, 1 << 20),
       st.sampled_from([{"do_db": ("db1",)}, {"ignore_table": ("db1.t1",)}, {"wild_do_table": ("db%.t2",)}]))
def test_mutated_statement_binlogs_filter_as_the_reference(flavor, flips, cut, rules):
    raw = bytearray(_workload(flavor))
    for offset, value in flips:
        raw[4 + offset % (len(raw) - 4)] = value  # the magic left alone: the walk gets going
    # (At least one byte past the magic: filter_bytes, a test helper, writes no file for an input
    # of the magic alone, which has no Format_description event to begin it.)
    data = bytes(raw[: max(5, len(raw) - cut % len(raw))])
    settings = Settings(flavor=flavor)
    with only_project_errors("mutated statement binlog"):
        got = _filtered(data, RuleEngine(RuleSet(**rules), settings), flavor)
    want = _filtered(data, PerStatement(RuleEngine(RuleSet(**rules), settings)), flavor)
    assert got == want
