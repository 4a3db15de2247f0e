"""The schema model the decision engine consults: databases, tables with their columns, and triggers
(timing, event, table, the tables their bodies write). Filled from a starting schema (`--schema FILE`:
a `mysqldump`/`mariadb-dump --no-data` file, triggers included) and from the binlog's DDL replayed in
order. It changes per DDL statement, never per row event: the ROW fast path never looks at it.

The core's facts read each DDL statement; the output columns of CREATE ... SELECT and of a view,
which it leaves, are read here with sqlglot (`create_columns`).

Where the server needs a fact this model does not hold (a table it never saw, a column list it could
not read, a trigger body it could not follow), the model says "unknown" (None) and the engine falls
back to its schema-less answer, recording the assumption (`Decision.assumption`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from urllib.parse import unquote, urlparse
from dataclasses import dataclass, field

from dumpfilter.rules.lazy_pattern import LazyPattern
from dumpfilter.rules.lazy_sqlglot import exp, sqlglot

from dumpfilter import _core
from dumpfilter.codec.transactions import statement_verb
from dumpfilter.errors import RuleError, without_password
from dumpfilter.regular_file import read_regular
from dumpfilter.rules.ruleset import quote_identifier
from dumpfilter.rules.statement_info import Kind, StatementInfo, TableRef
from dumpfilter.rules.statements import statement_tables


# CREATE TABLE's replay asks these of every statement (compiled once, not looked up per call).
_IF_NOT_EXISTS = LazyPattern(r"\bIF\s+NOT\s+EXISTS\b", re.IGNORECASE)
_SELECT = LazyPattern(r"\bSELECT\b", re.IGNORECASE)
_LIKE = LazyPattern(r"\bLIKE\b", re.IGNORECASE)

# Statements that change what the model holds; every other statement passes untouched.
SCHEMA_KINDS = frozenset({Kind.CREATE_TABLE, Kind.ALTER_TABLE, Kind.DROP_TABLE, Kind.RENAME_TABLE, Kind.CREATE_DB,
                          Kind.DROP_DB, Kind.CREATE_TRIGGER, Kind.DROP_TRIGGER, Kind.CREATE_VIEW, Kind.DROP_VIEW})

MAX_SCHEMA_FILE_BYTES = 256 << 20  # a --no-data dump of about a million tables
DEFERRED_CHARS = 4 << 20  # the deferred ALTER TABLEs' text (`SchemaModel.defer`), at most: memory stays bounded
# (a versioned comment that does not lex stays closed: `/*!40101 CREATE TABLE t (a 'x */`)
_SCHEMA_DDL = LazyPattern(r"\s*(?:/\*M?!\d*)?\s*(CREATE|ALTER|DROP|RENAME)\s+(TABLE|DATABASE|SCHEMA)\b",
                           re.IGNORECASE)


@dataclass(frozen=True)
class Trigger:
    """CREATE TRIGGER db.name {BEFORE|AFTER} {INSERT|UPDATE|DELETE} ON table: what its body writes.
    `writes` lists (table, event) in body order, the event being the trigger event it fires on that table
    (REPLACE fires INSERT and DELETE); None when the body could not be followed (a CALL, dynamic SQL,
    an unparsed statement)."""

    db: str
    name: str
    table: TableRef
    timing: str
    event: str
    writes: tuple[tuple[TableRef, str], ...] | None


@dataclass
class SchemaModel:
    """Tables are keyed (db, table) as the binlog spells them; columns are lower-cased (column names are
    case-insensitive in MySQL and MariaDB). A table whose column list is unknown maps to None.

    Column lists change as each statement is replayed: the core's facts read CREATE TABLE's columns
    and ALTER TABLE's changes (every one of the matrix binlogs'); sqlglot reads the rest (CREATE ...
    SELECT, a view, what the core declines)."""

    databases: set[str] = field(default_factory=set)
    triggers: dict[TableRef, Trigger] = field(default_factory=dict)  # (db, trigger name) -> Trigger
    source: str = "binlog DDL"
    views: set[TableRef] = field(default_factory=set)  # the names in `tables` that are views
    # What a write through a view writes: the tables its SELECT reads (a view made outside the binlog
    # and --schema's dump: those its CREATE VIEW names; information_schema's: not known).
    view_reads: dict[TableRef, tuple[TableRef, ...]] = field(default_factory=dict)
    # Stored functions, (db, lower-cased name) -> the (table, trigger event) pairs their bodies write,
    # None where a body was not followed: a statement calling one writes those tables as it runs, on
    # the primary and on a replica alike (the call is logged as the calling statement).
    functions: dict[TableRef, tuple[tuple[TableRef, str], ...] | None] = field(default_factory=dict)
    _columns: dict[TableRef, tuple[str, ...] | None] = field(default_factory=dict)
    # Every table a trigger is on, and maybe more (built at the first DROP TABLE): a dump drops each
    # table before it creates it, and that must not cost a look at every trigger (N tables x T).
    _trigger_tables: set[TableRef] | None = field(default=None, compare=False, repr=False)
    # ALTER TABLEs that rename nothing (`defer`) and CREATE TABLEs of their own columns (`replay`),
    # by table, not read yet, each with its parse where it has one: they read and change their
    # table's columns alone, so they commute with other tables'; replayed when the model is next
    # read or changed another way, or past DEFERRED_CHARS of text, and dropped unread with their
    # table (a DDL workload's scratch tables: each ALTER's text parsed only if something reads
    # what it did).
    _deferred: dict[TableRef, list[tuple[str, str | None, StatementInfo | None]]] = field(
        default_factory=dict, compare=False, repr=False)
    _deferred_chars: int = field(default=0, compare=False, repr=False)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_sql(cls, text: str, source: str = "--schema", *, strict: bool = False) -> SchemaModel:
        """A dump (`mariadb-dump --no-data`, `mysqldump --no-data`) or any DDL script: `USE`, `DELIMITER`
        and the dumps' `/*!50003 ... */` conditional comments are followed; other statements are ignored.
        `strict` (a user's file): a statement no schema dump holds, an unreadable table or database
        statement, or nothing created, is an error (at the first such statement: junk is not read on)."""
        model = cls(source=source)
        current_db = ""
        script = _core.split_script(text)  # as the mariadb client cuts it
        for each in script.statements:
            statement = each.sql
            use = _USE.match(statement)
            if use:
                current_db = use.group(1)
                continue
            sql = strip_version_comments(statement)
            info = statement_tables(sql, current_db)  # (read once, for the check and the model)
            why = _refused(statement, sql, info, bool(model.databases or model._columns)) if strict else None
            if why:
                raise RuleError(f"{source}: line {each.line}: {why}")
            model.observe(sql, current_db, info)
        if strict and not (model.databases or model._columns or model.triggers):
            raise RuleError(f"{source}: creates no database, table or trigger: not a schema dump")
        return model

    @classmethod
    def load(cls, path: str | os.PathLike[str], option: str = "--schema") -> SchemaModel:
        try:
            data = read_regular(path, MAX_SCHEMA_FILE_BYTES)  # never a FIFO or /dev/zero
        except (OSError, ValueError) as exc:
            raise RuleError(f"{option} {path}: {getattr(exc, 'strerror', None) or exc}") from None
        if b"\0" in data:
            raise RuleError(f"{option} {path}: line {data[:data.index(0)].count(10) + 1}: a NUL byte: not SQL text")
        return cls.from_sql(data.decode("utf-8", errors="replace"), f"{option} {path}", strict=True)

    @classmethod
    def from_tables(cls, databases: Iterable[str], tables: dict[TableRef, tuple[str, ...] | None], source: str) -> SchemaModel:
        """Databases and tables (columns lower-cased, None: not known) as they are, no DDL replayed."""
        return cls(set(databases), source=source,
                   _columns={key: None if cols is None else tuple(c.lower() for c in cols) for key, cols in tables.items()})

    @classmethod
    def from_server(cls, url: str, option: str = "--schema") -> SchemaModel:
        """`mysql://USER[:PASSWORD]@HOST[:PORT]`: tables, columns, views, triggers and functions from
        information_schema."""
        import pymysql

        shown = without_password(url)  # in every message: never the password
        try:
            parsed = urlparse(url)  # (an unclosed [IPv6 address raises)
            port = parsed.port  # (urllib checks it only when asked)
        except ValueError as exc:
            raise RuleError(f"{option}: {shown!r}: {exc}") from None
        if parsed.scheme != "mysql" or not parsed.hostname:
            raise RuleError(f"{option}: {shown!r} is not a file or mysql://USER[:PASSWORD]@HOST[:PORT]")
        try:
            conn = pymysql.connect(host=parsed.hostname, port=port or 3306, connect_timeout=10,
                                   user=unquote(parsed.username or "root"), password=unquote(parsed.password or ""))
        except (pymysql.Error, ValueError) as exc:  # its words less "[Errno 111] "; idna refuses a 64-byte label
            why = re.sub(r"\[Errno -?\d+\] ", "", str(exc.args[-1])) if isinstance(exc, pymysql.Error) else "bad host"
            raise RuleError(f"{option} {shown}: cannot connect: {why}") from None
        model = cls(source=f"{option} {shown}")
        system = ("mysql", "information_schema", "performance_schema", "sys")
        with conn, conn.cursor() as cursor:
            cursor.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
            model.databases = {row[0] for row in cursor.fetchall() if row[0] not in system}
            cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS "
                           "WHERE TABLE_SCHEMA NOT IN %s ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
                           (system,))
            columns: dict[TableRef, list[str]] = {}
            for db, table, column in cursor.fetchall():
                columns.setdefault((db, table), []).append(column.lower())
            model._columns = {key: tuple(names) for key, names in columns.items()}
            cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS "
                           "WHERE TABLE_SCHEMA NOT IN %s", (system,))
            for db, name, definition in cursor.fetchall():
                model.views.add((db, name))  # (its definition qualifies every table: MariaDB and MySQL store it so)
                model.view_reads[(db, name)] = statement_tables(f"CREATE VIEW `{db}`.`{name}` AS {definition}", db).read
            cursor.execute("SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_DEFINITION FROM information_schema.ROUTINES "
                           "WHERE ROUTINE_TYPE = 'FUNCTION' AND ROUTINE_SCHEMA NOT IN %s", (system,))
            for db, name, body in cursor.fetchall():  # read as the binlog's CREATE FUNCTION is (its type aside)
                model.observe(f"CREATE FUNCTION {quote_identifier(db)}.{quote_identifier(name)}() RETURNS INT "
                              f"{body or ''}", db)
            cursor.execute("SELECT TRIGGER_SCHEMA, TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, "
                           "EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, ACTION_STATEMENT FROM information_schema.TRIGGERS")
            for db, name, timing, event, table_db, table, body in cursor.fetchall():
                # read as the binlog's CREATE TRIGGER is (the core's facts; their decline, the parser's)
                model.observe(f"CREATE TRIGGER {quote_identifier(db)}.{quote_identifier(name)} {timing} {event} "
                              f"ON {quote_identifier(table_db)}.{quote_identifier(table)} FOR EACH ROW {body}", db)
        return model

    def key(self) -> tuple[tuple[str, ...], tuple[tuple[TableRef, tuple[str, ...] | None], ...]]:
        """Its databases and tables (with their columns), hashable: equal for equal schemas."""
        self._settle()
        return tuple(sorted(self.databases)), tuple(sorted(self.tables.items(), key=lambda item: item[0]))

    def copy(self) -> SchemaModel:
        self._settle()
        return SchemaModel(set(self.databases), dict(self.triggers), self.source, set(self.views),
                           dict(self.view_reads), dict(self.functions), _columns=dict(self._columns))

    @property
    def tables(self) -> dict[TableRef, tuple[str, ...] | None]:
        """Every table with its column list."""
        self._settle()
        return dict(self._columns)

    # ------------------------------------------------------------------ replay
    def observe(self, sql: str, current_db: str | None, info: StatementInfo | None = None) -> None:
        """Replay one statement (a Query event, or a statement of a dump) if it is DDL the model tracks.
        Replaying the same DDL twice leaves the same model (the master shares engines between slaves)."""
        if info is None:
            info = statement_tables(strip_version_comments(sql), current_db or "")
        kind = info.kind
        if kind is Kind.ROUTINE and info.parse_ok and info.target is not None and info.target[0] == "FUNCTION":
            self._function(strip_version_comments(sql), info)
            return
        if kind not in SCHEMA_KINDS or not info.parse_ok:
            return
        if self._deferred and not (kind is Kind.DROP_TABLE and not info.temporary):  # (DROP: dropped below)
            # (a CREATE TABLE of its own columns and an ALTER that renames nothing read their table alone)
            own = kind is Kind.CREATE_TABLE and info.columns is not None and not info.read or (
                kind is Kind.ALTER_TABLE and not info.renames)
            self._settle(info.updated if own else None)
        if kind is Kind.DROP_TABLE:  # (the DDL workloads repeat most: scratch tables dropped, created)
            if not info.temporary:
                self._drop(info.updated)
            return
        sql, default = strip_version_comments(sql), current_db or ""
        if kind is Kind.CREATE_TABLE and info.updated:  # (the DDL most met first)
            if info.temporary:
                return  # a temporary table shadows the base table for its session only; not modelled
            self._create_table(info, sql, default)
        elif kind is Kind.ALTER_TABLE and info.updated:
            self._alter_table(info)
        elif kind is Kind.CREATE_DB and info.db_statement_name:
            self.databases.add(info.db_statement_name)
        elif kind is Kind.DROP_DB and info.db_statement_name:
            self.databases.discard(name := info.db_statement_name)
            self._columns = {key: cols for key, cols in self._columns.items() if key[0] != name}
            self.views = {key for key in self.views if key[0] != name}
            self.view_reads = {key: read for key, read in self.view_reads.items() if key[0] != name}
            self.functions = {key: writes for key, writes in self.functions.items() if key[0] != name}
            self.triggers = {key: trig for key, trig in self.triggers.items() if key[0] != name}
        elif kind is Kind.RENAME_TABLE:
            for old, new in info.renames:
                self._rename(old, new)
        elif kind is Kind.CREATE_VIEW and info.updated:
            self._create_view(info.updated[0], sql, default)
            self.view_reads[info.updated[0]] = info.read
        elif kind is Kind.DROP_VIEW:
            for key in info.updated:
                if key in self.views:
                    self.views.discard(key)
                    self.view_reads.pop(key, None)
                    self._columns.pop(key, None)
        elif kind is Kind.CREATE_TRIGGER and info.trigger and info.updated:
            if info.trigger_def is not None:  # (not a definition the model keeps: no trigger)
                db, name = info.trigger
                self.triggers[(db, name)] = Trigger(db, name, info.updated[0], *info.trigger_def, info.writes)
                self._trigger_on(info.updated[0])
        elif kind is Kind.DROP_TRIGGER and info.trigger:
            self.triggers.pop(info.trigger, None)

    def replay(self, statements: Iterable[tuple[str, str | None, StatementInfo | TableRef | None]]) -> None:
        """Statements replayed in order, each as `observe` replays its parse (a StatementInfo) or
        `defer` an ALTER TABLE that renames nothing (its table), in one loop: a DDL workload's
        scratch tables' CREATE, ALTER and DROP TABLE (`experiment`'s count replays a segment's lone
        DDL so: 12,700 statements a pass of the DDL-heavy binlog, 1.9 us each through `observe`).
        A CREATE TABLE of its own columns is deferred with its table's ALTERs (`defer`): it reads
        and changes its table alone, and its table's DROP drops it unread."""
        observe = self.observe
        for sql, db, how in statements:
            if not isinstance(how, StatementInfo):  # (an ALTER TABLE's table; None: nothing to replay)
                if how is not None:
                    self.defer(sql, db, how)
                continue
            kind = how.kind
            if how.temporary or not how.parse_ok or not how.updated:
                observe(sql, db, how)
            elif kind is Kind.DROP_TABLE:
                self._drop(how.updated)
            elif kind is Kind.CREATE_TABLE and how.columns is not None and not how.read:
                table = how.updated[0]
                self.databases.add(table[0])  # (read as it is, never settled)
                self._deferred.setdefault(table, []).append((sql, db, how))  # (a settle makes a new dict)
                self._deferred_chars += len(sql)
                if self._deferred_chars > DEFERRED_CHARS:
                    self._settle()
            else:
                observe(sql, db, how)

    def _drop(self, tables: Iterable[TableRef]) -> None:
        """DROP TABLE (not TEMPORARY) of `tables`: each one's columns, deferred statements and triggers
        gone, but a view's (DROP TABLE leaves a view: MariaDB's 1965 "is a view"; with IF EXISTS a
        note, logged)."""
        columns = self._columns
        if self._trigger_tables is None:
            self._trigger_tables = {t.table for t in self.triggers.values()}
        for key in tables:
            if key in self.views:
                continue
            columns.pop(key, None)
            if key in self._deferred:
                self._deferred_chars -= sum(len(sql) for sql, _, _ in self._deferred.pop(key))
            if key in self._trigger_tables:
                self.triggers = {k: t for k, t in self.triggers.items() if t.table != key}
                self._trigger_tables.discard(key)

    def _create_table(self, info: StatementInfo, sql: str, default: str) -> None:
        table = info.updated[0]
        self.databases.add(table[0])
        if table in self._columns and _IF_NOT_EXISTS.search(sql):
            return  # logged, but the existing table is left as it is
        if info.columns is not None:  # read by the core (rules.statement_facts)
            self._columns[table] = info.columns
        elif info.read and _LIKE.search(sql) and not _SELECT.search(sql):
            source = self._key(*info.read[0])
            self._columns[table] = self._columns.get(source) if source else None
        else:
            self._columns[table] = create_columns(sql, default, self.columns)

    def _create_view(self, view: TableRef, sql: str, default: str) -> None:
        """CREATE [OR REPLACE] VIEW and ALTER VIEW (both logged as CREATE_VIEW): its columns are its
        column list, else its SELECT's names (`SELECT *` expanded from the tables as they are: the
        server stores the expanded list)."""
        sql = _CHECK_OPTION.sub("", re.sub(r"^\s*ALTER\b", "CREATE", sql, count=1, flags=re.IGNORECASE))  # (sqlglot)
        self.databases.add(view[0])
        self.views.add(view)
        self._columns[view] = create_columns(sql, default, self.columns)

    def _alter_table(self, info: StatementInfo) -> None:
        table = info.updated[0]  # (altered before we saw it: known to exist, columns unknown)
        self._columns[table] = _altered(self._columns.get(table), info.column_changes)
        for old, new in info.renames:  # RENAME TO
            self._rename(old, new)

    def _rename(self, old: TableRef, new: TableRef) -> None:
        if old in self._columns and old != new:
            if old in self.views:  # RENAME TABLE renames a view too
                self.views.discard(old)
                self.views.add(new)
                if old in self.view_reads:
                    self.view_reads[new] = self.view_reads.pop(old)
            self._columns[new] = self._columns.pop(old)
            # Triggers move with their table (same schema only; MySQL refuses a cross-db rename otherwise).
            for key, trig in list(self.triggers.items()):
                if trig.table == old:
                    self.triggers[key] = Trigger(trig.db, trig.name, new, trig.timing, trig.event, trig.writes)
                    self._trigger_on(new)

    def _function(self, sql: str, info: StatementInfo) -> None:
        """CREATE [OR REPLACE] / DROP FUNCTION: what its body writes."""
        assert info.target is not None  # (the caller's check)
        _, db, name = info.target
        key = (db, name.lower())
        verb = statement_verb(sql)
        if verb == "DROP":
            self.functions.pop(key, None)
        elif verb == "CREATE" and not (key in self.functions and _IF_NOT_EXISTS.search(sql)):
            self.functions[key] = info.writes

    def _trigger_on(self, table: TableRef) -> None:
        if self._trigger_tables is not None:
            self._trigger_tables.add(table)

    def defer(self, sql: str, current_db: str | None, table: TableRef) -> None:
        """ALTER TABLE `sql` of `table`, which renames nothing, replayed when its change is next read."""
        self._deferred.setdefault(table, []).append((sql, current_db, None))
        self._deferred_chars += len(sql)
        if self._deferred_chars > DEFERRED_CHARS:
            self._settle()

    def _settle(self, tables: Iterable[TableRef] | None = None) -> None:
        """The deferred ALTER TABLEs (of `tables`, else all) replayed, each table's in order."""
        if not self._deferred:
            return
        if tables is None:
            deferred, self._deferred = self._deferred, {}
        else:
            deferred = {table: self._deferred.pop(table) for table in tables if table in self._deferred}
        for sql, db, info in (each for entries in deferred.values() for each in entries):
            self._deferred_chars -= len(sql)
            self.observe(sql, db, info)

    # ------------------------------------------------------------------ questions
    def _key(self, db: str, table: str) -> TableRef | None:
        self._settle()
        if (db, table) in self._columns:
            return (db, table)
        folded = (db.lower(), table.lower())  # lower_case_table_names: the applier opens lower-cased names
        return next((key for key in self._columns if (key[0].lower(), key[1].lower()) == folded), None)

    def knows(self, db: str, table: str) -> bool:
        return self._key(db, table) is not None

    def is_view(self, db: str, table: str) -> bool:
        return self._key(db, table) in self.views

    def columns(self, db: str, table: str) -> tuple[str, ...] | None:
        key = self._key(db, table)
        return None if key is None else self._columns[key]

    def base_tables(self, ref: TableRef) -> tuple[TableRef, ...]:
        """The tables a write naming `ref` writes: a view's base tables (views over views followed;
        an updatable view over a join writes one of them: all are named), else `ref` itself."""
        if not self.views:
            return (ref,)
        out: list[TableRef] = []
        seen: set[TableRef] = set()
        queue = [ref]
        while queue:
            item = queue.pop(0)
            key = self._key(*item)
            if key is not None and key in self.views and key in self.view_reads and key not in seen:
                seen.add(key)
                queue.extend(self.view_reads[key])
            elif item not in out:
                out.append(item)
        return tuple(out)

    def triggers_on(self, table: TableRef, event: str) -> list[Trigger]:
        """The triggers of `table` for `event`, BEFORE ones first (their order within a timing does not
        change which tables they write)."""
        key = self._key(*table) or table
        found = [t for t in self.triggers.values() if t.table == key and t.event == event]
        return sorted(found, key=lambda t: t.timing != "BEFORE")


