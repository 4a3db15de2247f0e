"""The one keep table (rules/keep_table.py, issue #57): per table name and per statement key, each
asked of the decider once; a key by its bytes whatever scanner or segment met it; a restricting
gate ANDed in as the master sends; the statements a walk answered by key accounted; a buffer's keys
numbered once for every table that shares a numbering."""

from __future__ import annotations

from typing import NamedTuple

from dumpfilter import _core
from dumpfilter.codec.scanner import KEEP_DROP, KEEP_KEEP, KEEP_ASK
from dumpfilter.rules.decider import Decider, gated
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.gate import MASTER_POLICY, Gate
from dumpfilter.rules.keep_table import KeepTable, KeyShapes
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.ruleset import Settings


class Key(NamedTuple):  # the fields of a _core.StatementKey
    id: int
    key: bytes
    db: bytes
    sql: bytes


class Use(NamedTuple):  # the fields of a _core.KeyUse
    id: int
    statements: int


def engine(*options: str, settings: Settings | None = None) -> RuleEngine:
    pairs = [tuple(option.removeprefix("--").split("=", 1)) for option in options]
    return RuleEngine(StartupFilters.from_options(pairs).global_rules, settings)


class Counting(Decider):
    keys_statements = True

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []
        self.keys: list[tuple[str, str | None]] = []
        self.accounted: list[tuple[bool, int]] = []

    def decide_table(self, db: str, table: str) -> Decision:
        self.asked.append((db, table))
        return Decision(db == "db1", "db1 only")

    def decide_statement(self, sql: str, current_db: str | None) -> Decision:
        return Decision(current_db == "db1", "db1 only")

    def decide_statement_key(self, sql: str, current_db: str | None, parses: object = None) -> Decision:
        self.keys.append((sql, current_db))
        return self.decide_statement(sql, current_db)

    def account(self, decision: Decision, times: int) -> None:
        self.accounted.append((decision.apply, times))


def test_tables_are_asked_once_each_until_forgotten():
    decider = Counting()
    keeps = KeepTable(decider)
    names = [("db1", "a"), ("db2", "b")]
    assert keeps.tables(names) == bytes([KEEP_KEEP, KEEP_DROP])
    names.append(("db1", "c"))
    assert keeps.tables(names) == bytes([KEEP_KEEP, KEEP_DROP, KEEP_KEEP])
    assert keeps.tables(names) == bytes([KEEP_KEEP, KEEP_DROP, KEEP_KEEP])
    assert decider.asked == names
    keeps.forget_tables()
    assert keeps.tables(names) == bytes([KEEP_KEEP, KEEP_DROP, KEEP_KEEP])
    assert decider.asked == names + names


class Used(NamedTuple):  # the fields of a _core.KeysUsed
    uses: list[Use]
    units: int
    statements: int


def test_a_key_is_decided_once_by_its_bytes_across_id_spaces():
    decider = Counting()
    keeps = KeepTable(decider)
    assert keeps.keys_enabled
    rows = keeps.rows([Key(0, b"k-db1", b"db1", b"UPDATE t SET a=1"), Key(1, b"k-db2", b"db2", b"UPDATE t SET a=2")])
    assert rows.keep == bytes([KEEP_KEEP, KEEP_DROP]) and rows.gated is None
    assert decider.keys == [("UPDATE t SET a=1", "db1"), ("UPDATE t SET a=2", "db2")]
    keeps.account(rows, Used([Use(0, 5), Use(1, 3)], units=4, statements=8))  # type: ignore[arg-type]
    assert decider.accounted == [(True, 5), (False, 3)]
    assert (keeps.units, keeps.statements, keeps.keys_decided) == (4, 8, 2)
    # The next buffer's own id space (a scanner's next scan, a segment): the answers by bytes go on.
    rows = keeps.rows([Key(0, b"k-new", b"", b"UPDATE t SET a=3"), Key(1, b"k-db1", b"db1", b"x"),
                       Key(2, b"k-db2", b"db2", b"UPDATE t SET a=9")])
    assert rows.keep == bytes([KEEP_DROP, KEEP_KEEP, KEEP_DROP])
    assert rows.answer(1).decision.apply
    assert decider.keys[2:] == [("UPDATE t SET a=3", None)]  # an empty default database is none
    assert keeps.keys_decided == 3
    keeps.account(rows, Used([Use(2, 1)], units=1, statements=1))  # type: ignore[arg-type]
    assert decider.accounted[-1] == (False, 1) and (keeps.units, keeps.statements) == (5, 9)


def test_an_impure_key_goes_to_python():
    keeps = KeepTable(Counting(), decide_key=lambda sql, db: (Decision(True, "r"), False), keys_enabled=True)
    assert keeps.rows([Key(0, b"k", b"db1", b"UPDATE t SET a=1")]).keep == bytes([KEEP_ASK])


