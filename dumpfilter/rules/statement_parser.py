"""The full classification of a statement: its tokens, and sqlglot where joins and subqueries need
a real parser, into its kind and the tables it updates and reads (what the core's statement
key and facts leave to it: `statements`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, overload

import re

from dumpfilter.rules.lazy_sqlglot import exp, sqlglot

from dumpfilter.rules.sqltokens import Token
from dumpfilter.rules.statement_info import Kind, StatementInfo, TableRef


class _Unparsed(Exception):
    """The statement is outside what this module understands."""


_TRANSACTION_WORDS = frozenset({"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA"})


_NO_TABLE_WORDS = frozenset({"DO", "CALL", "INSTALL", "UNINSTALL", "SIGNAL", "RESIGNAL", "FLUSH", "USE", "LOCK",
                             "UNLOCK", "HANDLER", "PREPARE", "EXECUTE", "DEALLOCATE", "SHUTDOWN"})


_ROUTINE_OBJECTS = frozenset({"PROCEDURE", "FUNCTION", "EVENT", "AGGREGATE", "SERVER", "TABLESPACE", "LOGFILE",
                              "RESOURCE", "SPATIAL", "PACKAGE", "UNDO"})


_ACCOUNT_OBJECTS = frozenset({"USER", "ROLE"})


_CREATE_MODIFIERS = frozenset({"OR", "REPLACE", "TEMPORARY", "UNIQUE", "FULLTEXT", "SPATIAL", "ONLINE", "OFFLINE",
                               "IGNORE", "SQL", "SECURITY", "DEFINER", "INVOKER", "ALGORITHM", "UNDEFINED", "MERGE",
                               "TEMPTABLE", "NO_WRITE_TO_BINLOG", "LOCAL"})


# Account and privilege statements change the grant tables of the `mysql` system database.
_ACCOUNT_TARGET = ("ACCOUNT", "mysql", "")


def _guess_kind(tokens: list[Token]) -> Kind:
    first = tokens[0].value.upper() if tokens[0].kind == "word" else ""
    return Kind.TRANSACTION if first in _TRANSACTION_WORDS else Kind.OTHER


class _Statement:
    """One statement's tokens with a cursor; `classify()` dispatches on the leading keyword."""

    def __init__(self, sql: str, tokens: list[Token], default: str):
        self.sql, self.tokens, self.default, self.index = sql, tokens, default, 0

    # -- cursor helpers
    def word(self, offset: int = 0) -> str:
        position = self.index + offset
        if position < len(self.tokens) and self.tokens[position].kind == "word":
            return self.tokens[position].value.upper()
        return ""

    def accept(self, *words: str) -> bool:
        if self.word() in words:
            self.index += 1
            return True
        return False

    def accept_punct(self, char: str) -> bool:
        if self.index < len(self.tokens) and self.tokens[self.index].kind == "punct" \
                and self.tokens[self.index].value == char:
            self.index += 1
            return True
        return False

    def skip_modifiers(self, words: frozenset[str] = _CREATE_MODIFIERS) -> None:
        while True:
            if self.accept(*words):
                if self.accept_punct("="):  # DEFINER = user@host, ALGORITHM = MERGE
                    self.skip_value()
                continue
            return

    def skip_value(self) -> None:
        """Skip a `user@host` or `CURRENT_USER[()]` value."""
        self.index += 1
        while self.accept_punct("@") or self.accept_punct("(") or self.accept_punct(")"):
            if self.index < len(self.tokens) and self.tokens[self.index].kind != "punct":
                self.index += 1

    def skip_if_exists(self) -> bool:
        if self.word() == "IF" and self.word(1) == "EXISTS":
            self.index += 2
            return True
        if self.word() == "IF" and self.word(1) == "NOT" and self.word(2) == "EXISTS":
            self.index += 3
        return False

    def identifier(self) -> str:
        if self.index >= len(self.tokens) or not self.tokens[self.index].is_identifier:
            raise _Unparsed
        self.index += 1
        return self.tokens[self.index - 1].value

    def qualified_name(self, default: str | None = None) -> TableRef:
        first = self.identifier()
        if self.accept_punct("."):
            return first, self.identifier()
        return (self.default if default is None else default), first

    def name_list(self) -> list[TableRef]:
        names = [self.qualified_name()]
        while self.accept_punct(","):
            names.append(self.qualified_name())
        return names

    def rest_offset(self) -> int:
        return self.tokens[self.index].start if self.index < len(self.tokens) else len(self.sql)

    # -- dispatch
    def classify(self) -> StatementInfo:
        first = self.word()
        if first in _TRANSACTION_WORDS or (first == "START" and self.word(1) == "TRANSACTION"):
            return StatementInfo(Kind.TRANSACTION)
        handler: Callable[[], StatementInfo] | None = getattr(self, "_" + first.lower(), None) if first else None
        if handler is not None:
            self.index += 1
            return handler()
        if first in _NO_TABLE_WORDS:
            return StatementInfo(Kind.OTHER)
        raise _Unparsed

    def _with(self) -> StatementInfo:
        """`WITH [RECURSIVE] c AS (...)[, ...] UPDATE|DELETE|INSERT ...`: the CTEs are read-only names."""
        self.accept("RECURSIVE")
        ctes: set[str] = set()
        while True:
            ctes.add(self.identifier())
            if self.accept_punct("("):
                self._skip_balanced()
            if not self.accept("AS") or not self.accept_punct("("):
                raise _Unparsed
            self._skip_balanced()
            if not self.accept_punct(","):
                break
        main = self.word()
        handler = {"UPDATE": self._update, "DELETE": self._delete, "INSERT": self._insert,
                   "REPLACE": self._replace}.get(main)
        if handler is None:
            if main == "SELECT":
                return StatementInfo(Kind.OTHER)
            raise _Unparsed
        self.index += 1
        info = handler()

        def real(ref: TableRef) -> bool:  # an unqualified CTE name is not a table
            return not (ref[0] == self.default and ref[1] in ctes)

        updated = tuple(filter(real, info.updated))
        if not updated:
            raise _Unparsed
        return dataclasses.replace(info, updated=updated, read=tuple(filter(real, info.read)),
                                   joined=tuple(j for j in info.joined if real(j[0])))

    def _skip_balanced(self) -> None:
        """After an opening parenthesis: skip to just past its closing one."""
        depth = 1
        while self.index < len(self.tokens) and depth:
            token = self.tokens[self.index]
            if token.kind == "punct" and token.value in "()":
                depth += 1 if token.value == "(" else -1
            self.index += 1
        if depth:
            raise _Unparsed

    def _call(self) -> StatementInfo:
        """CALL [db.]p(...): the procedure's database is the effective one (under SBR MySQL logs the body
        statements instead, but a CALL can still reach a binlog written by other tools)."""
        db, name = self.qualified_name()
        return StatementInfo(Kind.ROUTINE, target=("PROCEDURE", db, name))

    def _install(self) -> StatementInfo:
        """INSTALL/UNINSTALL PLUGIN|SONAME change mysql.plugin."""
        return StatementInfo(Kind.OTHER, target=("PLUGIN", "mysql", "plugin"))

    _uninstall = _install

    def _set(self) -> StatementInfo:
        if self.word() == "PASSWORD" or (self.word() == "DEFAULT" and self.word(1) == "ROLE"):
            return StatementInfo(Kind.ACCOUNT, target=_ACCOUNT_TARGET)
        return StatementInfo(Kind.SET)

    def _insert(self, kind: Kind = Kind.INSERT) -> StatementInfo:
        self.skip_modifiers(frozenset({"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"}))
        self.accept("INTO")
        target = self.qualified_name()
        reads = _read_tables(self.sql[self.rest_offset():], self.default, exclude=(target,))
        return StatementInfo(kind, updated=(target,), read=reads)

    def _replace(self) -> StatementInfo:
        return self._insert(Kind.REPLACE)

    def _load(self) -> StatementInfo:
        while self.index < len(self.tokens) and not (self.word() == "INTO" and self.word(1) == "TABLE"):
            self.index += 1
        if self.index >= len(self.tokens):
            raise _Unparsed
        self.index += 2
        return StatementInfo(Kind.LOAD_DATA, updated=(self.qualified_name(),))

    def _update(self) -> StatementInfo:
        self.skip_modifiers(frozenset({"LOW_PRIORITY", "IGNORE"}))
        set_index = self._find_top_level("SET")
        refs = _reference_tables(self.sql[self.rest_offset():self.tokens[set_index].start], self.default)
        self.index = set_index + 1
        columns = self._set_columns()
        updated = _resolve_targets(refs, [qualifier for qualifier, _ in columns])
        kind = Kind.UPDATE if len(refs) == 1 else Kind.UPDATE_MULTI
        reads = _read_tables(self.sql, self.default, exclude=tuple(key for key, _ in updated))
        multi = kind is Kind.UPDATE_MULTI
        return StatementInfo(kind, updated=tuple(key for key, _ in updated), read=reads,
                             joined=tuple(refs) if multi else (), set_columns=tuple(columns) if multi else ())

    def _set_columns(self) -> list[tuple[tuple[str, ...] | None, str]]:
        """The SET columns as (qualifier, column): qualifier ('t',), ('db', 't'), or None when unqualified."""
        columns: list[tuple[tuple[str, ...] | None, str]] = []
        parts: list[str] = []
        depth, expecting_column = 0, True
        for token in self.tokens[self.index:]:
            if token.kind == "punct" and token.value in "()":
                depth += 1 if token.value == "(" else -1
            elif depth == 0 and token.is_keyword("WHERE", "ORDER", "LIMIT"):
                break
            elif depth == 0 and token.kind == "punct" and token.value == ",":
                expecting_column, parts = True, []
            elif depth == 0 and expecting_column and token.kind == "punct" and token.value == "=":
                if parts:
                    columns.append((tuple(parts[:-1]) or None, parts[-1]))
                expecting_column = False
            elif depth == 0 and expecting_column and token.is_identifier:
                parts.append(token.value)
        return columns

    def _delete(self) -> StatementInfo:
        self.skip_modifiers(frozenset({"LOW_PRIORITY", "QUICK", "IGNORE"}))
        if self.accept("FROM"):
            targets_start = self.index
            using = self._find_top_level("USING", required=False)
            if using is None:  # DELETE FROM t [AS a] WHERE ...: single table
                target = self.qualified_name()
                reads = _read_tables(self.sql, self.default, exclude=(target,))
                return StatementInfo(Kind.DELETE, updated=(target,), read=reads)
            targets = self._delete_targets(targets_start, using)
            refs_text = self._text_after(using)
        else:
            from_index = self._find_top_level("FROM")
            targets = self._delete_targets(self.index, from_index)
            refs_text = self._text_after(from_index)
        refs = _reference_tables(_cut_at_where(refs_text), self.default)
        updated = _resolve_targets(refs, targets)
        keys = tuple(key for key, _ in updated)
        return StatementInfo(Kind.DELETE_MULTI, updated=keys,
                             read=_read_tables(self.sql, self.default, exclude=keys))

    def _delete_targets(self, start: int, end: int) -> list[tuple[str, ...]]:
        """`a, db.b.*` -> [('a',), ('db', 'b')]: delete targets name aliases or tables."""
        targets, parts = [], []
        for token in self.tokens[start:end]:
            if token.is_identifier:
                parts.append(token.value)
            elif token.kind == "punct" and token.value == ",":
                targets.append(tuple(parts))
                parts = []
        targets.append(tuple(parts))
        return [target for target in targets if target]

    def _text_after(self, position: int) -> str:
        """The statement's text after the token at `position`; when nothing follows it (a DELETE
        ending at its FROM or USING) the statement is not parsed."""
        if position + 1 >= len(self.tokens):
            raise _Unparsed
        return self.sql[self.tokens[position + 1].start:]

    @overload
    def _find_top_level(self, word: str, required: Literal[True] = True) -> int: ...
    @overload
    def _find_top_level(self, word: str, required: bool) -> int | None: ...

    def _find_top_level(self, word: str, required: bool = True) -> int | None:
        depth = 0
        for position in range(self.index, len(self.tokens)):
            token = self.tokens[position]
            if token.kind == "punct" and token.value in "()":
                depth += 1 if token.value == "(" else -1
            elif depth == 0 and token.is_keyword(word):
                return position
        if required:
            raise _Unparsed
        return None

    def _create(self) -> StatementInfo:
        self.skip_modifiers()
        temporary = any(token.is_keyword("TEMPORARY") for token in self.tokens[:self.index])
        obj = self.word()
        self.index += 1
        if obj in ("DATABASE", "SCHEMA"):
            self.skip_if_exists()
            return StatementInfo(Kind.CREATE_DB, db_statement_name=self.identifier())
        if obj in ("TABLE", "SEQUENCE"):
            self.skip_if_exists()
            return self._create_table(temporary)
        if obj == "INDEX":
            self.identifier()
            self._skip_to("ON")
            return StatementInfo(Kind.CREATE_INDEX, updated=(self.qualified_name(),))
        if obj == "TRIGGER":
            return self._create_trigger()
        if obj == "VIEW":
            self.skip_if_exists()
            view = self.qualified_name()
            as_index = self._find_top_level("AS")
            reads = _read_tables(self._text_after(as_index), self.default, exclude=(view,))
            return StatementInfo(Kind.CREATE_VIEW, updated=(view,), read=reads)
        return self._object_without_tables(obj)

    def _object_without_tables(self, obj: str) -> StatementInfo:
        if obj in _ACCOUNT_OBJECTS:
            return StatementInfo(Kind.ACCOUNT, target=_ACCOUNT_TARGET)
        if obj in _ROUTINE_OBJECTS:
            return StatementInfo(Kind.ROUTINE, target=self._routine_target(obj))
        raise _Unparsed

    def _routine_target(self, obj: str) -> tuple[str, str, str] | None:
        """The object a routine statement changes: a stored routine, event or package lives in a database
        (its qualifier, else the default one); a UDF (`... SONAME`) in mysql.func, a server in mysql.servers;
        tablespaces, log file groups and resource groups in none."""
        if obj == "AGGREGATE":
            self.accept("FUNCTION")
            obj = "FUNCTION"
        if obj == "SERVER":
            return ("SERVER", "mysql", "servers")
        if obj not in ("PROCEDURE", "FUNCTION", "EVENT", "PACKAGE"):
            return None
        if obj == "PACKAGE":
            self.accept("BODY")
        self.skip_if_exists()
        db, name = self.qualified_name()
        if obj == "FUNCTION" and any(token.is_keyword("SONAME") for token in self.tokens[self.index:]):
            return ("UDF", "mysql", "func")
        return (obj, db, name)

    def _create_table(self, temporary: bool) -> StatementInfo:
        """CREATE TABLE t ... / LIKE s / SELECT ...: only the new table is updating (rpl_replicate_do)."""
        table = self.qualified_name()
        self.accept_punct("(")
        if self.accept("LIKE"):
            source = self.qualified_name()
            return StatementInfo(Kind.CREATE_TABLE, updated=(table,), read=(source,), temporary=temporary)
        select = next((token.start for token in self.tokens[self.index:] if token.is_keyword("SELECT")), None)
        reads = _read_tables(self.sql[select:], self.default, exclude=(table,)) if select is not None else ()
        return StatementInfo(Kind.CREATE_TABLE, updated=(table,), read=reads, temporary=temporary)

    def _create_trigger(self) -> StatementInfo:
        self.skip_if_exists()
        trigger_db, trigger = self.qualified_name()
        self._skip_to("ON")
        # The trigger's table lives in the trigger's schema.
        table = self.qualified_name(default=trigger_db)
        return StatementInfo(Kind.CREATE_TRIGGER, updated=(table,), trigger=(trigger_db, trigger))

    def _skip_to(self, word: str) -> None:
        while self.index < len(self.tokens) and not self.accept(word):
            self.index += 1
        if self.index >= len(self.tokens):
            raise _Unparsed

    def _alter(self) -> StatementInfo:
        self.skip_modifiers()
        obj = self.word()
        self.index += 1
        if obj in ("TABLE", "SEQUENCE"):
            self.skip_if_exists()
            # ALTER TABLE t RENAME TO u: the new name is not in the table list [inf].
            return StatementInfo(Kind.ALTER_TABLE, updated=(self.qualified_name(),))
        if obj in ("DATABASE", "SCHEMA"):
            # ALTER DATABASE without a name alters the default database.
            name = self.identifier() if self.index < len(self.tokens) and self.tokens[self.index].is_identifier \
                and self.word() not in ("CHARACTER", "CHARSET", "DEFAULT", "COLLATE", "READ", "ENCRYPTION",
                                        "UPGRADE", "COMMENT") else None
            return StatementInfo(Kind.ALTER_DB, db_statement_name=name)
        if obj == "VIEW":
            view = self.qualified_name()
            return StatementInfo(Kind.CREATE_VIEW, updated=(view,))
        return self._object_without_tables(obj)

    def _drop(self) -> StatementInfo:
        temporary = self.accept("TEMPORARY")
        obj = self.word()
        self.index += 1
        if obj in ("DATABASE", "SCHEMA"):
            if_exists = self.skip_if_exists()
            return StatementInfo(Kind.DROP_DB, db_statement_name=self.identifier(), if_exists=if_exists)
        if obj in ("TABLE", "TABLES", "SEQUENCE"):
            if_exists = self.skip_if_exists()
            return StatementInfo(Kind.DROP_TABLE, updated=tuple(self.name_list()), temporary=temporary,
                                 if_exists=if_exists)
        if obj == "INDEX":
            self.identifier()
            self._skip_to("ON")
            return StatementInfo(Kind.DROP_INDEX, updated=(self.qualified_name(),))
        if obj == "TRIGGER":
            if_exists = self.skip_if_exists()
            # The table is not in the statement; the applier looks it up (Bug#24478).
            return StatementInfo(Kind.DROP_TRIGGER, trigger=self.qualified_name(), if_exists=if_exists)
        if obj == "VIEW":
            if_exists = self.skip_if_exists()
            return StatementInfo(Kind.DROP_VIEW, updated=tuple(self.name_list()), if_exists=if_exists)
        return self._object_without_tables(obj)

    def _truncate(self) -> StatementInfo:
        self.accept("TABLE")
        return StatementInfo(Kind.TRUNCATE, updated=(self.qualified_name(),))

    def _rename(self) -> StatementInfo:
        obj = self.word()
        self.index += 1
        if obj in _ACCOUNT_OBJECTS:
            return StatementInfo(Kind.ACCOUNT, target=_ACCOUNT_TARGET)
        if obj not in ("TABLE", "TABLES"):
            raise _Unparsed
        pairs = []
        while True:
            source = self.qualified_name()
            if not self.accept("TO"):
                raise _Unparsed
            pairs.append((source, self.qualified_name()))
            if not self.accept_punct(","):
                break
        return StatementInfo(Kind.RENAME_TABLE, updated=rename_tables(pairs), renames=tuple(pairs))

    def _grant(self) -> StatementInfo:
        return StatementInfo(Kind.ACCOUNT, updated=self._grant_target(), target=_ACCOUNT_TARGET)

    _revoke = _grant

    def _grant_target(self) -> tuple[TableRef, ...]:
        """`GRANT ... ON [TABLE] db.t` names a table (rpl_ignore_table, BUG#25482); `*`, `db.*`, routines do not."""
        on_index = self._find_top_level("ON", required=False)
        if on_index is None:  # GRANT role TO user
            return ()
        self.index = on_index + 1
        self.accept("TABLE")
        if self.word() in ("PROCEDURE", "FUNCTION") or self.accept_punct("*"):
            return ()
        first = self.identifier()
        if not self.accept_punct("."):
            return ((self.default, first),)
        if self.accept_punct("*"):
            return ()
        return ((first, self.identifier()),)

    def _analyze(self) -> StatementInfo:
        self.skip_modifiers(frozenset({"NO_WRITE_TO_BINLOG", "LOCAL"}))
        if not self.accept("TABLE", "TABLES"):
            raise _Unparsed
        return StatementInfo(Kind.TABLE_MAINTENANCE, updated=tuple(self.name_list()))

    _optimize = _repair = _analyze


