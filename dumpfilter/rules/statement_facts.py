"""The one reader of a statement's text (issues #43, #80): a StatementInfo built from what the core
reads of it (core/src/facts), with the rules over those parts applied here: the default database,
which reference a SET column or DELETE target names (`_resolve_targets`), WL#40's rename list; and
the tables a statement only reads, sqlglot's to list where the core hands it the text (`_read_tables`,
a multi-table statement's references `_reference_tables`). None: no statement the rules read."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Sequence

from dumpfilter import _core
from dumpfilter.codec.event import decode_text
from dumpfilter.rules.lazy_sqlglot import exp, sqlglot
from dumpfilter.rules.statement_info import DATABASE_KINDS, Kind, StatementInfo, TableRef

Name = _core.QualifiedName              # (database or None, name), as the core gives them
Ref = _core.TableReference               # a table reference and its alias
Namer = Callable[..., TableRef]          # a Name under the default (or a given) database
Joined = tuple[TableRef, tuple[str, ...]]  # a reference's table and its alias (none, or one)
_KINDS = {kind.value: kind for kind in Kind}  # (a dict read: an Enum's call by value costs 1.7 us in 3.11)
# The kinds `_info` reads a way of their own (a set test: Kind's attributes cost 60 ns each in 3.11)
_SPECIAL = DATABASE_KINDS | {Kind.UPDATE, Kind.UPDATE_MULTI, Kind.DELETE_MULTI, Kind.CREATE_TRIGGER, Kind.RENAME_TABLE,
                             Kind.ACCOUNT, Kind.ROUTINE, Kind.OTHER, Kind.DROP_TRIGGER}


class _Unparsed(Exception):
    """sqlglot does not read the references, or none of them is named: the statement is not parsed."""


def core_info(sql: str, default: str) -> StatementInfo | None:
    """The StatementInfo of `sql` under default database `default`, from the core's facts."""
    facts = _core.statement_facts(sql.encode("utf-8", "surrogateescape"))  # (as the binlog holds it)
    if facts is None:
        return None
    try:
        info = _info(facts, sql, default)
    except _Unparsed:
        return None
    if not facts.ctes:
        return info
    ctes = {decode_text(c) for c in facts.ctes}

    def real(ref: TableRef) -> bool:  # an unqualified CTE name is not a table
        return not (ref[0] == default and ref[1] in ctes)

    updated = tuple(filter(real, info.updated))
    if not updated:
        return None
    return dataclasses.replace(info, updated=updated, read=tuple(filter(real, info.read)),
                               joined=tuple(j for j in info.joined if real(j[0])))


def class_declined(skip: frozenset[Kind]) -> frozenset[Kind]:
    """The kinds `core_class` declines under `skip`: those `_info` reads a way of its own, and `skip`."""
    return _SPECIAL | skip


def core_class(sql: str, default: str, skip: frozenset[Kind]) -> tuple[Kind, tuple[TableRef, ...]] | None:
    """`core_info`'s kind and updated tables of `sql` under `default` off the core's facts alone (no
    StatementInfo: the core's `statement_class`), for a kind `_info` reads no way of its own and not
    in `skip`, no CTE or rename, a table updated or none read (`has_tables`: whether it updates one);
    else None."""
    found = _core.statement_class(sql.encode("utf-8", "surrogateescape"), default)
    if found is None or (kind := _KINDS[found.kind]) in _SPECIAL or kind in skip:
        return None
    return kind, tuple(zip(found.dbs, found.names))