def test_a_restricting_gate_is_anded_with_the_rules_answer():
    rules = engine("--replicate-wild-do-table=%.%")
    keeps = KeepTable(gated(rules, Gate(("shop.%",), restricted=True)))
    assert keeps.keys_enabled == rules.keys_statements
    update = bytes([_core.KIND_UPDATE])  # a key's first byte: its kind
    rows = keeps.rows([Key(0, update + b"shop", b"shop", b"UPDATE t SET a=1"),
                       Key(1, update + b"crm", b"crm", b"UPDATE t SET a=1"),
                       Key(2, bytes([_core.KIND_INSERT_SELECT]) + b"shop", b"shop", b"INSERT INTO t SELECT * FROM u")])
    assert rows.keep == bytes([KEEP_KEEP, KEEP_DROP, KEEP_ASK])
    assert rows.gated == bytes([1, 0, 0])
    assert MASTER_POLICY in rows.answer(1).counted
    # Without a restriction the gate is no part of the answer.
    plain = KeepTable(gated(rules, Gate(("shop.%",), restricted=False)))
    assert plain.rows([Key(0, update + b"crm", b"crm", b"UPDATE t SET a=1")]).keep == bytes([KEEP_KEEP])


def test_tables_sharing_a_numbering_number_a_buffers_keys_once_and_answer_each_by_its_rules():
    shapes = KeyShapes()
    one = KeepTable(engine("--replicate-do-db=db1"), shapes=shapes)
    two = KeepTable(engine("--replicate-do-db=db2"), shapes=shapes)
    update = bytes([_core.KIND_UPDATE])
    keys = [Key(0, update + b"db1", b"db1", b"UPDATE t SET a=1"), Key(1, update + b"db2", b"db2", b"UPDATE t SET a=2")]
    first, second = one.rows(keys), two.rows(keys)  # type: ignore[arg-type]
    assert first.keep == bytes([KEEP_KEEP, KEEP_DROP]) and second.keep == bytes([KEEP_DROP, KEEP_KEEP])
    assert first.ids is second.ids  # the buffer's keys numbered once for both
    assert second.answer(1).decision.apply and not first.answer(1).decision.apply
    # The next segment: its own ids, a key met before (by its bytes) and a new one.
    keys = [Key(0, update + b"db3", b"db3", b"UPDATE t SET a=3"), Key(1, update + b"db1", b"db1", b"UPDATE t SET a=1")]
    assert two.rows(keys).keep == bytes([KEEP_DROP, KEEP_DROP])  # type: ignore[arg-type]
    assert one.rows(keys).keep == bytes([KEEP_DROP, KEEP_KEEP])  # type: ignore[arg-type]
    assert (one.keys_decided, two.keys_decided) == (3, 3) and len(shapes) == 3


PLAIN = {_core.KIND_INSERT: "INSERT INTO {t} (a) VALUES (1)", _core.KIND_REPLACE: "REPLACE INTO {t} (a) VALUES (1)",
         _core.KIND_UPDATE: "UPDATE {t} SET a=1 WHERE b=2", _core.KIND_DELETE: "DELETE FROM {t} WHERE b=2"}


def test_a_plain_kinds_twins_are_decided_once_as_the_engine_decides_each():
    """Keys that differ only in their plain DML kind (the same default database and updated table)
    take one decision: each is the one the engine gives that statement alone, under rules on
    databases, tables, patterns and rewrites, both semantics (the verb is read by neither)."""
    rule_sets = (["--replicate-do-db=db1"], ["--replicate-ignore-db=db1"], ["--replicate-ignore-table=db1.t"],
                 ["--replicate-wild-do-table=db2.%"], ["--replicate-do-table=db1.t", "--replicate-ignore-db=db2"],
                 ["--replicate-rewrite-db=db1->db2", "--replicate-do-db=db2"])
    decided = set()
    for options in rule_sets:
        for settings in (Settings(), Settings(semantics="effective")):
            for db, table in (("db1", "t"), ("db1", "db2.t"), ("db2", "t"), ("db2", "db1.u")):
                keeps = KeepTable(engine(*options, settings=settings))
                tail = f"|{db}|{table}".encode()
                keys = [Key(k, bytes([kind]) + tail, db.encode(), text.format(t=table).encode())
                        for k, (kind, text) in enumerate(PLAIN.items())]
                select = Key(4, bytes([_core.KIND_INSERT_SELECT]) + tail, db.encode(),
                             f"INSERT INTO {table} (a) SELECT a FROM v".encode())
                rows = keeps.rows([*keys, select])  # type: ignore[list-item]
                assert keeps.keys_decided == 2  # the twins once, the INSERT ... SELECT on its own
                for k, text in enumerate(PLAIN.values()):
                    alone = engine(*options, settings=settings).decide_statement_key(text.format(t=table), db)
                    assert rows.answer(k).decision == alone, (options, settings, db, table, text)
                    decided.add(alone.apply)
    assert decided == {True, False}