def rename_tables(pairs: Iterable[tuple[TableRef, TableRef]]) -> tuple[TableRef, ...]:
    """WL#40 §4.2: sources and destinations in order, minus tables created and removed within the statement.

    `t1 TO tmp, t2 TO t1, tmp TO t2` -> (t1, t2): tmp first appears as a destination and is renamed away last.
    """
    roles: dict[TableRef, list[str]] = {}
    for source, destination in pairs:
        roles.setdefault(source, []).append("source")
        roles.setdefault(destination, []).append("destination")
    return tuple(table for table, seen in roles.items() if not (seen[0] == "destination" and seen[-1] == "source"))


def _cut_at_where(text: str) -> str:
    match = re.search(r"\b(WHERE|ORDER\s+BY|LIMIT)\b", text, re.IGNORECASE)
    return text[:match.start()] if match else text


def _reference_tables(refs_text: str, default: str) -> list[tuple[TableRef, tuple[str, ...]]]:
    """Tables of a FROM-like clause in statement order with the names they answer to (alias, table)."""
    try:
        select = sqlglot.parse_one(f"SELECT 1 FROM {refs_text}", read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, RecursionError) as exc:
        raise _Unparsed from exc
    from_clause = select.args.get("from_") or select.args.get("from")
    if from_clause is None:
        raise _Unparsed
    nodes = _join_leaves(from_clause.this)
    for join in select.args.get("joins") or []:
        nodes += _join_leaves(join.this)
    return [((table.db or default, table.name), tuple(filter(None, (table.alias,)))) for table in nodes]


