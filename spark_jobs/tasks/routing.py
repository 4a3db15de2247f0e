"""Which output binlog each transaction goes to, and the copy of it that output gets.

Two modes (docs/split.md has the full rules):

- by schema (no maps): a ROW transaction is split per schema of its Table_map events, each copy
  with its own framing (GTID/BEGIN ... XID/COMMIT), only its tables' Table_map and rows events and
  STMT_END_F moved onto its last kept rows event. A statement follows its default database (MySQL
  statement rule) or, with `semantics='effective'`, the databases of the tables it updates. DDL
  goes with the schema of the object it changes; CREATE/ALTER/DROP DATABASE with the named one.
- by named rule sets (`maps`): an output keeps exactly what a replica with those rules would
  apply (`dumpfilter.rules.evaluate.RuleEngine`); a transaction can go to several outputs.

Events that belong to no output go to the `unassigned` binlog (or nowhere when it is None). The
file framing (FDE, Rotate, Stop, Gtid_list, Previous_GTIDs, Binlog_checkpoint) is never routed:
the output writer makes its own. An INCIDENT goes to every output (`ALL`).

In map mode the rule engines decide with the schema model (docs/schema-model.md) as `filter` and
the master do: one model for the stream, shared by every map's engine, the DDL replayed into it
once per unit after every engine has decided. So that any chunking gives the same outputs, a first
in-order pass over the input's DDL (`chunk_starts`) gives each chunk the state it starts from: the
model, and each engine's knowledge of triggers (which CREATE TRIGGERs its replica applied,
Bug#24478). Otherwise routing keeps no state from one chunk to the next; WL#40 derived-table
tracking is not available.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from dumpfilter.binlogs.series import FILE_FRAMING_TYPES
from dumpfilter.codec import Event, EventType, Transaction, fix_transaction_length
from dumpfilter.codec.constants import QUERY_EVENT_TYPES
from dumpfilter.codec.rename import rewrite_event
from dumpfilter.errors import BinlogError, RuleError
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.decider import Decider
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.parse import StartupFilters, normalize_option_name, parse_filter_statement
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel, is_schema_statement
from dumpfilter.rules.statement_info import DATABASE_KINDS, TABLE_DDL_KINDS, WRITE_KINDS, Kind
from dumpfilter.rules.statements import statement_tables
from dumpfilter.rules.transaction_filter import DROP, TransactionFilter, framing_statement
from dumpfilter.rules.trigger_knowledge import TableRef, TriggerKey, TriggerKnowledge

ALL = "*"  # the routing key of events every output gets (INCIDENT)
DEFAULT_UNASSIGNED = "unassigned"

# Events the output writer generates itself for each file, and events that never sit in a file.
_NOT_ROUTED = FILE_FRAMING_TYPES | {EventType.HEARTBEAT, EventType.HEARTBEAT_V2}
# Statements that change the definition of a table-level object: they go with that object's schema.
_DDL_KINDS = TABLE_DDL_KINDS | {Kind.TABLE_MAINTENANCE}
_NAME = re.compile(r"^[A-Za-z0-9_$][A-Za-z0-9_$.-]*$")
_SAFE_CHAR = re.compile(r"[A-Za-z0-9_$]")
_UNQUALIFIED = "\x00unqualified"  # a default database no statement can name


# ------------------------------------------------------------------------------------ config
@dataclass(frozen=True)
class BinlogMap:
    """One named output binlog and the rules that select its events."""

    name: str
    rules: RuleSet


@dataclass(frozen=True)
class SplitConfig:
    """How to split: by schema (no maps) or by named rule sets. Picklable (sent to workers)."""

    maps: tuple[BinlogMap, ...] = ()
    settings: Settings = field(default_factory=Settings)
    unassigned: str | None = DEFAULT_UNASSIGNED
    schema: SchemaModel | None = field(default=None, compare=False)  # --schema: the stream's starting schema

    def __post_init__(self) -> None:
        if self.unassigned is not None:
            check_binlog_name(self.unassigned, "--unassigned")
        names = [m.name for m in self.maps]
        if self.unassigned in names:
            raise RuleError(f"--unassigned: {self.unassigned!r} is also the name of a --map binlog")
        for m in self.maps:
            RuleEngine(m.rules, self.settings)  # rejects rule sets the semantics cannot use, early


def check_binlog_name(name: str, what: str = "--map") -> str:
    """Output names become file names `<name>-bin.NNNNNN`: letters, digits, `_ $ . -` only."""
    if not _NAME.match(name) or name.endswith("-bin"):
        raise RuleError(f"{what}: binlog name {name!r} must be letters, digits and _ $ . - "
                        "(not starting with . or -), without the -bin suffix")
    return name


def schema_binlog_name(schema: str) -> str:
    """The output name of a schema in by-schema mode: the schema name, with every character other
    than letters, digits, `_` and `$` written as `@xxxx` (its code point in hex, as MySQL names
    database directories), so that any schema name is a safe, distinct file name."""
    return "".join(c if _SAFE_CHAR.match(c) else f"@{ord(c):04x}" for c in schema)


def parse_map(text: str) -> BinlogMap:
    """`NAME=RULES`. RULES is one mysqld-style rule (`replicate-wild-do-table=shop%.%`), a CHANGE
    REPLICATION FILTER or WL#2516 CHANGE MASTER ... TO DO=... statement, or a bare pattern:
    `shop%.%` (a wild-do-table pattern) or `shop%` (the same as `shop%.%`)."""
    name, sep, rules_text = text.partition("=")
    name, rules_text = name.strip(), rules_text.strip()
    if not sep or not name or not rules_text:
        raise RuleError(f"--map: {text!r} is not of the form NAME=RULES")
    check_binlog_name(name)
    if re.match(r"CHANGE\b", rules_text, re.IGNORECASE):
        return BinlogMap(name, parse_filter_statement(rules_text).apply(RuleSet()))
    if normalize_option_name(rules_text) is not None:
        raise RuleError(f"--map {name}: option {rules_text!r} has no value (expected {rules_text}=VALUE)")
    option, eq, value = rules_text.partition("=")
    if eq and normalize_option_name(option) is not None:
        return BinlogMap(name, StartupFilters.from_options([(option, value)]).for_channel(""))
    if eq or any(c.isspace() for c in rules_text):
        raise RuleError(f"--map {name}: {rules_text!r} is neither a replicate-*/binlog-* option, a CHANGE "
                        "statement nor a db[.table] pattern")
    pattern = rules_text if "." in rules_text else rules_text + ".%"
    return BinlogMap(name, RuleSet(wild_do_table=(pattern,)))


def config_from_maps(map_texts: Iterable[str], settings: Settings | None = None,
                     unassigned: str | None = DEFAULT_UNASSIGNED, schema: SchemaModel | None = None) -> SplitConfig:
    """Repeated `--map NAME=...` for one NAME add up, in order (like repeated mysqld options)."""
    merged: dict[str, RuleSet] = {}
    for text in map_texts:
        m = parse_map(text)
        if m.name in merged:
            old = merged[m.name]
            merged[m.name] = old.replace(**{t: getattr(old, t) + getattr(m.rules, t)
                                            for t in RuleSet.__dataclass_fields__})
        else:
            merged[m.name] = m.rules
    return SplitConfig(tuple(BinlogMap(n, r) for n, r in merged.items()), settings or Settings(), unassigned, schema)


# ------------------------------------------------------------------------------------ statements
@dataclass(frozen=True)
class StatementRoute:
    """The schemas a statement belongs to (empty: none) and whether it names every table with its
    database, so that its copy can take another default database without changing meaning."""

    schemas: frozenset[str]
    kind: Kind
    by_table: bool  # routed by the tables/database it names rather than its default database


def statement_route(sql: str, db: str | None, semantics: str) -> StatementRoute:
    """Which schemas a Query event belongs to in by-schema mode (docs/split.md)."""
    info = statement_tables(sql, db or "")
    kind = info.kind
    default = frozenset({db}) if db else frozenset()
    if kind in DATABASE_KINDS:
        name = info.db_statement_name or db
        return StatementRoute(frozenset({name}) if name else frozenset(), kind, True)
    if kind in _DDL_KINDS:
        names = {t[0] for t in info.updated if t[0]}
        if kind is Kind.DROP_TRIGGER and info.trigger and info.trigger[0]:
            names.add(info.trigger[0])
        return StatementRoute(frozenset(names), kind, True) if names else StatementRoute(default, kind, False)
    if semantics == "effective" and kind in WRITE_KINDS and info.updated:
        return StatementRoute(frozenset(t[0] for t in info.updated if t[0]) or default, kind, True)
    return StatementRoute(default, kind, False)


def fully_qualified(sql: str) -> bool:
    """Every table the statement names carries its database (none resolves to the default)."""
    info = statement_tables(sql, _UNQUALIFIED)
    if not info.parse_ok:
        return False
    return all(db != _UNQUALIFIED for db, _ in (*info.updated, *info.read))


def with_default_db(event: Event, db: str) -> Event:
    """A copy of a Query event whose default database is `db` (written as replicate-rewrite-db's
    renames are: `codec.rename`, the CRC made again)."""
    copy = rewrite_event(event, lambda _db, table: (db, table, True))
    if copy is event:  # (the name is longer than the event's one length byte can say)
        raise BinlogError(f"database name {db!r} is too long for a Query event")
    return copy


# ------------------------------------------------------------------------------------ deciders
class _SchemaDecider(Decider):
    """TransactionFilter's decider for one schema's output (None: events of no schema)."""

    def __init__(self, router: Router, schema: str | None):
        self.router = router
        self.schema = schema
        self._in = Decision(True, f"in schema {schema}")
        self._out = Decision(False, f"not in schema {schema}")

    def decide_table(self, db: str, table: str) -> Decision:
        return self._in if db == self.schema else self._out

    def decide_statement(self, sql: str, current_db: str | None) -> Decision:
        schemas = self.router.route_of(sql, current_db).schemas
        return self._in if (self.schema in schemas if schemas else self.schema is None) else self._out


_UNASSIGNED = Decision(True, "kept by no --map rule set")
_ASSIGNED = Decision(False, "kept by a --map rule set")


class _NoMapDecider(Decider):
    """Keeps what no --map rule set keeps (the unassigned output in map mode)."""

    def __init__(self, engines: list[RuleEngine]):
        self.engines = engines

    def table_kept(self, db: str, table: str) -> bool:
        return not any(engine.table_kept(db, table) for engine in self.engines)

    def decide_table(self, db: str, table: str) -> Decision:
        return _UNASSIGNED if self.table_kept(db, table) else _ASSIGNED

    def decide_statement(self, sql: str, current_db: str | None) -> Decision:
        kept = not any(engine.decide_statement(sql, current_db).apply for engine in self.engines)
        return _UNASSIGNED if kept else _ASSIGNED


def chunk_starts(config: SplitConfig, statements: Iterable[Iterable[tuple[str, str | None]]]) -> list[ChunkStart | None]:
    """The first, in-order pass: `statements` gives each chunk's Query statements (sql, default
    db) in order, at least those `is_schema_statement` accepts (`chunks.schema_statements`: the
    core passes over the others); returns the state each chunk starts from (None in by-schema
    mode, where no rule engine decides). Only DDL is parsed: the pass costs a compiled walk."""
    if not config.maps:
        return [None for _ in statements]
    router = Router(config)
    starts: list[ChunkStart | None] = []
    for chunk_statements in statements:
        starts.append(router.snapshot())
        for sql, db in chunk_statements:
            if is_schema_statement(sql):
                for engine in router._engines:  # what each replica knows of triggers (Bug#24478)
                    engine.decide_statement(sql, db)
                router.schema.observe(sql, db)
    return starts


# ------------------------------------------------------------------------------------ router
@dataclass(frozen=True)
class ChunkStart:
    """What a chunk's router needs to route it as a reader of the whole stream would: the schema
    model where the chunk starts, and each map engine's trigger knowledge there (picklable)."""

    schema: SchemaModel
    triggers: tuple[tuple[frozenset[TriggerKey], dict[TriggerKey, TableRef]], ...]