def _info(facts: _core.StatementFacts, sql: str, default: str) -> StatementInfo:
    kind = _KINDS[facts.kind]
    refs = facts.refs

    def name(ref: Name, db: str = default) -> TableRef:
        return (decode_text(ref.db) if ref.db is not None else db, decode_text(ref.name))

    tables = tuple([name(ref) for ref in facts.updated])
    if kind in _SPECIAL:
        trigger, db_name, target = facts.trigger, facts.db_name, facts.target
        refs_text = facts.refs_text if kind in (Kind.UPDATE, Kind.DELETE_MULTI) else None
        if refs_text is not None or (refs and kind in (Kind.UPDATE, Kind.UPDATE_MULTI, Kind.DELETE_MULTI)):
            joined = (_reference_tables(decode_text(refs_text), default, kind) if refs_text is not None else
                      [(name(r.table), (decode_text(r.alias),) if r.alias else ()) for r in refs])
            return _multi(kind, joined, facts, sql, name, default)
        if kind is Kind.CREATE_TRIGGER:
            assert trigger is not None  # (the core reads a CREATE TRIGGER's trigger)
            trigger_ref = name(trigger)
            table = name(facts.updated[0], trigger_ref[0])  # the trigger's table lives in the trigger's schema
            d = facts.trigger_def
            return StatementInfo(kind, updated=(table,), trigger=trigger_ref, trigger_def=None if d is None else
                                 (d.timing, d.event), writes=_writes(facts.writes, sql, trigger_ref[0], name))
        if kind is Kind.RENAME_TABLE:
            pairs = tuple((name(r.old), name(r.new)) for r in facts.renames)
            return StatementInfo(kind, updated=rename_tables(pairs), renames=pairs)
        if kind in (Kind.CREATE_DB, Kind.DROP_DB):
            assert db_name is not None  # (CREATE and DROP DATABASE name one)
            return StatementInfo(kind, db_statement_name=decode_text(db_name), if_exists=facts.if_exists)
        if kind is Kind.ALTER_DB:
            return StatementInfo(kind, db_statement_name=decode_text(db_name) if db_name is not None else None)
        if kind in (Kind.ACCOUNT, Kind.ROUTINE, Kind.OTHER):
            what = (target.object, *name(target.name)) if target is not None else None
            writes = _writes(facts.writes, sql, what[1], name) if what is not None and what[0] == "FUNCTION" else None
            return StatementInfo(kind, updated=tables, target=what, writes=writes)
        if kind is Kind.DROP_TRIGGER:
            assert trigger is not None  # (DROP TRIGGER names one)
            return StatementInfo(kind, trigger=name(trigger), if_exists=facts.if_exists)
    read_text, read = facts.read_text, facts.read
    if read_text is not None:  # INSERT ... SELECT, a view's query, a subquery: sqlglot's tables
        reads = _read_tables(decode_text(read_text), default, exclude=tables)
    elif refs:  # CREATE ... SELECT: its FROM tables, less the new one
        reads = _reads(refs, name, exclude=tables)
    else:  # LIKE s: the source as named
        reads = tuple(map(name, read)) if read else ()
    columns, changes, renames = facts.columns, facts.column_changes, facts.renames
    return StatementInfo(kind, updated=tables, read=reads, temporary=facts.temporary, if_exists=facts.if_exists,
                         columns=tuple(map(decode_text, columns)) if columns is not None else None,
                         # ALTER TABLE's RENAME TO: a new name without a database is in the table's
                         renames=tuple([(name(r.old), name(r.new, tables[0][0])) for r in renames]) if renames else (),
                         column_changes=None if changes is None else tuple([
                             (None if c.old is None else decode_text(c.old), None if c.new is None else decode_text(c.new))
                             for c in changes]))


def _multi(kind: Kind, joined: Sequence[Joined], facts: _core.StatementFacts, sql: str, name: Namer,
           default: str) -> StatementInfo:
    """UPDATE (multi-table, or one table with an alias) and multi-table DELETE: the references the
    SET columns or the delete targets name. The core lists reads only where the text holds SELECT,
    FROM or JOIN, and hands sqlglot the text where they are more than its references."""
    qualifiers: list[tuple[str, ...] | None]
    if kind is Kind.DELETE_MULTI:
        qualifiers = [tuple(decode_text(part) for part in target) for target in facts.targets]
        columns: tuple[tuple[tuple[str, ...] | None, str], ...] = ()
    else:
        kind = Kind.UPDATE if len(joined) == 1 else Kind.UPDATE_MULTI
        columns = tuple((tuple(decode_text(p) for p in sc.qualifier) if sc.qualifier is not None else None,
                         decode_text(sc.column)) for sc in facts.set_columns)
        qualifiers = [qualifier for qualifier, _ in columns]
    updated = tuple(key for key, _ in _resolve_targets(joined, qualifiers))
    aliases = {alias for _, names in joined for alias in names}  # (the delete targets' check)
    named = {names for ref in joined for names in ref_names(ref)}
    read_text = None if facts.read_text is None else decode_text(facts.read_text)
    for qualifier in qualifiers if kind is Kind.DELETE_MULTI and read_text is None else ():
        # A DELETE target sqlglot lists as a table read (one naming no reference, or naming a
        # qualified one by its bare name) lands in the read list where sqlglot's tree puts it.
        assert qualifier is not None  # (a DELETE target always has its parts)
        target = (qualifier[0] if len(qualifier) == 2 else default, qualifier[-1])
        if qualifier not in named or not (target in updated or (len(qualifier) == 1 and qualifier[0] in aliases)):
            read_text = sql
            break
    if read_text is not None:
        reads = _read_tables(read_text, default, exclude=updated)
    else:
        reads = _reads(facts.refs, name, exclude=updated) if facts.read else ()
    multi = kind is Kind.UPDATE_MULTI
    return StatementInfo(kind, updated=updated, read=reads, joined=tuple(joined) if multi else (),
                         set_columns=columns if multi else ())


