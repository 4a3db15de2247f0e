"""What a replica's server says to a statement, given what the replica holds: whether a database or
table is there (and which skipped event made it absent), and the error a kept statement stops the
replica with (`ReplicaServer.check`: 1007/1008, 1049, 1050/1051, 1146, 1054, 1136, for views
1050 and MariaDB's 4092, for routines and events in a database the replica lacks 1049, 1305, 1539). `rules.lint`'s Linter keeps that state as it replays a binlog; this is the
server's side of each question it asks.

Views, as a real MariaDB 10.11 replica answers (tests/rules/test_lint_real_replica.py):
- a view is a table to the statements that name it: an INSERT through a view whose CREATE VIEW was
  skipped fails 1146; a kept CREATE VIEW reading a table the replica lacks fails 1146 too;
- slave_ddl_exec_mode=IDEMPOTENT does not reach views: a kept CREATE VIEW of a view a skipped DROP
  VIEW left fails 1050, a kept DROP VIEW of a view never created fails 4092 (ER_UNKNOWN_VIEW;
  MySQL's is 1051, mysql-test rpl_drop_view).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from dumpfilter.codec.transactions import statement_verb
from dumpfilter.rules.lazy_pattern import LazyPattern
from dumpfilter.rules.lint_records import Cause
from dumpfilter.rules.lint_sql import first_row_values, if_not_exists, insert_column_list
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.rules.statement_info import Kind, StatementInfo

TableRef = tuple[str, str]
_OR_REPLACE = LazyPattern(r"\s*CREATE\s+OR\s+REPLACE\b", re.IGNORECASE)
_IF_EXISTS = LazyPattern(r"\A\s*DROP\s+(?:\w+\s+){1,2}IF\s+EXISTS\b", re.IGNORECASE)
_ROUTINES = frozenset({"PROCEDURE", "FUNCTION", "EVENT", "PACKAGE"})  # objects that live in a database
Problem = tuple[int, str, Cause | None]  # errno, the server's message, the skipped event behind it


@dataclass
class Side:
    """One server's objects: the schema model (tables, columns) plus what the model cannot hold."""

    model: SchemaModel
    temps: set[tuple[int, str, str]] = field(default_factory=set)  # (master thread id, db, table)