@dataclass
class RouteStats:
    units: int = 0
    incomplete: int = 0  # units the input ended inside: not written anywhere
    dropped_units: int = 0  # units of no output while `unassigned` is None


class Router:
    """`route(txn)` -> [(output name, events)], sorted by name; `ALL` means every output."""

    def __init__(self, config: SplitConfig):
        self.config = config
        self.semantics = config.settings.semantics
        self.stats = RouteStats()
        self._routes: dict[tuple[str, str | None], StatementRoute] = {}
        self._filters: dict[str | None, TransactionFilter] = {}
        # One schema model for the stream, shared by every map's engine; the router replays each
        # unit's DDL into it once, after all of them decided (the decisions see the schema before).
        self.schema = config.schema.copy() if config.schema is not None else SchemaModel()
        self._engines = [RuleEngine(m.rules, config.settings, schema=self.schema, replay_ddl=False)
                         for m in config.maps]
        self._map_filters = [(m.name, TransactionFilter(engine, empty_transactions=DROP))
                             for m, engine in zip(config.maps, self._engines)]
        self._rest_filter = TransactionFilter(_NoMapDecider(self._engines), empty_transactions=DROP)

    def route_of(self, sql: str, db: str | None) -> StatementRoute:
        key = (sql, db)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = statement_route(sql, db, self.semantics)
        return route

    def route(self, txn: Transaction) -> list[tuple[str, list[Event]]]:
        self.stats.units += 1
        if txn.kind == CONTROL:
            event = txn.events[0]
            if event.type_code in _NOT_ROUTED:
                return []
            if event.type_code == EventType.START_ENCRYPTION:
                raise BinlogError("encrypted binlogs cannot be split", path=None, offset=event.pos)
            return [(ALL, [event])]  # INCIDENT, and control types a newer server may add
        if not txn.complete:
            self.stats.incomplete += 1
            return []
        self._routes.clear()
        if self.config.maps:
            out = self._by_maps(txn)
            self.replay(txn.events)
        else:
            out = self._by_schema(txn)
        named = [(name, events) for name, events in out if name is not None]
        if len(named) < len(out):
            if self.config.unassigned is not None:
                named.append((self.config.unassigned, next(e for n, e in out if n is None)))
            elif not named:
                self.stats.dropped_units += 1
        return sorted(named, key=lambda item: item[0])

    # -- the schema model ---------------------------------------------------------------------
    def replay(self, events: Iterable[Event]) -> None:
        """The DDL of one unit into the stream's model (only statements that can change it are
        parsed: CREATE, ALTER, DROP, RENAME)."""
        for event in events:
            if event.type_code in QUERY_EVENT_TYPES and is_schema_statement(event.query.sql):
                self.schema.observe(event.query.sql, event.query.db)

    def snapshot(self) -> ChunkStart:
        return ChunkStart(self.schema.copy(), tuple(e.triggers.snapshot() for e in self._engines))

    def start_chunk(self, start: ChunkStart | None) -> None:
        """Route the next units as a reader of the whole stream would at the chunk's start."""
        if start is None or not self._engines:
            return
        self.schema = start.schema.copy()
        for engine, (absent, known) in zip(self._engines, start.triggers):
            engine.schema = self.schema
            engine.triggers = TriggerKnowledge.restore(absent, known)

    # -- maps ---------------------------------------------------------------------------------
    def _by_maps(self, txn: Transaction) -> list[tuple[str | None, list[Event]]]:
        if not _has_content(txn.events):
            return [(None, list(txn.events))]
        out: list[tuple[str | None, list[Event]]] = []
        for name, txn_filter in (*self._map_filters, (None, self._rest_filter)):
            txn_filter.reset()
            events = txn_filter.filter(txn).events
            if events:
                out.append((name, events))
        return out

    # -- schemas ------------------------------------------------------------------------------
    def _by_schema(self, txn: Transaction) -> list[tuple[str | None, list[Event]]]:
        schemas = self._schemas(txn.events)
        if not schemas:
            return [(None, list(txn.events))]
        out: list[tuple[str | None, list[Event]]] = []
        for schema in sorted(schemas, key=lambda s: (s is not None, s or "")):
            txn_filter = self._filters.get(schema)
            if txn_filter is None:
                txn_filter = self._filters[schema] = TransactionFilter(_SchemaDecider(self, schema),
                                                                       empty_transactions=DROP)
            txn_filter.reset()
            events = txn_filter.filter(txn).events
            if events:
                if schema is not None:
                    events = self._retarget(events, schema)
                out.append((None if schema is None else schema_binlog_name(schema), events))
        return out

    def _schemas(self, events: list[Event]) -> set[str | None]:
        schemas: set[str | None] = set()
        for event in events:
            t = event.type_code
            if t == EventType.TABLE_MAP:
                schemas.add(event.table_map[1])
            elif event.is_query:
                if not framing_statement(event.query.sql):
                    schemas.update(self.route_of(event.query.sql, event.query.db).schemas or (None,))
            elif t == EventType.TRANSACTION_PAYLOAD:
                schemas.update(self._schemas(event.payload_events()))
        return schemas

    def _retarget(self, events: list[Event], schema: str) -> list[Event]:
        """Give a copy's Query events the schema as default database where that keeps the meaning:
        framing statements (BEGIN/COMMIT), DATABASE statements, and statements routed by the tables
        they name when they name every table with its database. Otherwise `mariadb-binlog` would
        write `use <other db>` and the output would not replay on a server holding only `schema`."""
        changed = False
        out = []
        for event in events:
            if event.type_code in QUERY_EVENT_TYPES and event.db and event.db != schema:
                sql = event.query.sql
                if framing_statement(sql):
                    event, changed = with_default_db(event, schema), True
                else:
                    route = self.route_of(sql, event.db)
                    if route.by_table and (route.kind in DATABASE_KINDS or fully_qualified(sql)):
                        event, changed = with_default_db(event, schema), True
            out.append(event)
        return fix_transaction_length(out) if changed else out


def _has_content(events: list[Event]) -> bool:
    return any(event.type_code in (EventType.TABLE_MAP, EventType.TRANSACTION_PAYLOAD) or event.is_rows
               or (event.is_query and not framing_statement(event.query.sql)) for event in events)