def _reads(refs: Sequence[Ref], name: Namer, exclude: Sequence[TableRef]) -> tuple[TableRef, ...]:
    """`_read_tables`' answer over the references, the tables sqlglot finds, in order. One named
    by another's alias (no database, no alias of its own) is that alias, not a table."""
    aliases = {r.alias for r in refs if r.alias}
    excluded = set(exclude)
    found: dict[TableRef, None] = {}  # in order, each once
    for r in refs:
        table = name(r.table)
        if table in excluded or (r.table.db is None and r.table.name in aliases and not r.alias):
            continue
        found[table] = None
    return tuple(found)


_FIRES = {Kind.INSERT: ("INSERT",), Kind.LOAD_DATA: ("INSERT",), Kind.REPLACE: ("INSERT", "DELETE"),
          Kind.UPDATE: ("UPDATE",), Kind.UPDATE_MULTI: ("UPDATE",), Kind.DELETE: ("DELETE",),
          Kind.DELETE_MULTI: ("DELETE",)}


def _writes(writes: Sequence[_core.BodyWrite] | None, sql: str, db: str, name: Namer
            ) -> tuple[tuple[TableRef, str], ...] | None:
    """A trigger's or function's body's (table, event) writes, unqualified names in its database
    `db`, repeats dropped; a body statement the core hands back as a span is read here as a
    statement of its own (a multi-table UPDATE's targets resolved), None if it is not read."""
    if writes is None:
        return None
    raw = sql.encode("utf-8", "surrogateescape")  # (as the binlog holds it)
    out: dict[tuple[TableRef, str], None] = {}  # in body order, each once
    for w in writes:
        if w.table is not None:
            out[(name(w.table, db), w.event)] = None
            continue
        info = core_info(decode_text(raw[w.start:w.end]), db)
        if info is None:
            return None
        out.update(((ref, event), None) for ref in info.updated for event in _FIRES.get(info.kind, ("UPDATE",)))
    return tuple(out)


def rename_tables(pairs: Iterable[tuple[TableRef, TableRef]]) -> tuple[TableRef, ...]:
    """WL#40 §4.2: sources and destinations in order, minus tables created and removed within the statement.

    `t1 TO tmp, t2 TO t1, tmp TO t2` -> (t1, t2): tmp first appears as a destination and is renamed away last.
    """
    roles: dict[TableRef, list[str]] = {}
    for source, destination in pairs:
        roles.setdefault(source, []).append("source")
        roles.setdefault(destination, []).append("destination")
    return tuple(table for table, seen in roles.items() if not (seen[0] == "destination" and seen[-1] == "source"))


def _resolve_targets(refs: Sequence[Joined], qualifiers: Sequence[tuple[str, ...] | None]) -> list[Joined]:
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


def ref_names(ref: Joined) -> tuple[tuple[str, ...], ...]:
    """MySQL: a table with an alias is named by its alias only; otherwise by `table` or `db.table`."""
    (db, table), aliases = ref
    return (aliases[:1],) if aliases else ((table,), (db, table))


_CUT = re.compile(r"\b(WHERE|ORDER\s+BY|LIMIT)\b", re.IGNORECASE)


def _reference_tables(refs_text: str, default: str, kind: Kind) -> list[Joined]:
    """Tables of a FROM-like clause in statement order with the names they answer to (alias, table);
    a DELETE's references end at the text's first WHERE, ORDER BY or LIMIT word."""
    if kind is Kind.DELETE_MULTI:
        match = _CUT.search(refs_text)
        refs_text = refs_text[:match.start()] if match else refs_text
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


def _read_tables(text: str, default: str, exclude: Sequence[TableRef] = ()) -> tuple[TableRef, ...]:
    """Every table sqlglot finds in `text` that is not updated; best effort (reads never decide).
    Remembered by text for the last few hundred short ones (`_every_read_table`): a sqlglot parse
    is about 0.4 ms, and a binlog repeats an INSERT ... SELECT's query into each new table (the
    DDL-heavy bench's shadow pass parsed 8 texts 32 times)."""
    found = _every_read_table(text, default) if len(text) <= _READS_TEXT_MAX else _every_read_table.__wrapped__(
        text, default)
    return tuple([ref for ref in found if ref not in exclude]) if exclude else found


_READS_TEXT_MAX = 4096  # longer texts are parsed each time (the memo's memory stays bounded)


@functools.lru_cache(maxsize=512)
def _every_read_table(text: str, default: str) -> tuple[TableRef, ...]:
    """`_read_tables` with nothing excluded (excluding a table drops it from this list, in order)."""
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
        if not table.name or ref in found or (not table.db and table.name in aliases and not table.alias):
            continue
        found.append(ref)
    return tuple(found)

