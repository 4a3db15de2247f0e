"""WL#2516 effective semantics of a rule engine: DO/IGNORE/REWRITE patterns over db.table (the
classic options mapped onto them), the objects a statement has an effect on, and the decision
they make."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from dumpfilter.rules.statement_info import DATABASE_KINDS, Kind, StatementInfo
from dumpfilter.rules.wildcards import compile_like, escape_like
from dumpfilter.rules.decisions import Decision, Names, compile_pattern_rewrite, fill_pattern
from dumpfilter.rules.percent_captures import PercentCaptures
from dumpfilter.rules.ruleset import RuleSet

if TYPE_CHECKING:
    from dumpfilter.rules.trigger_knowledge import TriggerKnowledge

# A compiled DO/IGNORE pattern and its text.
_Patterns = list[tuple[re.Pattern[str], str]]


class EffectiveSemantics:
    """The RuleEngine methods this module owns (a mixin of RuleEngine)."""

    # RuleEngine's state these methods read (set in evaluate.py), and what _compile_effective sets.
    rules: RuleSet
    names: Names
    acl_tables: tuple[str, ...]
    unparsed: int
    _counting: bool
    _at: Any
    _rewrite: list[tuple[str, str]]
    _effective_do: _Patterns
    _effective_ignore: _Patterns
    _binlog_effective_do: _Patterns
    _binlog_effective_ignore: _Patterns
    _effective_rewrite: list[tuple[PercentCaptures | re.Pattern[str], str]]

    if TYPE_CHECKING:
        def _knowledge(self) -> TriggerKnowledge: ...  # RuleEngine's

    # ------------------------------------------------------------------ WL#2516 effective semantics
    def _compile_effective(self) -> None:
        """DO/IGNORE patterns over db.table; the classic options map onto them as WL#2516 says ("a '%' as
        table or db corresponds to the old options"). A classic do list also means "nothing else", so it adds
        an implicit IGNORE '%.%' (design decision: keeps --replicate-do-db meaningful in this mode).
        The binlog side (CHANGE BINLOG DO/IGNORE, binlog-do-db/binlog-ignore-db) compiles the same way."""
        rules, fold = self.rules, self.names.table
        do = list(rules.effective_do) + [escape_like(db) + ".%" for db in rules.do_db]
        do += [escape_like(key) for key in rules.do_table] + list(rules.wild_do_table)
        ignore = list(rules.effective_ignore) + [escape_like(db) + ".%" for db in rules.ignore_db]
        ignore += [escape_like(key) for key in rules.ignore_table] + list(rules.wild_ignore_table)
        if rules.do_db or rules.do_table or rules.wild_do_table:
            ignore.append("%.%")
        self._effective_do = [(compile_like(fold(p)), p) for p in do]
        self._effective_ignore = [(compile_like(fold(p)), p) for p in ignore]
        binlog_do = list(rules.binlog_effective_do) + [escape_like(db) + ".%" for db in rules.binlog_do_db]
        binlog_ignore = list(rules.binlog_effective_ignore) + [escape_like(db) + ".%" for db in rules.binlog_ignore_db]
        if rules.binlog_do_db:
            binlog_ignore.append("%.%")
        self._binlog_effective_do = [(compile_like(fold(p)), p) for p in binlog_do]
        self._binlog_effective_ignore = [(compile_like(fold(p)), p) for p in binlog_ignore]
        self._effective_rewrite = [compile_pattern_rewrite(fold(old), new) for old, new in rules.effective_rewrite]
        self._effective_rewrite += [(re.compile(re.escape(old) + r"\.(.*)", re.DOTALL), new + ".%")
                                    for old, new in self._rewrite]

    def _effective_key(self, db: str, table: str) -> tuple[str, bool]:
        key = f"{db}.{table}"
        for regex, replacement in self._effective_rewrite:
            match = regex.fullmatch(self.names.table(key))
            if match:
                return fill_pattern(replacement, match.groups()), True
        return key, False

    def effective_rename(self, db: str, table: str) -> tuple[str, str, bool]:
        """WL#2516 REWRITE (and replicate-rewrite-db as `db.%` patterns) as the slave applies it to
        the names an event carries: (db, table, changed); the first matching rule wins. With an
        empty `table` it renames a default database (`db1.%->db2.%` maps `db1` to `db2`)."""
        key, changed = self._effective_key(db, table)
        if not changed:
            return db, table, False
        new_db, _, new_table = key.partition(".")  # database names cannot contain '.'
        return new_db, new_table, True

    def effective_objects(self, info: StatementInfo, session_db: str) -> tuple[list[tuple[str, str]], str]:
        """WL#2516: the (db, table) pairs a statement has an effect on, and which case found them.
        `(db, "")` is a database-level object: it matches patterns whose table part can be empty (`db.%`).
        The USE database is never a fallback: it only qualifies names the statement leaves unqualified."""
        if info.kind is Kind.ACCOUNT:
            return [("mysql", name) for name in self.acl_tables], \
                "account/privilege statement: its effective database is `mysql` (the grant tables it changes)"
        if info.updated:
            listed = ", ".join(f"{db}.{table}" for db, table in info.updated)
            return list(info.updated), f"the table(s) it changes ({listed})"
        if info.kind in DATABASE_KINDS:
            name = info.db_statement_name or session_db
            if not name:
                return [], "ALTER DATABASE without a name and without a default database changes no database"
            return [(name, "")], f"the database it creates/alters/drops ('{name}')"
        if info.kind is Kind.DROP_TRIGGER and info.trigger is not None:
            table = self._knowledge().table(info.trigger, self._at)
            if table is not None:
                return [table], f"the table of trigger '{info.trigger[1]}' ({table[0]}.{table[1]})"
            if info.trigger[0]:
                return [(info.trigger[0], "")], \
                    f"the database of trigger '{info.trigger[1]}' (its table is unknown: never created here)"
        if info.target is not None:
            kind, db, name = info.target
            if db and kind in ("UDF", "SERVER", "PLUGIN"):
                return [(db, name)], f"{kind}: its effective database is `mysql` ({db}.{name})"
            if db:
                return [(db, "")], f"the database of {kind} '{name}' ('{db}')"
            return [], f"{kind} '{name}' is unqualified and there is no default database: it changes no database"
        return [], "the statement changes no database or table"

    def _effective_statement(self, info: StatementInfo, session_db: str) -> Decision:
        if info.kind is Kind.TRANSACTION:
            return Decision(True, "BEGIN/COMMIT/ROLLBACK/SAVEPOINT/XA are never filtered")
        if not info.parse_ok:
            # Never the USE database: that is exactly what effective semantics must not depend on.
            self.unparsed += self._counting  # (self.assumed is counted by decide_statement for every assumption)
            return Decision(True, "the statement could not be parsed, so its effective database is unknown; "
                                  "written (never dropped) and counted as unparsed", None, (), (),
                            "unparsed statement: effective database unknown")
        if info.kind is Kind.SET:
            return Decision(True, "SET affects no database or table")
        affected, case = self.effective_objects(info, session_db)
        if not affected:
            # WL#2516 NEW SEMANTICS: "For each statement having an effect on a database and/or a table";
            # a statement with none is outside the rules and is written.
            return Decision(True, f"{case}: outside WL#2516's rules (they apply to statements having an effect "
                                  "on a database and/or a table); written")
        return self._effective_decision(affected, (), case, session_db)

    def _effective_decision(self, affected: Iterable[tuple[str, str]], counted: tuple[str, ...], case: str = "",
                            session_db: str | None = None) -> Decision:
        """WL#2516's three steps: no rules -> write; any DO matches -> write; any IGNORE matches -> skip; else
        write. The master's binlog filter (CHANGE BINLOG / binlog-*-db) runs first with the same steps.
        DO/IGNORE see the master's names; REWRITE renames only what is kept (the seed's own example
        `DO='db1.%', IGNORE='%.table2', REWRITE=db1.%->db2.%` keeps nothing by DO if REWRITE ran first).
        REWRITE renames what replicate-rewrite-db renames (docs/effective-semantics.md): a row event's
        table, and a statement's default database (`session_db`), never a name written in its text."""
        keys = [f"{db}.{table}" for db, table in affected]
        prefix = f"effective object: {case}; " if case else ""
        binlog = self._effective_steps(keys, self._binlog_effective_do, self._binlog_effective_ignore,
                                       "CHANGE BINLOG ")
        if binlog is not None and not binlog[0]:
            return Decision(False, prefix + binlog[1], binlog[2], tuple(k for k in keys if not k.endswith(".")))
        steps = self._effective_steps(keys, self._effective_do, self._effective_ignore, "")
        apply, reason, rule = steps if steps is not None else (True, "no DO or IGNORE pattern matches the "
                                                                      "effective database and table", None)
        renamed = []
        for key in keys:
            db, _, table = key.partition(".")
            new_key, was_rewritten = self._effective_key(db, table)
            renamed.append(new_key)
            if was_rewritten and apply and session_db is None:
                counted += ("REWRITE",)
                reason += f"; REWRITE renames '{key}' to '{new_key}'"
        new_db = self.effective_rename(session_db, "")[0] if apply and session_db else session_db
        if new_db != session_db:
            counted += ("REWRITE",)
            reason += (f"; REWRITE renames the default database '{session_db}' to '{new_db}' (names written "
                       "in the statement are not rewritten)")
        if steps is None and not self._effective_do and not self._effective_ignore:
            reason = "no DO/IGNORE rules" + reason.removeprefix(
                "no DO or IGNORE pattern matches the effective database and table")
        # a statement's tables keep the names written in it (only its default database is renamed)
        tables = tuple(key for key in (renamed if apply and session_db is None else keys) if not key.endswith("."))
        counted += (rule,) if rule else ()
        return Decision(apply, prefix + reason, rule, tables, counted)

    def _effective_steps(self, keys: Sequence[str], do_patterns: _Patterns, ignore_patterns: _Patterns,
                         label: str) -> tuple[bool, str, str] | None:
        """(apply, reason, rule) of the first DO then IGNORE pattern matching any key; None if none matches."""
        for rule, patterns, verdict in (("DO", do_patterns, True), ("IGNORE", ignore_patterns, False)):
            for key in keys:
                for regex, pattern in patterns:
                    if regex.fullmatch(self.names.table(key)):
                        verb = "is written" if verdict else "is not written"
                        return verdict, f"{label}{rule}: '{key}' matches '{pattern}' and {verb}", label + rule
        return None
