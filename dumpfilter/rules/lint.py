"""Replica breakage prediction (`dumpfilter lint`): replays a binlog twice through the schema model, as
the primary saw it (everything applied) and as a replica with these rules sees it (only what the rule
engine keeps, rewrite-db applied to the default database), and reports each kept statement or row event
that needs an object the replica lacks, with the skipped event that caused the difference.

Pure: it takes Transactions (dumpfilter.codec's grouping of the compiled scanner's events) and a RuleEngine,
never paths or the CLI. Where the model cannot tell (a table created before the binlog and no --schema),
the object is taken to exist on both sides: it was seeded outside replication.

What the server does, and this module follows:
- Unknown database, CREATE TABLE in it: 1049; any statement opening a table that is not there (base or
  temporary, or in a missing database): 1146 (sql_base.cc open_tables).
- INSERT without a column list: the primary ran it, so it carries one value per primary column; a replica
  table with another column count raises 1136 (ER_WRONG_VALUE_COUNT_ON_ROW). A column list or SET naming
  a column the replica lacks: 1054.
- Row events carry their own column count and the replica converts (rpl_utility.cc
  table_def::compatible_with): a replica table with fewer or more columns is tolerated, only a missing
  table breaks (1146).
- Temporary tables live per session: the replica's applier keeps them per master thread id
  (pseudo_thread_id), so a kept statement reading a temporary table whose CREATE was skipped fails 1146.
- MariaDB's slave_ddl_exec_mode=IDEMPOTENT (its default): CREATE TABLE runs as CREATE OR REPLACE and
  DROP TABLE as DROP TABLE IF EXISTS, so neither stops the replica; MySQL raises 1050/1051.
  CREATE/DROP DATABASE are outside that mode: 1007/1008 are predicted for both flavors (unverified on a
  real server: DATABASE statements are judged by their own name, so static rules keep or skip both).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from dumpfilter.codec import Event, EventType, Transaction
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.errors import MalformedEventError
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.renamer import applied_db
from dumpfilter.rules.lcase import folded_info, folded_ref, folded_schema
from dumpfilter.rules.lint_divergence import Breaks, Divergence
from dumpfilter.rules.lint_records import Break as Break, Cause as Cause, Verdict  # (Break, Cause: importers name this module)
from dumpfilter.rules.lint_server import ReplicaServer, Side
from dumpfilter.rules.lint_sql import if_not_exists
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.statement_info import TABLE_DDL_KINDS, Kind, StatementInfo
from dumpfilter.rules.statements import statement_tables
from dumpfilter.rules.transaction_filter import decided_events

TableRef = tuple[str, str]

# A statement of a transaction the replica already stopped in: never applied there.
_NOT_APPLIED = Decision(False, "the replica stopped earlier in this transaction")


class Linter(ReplicaServer):
    """Feed it (file name, Transaction) in binlog order; `breaks` collects the predictions.

    `schema` is the master's schema before the binlog; `replica_schema` the replica's, when it differs
    (a database or table it created outside replication); without it the replica starts as the master
    did (seeded outside replication). With `schema_complete` (a --schema was given) or a
    `replica_schema`, an object the replica's starting schema lacks is absent, not assumed."""

    def __init__(self, engine: RuleEngine, schema: SchemaModel | None = None, *, flavor: str = "mysql",
                 schema_complete: bool = False, replica_schema: SchemaModel | None = None):
        self.engine = engine
        self.flavor = flavor
        self.idempotent_ddl = flavor == "mariadb"
        self.schema_complete = schema_complete or replica_schema is not None
        start = schema if schema is not None else SchemaModel()
        self.primary = Side(start.copy())
        # A replica that lower-cases the names it is sent (BUG#37656, rpl_row/stm_lcase_tblnames) holds
        # and opens every database and table lower-cased: its side of the replay is kept so.
        self.fold = engine.names.lower_incoming
        replica_start = replica_schema if replica_schema is not None else start
        self.replica = Side(folded_schema(replica_start) if self.fold else replica_start.copy())
        self._start = ("--replica-schema", "the replica's starting schema") if replica_schema is not None \
            else ("--schema", "the starting schema")
        # Objects the replica lacks (replica names) and the skipped event that made it so.
        self.absent_dbs: dict[str, Cause | None] = {}
        self.absent_tables: dict[TableRef, Cause | None] = {}
        # Objects the replica still has but the primary dropped (a skipped DROP/RENAME).
        self.extra_dbs: dict[str, Cause | None] = {}
        self.extra_tables: dict[TableRef, Cause | None] = {}
        # Tables whose shape differs: a skipped ALTER (replica names).
        self.shape_causes: dict[TableRef, Cause | None] = {}
        # Columns the primary gained over the replica through skipped ALTERs (None: not followed): with it
        # a 1136 is predicted even when neither column list is known (a table seeded before the binlog).
        self.column_delta: dict[TableRef, int | None] = {}
        # Temporary tables whose CREATE the replica skipped: (master thread id, db, table) -> cause.
        self.temp_causes: dict[tuple[int, str, str], Cause | None] = {}
        self.breaks = Breaks(Divergence(engine.rules))  # and the writes that silently diverge
        # What the statements fed since a caller set a set() here may have changed: the table names
        # (lower case) whose presence, shape or triggers they touched; None once one may have
        # changed more (a database, a temporary table, a statement not parsed). `binlogs.lint_scan`
        # asks again only these tables' safety after a DDL unit, not every name's. None: not kept.
        self.touched: set[str] | None = None

    # ------------------------------------------------------------------ the stream
    def feed(self, file: str, txn: Transaction) -> None:
        if txn.kind == CONTROL:
            if txn.events[0].type_code == EventType.FORMAT_DESCRIPTION:
                self.engine.invalidate()  # table ids and per-table caches start again with the server
            return
        failed = False
        try:
            for event, outer in decided_events(txn):  # (a rows event goes with its Table_map)
                if event.is_query:
                    decision = self.engine.decide_statement(event.sql or "", event.db)
                    if failed:
                        # The replica stopped at an earlier statement of this transaction: the rest of it is
                        # rolled back with it (as if skipped, for the same cause); the primary ran it.
                        self._statement(file, txn, event, outer, _NOT_APPLIED, self.breaks.last_cause)
                        continue
                    failed = self._statement(file, txn, event, outer, decision)
                else:
                    _, db, table = event.table_map
                    if self.engine.decide_table(db, table).apply and not failed:
                        failed = self._table_map(file, txn, outer, db, table)
        except MalformedEventError as exc:  # a rows event without a Table_map: refused, as the replica refuses it
            raise exc.in_file(file) from None

    def _replica_db(self, db: str) -> str:
        """The default database the replica's applier uses: rewrite-db applies to it, never to qualified
        names inside the statement text (rpl_filter.cc get_rewrite_db on the event's db)."""
        if not db:
            return db
        if self.engine.settings.semantics == "effective":
            return self.engine.effective_rename(db, "")[0]
        return applied_db(self.engine, db)[0]  # folded under lower_case_table_names first (BUG#37656)

    def _replica_table(self, db: str, table: str) -> TableRef:
        if self.engine.settings.semantics == "effective":
            new_db, new_table, _ = self.engine.effective_rename(db, table)
            return self.replica_ref((new_db, new_table))
        return self.replica_ref((applied_db(self.engine, db)[0], table))

    def replica_ref(self, ref: TableRef) -> TableRef:
        """A table as the replica names it: lower-cased when it folds names (`fold`)."""
        return folded_ref(ref) if self.fold else ref

    # ------------------------------------------------------------------ a Query event
    def _statement(self, file: str, txn: Transaction, event: Event, outer: Event, decision: Decision,
                   inherited: Cause | None = None) -> bool:
        sql = event.sql or ""
        db = event.db or ""
        thread = event.query.thread_id
        return self.act(self._read(sql, db, decision, thread), file, txn.start_pos, txn.gtid, outer.pos, sql, db,
                        thread, inherited)

    def _read(self, sql: str, db: str, decision: Decision, thread: int) -> Verdict:
        """What the Linter reads of a Query (text `sql`, default database `db`) before it acts on it."""
        replica_db = self._replica_db(db)
        primary_info = statement_tables(sql, db)
        replica_info = statement_tables(sql, replica_db) if replica_db != db else primary_info
        replica_info = folded_info(replica_info) if self.fold else replica_info
        problem = self.check(sql, primary_info, replica_info, thread) if decision.apply else None
        return Verdict(decision, replica_db, primary_info, replica_info, problem)

    def key_verdict(self, db: str, sql: str) -> Verdict | None:
        """The verdict of every statement of a keyed DML statement's key (`_core.StatementKey`: its
        kind, default database and one table, none read), read off one of them (`sql` under default
        database `db`) with the state as it is, for `act`, while the state holds (no DDL fed since).
        None where statements of one key may be read otherwise: rules that do not decide statements
        by key, a temporary table of some session (it may shadow the key's table), a text that is not a
        single-table write, an INSERT/REPLACE into a present table whose column count only skipped
        ALTERs tell, a stored function either side knows (a text of the key may call it), an INSERT
        into a table with UPDATE triggers (a text may be an upsert). A kept INSERT/REPLACE into a
        present table whose columns the replica's model holds has its `columns`: `_insert_shape`
        holds each statement's column list or count to them. The
        statements it answers change no state, applied or not (`_skipped`, `_kept` and the models act
        on DDL only): a unit's statements after its break leave nothing."""
        if not self.engine.keys_statements or self.primary.temps or self.replica.temps or self.calls_functions:
            return None
        decision = self.engine.decide_statement_key(sql, db)
        verdict = self._read(sql, db, decision, 0)
        for info in (verdict.primary, verdict.replica):
            if info.kind not in _KEYED or not info.parse_ok or info.temporary or info.read or len(info.updated) != 1:
                return None
        ref = verdict.replica.updated[0]
        if decision.apply and verdict.primary.kind in (Kind.INSERT, Kind.REPLACE) and self._shape_known(ref):
            replica_columns = self.replica.model.columns(*ref)
            if replica_columns is None or not self._table_state(ref)[0]:
                return None
            # Without a list the primary's column count is the values' (unknown: the Linter counts them).
            primary_columns = self.primary.model.columns(*verdict.primary.updated[0])
            verdict = dataclasses.replace(verdict, problem=None, columns=(
                replica_columns, primary_columns is not None and len(primary_columns) == len(replica_columns)))
        if verdict.primary.kind is Kind.INSERT and any(
                side.model.triggers and side.model.triggers_on(info.updated[0], "UPDATE")
                for side, info in ((self.primary, verdict.primary), (self.replica, verdict.replica))):
            return None  # a text of the key may be INSERT ... ON DUPLICATE KEY UPDATE: its UPDATE triggers fire
        counted = Divergence(self.engine.rules)  # whether `note` counts its statements: asked of `note`
        counted.note(self, "", None, 0, sql, db, verdict.primary, decision, 0, verdict.replica)
        return dataclasses.replace(verdict, notes=bool(counted.groups))

    @property
    def calls_functions(self) -> bool:
        """Either side knows a stored function: one statement of a key may call it, another not."""
        return bool(self.primary.model.functions or self.replica.model.functions)

    def act(self, verdict: Verdict, file: str, start_pos: int, gtid: str | None, pos: int, sql: str, db: str,
            thread: int, inherited: Cause | None = None) -> bool:
        """What the Linter does with a Query it read (`verdict`, of text `sql` under default database
        `db`, by master thread `thread`), at `pos` of the transaction at `start_pos` of `file`:
        `feed`'s for each Query, and for a statement of a key answered by `key_verdict`. Returns
        whether the replica stops there."""
        decision, primary_info, replica_info = verdict.decision, verdict.primary, verdict.replica
        if self.touched is not None:
            self._touch(sql, primary_info, replica_info)
        if not decision.apply:
            cause = inherited if decision is _NOT_APPLIED else \
                Cause(file, pos, decision.rule or "rule", f"skipped, {decision.reason}")
            self._skipped(sql, primary_info, replica_info, thread, cause)
            self._observe(self.primary, sql, db, primary_info, thread)
            if decision is not _NOT_APPLIED:
                self.breaks.divergence.note(self, file, gtid, pos, sql, db, primary_info, decision, thread)
            return False
        if verdict.problem is not None:
            errno, message, cause = verdict.problem
            self.breaks.add(Break(file, start_pos, gtid, errno, message, cause, pos, sql))
            # The statement never ran on the replica: what it would have created is missing from now on,
            # for the same cause.
            self._skipped(sql, primary_info, replica_info, thread, cause)
            self._observe(self.primary, sql, db, primary_info, thread)
            return True
        self._kept(sql, replica_info)
        self.breaks.divergence.note(self, file, gtid, pos, sql, db, primary_info, decision, thread, replica_info)
        if primary_info.kind is Kind.CREATE_TABLE and not primary_info.temporary and primary_info.updated \
                and replica_info.updated and primary_info.updated[0] != replica_info.updated[0] \
                and not self.replica.model.knows(*primary_info.updated[0]):
            # rewrite-db made the table under another name: a later statement naming the master's
            # database explicitly (rewrite never touches qualified names) finds nothing there.
            new = replica_info.updated[0]
            rule = "REWRITE" if self.engine.settings.semantics == "effective" and self.engine.rules.effective_rewrite \
                else "replicate-rewrite-db"  # as the rule was written: WL#2516 REWRITE= or the mysqld option
            self.absent_tables.setdefault(primary_info.updated[0], Cause(
                file, pos, rule, f"{rule}: created as '{new[0]}.{new[1]}' on the replica"))
        self._observe(self.primary, sql, db, primary_info, thread)
        self._observe(self.replica, sql, verdict.replica_db, replica_info, thread)
        return False

    def _touch(self, sql: str, *infos: StatementInfo) -> None:
        """The tables a statement may change the state of, into `touched` (see __init__)."""
        touched = self.touched
        if touched is None:
            return
        for info in infos:
            if info.kind in _STATELESS and info.parse_ok and not info.temporary:
                continue
            if info.kind not in TABLE_DDL_KINDS or not info.parse_ok or info.temporary or not info.updated or (
                    info.kind is Kind.ALTER_TABLE and "rename" in sql.lower()):
                # A database, a temporary table, a routine, a text not parsed, a DROP TRIGGER (its
                # table is the model's to know), an ALTER TABLE ... RENAME (the new name is not in
                # `updated`): anything may have changed.
                self.touched = None
                return
            for db, table in info.updated:  # (a RENAME TABLE's `updated` holds both names of each pair)
                if self.schema_complete and not (db in self.replica.model.databases and db in self.primary.model.databases):
                    self.touched = None  # the first table of a database the schema lacks makes the database present
                    return
                touched.add(table.lower())

    def _observe(self, side: Side, sql: str, db: str, info: StatementInfo, thread: int) -> None:
        if info.kind is Kind.CREATE_TABLE and info.temporary and info.updated:
            ref = info.updated[0]
            side.temps.add((thread, ref[0], ref[1]))
        elif info.kind is Kind.DROP_TABLE:
            for ref in info.updated:
                side.temps.discard((thread, ref[0], ref[1]))
        if not (info.kind is Kind.DROP_TABLE and info.temporary):
            side.model.observe(sql, db, info)

    def _skipped(self, sql: str, primary_info: StatementInfo, info: StatementInfo, thread: int,
                 cause: Cause | None) -> None:
        """A statement the primary ran and the replica does not: what it creates is absent there, what it
        drops stays there, what it alters keeps its old shape."""
        kind = info.kind
        if kind is Kind.CREATE_DB and info.db_statement_name:
            name = info.db_statement_name
            if self._replica_holds_db(name):
                # The replica has it (its own starting schema, a DROP it skipped): the skipped statement
                # changes nothing there, and the primary has it now too.
                self.extra_dbs.pop(name, None)
                return
            self.absent_dbs.setdefault(name, cause)
            self.extra_dbs.pop(name, None)
        elif kind is Kind.DROP_DB and info.db_statement_name:
            if self.absent_dbs.pop(info.db_statement_name, _NONE) is _NONE:  # else: gone on both sides
                self.extra_dbs[info.db_statement_name] = cause
        elif kind in (Kind.CREATE_TABLE, Kind.CREATE_VIEW) and info.updated:
            ref = info.updated[0]
            if info.temporary:
                primary_ref = primary_info.updated[0]
                self.temp_causes[(thread, primary_ref[0], primary_ref[1])] = cause
                return
            if self._replica_holds_table(ref):
                self.extra_tables.pop(ref, None)  # the replica has it: the skipped statement changes nothing there
                return
            self.absent_tables.setdefault(ref, cause)
            self.extra_tables.pop(ref, None)
        elif kind in (Kind.DROP_TABLE, Kind.DROP_VIEW):
            for primary_ref, ref in zip(primary_info.updated, info.updated):
                if not (info.temporary or self._is_temp(thread, primary_ref)) and \
                        self.absent_tables.pop(ref, _NONE) is _NONE:
                    self.extra_tables[ref] = cause
        elif kind is Kind.RENAME_TABLE:
            before, after = _rename_net(info.renames)
            for ref in before - after:  # gone on the primary, still on the replica
                if self.absent_tables.pop(ref, _NONE) is _NONE:
                    self.extra_tables[ref] = cause
            for ref in after - before:  # made on the primary only
                if self.extra_tables.pop(ref, _NONE) is _NONE:
                    self.absent_tables.setdefault(ref, cause)
        elif kind is Kind.ALTER_TABLE and info.updated:
            ref = info.updated[0]
            self.shape_causes.setdefault(ref, cause)
            changes = info.column_changes  # columns added less those dropped
            delta = None if changes is None else sum((new is not None) - (old is not None) for old, new in changes)
            known = self.column_delta.get(ref, 0)
            self.column_delta[ref] = None if delta is None or known is None else known + delta

    def _kept(self, sql: str, info: StatementInfo) -> None:
        """A statement the replica applies: what it creates exists there now."""
        kind = info.kind
        if kind is Kind.CREATE_DB and info.db_statement_name:
            self.absent_dbs.pop(info.db_statement_name, None)
        elif kind is Kind.DROP_DB and info.db_statement_name:
            name = info.db_statement_name
            self.extra_dbs.pop(name, None)
            for records in (self.absent_tables, self.extra_tables):  # its tables' records go with it
                for ref in [r for r in records if r[0] == name]:
                    del records[ref]
        elif kind in (Kind.CREATE_TABLE, Kind.CREATE_VIEW) and info.updated and not info.temporary:
            ref = info.updated[0]
            self.absent_tables.pop(ref, None)
            if not if_not_exists(sql):
                self.extra_tables.pop(ref, None)
                self.shape_causes.pop(ref, None)  # CREATE (OR REPLACE) gives it the primary's shape
                self.column_delta.pop(ref, None)
        elif kind in (Kind.DROP_TABLE, Kind.DROP_VIEW):
            for ref in info.updated:
                self.extra_tables.pop(ref, None)
                self.shape_causes.pop(ref, None)
                self.column_delta.pop(ref, None)
        elif kind is Kind.RENAME_TABLE:
            before, after = _rename_net(info.renames)
            for ref in after - before:
                self.absent_tables.pop(ref, None)
            for ref in before - after:
                self.extra_tables.pop(ref, None)
            if len(info.renames) == 1:
                old, new = info.renames[0]
                if old in self.shape_causes:
                    self.shape_causes[new] = self.shape_causes.pop(old)
                if old in self.column_delta:
                    self.column_delta[new] = self.column_delta.pop(old)

    def _table_map(self, file: str, txn: Transaction, at: Event, db: str, table: str) -> bool:
        """A kept Table_map at `at` (the event holding its position: its Transaction_payload, for one inside
        a compressed transaction, as mysqlbinlog and SHOW BINLOG EVENTS name it)."""
        ref = self._replica_table(db, table)
        present, cause = self._table_state(ref)
        if present:
            return False  # row events carry their own column count: another shape is converted, not refused
        self.breaks.add(Break(file, txn.start_pos, txn.gtid, 1146,
                              f"Table '{ref[0]}.{ref[1]}' doesn't exist", cause, at.pos,
                              f"rows of {db}.{table}"))
        return True


# Statements that change none of the Linter's state (its models and absent/extra records act on
# DDL); TABLE_DDL_KINDS' changes stay with the tables they name (`Linter._touch`).
_STATELESS = frozenset({Kind.INSERT, Kind.REPLACE, Kind.UPDATE, Kind.UPDATE_MULTI, Kind.DELETE, Kind.DELETE_MULTI,
                        Kind.LOAD_DATA, Kind.TABLE_MAINTENANCE, Kind.ACCOUNT, Kind.SET, Kind.TRANSACTION})
_NONE = object()  # dict.pop's default: a record whose value (a Cause) may be None was not there
_KEYED = frozenset({Kind.INSERT, Kind.REPLACE, Kind.UPDATE, Kind.DELETE})  # the kinds `key_verdict` answers


def _rename_net(renames: Iterable[tuple[TableRef, TableRef]]) -> tuple[set[TableRef], set[TableRef]]:
    """RENAME TABLE's pairs run in order: (the names it needs before, the names that exist after)."""
    before: set[TableRef] = set()
    alive: set[TableRef] = set()
    for old, new in renames:
        if old in alive:
            alive.discard(old)
        else:
            before.add(old)
        alive.add(new)
    return before, alive
