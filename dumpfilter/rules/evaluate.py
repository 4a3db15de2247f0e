"""The compiled decision engine: rpl_filter.cc (db_ok, tables_ok, rewrite) plus the applier call sites, exactly."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass

from dumpfilter.errors import RuleError
from dumpfilter.rules.percent_captures import PercentCaptures
from dumpfilter.rules.ruleset import RuleSet, Settings, filter_name, option_name
from dumpfilter.rules.schema import SCHEMA_KINDS, SchemaModel
from dumpfilter.rules.schema_timeline import SchemaTimeline
from dumpfilter.rules.statements import DATABASE_KINDS, Kind, StatementInfo, names_ref, statement_tables
from dumpfilter.rules.trigger_knowledge import TriggerKnowledge
from dumpfilter.rules.wildcards import LikeIndex, compile_like, escape_like

# open_grant_tables (sql/auth/sql_user_table.cc, 8.0) marks every ACL table updating.
MYSQL_ACL_TABLES = ("user", "db", "tables_priv", "columns_priv", "procs_priv", "proxies_priv", "role_edges",
                    "default_roles", "global_grants", "password_history")
# MariaDB 10.4+ Grant_tables::open_and_lock; it opens only the subset a statement needs [inf: all taken].
MARIADB_ACL_TABLES = ("global_priv", "db", "tables_priv", "columns_priv", "host", "procs_priv", "proxies_priv",
                      "roles_mapping")


@dataclass(frozen=True)
class Decision:
    """Whether the replica applies an event, and the rule and step that decided."""

    apply: bool
    reason: str
    rule: str | None = None
    tables: tuple[str, ...] = ()
    counted: tuple[str, ...] = ()  # FILTER_NAMEs whose P_S COUNTER this decision increments
    # Set when the engine could not see what the server sees (an unparsed statement, a column or a
    # trigger the schema model lacks) and gave its default answer: says which assumption it made.
    assumption: str | None = None

    @property
    def verdict(self) -> str:
        return "apply" if self.apply else "skip"

    def to_json(self) -> dict:
        out = {"decision": self.verdict, "reason": self.reason, "rule": self.rule, "tables": list(self.tables)}
        if self.assumption is not None:
            out["assumption"] = self.assumption
        return out

    def __str__(self) -> str:
        text = f"{self.verdict}: {self.reason}"
        return text + f" [assumed: {self.assumption}]" if self.assumption else text


def _decision_init(self: Decision, apply: bool, reason: str, rule: str | None = None, tables: tuple[str, ...] = (),
                   counted: tuple[str, ...] = (), assumption: str | None = None) -> None:
    # The generated frozen __init__ sets each field through object.__setattr__: it cost more than
    # the rest of a remembered statement decision. The same fields, set in one dict update.
    self.__dict__.update(apply=apply, reason=reason, rule=rule, tables=tables, counted=counted,
                         assumption=assumption)


Decision.__init__ = _decision_init


@dataclass(frozen=True)
class _Step:
    """One rpl_filter.cc check: ok is True/False, or None when no rule decided (caller's final step)."""

    ok: bool | None
    rule: str | None = None
    reason: str = ""
    counted: tuple[str, ...] = ()


def _step_init(self: _Step, ok: bool | None, rule: str | None = None, reason: str = "",
               counted: tuple[str, ...] = ()) -> None:
    self.__dict__.update(ok=ok, rule=rule, reason=reason, counted=counted)  # (as _decision_init)


_Step.__init__ = _step_init


class _Names:
    """Case rules: MySQL compares with table_alias_charset (ci iff lctn>=1); MariaDB uses strcmp for db and
    rewrite rules and system_charset_info (always ci) for table and wild rules (filter-semantics §8)."""

    def __init__(self, settings: Settings):
        mysql, lctn = settings.flavor == "mysql", settings.lower_case_table_names
        self.db_ci = mysql and lctn >= 1
        self.table_ci = (not mysql) or lctn >= 1
        # set_thd_db / Table_map_log_event::do_apply_event lower-case incoming names (BUG#37656):
        # MySQL 8 when lctn != 0, MariaDB when lctn == 1.
        self.lower_incoming = lctn != 0 if mysql else lctn == 1

    def incoming(self, name: str) -> str:
        return name.lower() if self.lower_incoming else name

    def db(self, name: str) -> str:
        return name.lower() if self.db_ci else name

    def table(self, key: str) -> str:
        return key.lower() if self.table_ci else key


class RuleEngine:
    """Decisions for one replica's rules. Per-table decisions are cached; build a new engine when rules change."""

    def __init__(self, rules: RuleSet, settings: Settings | None = None, *, triggers=None,
                 schema: SchemaModel | SchemaTimeline | None = None, replay_ddl: bool = True):
        self.rules = rules
        self.settings = settings or Settings()
        self.names = _Names(self.settings)
        self.acl_tables = MYSQL_ACL_TABLES if self.settings.flavor == "mysql" else MARIADB_ACL_TABLES
        self.unparsed = 0
        self.assumed = 0  # decisions that carry an assumption (Decision.assumption): `assumed_decisions`
        self.counters: Counter[str] = Counter()
        # The master's schema as the binlog's DDL builds it (plus a starting --schema): columns place
        # unqualified SET columns, triggers add the tables they write. Changes per DDL, not per event.
        # A SchemaTimeline (the master's, shared by every engine) is versioned by position: each
        # decision then names its position (`at`), and the engine neither replays DDL into it nor
        # records its trigger knowledge from the order it is asked in: it folds the timeline's log.
        self.timeline = schema if isinstance(schema, SchemaTimeline) else None
        if self.timeline is not None:
            self.schema = self.timeline.start
        else:
            self.schema = schema if schema is not None else SchemaModel()
        # False when the model is one stream's, shared with other engines: the stream's reader
        # replays each DDL once, after every engine has decided it (split's Router does).
        self.replay_ddl = replay_ddl and self.timeline is None
        # Which triggers this replica has (Bug#24478: one whose CREATE it skipped exists on the master only).
        self.triggers = TriggerKnowledge(triggers)
        self._at = None           # the position of the decision being made (None: in stream order)
        self._folded = 0          # timeline log entries folded into self.triggers
        self._counting = True     # False while folding: those decisions are not the stream's
        # Set when a decision read the schema model or the trigger knowledge: its answer may differ at
        # another position, so it must not be remembered by statement (master.flags.StatementWords).
        self.consulted = False
        self.derived_ignored: set[str] = set()
        self._table_decisions: dict[tuple[str, str], Decision] = {}
        self._by_database: dict[tuple, tuple[Decision, bool]] = {}  # see _decide_by_database
        # (sql, default db) -> (decision, info, the parse the model replays), or None when met once:
        # see decide_statement.
        self._statements: dict[tuple[str, str | None], tuple[Decision, StatementInfo, StatementInfo | None] | None] = {}
        self._table_steps: dict[str, _Step] = {}
        self._db_steps: dict[tuple[str | None, str], _Step] = {}  # see db_ok
        self._compile()

    # ------------------------------------------------------------------ compile
    def _compile(self) -> None:
        rules, names = self.rules, self.names
        self._do_db = {names.db(db): db for db in reversed(rules.do_db)}
        self._ignore_db = {names.db(db): db for db in reversed(rules.ignore_db)}
        self._binlog_do_db = {names.db(db): db for db in reversed(rules.binlog_do_db)}
        self._binlog_ignore_db = {names.db(db): db for db in reversed(rules.binlog_ignore_db)}
        self._do_table = {names.table(key): key for key in reversed(rules.do_table)}
        self._ignore_table = {names.table(key): key for key in reversed(rules.ignore_table)}
        # Indexed by literal prefix (wildcards.LikeIndex): a key is matched only against the
        # patterns it could match, so 10 000 wild rules cost about what one costs.
        self._wild_do = _like_index(rules.wild_do_table, names.table)
        self._wild_ignore = _like_index(rules.wild_ignore_table, names.table)
        self._rewrite = [(names.db(old), new) for old, new in rules.rewrite_db]
        self.table_rules_on = rules.table_rules_on
        self._rules_alone = self.settings.semantics != "effective" and not self.settings.track_derived_tables
        if self.settings.semantics == "effective":
            self._compile_effective()
        elif rules.effective_do or rules.effective_ignore or rules.effective_rewrite or rules.binlog_effective_do \
                or rules.binlog_effective_ignore:
            raise RuleError("DO/IGNORE/REWRITE (WL#2516 CHANGE MASTER/CHANGE BINLOG) rules need "
                            "--filter-semantics=effective")

    def invalidate(self) -> None:
        """Forget cached per-table decisions (at a Format_description event, or after derived-table changes),
        and the remembered statement answers with them."""
        self._table_decisions.clear()
        self._table_steps.clear()
        self._statements.clear()

    # ------------------------------------------------------------------ rpl_filter.cc primitives
    def rewrite_db(self, db: str) -> tuple[str, bool]:
        """Rpl_filter::get_rewrite_db: the first rule whose FROM matches wins; one pass, not transitive."""
        folded = self.names.db(db)
        for old, new in self._rewrite:
            if old == folded:
                return new, True
        return db, False

    def db_ok(self, db: str | None, what: str = "default database") -> _Step:
        """Rpl_filter::db_ok: a do list decides alone (ignore_db never consulted); NULL db passes.
        Remembered per (db, what): the answer depends on the rules alone."""
        key = (db, what)
        step = self._db_steps.get(key)
        if step is None:
            if len(self._db_steps) >= _BY_DATABASE_MAX:
                self._db_steps.clear()
            step = self._db_steps[key] = _db_list_check(self.names.db, db, self._do_db, self._ignore_db,
                                                        "replicate", what)
        return step

    def db_ok_with_wild_table(self, db: str) -> _Step:
        """Rpl_filter::db_ok_with_wild_table: key `db.` against wild-do then wild-ignore; only `%`-table
        patterns can match (`'db1.' LIKE 'db1.t%'` is false)."""
        step = self._wild_step(self.names.table(db + "."), f"database '{db}'")
        if step is not None:
            return step
        if self._wild_do:
            return _Step(False, "replicate-wild-do-table", f"database '{db}' matches no wild-do pattern")
        return _Step(True, None, f"database '{db}': no wild rule applies")

    def table_step(self, db: str, table: str) -> _Step:
        """One table of tables_ok: do-table > ignore-table > wild-do > wild-ignore; cached per key."""
        key = db + "." + table
        folded = self.names.table(key)
        step = self._table_steps.get(folded)
        if step is None:
            step = self._table_steps[folded] = self._uncached_table_step(key, folded)
        return step

    def _uncached_table_step(self, key: str, folded: str) -> _Step:
        if folded in self._do_table:
            return _Step(True, "replicate-do-table", f"'{key}' is in the do list", (filter_name("do_table"),))
        if folded in self._ignore_table:
            return _Step(False, "replicate-ignore-table", f"'{key}' is in the ignore list",
                         (filter_name("ignore_table"),))
        if folded in self.derived_ignored:
            return _Step(False, "track-derived-tables", f"'{key}' was derived from an ignored table (WL#40)")
        return self._wild_step(folded, f"'{key}'") or _Step(None)

    def _wild_step(self, folded_key: str, shown: str) -> _Step | None:
        """wild-do before wild-ignore; the first matching pattern decides."""
        for patterns, verdict, rule_type in ((self._wild_do, True, "wild_do_table"),
                                             (self._wild_ignore, False, "wild_ignore_table")):
            pattern = patterns.first_match(folded_key)
            if pattern is not None:
                return _Step(verdict, option_name(rule_type), f"{shown} matches '{pattern}'",
                             (filter_name(rule_type),))
        return None

    def tables_ok(self, updated) -> _Step:
        """Rpl_filter::tables_ok over the *updated* tables in statement order; the first decisive rule wins.
        "Changing table order in the list can lead to different results" (source comment)."""
        for db, table in updated:
            step = self.table_step(db, table)
            if step.ok is not None:
                return step
        if not updated:
            return _Step(False, "replicate-*-table", "table rules are on and the statement updates no table")
        if self.rules.do_table or self.rules.wild_do_table:
            rule = "replicate-do-table" if self.rules.do_table else "replicate-wild-do-table"
            listed = ", ".join(f"'{db}.{table}'" for db, table in updated)
            return _Step(False, rule, f"no rule matched {listed} and a do list exists")
        return _Step(True, None, "no table rule matched")

    # ------------------------------------------------------------------ binlog write filter (master side)
    def binlog_db_ok(self, db: str | None) -> _Step:
        """FILTER_BINLOG_WRITE_F: the master's binlog-do/ignore-db, same db_ok; a NULL db is written."""
        if not self._binlog_do_db and not self._binlog_ignore_db:
            return _NO_DATABASE_RULES
        return _db_list_check(self.names.db, db, self._binlog_do_db, self._binlog_ignore_db, "binlog", "database")

    # ------------------------------------------------------------------ row events
    def table_kept(self, db: str, table: str) -> bool:
        """Fast cached path for Table_map/rows events: one dict lookup once warm."""
        decision = self._table_decisions.get((db, table))
        if decision is None:
            decision = self.decide_table(db, table)
        return decision.apply

    def decide_table(self, db: str, table: str) -> Decision:
        """A Table_map for db.table: binlog write filter on the table's db, then rewrite, db_ok, tables_ok."""
        cached = self._table_decisions.get((db, table))
        if cached is None:
            cached = self._table_decisions[(db, table)] = self._decide_table_uncached(db, table)
        counters = self.counters
        for name in cached.counted:  # (a loop: Counter.update's Mapping check costs more here)
            counters[name] += 1
        return cached

    def _decide_table_uncached(self, db: str, table: str) -> Decision:
        if self.settings.semantics == "effective":
            return self._effective_decision([(self.names.incoming(db), self.names.incoming(table))], (),
                                            "the table of the rows")
        binlog = self.binlog_db_ok(db)
        if binlog.ok is False:
            return _decision(binlog, ())
        db, table = self.names.incoming(db), self.names.incoming(table)
        rewritten, was_rewritten = self.rewrite_db(db)
        counted = (filter_name("rewrite_db"),) if was_rewritten else ()
        key = (f"{rewritten}.{table}",)
        db_step = self.db_ok(rewritten, "table database")
        if db_step.ok is False or not self.table_rules_on:
            return _decision(db_step, key, counted)
        table_step = self.tables_ok([(rewritten, table)])
        if table_step.ok and table_step.rule is None and db_step.rule:
            return _decision(db_step, key, counted)
        return _decision(table_step, key, counted + db_step.counted)

    # ------------------------------------------------------------------ statement events
    def decide_statement(self, sql: str, current_db: str | None, at=None, parses: dict | None = None) -> Decision:
        """A Query event with default database `current_db` (None: the source had none). `at`: its
        position key, for an engine on a SchemaTimeline (the decision sees the schema before it).
        `parses`: a memo shared by the engines deciding the same event (the master keeps one per
        unit), so that it is parsed once whatever the number of rule sets."""
        self._at = at
        known = self._statements.get((sql, current_db))
        if known is not None:
            # Decided before, by rules alone (see _remembered): the answer again, and what a
            # decision does besides (rule-hit counters, the schema model's replay) done again.
            decision, info, parsed = known
            if self._counting:
                self._account_statement(sql, current_db, parsed, info, decision)
            return decision
        session_db = self.names.incoming(current_db) if current_db else ""
        notes: list[str] = []
        if self.settings.semantics == "effective":
            # WL#2516 patterns are matched against the master's names: no rewrite before the decision.
            parsed_db, parsed = session_db, parse_statement(sql, session_db, parses)
            info = parsed
            info = _lower_tables(info) if self.names.lower_incoming else info
            if info.kind is Kind.UPDATE_MULTI:
                info = self._multi_update(info, notes, triggers=False)
            decision = self._effective_statement(info, session_db)
            notes = notes if self._effective_do or self._effective_ignore else []
        else:
            rewritten, was_rewritten = self.rewrite_db(session_db) if session_db else ("", False)
            parsed_db, parsed = rewritten, parse_statement(sql, rewritten, parses)
            info = parsed
            info = _lower_tables(info) if self.names.lower_incoming else info
            if info.kind is Kind.UPDATE_MULTI:
                # MariaDB checks a multi-table UPDATE after opening its tables: the prelocked tables that
                # fired triggers write are in the list (observed on 10.11). MySQL 8 checks it before, on
                # the table_map_for_update bitmap: SET tables only [src: sql_parse.cc].
                info = self._multi_update(info, notes, triggers=self.settings.flavor == "mariadb")
            counted = (filter_name("rewrite_db"),) if was_rewritten else ()
            decision = self._decide_by_database(info, current_db, rewritten, counted)
            notes = notes if self.table_rules_on else []
        if notes and decision.assumption is None:
            decision = dataclasses.replace(decision, assumption="; ".join(notes))
        # The model holds the master's names: reuse the parse only if it resolved against them.
        model_parse = parsed if parsed_db == (current_db or "") else None
        if not notes and self._remembered(sql, info):
            # Remembered the second time it is met: a text met once costs a key (strings, which the
            # garbage collector stops tracking), not a kept decision that every collection walks.
            statements, key = self._statements, (sql, current_db)
            if len(statements) >= _STATEMENTS_MAX:
                statements.clear()
            statements[key] = (decision, info, model_parse) if key in statements else None
        if self._counting:
            self._account_statement(sql, current_db, model_parse, info, decision)
        return decision

    def _account_statement(self, sql: str, current_db: str | None, model_parse: StatementInfo | None,
                           info: StatementInfo, decision: Decision) -> None:
        """What a statement decision does besides answering, whether computed or remembered: the
        assumed count, the schema model's replay of DDL, the rule-hit counters, derived tables."""
        if decision.assumption is not None:
            self.assumed += 1
        if info.kind in SCHEMA_KINDS and self.timeline is None:
            self._observe_ddl(sql, current_db, model_parse, info, decision)
        counters = self.counters
        for name in decision.counted:
            counters[name] += 1
        if self.settings.track_derived_tables:
            self._track_derived(info)

    def _remembered(self, sql: str, info: StatementInfo) -> bool:
        """Whether the decision of `sql` (with its default database) is the rules' alone, so that
        decide_statement may answer it again from `_statements`: the standard semantics without
        derived tables (whose ignore set grows with the stream), and a statement whose decision
        reads neither the schema model nor the trigger knowledge (a multi-table UPDATE, a DROP
        TRIGGER) nor counts an unparsed statement. Only short texts (the memory stays bounded)."""
        return (len(sql) <= _STATEMENT_LEN and self._rules_alone and info.kind not in _READS_STATE
                and (info.parse_ok or not self.table_rules_on))

    def _knowledge(self) -> TriggerKnowledge:
        """This replica's trigger knowledge, brought up to the decision's position first when the
        engine is on a timeline (only decisions that need it pay for reading the log)."""
        self.consulted = True
        if self.timeline is not None and self._at is not None:
            self._fold(self._at)
        return self.triggers

    def _fold(self, at) -> None:
        """Bring the trigger knowledge up to `at` from the timeline's log, in log order: each
        CREATE/DROP TRIGGER before `at` decided as this replica would (not counted)."""
        entries = self.timeline.entries_before(at, self._folded)
        if not entries:
            return
        saved_at, saved_counting = self._at, self._counting
        self._counting = False
        try:
            for key, sql, db, info in entries:
                self._folded += 1
                if info.kind in (Kind.CREATE_TRIGGER, Kind.DROP_TRIGGER):
                    self._record_trigger(info, self.decide_statement(sql, db, at=key).apply, key)
        finally:
            self._at, self._counting = saved_at, saved_counting

    def _model(self) -> SchemaModel:
        """The schema the decision being made sees."""
        self.consulted = True
        if self.timeline is not None and self._at is not None:
            return self.timeline.model_at(self._at)
        return self.schema

    @property
    def databases_only(self) -> bool:
        """Whether this engine decides statements by databases alone: no table rule, the standard
        semantics, no derived-table state. It then decides every `plain_statement` alike, by its
        default database."""
        return not (self.table_rules_on or self.settings.semantics == "effective" or self.settings.track_derived_tables)

    def _decide_by_database(self, info: StatementInfo, current_db, rewritten: str, counted) -> Decision:
        """`_decide_statement`, remembered per (kind, named database, default database) when the
        rules have no table rule: rpl_filter.cc then checks databases only, so the answer cannot
        depend on the tables (the many schema-per-replica setups decide each DDL by a dict lookup)."""
        if self.table_rules_on or info.kind is Kind.UPDATE_MULTI:
            return self._decide_statement(info, current_db, rewritten, counted)
        key = (info.kind, info.db_statement_name, current_db)
        known = self._by_database.get(key)
        tables = _table_names(info.updated)
        if known is None:
            decision = self._decide_statement(info, current_db, rewritten, counted)
            if tables:  # remembered with whether it lists the tables (not when a binlog-*-db rule decided)
                if len(self._by_database) >= _BY_DATABASE_MAX:
                    self._by_database.clear()
                self._by_database[key] = (decision, decision.tables == tables)
            return decision
        decision, lists = known
        return Decision(decision.apply, decision.reason, decision.rule, tables if lists else (), decision.counted,
                        decision.assumption)

    def _decide_statement(self, info: StatementInfo, current_db, rewritten: str, counted) -> Decision:
        if info.kind is Kind.TRANSACTION:
            return Decision(True, "BEGIN/COMMIT/ROLLBACK/SAVEPOINT/XA are never filtered")
        binlog_db = info.db_statement_name if info.kind in DATABASE_KINDS and info.db_statement_name else current_db
        binlog = self.binlog_db_ok(binlog_db)
        if binlog.ok is False:
            return _decision(binlog, ())
        tables = _table_names(info.updated)
        db_step = self._database_check(info, rewritten)
        if db_step.ok is False:
            return _decision(db_step, tables, counted)
        if not info.parse_ok and self.table_rules_on:
            self.unparsed += self._counting
            return Decision(True, "statement could not be parsed; kept (counted as unparsed, never dropped)",
                            None, tables, counted + db_step.counted, "unparsed statement: its tables are unknown")
        table_step = self._statement_table_check(info)
        if table_step is None or (table_step.ok and table_step.rule is None and db_step.rule):
            return _decision(db_step, tables, counted)
        return _decision(table_step, tables, counted + db_step.counted)

    def _database_check(self, info: StatementInfo, rewritten: str) -> _Step:
        """sql_parse.cc check_database_filters on the event db (§1.1: for DATABASE statements the source
        writes the target database as the event db, write_db_cmd_to_binlog)."""
        if info.kind not in DATABASE_KINDS:
            return self.db_ok(rewritten)
        name = info.db_statement_name
        if self.settings.flavor == "mariadb":
            # MariaDB 10.11 (observed, §1.4): db rules on lex->name (not rewritten) AND the wild check, always.
            name = name if name is not None else rewritten
            step = self.db_ok(name)
            return step if step.ok is False else _merge(step, self.db_ok_with_wild_table(name))
        # 8.0 filters DATABASE statements on the (rewritten) event db; 5.x/MariaDB on lex->name.
        target = self.rewrite_db(name)[0] if name is not None else rewritten
        step = self.db_ok(target)
        if step.ok is not False and not self.rules.db_rules_on:
            # BUG#46110: any do/ignore-db rule turns the wild check for DATABASE statements off.
            return self.db_ok_with_wild_table(target)
        return step

    def _statement_table_check(self, info: StatementInfo) -> _Step | None:
        """all_tables_not_ok, then open_grant_tables for account statements; None when nothing is checked."""
        if not self.table_rules_on or info.exempt_from_table_rules:
            return None
        if info.kind is Kind.DROP_TRIGGER:
            return self._drop_trigger_step(info)
        step = self.tables_ok(info.updated) if info.has_tables else None
        if step is not None and step.ok is False:
            return step
        if info.kind is Kind.ACCOUNT:
            # tables_ok(NULL, acl tables): a do list not covering mysql.* skips every account statement.
            acl = self.tables_ok([("mysql", name) for name in self.acl_tables])
            if acl.ok is False:
                return _Step(False, acl.rule, "account management checks every mysql ACL table: " + acl.reason,
                             acl.counted)
            return step or acl
        return step

    def _drop_trigger_step(self, info: StatementInfo) -> _Step:
        table = self._knowledge().table(info.trigger, self._at)
        if table is None:
            # Bug#24478: the trigger's table cannot be loaded (CREATE TRIGGER was filtered): silently skipped.
            return _Step(False, "replicate-*-table",
                         f"trigger '{info.trigger[0]}.{info.trigger[1]}' is unknown on the replica (Bug#24478)")
        return self.tables_ok([table])

    # ------------------------------------------------------------------ the schema model
    def _observe_ddl(self, sql: str, current_db, parsed, info: StatementInfo, decision: Decision) -> None:
        """Replay DDL into the model after the decision (the decision sees the schema before it)."""
        self._record_trigger(info, decision.apply, self._at)
        if self.replay_ddl:
            self.schema.observe(sql, current_db, parsed)

    def _record_trigger(self, info: StatementInfo, applied: bool, at) -> None:
        """A CREATE TRIGGER this replica skips leaves a trigger that exists on the master only; one it
        applies gives it the trigger (and its table); a DROP TRIGGER it applies removes it."""
        if info.trigger is None:
            return
        if info.kind is Kind.CREATE_TRIGGER:
            self.triggers.created(info.trigger, info.updated[0] if info.updated else None, applied, at)
        elif info.kind is Kind.DROP_TRIGGER and applied:
            self.triggers.dropped(info.trigger, at)

    def _multi_update(self, info: StatementInfo, notes: list[str], triggers: bool) -> StatementInfo:
        """BUG#37051: the updated tables of a multi-table UPDATE are those whose columns SET assigns,
        placed with the model's column lists; then (MariaDB) the tables the fired triggers write.
        Where the model cannot tell, today's answer stands and `notes` says which assumption was made."""
        updated = list(info.updated)
        if any(qualifier is None for qualifier, _ in info.set_columns):
            placed = self._place_set_columns(info, notes)
            if placed is not None:
                updated = placed
        if triggers:
            updated += self._trigger_tables(updated, notes)
        return dataclasses.replace(info, updated=tuple(updated))

    def _place_set_columns(self, info: StatementInfo, notes: list[str]) -> list | None:
        joined, chosen, model = info.joined, set(), self._model()
        for qualifier, column in info.set_columns:
            if qualifier is not None:
                chosen.update(i for i, ref in enumerate(joined) if names_ref(ref, qualifier))
                continue
            owners, unknown = [], []
            for i, ((db, table), _) in enumerate(joined):
                columns = model.columns(db, table)
                if columns is None:
                    unknown.append(i)
                elif column.lower() in columns:
                    owners.append(i)
            if len(owners) == 1:
                chosen.add(owners[0])  # the master ran it, so no other joined table has that column
            elif not owners and len(unknown) == 1:
                chosen.add(unknown[0])  # the only table whose columns are unknown must have it
            else:
                missing = ", ".join(f"{joined[i][0][0]}.{joined[i][0][1]}" for i in unknown)
                why = f"columns of {missing} unknown" if unknown else "no joined table has it in the schema model"
                notes.append(f"SET column '{column}' not placed ({why}): every joined table taken as updated")
                return None
        placed: list = []
        for i in sorted(chosen):
            if joined[i][0] not in placed:
                placed.append(joined[i][0])
        return placed or None

    def _trigger_tables(self, updated: list, notes: list[str]) -> list:
        """Tables written by the triggers the statement fires on this replica (nested triggers too)."""
        extra: list = []
        fired: set = set()
        model = self._model()
        queue = [(table, "UPDATE") for table in updated]
        while queue:
            table, event = queue.pop(0)
            if not model.knows(*table):
                notes.append(f"table {table[0]}.{table[1]} is not in the schema model: its {event} triggers "
                             "are unknown, none counted")
                continue
            for trigger in model.triggers_on(table, event):
                key = (trigger.db, trigger.name)
                if key in fired or self._knowledge().absent(key, self._at):
                    continue
                fired.add(key)
                if trigger.writes is None:
                    notes.append(f"trigger {trigger.db}.{trigger.name}: body not followed, its writes not counted")
                    continue
                for written, written_event in trigger.writes:
                    if written not in updated and written not in extra:
                        extra.append(written)
                    queue.append((written, written_event))
        return extra

    def _track_derived(self, info: StatementInfo) -> None:
        """WL#40 "clever" mode (off by default; MySQL does not do this): CREATE ... LIKE/SELECT from an
        ignored table, or RENAME from one, puts the new table in the ignore set for later events."""
        if info.kind is Kind.CREATE_TABLE and info.updated:
            sources = [(info.read, info.updated[0])]
        elif info.kind is Kind.RENAME_TABLE:
            sources = [((old,), new) for old, new in info.renames]
        else:
            return
        for read, new in sources:
            if any(self.table_step(db, table).ok is False for db, table in read):
                self.derived_ignored.add(self.names.table(f"{new[0]}.{new[1]}"))
                self.invalidate()

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
        self._effective_rewrite = [_compile_pattern_rewrite(fold(old), new) for old, new in rules.effective_rewrite]
        self._effective_rewrite += [(re.compile(re.escape(old) + r"\.(.*)", re.DOTALL), new + ".%")
                                    for old, new in self._rewrite]

    def _effective_key(self, db: str, table: str) -> tuple[str, bool]:
        key = f"{db}.{table}"
        for regex, replacement in self._effective_rewrite:
            match = regex.fullmatch(self.names.table(key))
            if match:
                return _fill_pattern(replacement, match.groups()), True
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

    def _effective_decision(self, affected, counted, case: str = "", session_db: str | None = None) -> Decision:
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

    def _effective_steps(self, keys, do_patterns, ignore_patterns, label: str):
        """(apply, reason, rule) of the first DO then IGNORE pattern matching any key; None if none matches."""
        for rule, patterns, verdict in (("DO", do_patterns, True), ("IGNORE", ignore_patterns, False)):
            for key in keys:
                for regex, pattern in patterns:
                    if regex.fullmatch(self.names.table(key)):
                        verb = "is written" if verdict else "is not written"
                        return verdict, f"{label}{rule}: '{key}' matches '{pattern}' and {verb}", label + rule
        return None


_NO_DATABASE_RULES = _Step(None, None, "no database rules")


def _db_list_check(fold, db, do_list: dict, ignore_list: dict, prefix: str, what: str) -> _Step:
    if not do_list and not ignore_list:
        return _NO_DATABASE_RULES
    if db is None:
        # "Previous behaviour 'if the user has specified restrictions on which databases to
        # replicate and db was not selected, do not replicate' has been replaced with 'do replicate'".
        return _Step(True, None, f"no {what} (NULL db passes db_ok)")
    folded = fold(db)
    if db == "":  # sql_parse.cc: the applier passes '' (not NULL) when the source had no default database
        what = f"no {what} ('')"
    else:
        what = f"{what} '{db}'"
    if do_list:  # the ignore list is never consulted when a do list exists
        counter = (filter_name("do_db"),) if prefix == "replicate" else ()
        if folded in do_list:
            return _Step(True, f"{prefix}-do-db", f"{what} is in the do list", counter)
        return _Step(False, f"{prefix}-do-db", f"{what} is not in the do list")
    if folded in ignore_list:
        counter = (filter_name("ignore_db"),) if prefix == "replicate" else ()
        return _Step(False, f"{prefix}-ignore-db", f"{what} is in the ignore list", counter)
    return _Step(True, None, f"{what} is not in the ignore list")


def _table_names(updated) -> tuple[str, ...]:
    """`db.table` of each table (as Decision.tables lists them)."""
    if len(updated) == 1:
        db, table = updated[0]
        return (db + "." + table,)
    return tuple([f"{db}.{table}" for db, table in updated])


def _like_index(patterns, fold) -> LikeIndex:
    folded = [fold(p) for p in patterns]
    return LikeIndex([(compile_like(f), p) for f, p in zip(folded, patterns)], folded)


def _merge(first: _Step, second: _Step) -> _Step:
    return _Step(second.ok, second.rule or first.rule, second.reason, first.counted + second.counted)


_BY_DATABASE_MAX = 4096  # remembered statement answers per engine (no table rules): cleared when full
# decide_statement's memory by text: texts up to _STATEMENT_LEN characters, at most _STATEMENTS_MAX
# of them (cleared when full). Statements whose decision reads the schema model or the trigger
# knowledge are never remembered: their answer can change with the stream.
_STATEMENT_LEN = 2048
_STATEMENTS_MAX = 4096
_READS_STATE = frozenset({Kind.UPDATE_MULTI, Kind.DROP_TRIGGER})


def parse_statement(sql: str, default_db: str, parses: dict | None) -> StatementInfo:
    """statement_tables through a parse memo (`parses`, keyed by text and default database) shared by
    the engines deciding the same event, so that it is parsed once whatever the number of rule sets."""
    if parses is None:
        return statement_tables(sql, default_db)
    info = parses.get((sql, default_db))
    if info is None:
        info = parses[(sql, default_db)] = statement_tables(sql, default_db)
    return info


def _decision(step: _Step, tables, counted=()) -> Decision:
    ok = step.ok is not False
    reason = f"{step.rule}: {step.reason}" if step.rule else step.reason
    return Decision(ok, reason, step.rule, tuple(tables), tuple(counted) + step.counted)


def _lower_tables(info: StatementInfo) -> StatementInfo:
    """lctn: the applier lower-cases the names it opens, so rules see lower-case db.table."""

    def lower(ref):
        return (ref[0].lower(), ref[1].lower()) if ref else ref

    return dataclasses.replace(
        info,
        updated=tuple(map(lower, info.updated)),
        joined=tuple((lower(ref), aliases) for ref, aliases in info.joined),
        read=tuple(map(lower, info.read)),
        renames=tuple((lower(old), lower(new)) for old, new in info.renames),
        trigger=lower(info.trigger),
        db_statement_name=info.db_statement_name.lower() if info.db_statement_name else info.db_statement_name,
    )


def _compile_pattern_rewrite(old: str, new: str) -> tuple[PercentCaptures, str]:
    """WL#2516 `REWRITE=db1.%->db2.%`: each `%` of FROM is captured and fills the next `%` of TO.

    The worklog allows "simple regular expressions only" at first: `%` is the only wildcard here.
    """
    if old.count("%") != new.count("%"):
        raise RuleError(f"REWRITE: '{old}->{new}' must use as many '%' on both sides")
    return PercentCaptures(old), new  # the regex a(.*)b(.*)... backtracked through every split


def _fill_pattern(replacement: str, groups: tuple[str, ...]) -> str:
    pieces = replacement.split("%")
    out = [pieces[0]]
    for group, piece in zip(groups, pieces[1:]):
        out += [group, piece]
    return "".join(out)
