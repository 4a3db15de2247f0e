"""What a rule set names (`Reach`): a statement that names none of it (its default database, the
database it creates or drops, its tables' databases) is decided by the kinds of rule alone (db_ok
finds it in no list, tables_ok no rule for its tables), alike for every rule set of the same kinds
and settings (`signature`): spark_jobs' RuleGroup decides its class once for all of them."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Hashable, Iterable

from dumpfilter.rules.decisions import Names
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.wildcards import literal_prefix


class Reach:
    """The databases one rule set names, folded as its engine folds them (`Names`): those its
    database rules list, and those under whose `db.` a do- or ignore-table entry or a wild
    pattern's literal start (what every key it matches starts with) runs. A wild pattern whose
    literal start holds no dot (`%.t1`) names every database; so do rules that rewrite, track
    derived tables (WL#40) or follow WL#2516, a name with a dot, and a non-ASCII name under folded
    table names (Python's lower() reads a Greek sigma by what follows it)."""

    __slots__ = ("signature", "_names", "_lists", "_dotted", "_everywhere", "_named")

    def __init__(self, rules: RuleSet, settings: Settings) -> None:
        names = self._names = Names(settings)
        self._lists = {names.db(db) for db in (*rules.do_db, *rules.ignore_db, *rules.binlog_do_db, *rules.binlog_ignore_db)}
        starts = [literal_prefix(names.table(p)) for p in (*rules.wild_do_table, *rules.wild_ignore_table)]
        keys = [*starts, *(names.table(key) for key in (*rules.do_table, *rules.ignore_table))]
        self._dotted = {key[:at + 1] for key in keys for at, char in enumerate(key) if char == "."}
        self._everywhere = (bool(rules.rewrite_db) or settings.track_derived_tables or settings.semantics != "mysql"
                            or any("." not in start for start in starts))
        self._named = functools.lru_cache(4096)(self._names_it)  # (a memo by database)
        # What the answers read of a statement that names nothing named: the kinds of rule, the settings.
        self.signature: Hashable = (tuple(bool(getattr(rules, f.name)) for f in dataclasses.fields(rules)),
                                    repr(settings))

    def blind_to(self, dbs: Iterable[str | None]) -> bool:
        """True where the rules name none of `dbs` (None, no database: db_ok passes it whatever the lists)."""
        return not self._everywhere and not any(db is not None and self._named(db) for db in dbs)

    def _names_it(self, db: str) -> bool:
        names = self._names  # (as the binlog spells it, and as the applier opens it: lctn)
        return "." in db or (names.table_ci and not db.isascii()) or any(
            names.db(name) in self._lists or names.table(name + ".") in self._dotted for name in (db, names.incoming(db)))
