"""Which names a replica's applier uses for the master's: `lower_case_table_names` folds the
incoming name first (set_thd_db, Table_map_log_event::do_apply_event; BUG#37656), then
replicate-rewrite-db renames it (Rpl_filter::get_rewrite_db), or under effective semantics the
WL#2516 REWRITE patterns. `event_renamer` writes those names into events, through the core's one
writer (dumpfilter.codec.rename, core/src/rename_db.rs): for the MySQL-protocol endpoint's
replicas, `filter`'s output and `slave run`'s relay log alike; `AppliedNames` gives the compiled
walks the same names, which the same writer writes into whole units."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from dumpfilter.codec import Event
from dumpfilter.codec.rename import rewrite_event
from dumpfilter.rules.ruleset import RuleSet, Settings

if TYPE_CHECKING:
    from dumpfilter.rules.evaluate import RuleEngine


def applied_db(engine: RuleEngine, db: str) -> tuple[str, bool]:
    """The database a replica's applier uses for the master's `db`: lower-cased first under
    lower_case_table_names (MySQL: 1 or 2, MariaDB: 1), then rewritten. (name, renamed by a rule)."""
    return engine.rewrite_db(engine.names.incoming(db))


def renames(rules: RuleSet, settings: Settings) -> bool:
    """Whether these rules rename anything a replica applies."""
    return bool(rules.rewrite_db) or (bool(rules.effective_rewrite) and settings.semantics == "effective")


def event_renamer(engine: RuleEngine, rules: RuleSet, settings: Settings) -> Callable[[Event], Event] | None:
    """What a replica with these rules renames in the events it applies: replicate-rewrite-db
    (after lower_case_table_names' folding), or under effective semantics WL#2516 REWRITE patterns
    (which include the rewrite-db rules); None when it renames nothing. A name no rule renames is
    left as the master wrote it (the replica folds it itself)."""
    if not renames(rules, settings):
        return None
    if bool(rules.effective_rewrite) and settings.semantics == "effective":
        rename = engine.effective_rename
        return lambda event: rewrite_event(event, rename)

    def rewrite(db: str, table: str) -> tuple[str, str, bool]:
        new, changed = applied_db(engine, db)
        return new, table, changed

    return lambda event: rewrite_event(event, rewrite)


class AppliedNames:
    """replicate-rewrite-db's names as the compiled relay run writes them (the core's rename_db):
    the master's database name -> the one the replica applies (itself where no rule renames it),
    for the names met so far. A unit naming another one is renamed by `event_renamer` in Python,
    which `learn`s its names for the runs after it."""

    def __init__(self, engine: RuleEngine) -> None:
        self.engine = engine
        self.map: dict[bytes, bytes] = {}

    def learn(self, events: list[Event]) -> None:
        for event in events:
            db = event.db  # a Query's default database or a Table_map's; None for any other event
            if not db:
                continue
            raw = db.encode("utf-8", "surrogateescape")
            if raw not in self.map:
                new, changed = applied_db(self.engine, db)
                # (a name no rule renames stays; one no server could write the core leaves)
                self.map[raw] = new.encode("utf-8", "surrogateescape") if changed else raw


def applied_names(engine: RuleEngine, rules: RuleSet, settings: Settings) -> AppliedNames | None:
    """The names the compiled relay run renames for these rules: replicate-rewrite-db's alone
    (WL#2516's REWRITE patterns rename tables too: those units are renamed in Python); None
    where the rules rename nothing."""
    if not rules.rewrite_db or (bool(rules.effective_rewrite) and settings.semantics == "effective"):
        return None
    return AppliedNames(engine)


class _NamedRules(Protocol):
    """What a live stream's current rules offer (the master's SlaveState): its engine and rules."""

    @property
    def engine(self) -> RuleEngine: ...

    @property
    def rules(self) -> RuleSet: ...


def live_renamer(current: Callable[[], _NamedRules | None]) -> Callable[[Event], Event]:
    """A renamer that follows rules changed while a stream runs (`current()` gives the rules the
    stream filters with now, None before it has any): each event is renamed as those rules say."""
    held: list[object] = [None]
    renamer: list[Callable[[Event], Event] | None] = [None]

    def rename(event: Event) -> Event:
        state = current()
        if state is None:
            return event
        if held[0] is not state:
            held[0] = state
            renamer[0] = event_renamer(state.engine, state.rules, state.engine.settings)
        chosen = renamer[0]
        return event if chosen is None else chosen(event)

    return rename
