"""The compiled statement facts (issue #43, core/src/facts): a StatementInfo built from what the
core reads of a DDL or multi-table statement, with the parser's own rules over those parts
applied here: the default database, which reference a SET column or DELETE target names
(`_resolve_targets`), WL#40's rename list, the tables read (`_read_tables`' exclusions). None
where the core leaves the statement to the Python parser (`rules.statements`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dumpfilter import _core
from dumpfilter.rules.statement_info import Kind, StatementInfo, TableRef
from dumpfilter.rules.statement_parser import _Unparsed, _resolve_targets, ref_names, rename_tables

Name = _core.QualifiedName              # (database or None, name), as the core gives them
Ref = _core.TableReference               # a table reference and its alias
Namer = Callable[..., TableRef]          # a Name under the default (or a given) database


def core_info(sql: str, default: str) -> StatementInfo | None:
    """The StatementInfo of `sql` under default database `default`, from the core's facts."""
    facts = _core.statement_facts(sql.encode("utf-8", "surrogateescape"))  # (as the binlog holds it)
    if facts is None:
        return None
    kind = Kind(facts.kind)
    refs, trigger, db_name, target = facts.refs, facts.trigger, facts.db_name, facts.target

    def name(ref: Name, db: str = default) -> TableRef:
        return (ref.db.decode() if ref.db is not None else db, ref.name.decode())

    if refs and kind in (Kind.UPDATE, Kind.UPDATE_MULTI, Kind.DELETE_MULTI):
        return _multi(kind, refs, facts.set_columns, facts.targets, bool(facts.read), name, default)
    if kind is Kind.CREATE_TRIGGER:
        assert trigger is not None and facts.trigger_def is not None  # (the core reads both, or neither)
        trigger_ref = name(trigger)
        table = name(facts.updated[0], trigger_ref[0])  # the trigger's table lives in the trigger's schema
        d = facts.trigger_def
        return StatementInfo(kind, updated=(table,), trigger=trigger_ref,
                             trigger_def=(d.timing, d.event, _writes(d.writes, trigger_ref[0], name)))
    tables = tuple(name(ref) for ref in facts.updated)
    if kind is Kind.RENAME_TABLE:
        pairs = tuple((name(r.old), name(r.new)) for r in facts.renames)
        return StatementInfo(kind, updated=rename_tables(pairs), renames=pairs)
    if kind in (Kind.CREATE_DB, Kind.DROP_DB):
        assert db_name is not None  # (CREATE and DROP DATABASE name one)
        return StatementInfo(kind, db_statement_name=db_name.decode(), if_exists=facts.if_exists)
    if kind is Kind.ALTER_DB:
        return StatementInfo(kind, db_statement_name=db_name.decode() if db_name is not None else None)
    if kind in (Kind.ACCOUNT, Kind.ROUTINE):
        what = (target.object, *name(target.name)) if target is not None else None
        return StatementInfo(kind, updated=tables, target=what)
    if kind is Kind.DROP_TRIGGER:
        assert trigger is not None  # (DROP TRIGGER names one)
        return StatementInfo(kind, trigger=name(trigger), if_exists=facts.if_exists)
    if kind is Kind.CREATE_TABLE:
        if refs:  # CREATE ... SELECT: its FROM tables, less the new one (`_read_tables`)
            reads = _reads(refs, name, exclude=tables)
        else:  # LIKE s: the source as named
            reads = tuple(name(ref) for ref in facts.read)
        columns = facts.columns
        return StatementInfo(kind, updated=tables, read=reads, temporary=facts.temporary,
                             columns=tuple(c.decode() for c in columns) if columns is not None else None)
    return StatementInfo(kind, updated=tables, temporary=facts.temporary, if_exists=facts.if_exists)


def _multi(kind: Kind, refs: Sequence[Ref], set_columns: Sequence[_core.SetColumn],
           targets: Sequence[list[bytes]], lists_reads: bool, name: Namer, default: str) -> StatementInfo | None:
    """UPDATE (multi-table, or one table with an alias) and multi-table DELETE: `_update`,
    `_delete`. The core lists reads only where the text holds SELECT, FROM or JOIN."""
    joined = tuple((name(r.table), (r.alias.decode(),) if r.alias else ()) for r in refs)
    qualifiers: list[tuple[str, ...] | None]
    if kind is Kind.DELETE_MULTI:
        qualifiers = [tuple(part.decode() for part in target) for target in targets]
        columns: tuple[tuple[tuple[str, ...] | None, str], ...] = ()
    else:
        columns = tuple((tuple(p.decode() for p in sc.qualifier) if sc.qualifier is not None else None,
                         sc.column.decode()) for sc in set_columns)
        qualifiers = [qualifier for qualifier, _ in columns]
    try:
        chosen = _resolve_targets(joined, qualifiers)
    except _Unparsed:  # no reference named: the parser gives up too
        return StatementInfo(Kind.OTHER, parse_ok=False)
    updated = tuple(key for key, _ in chosen)
    aliases = {r.alias.decode() for r in refs if r.alias}  # (the delete targets' check)
    named = {names for ref in joined for names in ref_names(ref)}
    for qualifier in qualifiers if kind is Kind.DELETE_MULTI else ():
        # A DELETE target sqlglot lists as a table read (one naming no reference, or naming a
        # qualified one by its bare name) lands in the read list where sqlglot's tree puts it:
        # the parser's to list.
        assert qualifier is not None  # (a DELETE target always has its parts)
        target = (qualifier[0] if len(qualifier) == 2 else default, qualifier[-1])
        if qualifier not in named or not (
                target in updated or (len(qualifier) == 1 and qualifier[0] in aliases)):
            return None
    reads: tuple[TableRef, ...] = ()
    if lists_reads:  # sqlglot's tables of the whole statement
        reads = _reads(refs, name, exclude=updated)
    multi = kind is Kind.UPDATE_MULTI
    return StatementInfo(kind, updated=updated, read=reads, joined=joined if multi else (),
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


def _writes(writes: Sequence[_core.TriggerWrite] | None, trigger_db: str, name: Namer
            ) -> tuple[tuple[TableRef, str], ...] | None:
    """A trigger body's (table, event) writes, unqualified names in the trigger's database,
    repeats dropped (`ddl_text.body_writes`)."""
    if writes is None:
        return None
    out = {(name(w.table, trigger_db), w.event): None for w in writes}  # in order, each once
    return tuple(out)


def parser_reads(sql: str, default: str) -> bool:
    """Whether the Python parser reads `sql` (neither the statement key nor the facts do), or the
    schema model may parse its text: a CREATE TABLE whose column list the core did not read (LIKE
    copies its source's). Issue #43's share, in `bench filter` and the tests."""
    if _core.statement_key(sql.encode("utf-8", "surrogateescape")) is not None:
        return False
    info = core_info(sql, default)
    if info is None:
        return True
    return info.kind is Kind.CREATE_TABLE and info.columns is None and not info.temporary \
        and " LIKE " not in f" {sql.upper()} ".replace("(", " ")