class ReplicaServer:
    """The Linter's state of the replica's objects, and the server's checks over it (a mixin: Linter
    sets every attribute below in its __init__)."""

    flavor: str
    idempotent_ddl: bool
    schema_complete: bool
    primary: Side
    replica: Side
    _start: tuple[str, str]
    absent_dbs: dict[str, Cause | None]
    absent_tables: dict[TableRef, Cause | None]
    extra_dbs: dict[str, Cause | None]
    extra_tables: dict[TableRef, Cause | None]
    shape_causes: dict[TableRef, Cause | None]
    column_delta: dict[TableRef, int | None]
    temp_causes: dict[tuple[int, str, str], Cause | None]

    # ------------------------------------------------------------------ presence on the replica
    def _db_state(self, db: str) -> tuple[bool, Cause | None]:
        if db in self.absent_dbs:
            return False, self.absent_dbs[db]
        if db in self.replica.model.databases:
            return True, None
        if self.schema_complete and not any(key[0] == db for key in self.replica.model._columns):
            return False, self._start_cause(f"database '{db}' is not in")
        return True, None

    def _start_cause(self, what: str) -> Cause:
        return Cause(None, None, self._start[0], f"{what} {self._start[1]}")

    def _replica_holds_db(self, db: str) -> bool:
        """The replica's model holds the database (its starting schema, or statements it applied)."""
        return db not in self.absent_dbs and _holds_db(self.replica.model, db)

    def _replica_holds_table(self, ref: TableRef) -> bool:
        return ref not in self.absent_tables and self._replica_holds_db(ref[0]) and self.replica.model.knows(*ref)

    def _table_state(self, ref: TableRef) -> tuple[bool, Cause | None]:
        db_ok, db_cause = self._db_state(ref[0])
        if not db_ok:
            return False, db_cause
        if ref in self.absent_tables:
            return False, self.absent_tables[ref]
        if self.replica.model.knows(*ref):
            return True, None
        if self.schema_complete:
            return False, self._start_cause(f"table '{ref[0]}.{ref[1]}' is not in")
        return True, None

    def _is_temp(self, thread: int, ref: TableRef) -> bool:
        return (thread, ref[0], ref[1]) in self.primary.temps

    def _shadowed(self, thread: int, primary_ref: TableRef, ref: TableRef) -> bool:
        """The primary's session `thread` used its temporary table `primary_ref`, which the replica's
        never created (its CREATE TEMPORARY TABLE skipped), and the replica holds a base table of that
        name (`ref`, known to it): there the statement opens the base table, no 1146, as a real MariaDB
        10.11 replica does (a temporary table shadows a base table in its own session only)."""
        return self._is_temp(thread, primary_ref) and (thread, ref[0], ref[1]) not in self.replica.temps \
            and self._replica_holds_table(ref)

    # ------------------------------------------------------------------ the server's checks
    def check(self, sql: str, primary_info: StatementInfo, info: StatementInfo,
               thread: int) -> Problem | None:
        kind = info.kind
        if not info.parse_ok:
            return None
        if kind is Kind.CREATE_DB and info.db_statement_name:
            name = info.db_statement_name
            # The primary ran it: had the replica the database where the primary had none (its own
            # starting schema, a DROP it skipped), the replica stops.
            if self._replica_holds_db(name) and not if_not_exists(sql) and (
                    name in self.extra_dbs or not _holds_db(self.primary.model, primary_info.db_statement_name or name)):
                return 1007, f"Can't create database '{name}'; database exists", \
                    self.extra_dbs.get(name) or self._start_cause(f"database '{name}' is in")
            return None
        if kind is Kind.DROP_DB and info.db_statement_name:
            name = info.db_statement_name
            present, cause = self._db_state(name)
            if not present and not info.if_exists:
                return 1008, f"Can't drop database '{name}'; database doesn't exist", cause
            return None
        if kind is Kind.ROUTINE:
            return self._routine(sql, info)
        if kind in (Kind.ALTER_DB, Kind.SET, Kind.TRANSACTION, Kind.ACCOUNT, Kind.OTHER):
            return None
        pairs = list(zip(primary_info.updated, info.updated))
        reads = list(zip(primary_info.read, info.read))
        if kind is Kind.CREATE_TABLE and info.updated:
            ref = info.updated[0]
            if not info.temporary:
                db_ok, cause = self._db_state(ref[0])
                if not db_ok:
                    return 1049, f"Unknown database '{ref[0]}'", cause
                if self._replica_holds_table(ref) and not if_not_exists(sql) and not self.idempotent_ddl and (
                        ref in self.extra_tables or not self.primary.model.knows(*primary_info.updated[0])):
                    return 1050, f"Table '{ref[1]}' already exists", \
                        self.extra_tables.get(ref) or self._start_cause(f"table '{ref[0]}.{ref[1]}' is in")
            return self._need_tables(reads, thread)
        if kind is Kind.CREATE_VIEW and info.updated:
            return self._view(sql, primary_info.updated[0], info.updated[0], reads, thread)
        if kind in (Kind.DROP_TABLE, Kind.DROP_VIEW):
            if info.if_exists or (self.idempotent_ddl and kind is Kind.DROP_TABLE) or info.temporary:
                return None
            missing = []
            cause = None
            for primary_ref, ref in pairs:
                if self._is_temp(thread, primary_ref):
                    continue
                present, why = self._table_state(ref)
                if not present:
                    missing.append(f"{ref[0]}.{ref[1]}")
                    cause = cause or why
            if missing and kind is Kind.DROP_VIEW and self.flavor == "mariadb":
                return 4092, f"Unknown VIEW: '{','.join(missing)}'", cause
            if missing:
                return 1051, f"Unknown table '{','.join(missing)}'", cause
            return None
        if kind is Kind.RENAME_TABLE:
            # The pairs run in order (RENAME TABLE a TO tmp, b TO a, tmp TO b swaps two tables).
            overlay: dict[TableRef, bool] = {}
            for old, new in info.renames:
                present, cause = (overlay[old], None) if old in overlay else self._table_state(old)
                if not present:
                    return 1146, f"Table '{old[0]}.{old[1]}' doesn't exist", cause
                if overlay.get(new) or (new not in overlay and new in self.extra_tables):
                    return 1050, f"Table '{new[1]}' already exists", self.extra_tables.get(new)
                overlay[old], overlay[new] = False, True
            return None
        if kind is Kind.CREATE_TRIGGER:
            return self._need_tables(pairs, thread)  # the trigger's table
        if kind is Kind.DROP_TRIGGER:
            return None  # DROP TRIGGER of a trigger this replica never created is skipped by the filter
        problem = self._need_tables(pairs + reads, thread)
        if problem is not None:
            return problem
        if kind in (Kind.INSERT, Kind.REPLACE) and pairs:
            return self._insert_shape(sql, pairs[0], thread)
        return None

    def _routine(self, sql: str, info: StatementInfo) -> Problem | None:
        """CREATE/ALTER/DROP of a procedure, function, package or event: it lives in a database (its
        qualifier, else the default one), which a replica that never got that database lacks. As a real
        MariaDB 10.11 replica answers: CREATE [OR REPLACE | ... IF NOT EXISTS] and ALTER EVENT 1049,
        ALTER/DROP PROCEDURE or FUNCTION 1305, DROP EVENT 1539, DROP ... IF EXISTS nothing (MySQL's
        numbers are the same errors': ER_BAD_DB_ERROR, ER_SP_DOES_NOT_EXIST, ER_EVENT_DOES_NOT_EXIST).
        CALL is not judged here (under STATEMENT its body's statements are logged)."""
        target = info.target
        if target is None or target[0] not in _ROUTINES or not target[1]:
            return None
        obj, db, name = target
        verb = statement_verb(sql)
        if verb not in ("CREATE", "ALTER", "DROP"):
            return None
        present, cause = self._db_state(db)
        if present:
            return None
        if verb == "CREATE" or (verb == "ALTER" and obj == "EVENT"):
            return 1049, f"Unknown database '{db}'", cause
        if verb == "DROP" and _IF_EXISTS.search(sql):
            return None
        if obj == "EVENT":
            return 1539, f"Unknown event '{name}'", cause
        return 1305, f"{obj} {db}.{name} does not exist", cause

    def _view(self, sql: str, primary_ref: TableRef, ref: TableRef, reads: list[tuple[TableRef, TableRef]],
              thread: int) -> Problem | None:
        """CREATE [OR REPLACE] VIEW and ALTER VIEW (one kind): its database, the view itself (ALTER
        needs it, CREATE without OR REPLACE needs it gone) and the tables it reads."""
        db_ok, cause = self._db_state(ref[0])
        if not db_ok:
            return 1049, f"Unknown database '{ref[0]}'", cause
        if statement_verb(sql) == "ALTER":
            present, cause = self._table_state(ref)
            if not present:
                return 1146, f"Table '{ref[0]}.{ref[1]}' doesn't exist", cause
        elif not _OR_REPLACE.match(sql) and self._replica_holds_table(ref) and (
                ref in self.extra_tables or not self.primary.model.knows(*primary_ref)):
            return 1050, f"Table '{ref[1]}' already exists", \
                self.extra_tables.get(ref) or self._start_cause(f"table '{ref[0]}.{ref[1]}' is in")
        return self._need_tables(reads, thread)

    def _need_tables(self, pairs: Iterable[tuple[TableRef, TableRef]], thread: int
                     ) -> Problem | None:
        for primary_ref, ref in pairs:
            if self._is_temp(thread, primary_ref):
                if (thread, ref[0], ref[1]) not in self.replica.temps and not self._replica_holds_table(ref):
                    return 1146, f"Table '{ref[0]}.{ref[1]}' doesn't exist", \
                        self.temp_causes.get((thread, primary_ref[0], primary_ref[1]))
                continue  # (the replica's temporary table, or the base table it opens instead: `_shadowed`)
            present, cause = self._table_state(ref)
            if not present:
                return 1146, f"Table '{ref[0]}.{ref[1]}' doesn't exist", cause
        return None

    def _insert_shape(self, sql: str, pair: tuple[TableRef, TableRef], thread: int
                      ) -> Problem | None:
        primary_ref, ref = pair
        if self._is_temp(thread, primary_ref) or not self._shape_known(ref):
            return None
        replica_columns = self.replica.model.columns(*ref)
        listed = insert_column_list(sql)
        if listed is None:
            return None  # INSERT ... SET, or text not followed
        if listed:
            if replica_columns is None:
                return None
            for column in listed:
                if column.lower() not in replica_columns:
                    return 1054, f"Unknown column '{column}' in 'field list'", self.shape_causes.get(ref)
            return None
        # No column list: the primary ran it, so it supplied one value per primary column.
        primary_columns = self.primary.model.columns(*primary_ref)
        values = len(primary_columns) if primary_columns is not None else first_row_values(sql)
        if replica_columns is not None:
            have = len(replica_columns)
        else:
            delta = self.column_delta.get(ref)
            if not delta or values is None:
                return None
            have = values - delta
        if values is None or values == have:
            return None
        return 1136, "Column count doesn't match value count at row 1", self.shape_causes.get(ref)

    def _shape_known(self, ref: TableRef) -> bool:
        """Whether `_insert_shape` has anything to hold an INSERT into the replica's `ref` to: its
        columns, or the columns skipped ALTERs gave the primary's over it."""
        return self.replica.model.columns(*ref) is not None or bool(self.column_delta.get(ref))


def _holds_db(model: SchemaModel, db: str) -> bool:
    return db in model.databases or any(key[0] == db for key in model._columns)
