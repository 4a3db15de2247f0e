"""Hypothesis properties of the master policy's bound (issue #27 6.3): for statements drawn from a
grammar over allowed and forbidden tables (tests/support/policy_grammar.py), nothing naming a
forbidden object or carrying a password is allowed, and, through a real gRPC master and slave, none
of it reaches the identity's stream, as a statement or as an Annotate_rows text."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.binlogs import TailingReader
from dumpfilter.codec import EventType
from dumpfilter.codec import encode as enc
from dumpfilter.codec.constants import STMT_END_F
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.policy import MasterPolicy, PolicyEntry
from dumpfilter.rules.policy_gates import PLAIN, Secret
from dumpfilter.rules.gate import ALLOWED, Gate
from tests.support.dump_helpers import run_slave
from tests.support.filtering import Synth
from tests.support.policy_grammar import ALLOWED_DB, FORBIDDEN_WORDS, statements

GATE = Gate((f"{ALLOWED_DB}.%",), restricted=True)


@settings(max_examples=400, deadline=None)
@given(statements())
def test_the_gate_allows_nothing_that_reaches_a_forbidden_object(drawn):
    if GATE.statement_verdict(drawn.sql, drawn.default_db) is ALLOWED:
        assert drawn.allowed, (drawn.sql, drawn.default_db, drawn.reached)


@settings(max_examples=400, deadline=None)
@given(statements())
def test_an_annotation_goes_only_when_all_it_names_is_allowed(drawn):
    if drawn.written and GATE.annotation_allowed(drawn.sql, drawn.written):
        assert drawn.allowed, (drawn.sql, drawn.written, drawn.reached)


@settings(max_examples=200, deadline=None)
@given(statements().filter(lambda d: d.allowed and d.sql.split()[0] in ("INSERT", "UPDATE", "DELETE", "REPLACE")))
def test_dml_over_allowed_tables_is_allowed(drawn):
    """The bound is conservative, not blind: DML whose every object is allowed goes through (as a
    statement; its annotation too, when its Table_maps tell the default database its bare names need)."""
    assert GATE.statement_verdict(drawn.sql, drawn.default_db) is ALLOWED, drawn
    if drawn.annotation_resolvable:
        assert GATE.annotation_allowed(drawn.sql, drawn.written), drawn


def _binlog(directory: Path, drawn_list) -> None:
    """Each statement twice: as a STATEMENT unit (GTID, Query, XID) and as a ROW unit (GTID,
    Annotate_rows, a Table_map and a rows event per table it writes, XID) when it writes tables."""
    synth = Synth("mariadb")
    for drawn in drawn_list:
        synth.events += [synth.gtid(), synth.ev(EventType.QUERY, enc.query_body(drawn.sql, drawn.default_db)),
                         synth.ev(EventType.XID, enc.xid_body(synth.seq))]
        if not drawn.written:
            continue
        body = [synth.gtid(), synth.ev(EventType.ANNOTATE_ROWS, drawn.sql.encode())]
        written = list(dict.fromkeys(drawn.written))
        for table_id, (db, table) in enumerate(written, 1):
            body.append(synth.ev(EventType.TABLE_MAP, enc.table_map_body(table_id, db, table, b"\x03\x03",
                                                                        nullable=b"\x02")))
        for table_id, _ in enumerate(written, 1):
            image = b"\x00" + table_id.to_bytes(4, "little") + b"\x01\x00\x00\x00"
            body.append(synth.ev(EventType.WRITE_ROWS_V1, enc.rows_body(
                table_id, image, ncols=2, v2=False, flags=STMT_END_F if table_id == len(written) else 0)))
        synth.events += [*body, synth.ev(EventType.XID, enc.xid_body(synth.seq))]
    directory.mkdir(parents=True)
    (directory / "master-bin.000001").write_bytes(synth.bytes())


POLICY = MasterPolicy({"shopper": PolicyEntry("shopper", (f"{ALLOWED_DB}.%",), Secret(PLAIN, "pw"))}, None)


@pytest.mark.grpc
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statements(), min_size=1, max_size=8))
def test_nothing_forbidden_reaches_the_identitys_stream(drawn_list):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _binlog(tmp / "binlog", drawn_list)
        master, port = create_server(tmp / "binlog", "127.0.0.1:0", policy=POLICY, lint_bytes=0)
        try:
            run_slave(f"127.0.0.1:{port}", tmp / "relay", 5, user="shopper", password="pw")
        finally:
            master.stop(grace=1.0)
        by_text = {}
        for drawn in drawn_list:
            by_text.setdefault(drawn.sql, []).append(drawn)
        received = 0
        for _, event in TailingReader(tmp / "relay"):
            assert b"pw-" not in event.raw, event
            if event.type_code == EventType.TABLE_MAP:
                assert event.table_map[1] == ALLOWED_DB, event.table_map
            elif event.type_code in (EventType.QUERY, EventType.ANNOTATE_ROWS) and event.sql not in ("COMMIT",):
                text = event.sql
                assert text in by_text and all(d.allowed for d in by_text[text]), text
                lowered = text.lower()
                assert not any(word in lowered.replace("`", " ").replace(".", " ").split() for word in FORBIDDEN_WORDS)
                received += 1
        # Not vacuous: a statement whose every object is allowed and that the bound can read is sent.
        if any(d.allowed and d.sql.startswith(("INSERT", "DELETE")) and "f(" not in d.sql for d in drawn_list):
            assert received


@pytest.mark.grpc
def test_a_statement_the_bound_cannot_analyse_is_not_sent_and_is_counted(tmp_path):
    """Counted under MASTER_POLICY_UNANALYSED (besides MASTER_POLICY) in Stats and the metrics."""
    from dumpfilter.master.serve.metrics import registry_for
    from tests.support.policy_grammar import Drawn

    unreadable = "LOAD DATA INFILE '/tmp/x' INTO TABLE shop.t1 (id) SET c = (SELECT pw FROM secret.s1 LIMIT 1)"
    _binlog(tmp_path / "binlog", [Drawn(unreadable, "shop", frozenset({"secret"}), ()),
                                  Drawn("INSERT INTO t1 VALUES (1, 'ok-1')", "shop", frozenset({"shop"}), ())])
    master, port = create_server(tmp_path / "binlog", "127.0.0.1:0", policy=POLICY, lint_bytes=0)
    try:
        run_slave(f"127.0.0.1:{port}", tmp_path / "relay", 6, user="shopper", password="pw")
        hits = master.service.slaves[6].stats.rule_hits
        assert hits["MASTER_POLICY_UNANALYSED"] == 1 and hits["MASTER_POLICY"] == 1
        metrics = registry_for(master.service)
        assert metrics.get_sample_value("dumpfilter_filter_rule_hits_total",
                                        {"slave": "6", "filter_name": "MASTER_POLICY_UNANALYSED"}) == 1
    finally:
        master.stop(grace=1.0)
    texts = [e.sql for _, e in TailingReader(tmp_path / "relay") if e.type_code == EventType.QUERY]
    assert "INSERT INTO t1 VALUES (1, 'ok-1')" in texts and unreadable not in texts