_CHECK_OPTION = LazyPattern(r"\s+WITH\s+(?:CASCADED\s+|LOCAL\s+)?CHECK\s+OPTION\s*;?\s*$", re.IGNORECASE)
_SCHEMA_VERBS = frozenset({"CREATE", "ALTER", "DROP", "RENAME"})
# What a schema dump's statements begin with (mysqldump and mariadb-dump --no-data, with the options
# that add CHANGE MASTER, START/STOP SLAVE, FLUSH PRIVILEGES, users and plugins), or a DDL script's.
_DUMP_VERBS = _SCHEMA_VERBS | {"SET", "USE", "LOCK", "UNLOCK", "CHANGE", "START", "STOP", "FLUSH", "GRANT", "REVOKE",
                               "INSTALL"}
_ROW_VERBS = frozenset({"INSERT", "REPLACE", "COMMIT"})  # a dump with data (--no-autocommit: COMMIT)
_SETVAL = LazyPattern(r"(?:DO|SELECT)\s+SETVAL\s*\(", re.IGNORECASE)  # mariadb-dump's sequences
_USE = LazyPattern(r"\s*USE\s+`?([^`;\s]+)`?\s*$", re.IGNORECASE)


def load_schema(source: str, option: str = "--schema") -> SchemaModel:
    """A starting schema: a dump file (`mariadb-dump --no-data`), or `mysql://...` to read from a
    server's information_schema; errors name `option`."""
    return SchemaModel.from_server(source, option) if source.startswith("mysql://") else SchemaModel.load(source, option)


