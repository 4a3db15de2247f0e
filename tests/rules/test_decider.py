"""The seam for "is this kept" (rules/decider.py): one Decider type whose answers are Decisions,
one composition of a slave's rules with the master policy's gate (Gated)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.rules.decider import Decider, Gated, gate_statement, gate_table, gated
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.gate import ALLOWED, MASTER_POLICY, MASTER_POLICY_UNANALYSED, UNRESTRICTED, Gate
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.transaction_filter import TransactionFilter


def engine(*options: str) -> RuleEngine:
    pairs = [tuple(option.removeprefix("--").split("=", 1)) for option in options]
    return RuleEngine(StartupFilters.from_options(pairs).global_rules)


NAMES = st.sampled_from(["db1", "db2", "shop", "secret", "Shop"])
TABLES = st.sampled_from(["t1", "t2", "users", "orders"])
RULES = st.lists(st.sampled_from([
    "--replicate-do-db=db1", "--replicate-ignore-db=secret", "--replicate-do-table=shop.orders",
    "--replicate-wild-do-table=db%.t%", "--replicate-wild-ignore-table=shop.u%", "--replicate-ignore-table=db2.t2",
]), max_size=3, unique=True)
ALLOWS = st.lists(st.sampled_from(["shop.%", "db1.%", "db2.t1", "%.orders"]), max_size=3, unique=True)


@settings(max_examples=200, deadline=None)
@given(RULES, ALLOWS, NAMES, TABLES)
def test_gated_tables_are_rules_and_gate(rules, allow, db, table):
    rules_engine = engine(*rules)
    gate = Gate(tuple(allow), restricted=True)
    decider = Gated(rules_engine, gate)
    expected = rules_engine.decide_table(db, table).apply and gate.table_allowed(db, table)
    decision = decider.decide_table(db, table)
    assert isinstance(decision, Decision)
    assert decision.apply is expected
    assert decider.table_kept(db, table) is expected
    if rules_engine.table_kept(db, table) and not expected:
        assert decision.rule == "master-policy" and MASTER_POLICY in decision.counted


@settings(max_examples=200, deadline=None)
@given(RULES, ALLOWS, NAMES, TABLES, st.sampled_from(["INSERT INTO {t} VALUES (1)", "DELETE FROM {t}",
                                                      "CREATE TABLE {t} (a INT)", "UPDATE {t} SET a = 1"]))
def test_gated_statements_are_rules_and_gate(rules, allow, db, table, shape):
    rules_engine = engine(*rules)
    gate = Gate(tuple(allow), restricted=True)
    sql = shape.format(t=table)
    decision = Gated(rules_engine, gate).decide_statement(sql, db)
    assert isinstance(decision, Decision)
    expected = rules_engine.decide_statement(sql, db).apply and gate.statement_verdict(sql, db) is ALLOWED
    assert decision.apply is expected


def test_an_unanalysable_statement_is_refused_and_counted_as_such():
    gate = Gate(("db1.%",), restricted=True)
    allowed = Decision(True, "no rules")
    refused = gate_statement(allowed, gate, "SELECT 1 FROM (((", "db1")
    assert not refused.apply and refused.rule == "master-policy"
    assert refused.counted[-2:] == (MASTER_POLICY, MASTER_POLICY_UNANALYSED)
    # What the rules already refuse is their answer, untouched; an unrestricted gate adds nothing.
    skipped = Decision(False, "replicate-do-db")
    assert gate_statement(skipped, gate, "SELECT 1 FROM (((", "db1") is skipped
    assert gate_statement(allowed, UNRESTRICTED, "DROP TABLE secret.t", "db1") is allowed
    assert gate_table(allowed, gate, "secret", "t").apply is False


def test_gated_without_a_restriction_is_the_rules_themselves():
    rules_engine = engine("--replicate-do-db=db1")
    assert gated(rules_engine, None) is rules_engine
    assert gated(rules_engine, UNRESTRICTED) is rules_engine
    restricted = gated(rules_engine, Gate(("db1.%",), restricted=True))
    assert isinstance(restricted, Gated) and restricted.checks_annotations


def test_annotations_are_checked_only_under_a_restricting_gate():
    gate = Gate(("shop.%",), restricted=True)
    decider = Gated(engine(), gate)
    assert decider.annotation_kept("INSERT INTO shop.orders VALUES (1)", [("shop", "orders")])
    assert not decider.annotation_kept("INSERT INTO shop.orders SELECT * FROM secret.users", [("shop", "orders")])
    assert not engine().checks_annotations and engine().annotation_kept("anything", [])


def test_the_transaction_filter_takes_only_a_decider():
    class Duck:  # the shape the filter used to accept, answering with bools
        def table_kept(self, db, table):
            return True

        def decide_statement(self, sql, current_db):
            return True

    with pytest.raises(TypeError, match="Decider"):
        TransactionFilter(Duck())  # type: ignore[arg-type]
    assert isinstance(TransactionFilter(engine()).decider, Decider)


def test_a_decider_must_answer_with_decisions():
    class Half(Decider):
        def decide_table(self, db: str, table: str) -> Decision:
            return Decision(db == "db1", "db1 only")

    with pytest.raises(TypeError):
        Half()  # type: ignore[abstract]  # decide_statement is not optional