def test_rules_on_databases_alone_decide_a_key_once_per_default_database():
    """Under database rules alone rpl_filter.cc reads a keyed statement's default database (db_ok),
    never its table, even `INSERT INTO other_db.t`: a keep table asks such rules once per default
    database, and each key's answer counts as the engine's for that statement alone. Rules with a
    table rule are asked once per default database, kind and table answer."""
    texts = ("UPDATE t SET a=1", "INSERT INTO u1 (a) VALUES (1)", "DELETE FROM db2.t WHERE a=1",
             "INSERT INTO db1.u2 (a) SELECT a FROM v")
    kinds = (_core.KIND_UPDATE, _core.KIND_INSERT, _core.KIND_DELETE, _core.KIND_INSERT_SELECT)
    rule_sets = ((["--replicate-do-db=db1"], True), (["--replicate-ignore-db=db2"], True),
                 (["--replicate-rewrite-db=db1->db2", "--replicate-do-db=db2"], True),
                 (["--replicate-wild-ignore-table=db1.u%"], False), (["--replicate-do-db=db1"], False))
    for n, (options, per_database) in enumerate(rule_sets):
        settings = Settings(semantics="effective") if n == len(rule_sets) - 1 else Settings()
        rules = engine(*options, settings=settings)
        assert rules.databases_only == per_database
        asked: list[tuple[str, str | None]] = []

        def decide(sql: str, db: str | None, rules: RuleEngine = rules,
                   asked: list[tuple[str, str | None]] = asked) -> tuple[Decision, bool]:
            asked.append((sql, db))
            return rules.decide_statement_key(sql, db), True

        keeps = KeepTable(rules, decide_key=decide)
        keys = [Key(k, bytes([kind]) + f"|{db}|{k}".encode(), db.encode(), text.encode())
                for k, (db, (kind, text)) in enumerate((db, pair) for db in ("db1", "db2", "")
                                                       for pair in zip(kinds, texts))]
        rows = keeps.rows(keys)  # type: ignore[arg-type]
        # (wild-ignore: db1.u1's INSERT and db1.u2's INSERT ... SELECT read the same, its answer,
        # each other key its own; WL#2516 decides each key alone)
        effective = settings.semantics == "effective"
        assert len(asked) == (3 if per_database else len(keys) if effective else len(keys) - 1), options
        for k, key in enumerate(keys):
            alone = engine(*options, settings=settings).decide_statement_key(key.sql.decode(), key.db.decode() or None)
            got = rows.answer(k)
            assert (got.decision.apply, got.counted, got.decision.assumption) == \
                (alone.apply, alone.counted, alone.assumption), (options, key)
            assert rows.keep[k] == (KEEP_KEEP if alone.apply else KEEP_DROP)


def test_rules_with_table_rules_decide_once_per_default_database_kind_and_table_answer():
    """With table rules rpl_filter.cc reads of a keyed statement its default database (db_ok,
    rewrite) and the answer of the table it updates (tables_ok: its verdict and rule, not the table
    it names): a keep table asks the rules once for keys that read the same (a pass's table-rule
    groups decided each of 288 key shapes alone, issue #80 goal 4), and every key's answer counts as
    the engine's for that statement alone."""
    tables = ("x1", "x2", "y1", "y2", "z")
    # Asked per default database once for the tables no rule names, once per answer a rule gives:
    # db1 (x1 and x2, the rest), db2, none; db1 (x1, the rest), db2, none; db1 (y1, the rest), db2
    # rewritten to db1 (y1, the rest), none.
    for options, decisions in ((["--replicate-wild-do-table=db1.x%"], 4),
                               (["--replicate-do-table=db1.x1", "--replicate-do-db=db1"], 4),
                               (["--replicate-rewrite-db=db2->db1", "--replicate-ignore-table=db1.y1"], 5)):
        rules = engine(*options)
        asked: list[tuple[str, str | None]] = []

        def decide(sql: str, db: str | None, rules: RuleEngine = rules,
                   asked: list[tuple[str, str | None]] = asked) -> tuple[Decision, bool]:
            asked.append((sql, db))
            return rules.decide_statement_key(sql, db), True

        keeps = KeepTable(rules, decide_key=decide)
        keys = [Key(k, bytes([_core.KIND_UPDATE]) + f"|{db}|{table}".encode(), db.encode(),
                    f"UPDATE {table} SET a=1".encode())
                for k, (db, table) in enumerate((db, table) for db in ("db1", "db2", "") for table in tables)]
        rows = keeps.rows(keys)  # type: ignore[arg-type]
        assert len(asked) == decisions, options
        for k, key in enumerate(keys):
            alone = engine(*options).decide_statement_key(key.sql.decode(), key.db.decode() or None)
            got = rows.answer(k)
            assert (got.decision.apply, got.counted, got.decision.assumption) == \
                (alone.apply, alone.counted, alone.assumption), (options, key)
            assert rows.keep[k] == (KEEP_KEEP if alone.apply else KEEP_DROP)