def _refused(statement: str, sql: str, info: StatementInfo, created: bool) -> str | None:
    """Why a user's schema file may not hold `statement`: not a statement of a schema dump (one led by
    a version comment may hold anything: Percona's dumps `/*!50717 SELECT ...*/`; rows only once a
    database or table is created), or DDL that cannot be read (`sql`, its version comments opened)."""
    verb = statement_verb(statement)
    if not (statement.startswith(("/*!", "/*M!")) or verb in _DUMP_VERBS or (created and verb in _ROW_VERBS)
            or _SETVAL.match(statement)):
        return f"{statement[:60]!r} is not a statement of a schema dump (mysqldump --no-data)"
    # A CREATE/ALTER/DROP/RENAME TABLE or DATABASE statement the reader cannot read (`info`), or whose
    # quotes or parentheses do not close (`CREATE TABLE a.t (x int`: the core's lexer answers).
    raw = sql.encode("utf-8", "surrogateescape")
    unreadable = _SCHEMA_DDL.match(sql) and not (info.parse_ok and _core.parens_close(raw))
    return f"cannot parse {statement[:60]!r}" if unreadable else None


def is_schema_statement(sql: str) -> bool:
    """Whether a statement can change the schema model (cheap: the first keyword, past a dump's
    `/*!50003 ... */` version comments). Only these are parsed when a model is replayed."""
    head = sql[:256]
    if "/*!" in head or "/*M!" in head:  # (up to where the head leaves a quote or comment open)
        head = strip_version_comments(head[:_core.sql_tokens(head).error_offset or None])
    return statement_verb(head) in _SCHEMA_VERBS