def _join_leaves(node: exp.Expression) -> list[exp.Table]:
    """Base tables of a join tree in textual order; derived tables (subqueries) are read-only and skipped."""
    leaves: list[exp.Table] = []
    if isinstance(node, exp.Table):
        leaves.append(node)
    elif isinstance(node, (exp.Subquery, exp.Paren)) and not isinstance(node.this, exp.Query):
        leaves += _join_leaves(node.this)
    for join in node.args.get("joins") or []:
        leaves += _join_leaves(join.this)
    return leaves


def _resolve_targets(refs: Sequence[tuple[TableRef, tuple[str, ...]]],
                     qualifiers: Sequence[tuple[str, ...] | None]) -> list[tuple[TableRef, tuple[str, ...]]]:
    """The refs (in statement order) that a SET column or DELETE target names, by alias or by [db.]table.

    An unqualified SET column could belong to any joined table; without the event's
    table_map_for_update bitmap (BUG#37051) every joined table is taken as updated [inf].
    """
    if len(refs) == 1 or any(qualifier is None for qualifier in qualifiers):
        return list(refs)
    named = set(qualifiers)  # (a set: a hostile statement's thousands of each stay linear)
    chosen = [ref for ref in refs if not named.isdisjoint(ref_names(ref))]
    if not chosen:
        raise _Unparsed
    return chosen


