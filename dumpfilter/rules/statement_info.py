"""What the rules know of a statement (`StatementInfo`): its kind, the tables it updates and reads
(the TABLE_LIST the applier hands to tables_ok) and the facts a decision needs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


TableRef = tuple[str, str]  # (db, table); db is the default database for unqualified names


class Kind(StrEnum):
    INSERT = "INSERT"
    REPLACE = "REPLACE"
    UPDATE = "UPDATE"
    UPDATE_MULTI = "UPDATE_MULTI"
    DELETE = "DELETE"
    DELETE_MULTI = "DELETE_MULTI"
    LOAD_DATA = "LOAD_DATA"
    CREATE_TABLE = "CREATE_TABLE"
    ALTER_TABLE = "ALTER_TABLE"
    DROP_TABLE = "DROP_TABLE"
    TRUNCATE = "TRUNCATE"
    RENAME_TABLE = "RENAME_TABLE"
    CREATE_INDEX = "CREATE_INDEX"
    DROP_INDEX = "DROP_INDEX"
    TABLE_MAINTENANCE = "TABLE_MAINTENANCE"
    CREATE_DB = "CREATE_DB"
    ALTER_DB = "ALTER_DB"
    DROP_DB = "DROP_DB"
    CREATE_TRIGGER = "CREATE_TRIGGER"
    DROP_TRIGGER = "DROP_TRIGGER"
    CREATE_VIEW = "CREATE_VIEW"
    DROP_VIEW = "DROP_VIEW"
    ACCOUNT = "ACCOUNT"  # GRANT, REVOKE, CREATE/DROP/RENAME/ALTER USER, SET PASSWORD, roles
    ROUTINE = "ROUTINE"  # procedures, functions, events: no table list
    SET = "SET"
    TRANSACTION = "TRANSACTION"  # BEGIN, COMMIT, ROLLBACK, SAVEPOINT, XA
    OTHER = "OTHER"


DATABASE_KINDS = frozenset({Kind.CREATE_DB, Kind.ALTER_DB, Kind.DROP_DB})
READS_STATE = frozenset({Kind.UPDATE_MULTI, Kind.DROP_TRIGGER})  # decided by the schema model or triggers too
# Statements that write rows, and the DDL whose changes stay with the tables it names.
WRITE_KINDS = frozenset({Kind.INSERT, Kind.REPLACE, Kind.UPDATE, Kind.UPDATE_MULTI, Kind.DELETE, Kind.DELETE_MULTI,
                         Kind.LOAD_DATA})
TABLE_DDL_KINDS = frozenset({Kind.CREATE_TABLE, Kind.ALTER_TABLE, Kind.DROP_TABLE, Kind.TRUNCATE, Kind.RENAME_TABLE,
                             Kind.CREATE_INDEX, Kind.DROP_INDEX, Kind.CREATE_TRIGGER, Kind.DROP_TRIGGER,
                             Kind.CREATE_VIEW, Kind.DROP_VIEW})


@dataclass(frozen=True)
class StatementInfo:
    kind: Kind
    updated: tuple[TableRef, ...] = ()
    read: tuple[TableRef, ...] = ()
    db_statement_name: str | None = None
    parse_ok: bool = True
    temporary: bool = False
    if_exists: bool = False
    renames: tuple[tuple[TableRef, TableRef], ...] = ()  # RENAME TABLE pairs, in order
    trigger: TableRef | None = None  # (db, trigger name) of CREATE/DROP TRIGGER
    # The object a statement without a table list changes (WL#2516 needs its database):
    # (object type, db, name), e.g. ("PROCEDURE", "db1", "p"), ("ACCOUNT", "mysql", "").
    target: tuple[str, str, str] | None = None
    # Multi-table UPDATE: the tables joined (in statement order, with their aliases) and the SET
    # columns as (qualifier or None, column); the schema model places unqualified columns (BUG#37051).
    joined: tuple[tuple[TableRef, tuple[str, ...]], ...] = ()
    set_columns: tuple[tuple[tuple[str, ...] | None, str], ...] = ()
    # What the compiled facts (rules.statement_facts) read for the schema model: CREATE TABLE's
    # column names (lower-cased; None where the model reads the text itself), CREATE TRIGGER's
    # (timing, event), and the (table, trigger event) a CREATE TRIGGER's or CREATE FUNCTION's
    # body writes (None: not followed, a CALL or dynamic SQL could write more).
    columns: tuple[str, ...] | None = None
    trigger_def: tuple[str, str] | None = None
    # ALTER TABLE's column changes in order, lower-cased: (None, new) added, (old, None) dropped,
    # (old, new) renamed; None where they are not read (system versioning, a period).
    column_changes: tuple[tuple[str | None, str | None], ...] | None = None
    writes: tuple[tuple[TableRef, str], ...] | None = None

    @property
    def has_tables(self) -> bool:
        """`tables != NULL` in all_tables_not_ok: any table in the statement, updated or read."""
        return bool(self.updated or self.read)

    @property
    def exempt_from_table_rules(self) -> bool:
        """sql_parse.cc skips the table check for SET and DROP TEMPORARY TABLE ... IF EXISTS (stale temp tables)."""
        return self.kind is Kind.SET or (self.kind is Kind.DROP_TABLE and self.temporary and self.if_exists)


_INFO_DEFAULTS = {f.name: f.default for f in dataclasses.fields(StatementInfo) if f.name != "kind"}


def _info_init(self: StatementInfo, kind: Kind, **fields: object) -> None:
    # The generated frozen __init__ sets each of the 14 fields through object.__setattr__ (about 5 us): here
    # in one dict update, their names checked by mypy against the dataclass's signature, not at each call.
    attrs = self.__dict__
    attrs.update(_INFO_DEFAULTS)
    attrs["kind"] = kind
    attrs.update(fields)


# The dataclass's signature stays what callers are checked against; only its body is replaced.
StatementInfo.__init__ = _info_init  # type: ignore[method-assign,assignment]

# A memo of parses by (text, default database), shared by the engines deciding one statement, so
# that it is parsed once whatever the number of rule sets (RuleEngine.decide_statement).
Parses = dict[tuple[str, str], StatementInfo]
TablesOf = Callable[[str, str, bool], "tuple[Kind, tuple[TableRef, ...]] | None"]  # KeyShapes.tables_of