# A MariaDB sequence is a table of these columns (information_schema.COLUMNS lists them).
SEQUENCE_COLUMNS = ("next_not_cached_value", "minimum_value", "maximum_value", "start_value", "increment",
                    "cache_size", "cycle_option", "cycle_count")
_SEQUENCE = LazyPattern(r"\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?SEQUENCE\b", re.IGNORECASE)
ColumnsOf = Callable[[str, str], "tuple[str, ...] | None"]  # (db, table) -> its columns, None: unknown


def create_columns(sql: str, default: str, columns_of: ColumnsOf) -> tuple[str, ...] | None:
    """The column list of CREATE TABLE (with sqlglot): defined columns, then CREATE ... SELECT output
    columns not already defined (MySQL appends them); CREATE VIEW's column list, else its SELECT's
    names; a sequence's fixed columns. None when it cannot be read."""
    if _SEQUENCE.match(sql):
        return SEQUENCE_COLUMNS
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    if not isinstance(tree, exp.Create):
        return None
    names: list[str] = []
    if isinstance(tree.this, exp.Schema):
        names = [node.name.lower() for node in tree.this.expressions if isinstance(node, exp.ColumnDef)]
        if str(tree.args.get("kind") or "").upper() == "VIEW":  # CREATE VIEW v (a, b) AS ...: the list
            return tuple(node.name.lower() for node in tree.this.expressions) or None
    select = tree.args.get("expression")
    if isinstance(select, exp.Select):
        for projection in select.expressions:
            if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column)
                                                   and isinstance(projection.this, exp.Star)):
                sources = [(t.db or default, t.name) for t in select.find_all(exp.Table)]
                for source in sources:
                    cols = columns_of(*source)
                    if cols is None:
                        return None
                    names += [c for c in cols if c not in names]
                continue
            name = projection.alias_or_name
            if not name:
                return None  # an expression column is named after its text: not modelled
            if name.lower() not in names:
                names.append(name.lower())
    elif select is not None:
        return None
    return tuple(names) if names else None