def ref_names(ref: tuple[TableRef, tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    """MySQL: a table with an alias is named by its alias only; otherwise by `table` or `db.table`."""
    (db, table), aliases = ref
    return (aliases[:1],) if aliases else ((table,), (db, table))


def names_ref(ref: tuple[TableRef, tuple[str, ...]], qualifier: tuple[str, ...] | None) -> bool:
    """Whether `qualifier` names `ref` (`ref_names`)."""
    return qualifier in ref_names(ref)


def _read_tables(text: str, default: str, exclude: Sequence[TableRef] = ()) -> tuple[TableRef, ...]:
    """Every table sqlglot finds in `text` that is not updated; best effort (reads never decide)."""
    if not re.search(r"\b(SELECT|FROM|JOIN)\b", text, re.IGNORECASE):
        return ()
    start = re.search(r"\b(SELECT|WITH)\b", text, re.IGNORECASE)
    candidate = text[start.start():] if start and not re.match(r"\s*(UPDATE|DELETE)\b", text, re.I) else text
    try:
        tree = sqlglot.parse_one(candidate, read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, RecursionError):
        return ()
    aliases = {table.alias for table in tree.find_all(exp.Table) if table.alias}
    found: list[TableRef] = []
    for table in tree.find_all(exp.Table):
        ref = (table.db or default, table.name)
        if not table.name or ref in exclude or ref in found or (not table.db and table.name in aliases
                                                                and not table.alias):
            continue
        found.append(ref)
    return tuple(found)