def _altered(columns: tuple[str, ...] | None, changes: tuple[tuple[str | None, str | None], ...] | None
             ) -> tuple[str, ...] | None:
    """A table's columns after ALTER TABLE's column changes (StatementInfo.column_changes); None
    (unknown) where either is not known. A column added goes last (FIRST and AFTER aside)."""
    if columns is None or changes is None:
        return None
    names = list(columns)
    for old, new in changes:
        if old is not None and old in names:
            if new is None:
                names.remove(old)
            else:
                names[names.index(old)] = new
        elif old is None and new is not None and new not in names:
            names.append(new)
    return tuple(names)


def strip_version_comments(sql: str) -> str:
    """A text holding a versioned comment (`/*!50003 CREATE*/ /*!50017 DEFINER=...*/ /*!50003 TRIGGER
    ...*/`, a dump's) as the server runs it, as the core's lexer reads it (`_core.sql_tokens`): its
    comments out (each a blank), the versioned code in; any other text, or one that does not lex, as
    it is."""
    lexed = _core.sql_tokens(sql) if "/*!" in sql or "/*M!" in sql else None
    if lexed is None or lexed.error is not None:
        return sql
    out: list[str] = []
    at = 0
    for token in [*lexed.tokens, None]:
        gap = sql[at:len(sql) if token is None else token.start]
        if gap and not gap.isspace():  # a comment: one blank
            if sql[at - 2:at] == "--":  # (`--/**/x` is minuses and x, `-- x` a comment: the minuses apart)
                run = at - len(sql[:at].rstrip("-"))
                del out[-(2 * run - 1):]
                out.append(" ".join("-" * run))
            gap = " "
        out.append(gap)
        if token is not None:
            out.append(sql[token.start:token.end])
            at = token.end
    return "".join(out)
