"""The compiled decision engine: rpl_filter.cc (db_ok, tables_ok, rewrite) plus the applier call sites, exactly."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Any

from dumpfilter.errors import RuleError
from dumpfilter.rules.ruleset import RuleSet, Settings, filter_name, option_name
from dumpfilter.rules.schema import SCHEMA_KINDS, SchemaModel
from dumpfilter.rules.schema_timeline import SchemaTimeline
from dumpfilter.rules.statement_info import DATABASE_KINDS, READS_STATE, Kind, Parses, StatementInfo, TablesOf
from dumpfilter.rules.statement_facts import ref_names
from dumpfilter.codec.transactions import statement_verb
from dumpfilter.rules.statements import plain_statement, statement_tables
from dumpfilter.rules.trigger_knowledge import TableRef, TriggerKey, TriggerKnowledge
from dumpfilter.rules.decisions import (MARIADB_ACL_TABLES, MYSQL_ACL_TABLES, NO_DATABASE_RULES, NO_RULE, Decision,
                                         Names, Step, db_list_check, decision_from, like_index, lower_tables,
                                         merge_steps, table_names)
from dumpfilter.rules.decider import Decider
from dumpfilter.rules.effective import EffectiveSemantics


class RuleEngine(EffectiveSemantics, Decider):
    """Decisions for one replica's rules. Per-table decisions are cached; build a new engine when rules change."""

    def __init__(self, rules: RuleSet, settings: Settings | None = None, *,
                 schema: SchemaModel | SchemaTimeline | None = None, replay_ddl: bool = True) -> None:
        self.rules = rules
        self.settings = settings or Settings()
        self.names = Names(self.settings)
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
        self.schema = schema.start if isinstance(schema, SchemaTimeline) else schema or SchemaModel()
        # False when the model is one stream's, shared with other engines: the stream's reader
        # replays each DDL once, after every engine has decided it (split's Router does).
        self.replay_ddl = replay_ddl and self.timeline is None
        # Which triggers this replica has (Bug#24478: one whose CREATE it skipped exists on the master only).
        self.triggers = TriggerKnowledge()
        self._at: Any = None      # the position of the decision being made (None: in stream order)
        self._folded = 0          # timeline log entries folded into self.triggers
        self._counting = True     # False while folding: those decisions are not the stream's
        # Set when a decision read the schema model or the trigger knowledge: its answer may differ at
        # another position, so it must not be remembered by statement (master.decide.flags.StatementWords).
        self.consulted = False
        self.derived_ignored: set[str] = set()
        self._table_decisions: dict[tuple[str, str], Decision] = {}
        self._by_database: dict[tuple[Kind, str | None, str | None], tuple[Decision, bool]] = {}  # see _decide_by_database
        # (sql, default db) -> (decision, info, the parse the model replays), or None when met once:
        # see decide_statement.
        self._statements: dict[tuple[str, str | None], tuple[Decision, StatementInfo, StatementInfo | None] | None] = {}
        self._table_steps: dict[str, Step] = {}
        self._table_reads: dict[tuple[TableRef, ...], Hashable] = {}  # see table_reads
        self._db_steps: dict[tuple[str | None, str], Step] = {}  # see db_ok
        self._plain: dict[str | None, Decision] = {}  # see statement_kept
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
        # patterns it could match, so 10 000 wild rules cost about what one costs. Kept: those that hold one.
        wild = like_index(rules.wild_do_table, names.table), like_index(rules.wild_ignore_table, names.table)
        self._wilds = tuple(w for w in zip(wild, (True, False), ("wild_do_table", "wild_ignore_table")) if w[0])
        self._rewrite = [(names.db(old), new) for old, new in rules.rewrite_db]
        self._db_as_given = not self._rewrite and not names.lower_incoming  # (`key_reads`: no rewrite, no lowering)
        self.table_rules_on = rules.table_rules_on
        self._rules_alone = self.settings.semantics != "effective" and not self.settings.track_derived_tables
        self._keys_alone = not self.settings.track_derived_tables  # see keys_statements
        # Whether statements are decided by databases alone: no table rule, the standard semantics, no
        # derived-table state. Every `plain_statement` is then decided alike, by its default database.
        self.databases_only = not (self.table_rules_on or self.settings.semantics == "effective"
                                   or self.settings.track_derived_tables)
        if self.settings.semantics == "effective":
            self._compile_effective()
        elif rules.effective_do or rules.effective_ignore or rules.effective_rewrite or rules.binlog_effective_do \
                or rules.binlog_effective_ignore:
            raise RuleError("DO/IGNORE/REWRITE (WL#2516 CHANGE MASTER/CHANGE BINLOG) rules need "
                            "--filter-semantics=effective")

    def invalidate(self) -> None:
        """Forget cached per-table decisions (at a Format_description event, or after derived-table changes),
        and the remembered statement answers with them."""
        for memo in (self._table_decisions, self._table_steps, self._table_reads, self._statements):
            memo.clear()

    # ------------------------------------------------------------------ rpl_filter.cc primitives
    def rewrite_db(self, db: str) -> tuple[str, bool]:
        """Rpl_filter::get_rewrite_db: the first rule whose FROM matches wins; one pass, not transitive."""
        folded = self.names.db(db)
        for old, new in self._rewrite:
            if old == folded:
                return new, True
        return db, False

    def db_ok(self, db: str | None, what: str = "default database") -> Step:
        """Rpl_filter::db_ok: a do list decides alone (ignore_db never consulted); NULL db passes.
        Remembered per (db, what): the answer depends on the rules alone."""
        key = (db, what)
        step = self._db_steps.get(key)
        if step is None:
            if len(self._db_steps) >= _BY_DATABASE_MAX:
                self._db_steps.clear()
            step = self._db_steps[key] = db_list_check(self.names.db, db, self._do_db, self._ignore_db, "replicate", what)
        return step

    def db_ok_with_wild_table(self, db: str) -> Step:
        """Rpl_filter::db_ok_with_wild_table: key `db.` against wild-do then wild-ignore; only `%`-table
        patterns can match (`'db1.' LIKE 'db1.t%'` is false)."""
        step = self._wild_step(self.names.table(db + "."), f"database '{db}'")
        if step is not None:
            return step
        if self._wilds and self._wilds[0][1]:  # (a wild-do pattern)
            return Step(False, "replicate-wild-do-table", f"database '{db}' matches no wild-do pattern")
        return Step(True, None, f"database '{db}': no wild rule applies")

    def table_step(self, db: str, table: str) -> Step:
        """One table of tables_ok: do-table > ignore-table > wild-do > wild-ignore; cached per key."""
        key = db + "." + table
        folded = self.names.table(key)
        step = self._table_steps.get(folded)
        if step is None:
            step = self._table_steps[folded] = self._uncached_table_step(key, folded)
        return step

    def _uncached_table_step(self, key: str, folded: str) -> Step:
        if folded in self._do_table:
            return Step(True, "replicate-do-table", f"'{key}' is in the do list", (filter_name("do_table"),))
        if folded in self._ignore_table:
            return Step(False, "replicate-ignore-table", f"'{key}' is in the ignore list",
                         (filter_name("ignore_table"),))
        if folded in self.derived_ignored:
            return Step(False, "track-derived-tables", f"'{key}' was derived from an ignored table (WL#40)")
        return (self._wild_step(folded, f"'{key}'") if self._wilds else None) or NO_RULE

    def _wild_step(self, folded_key: str, shown: str) -> Step | None:
        """wild-do before wild-ignore; the first matching pattern decides."""
        for patterns, verdict, rule_type in self._wilds:
            pattern = patterns.first_match(folded_key)
            if pattern is not None:
                return Step(verdict, option_name(rule_type), f"{shown} matches '{pattern}'",
                             (filter_name(rule_type),))
        return None

    def tables_ok(self, updated: Iterable[TableRef]) -> Step:
        """Rpl_filter::tables_ok over the *updated* tables in statement order; the first decisive rule wins.
        "Changing table order in the list can lead to different results" (source comment)."""
        for db, table in updated:
            step = self.table_step(db, table)
            if step.ok is not None:
                return step
        if not updated:
            return Step(False, "replicate-*-table", "table rules are on and the statement updates no table")
        if self.rules.do_table or self.rules.wild_do_table:
            rule = "replicate-do-table" if self.rules.do_table else "replicate-wild-do-table"
            listed = ", ".join(f"'{db}.{table}'" for db, table in updated)
            return Step(False, rule, f"no rule matched {listed} and a do list exists")
        return Step(True, None, "no table rule matched")

    # ------------------------------------------------------------------ binlog write filter (master side)
    def binlog_db_ok(self, db: str | None) -> Step:
        """FILTER_BINLOG_WRITE_F: the master's binlog-do/ignore-db, same db_ok; a NULL db is written."""
        if not self._binlog_do_db and not self._binlog_ignore_db:
            return NO_DATABASE_RULES
        return db_list_check(self.names.db, db, self._binlog_do_db, self._binlog_ignore_db, "binlog", "database")

    # ------------------------------------------------------------------ row events
    def table_kept(self, db: str, table: str) -> bool:
        """Fast cached path for Table_map/rows events: one dict lookup once warm."""
        return (self._table_decisions.get((db, table)) or self.decide_table(db, table)).apply

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
            return decision_from(binlog, ())
        db, table = self.names.incoming(db), self.names.incoming(table)
        rewritten, was_rewritten = self.rewrite_db(db)
        counted = (filter_name("rewrite_db"),) if was_rewritten else ()
        key = (f"{rewritten}.{table}",)
        db_step = self.db_ok(rewritten, "table database")
        if db_step.ok is False or not self.table_rules_on:
            return decision_from(db_step, key, counted)
        table_step = self.tables_ok([(rewritten, table)])
        if table_step.ok and table_step.rule is None and db_step.rule:
            return decision_from(db_step, key, counted)
        return decision_from(table_step, key, counted + db_step.counted)

    # ------------------------------------------------------------------ statement events
    def statement_kept(self, sql: str, current_db: str | None) -> bool:
        """`decide_statement(...).apply`, reading only what the rules need (issue #43): with
        database rules alone (`databases_only`), rpl_filter.cc checks a plain INSERT, REPLACE or
        DELETE against the Query's default database only (db_ok; the tables it names are never
        looked at, even `INSERT INTO other_db.t`: the cross-database quirk of replicate-do-db), so
        such a statement is answered by its default database without being parsed. Its rule hits
        are counted as its decision counts them. (Not UPDATE, which may be a multi-table UPDATE,
        nor DDL, which the schema model replays.)"""
        if (self.databases_only and self.timeline is None and statement_verb(sql) in _DATABASE_ONLY_VERBS
                and plain_statement(sql)):
            known = self._plain.get(current_db)
            if known is None:
                if len(self._plain) >= _BY_DATABASE_MAX:
                    self._plain.clear()
                known = self._plain[current_db] = self.decide_statement(sql, current_db)
            elif self._counting:
                self.account(known, 1)
            return known.apply
        return self.decide_statement(sql, current_db).apply

    @property
    def keys_statements(self) -> bool:  # type: ignore[override]
        """A statement key decides alike every statement it stands for (both semantics: why in
        rules.keep_table), without derived tables (their ignore set grows), in stream order."""
        return self._keys_alone and self.timeline is None

    @property
    def keys_statements_if_pure(self) -> bool:
        """`keys_statements` on a schema timeline too (the master's engines): there a key's decision
        stands for all its statements, at any position, when it read neither the schema model nor the
        trigger knowledge (`consulted` stays False) nor assumed; the caller checks that after each."""
        return self._keys_alone

    def decide_statement_key(self, sql: str, current_db: str | None, parses: Parses | None = None) -> Decision:
        saved, self._counting = self._counting, False
        try:
            return self.decide_statement(sql, current_db, parses=parses)
        finally:
            self._counting = saved

    def account(self, decision: Decision, times: int) -> None:
        """`times` statements answered by `decision`: its assumption and rule hits counted (what
        `_account_statement` does for a statement that is not DDL), an unparsed one's count too."""
        if decision.assumption is not None:
            self.assumed += times
            self.unparsed += times if decision.assumption.startswith(_UNPARSED) else 0
        counters = self.counters
        for name in decision.counted:
            counters[name] += times

    def decide_statement(self, sql: str, current_db: str | None, at: Any = None, parses: Parses | None = None) -> Decision:
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
        notes: list[str] = []
        effective = self.settings.semantics == "effective"
        # `sql` parsed under the session's database rewritten (not under WL#2516: it matches the master's names)
        session_db = self.names.incoming(current_db) if current_db else ""
        rewritten, was_rewritten = self.rewrite_db(session_db) if session_db and not effective else (session_db, False)
        parsed = parse_statement(sql, rewritten, parses)
        info = lower_tables(parsed) if self.names.lower_incoming else parsed
        if info.kind is Kind.UPDATE_MULTI:
            # MariaDB checks a multi-table UPDATE after opening its tables: the prelocked tables that
            # fired triggers write are in the list (observed on 10.11). MySQL 8 checks it before, on
            # the table_map_for_update bitmap: SET tables only [src: sql_parse.cc]. WL#2516's
            # effective objects are the SET tables alone.
            info = self._multi_update(info, notes, triggers=not effective and self.settings.flavor == "mariadb")
        if effective:
            decision = self._effective_statement(info, rewritten)  # (the session's database: not rewritten)
            notes = notes if self._effective_do or self._effective_ignore else []
        else:
            counted = (filter_name("rewrite_db"),) if was_rewritten else ()
            decision = self._decide_by_database(info, current_db, rewritten, counted)
            notes = notes if self.table_rules_on else []
        if notes and decision.assumption is None:
            decision = dataclasses.replace(decision, assumption="; ".join(notes))
        # The model holds the master's names: reuse the parse only if it resolved against them.
        model_parse = parsed if rewritten == (current_db or "") else None
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

    def key_reads(self, sql: str, current_db: str | None, tables_of: TablesOf) -> Hashable | None:
        """What a keyed statement's decision reads (keys that read the same are decided once:
        `KeepTable._decide_key`): under database rules alone its default database (db_ok reads no
        table); with table rules (standard semantics) that, its kind and its tables' answers (their
        names only make the reason), its kind and tables as `decide_statement` parses them read once
        for the rule sets that share them (`tables_of`). None (decided alone): WL#2516, or no tables."""
        if self.databases_only:
            return (current_db,)
        if self.settings.semantics == "effective":
            return None
        found = tables_of(sql, (current_db or "") if self._db_as_given or not current_db else
                          self.rewrite_db(self.names.incoming(current_db))[0], self.names.lower_incoming)
        return found and (current_db, found[0], self.table_reads(found[1]))

    def table_reads(self, updated: tuple[TableRef, ...]) -> Hashable:
        """What tables_ok reads of the tables a statement updates (`key_reads`; spark_jobs'
        RuleGroup, whose statement classes key the rest its decision reads): each table's step as
        tables_ok folds it, its verdict and rule, not its reason (which names the table: keys of
        other tables alike in both are one answer). Equal reads, equal answers; remembered until `invalidate`."""
        reads = self._table_reads.get(updated)
        if reads is None:
            if len(self._table_reads) >= _STATEMENTS_MAX:  # (bounded as the statements' memory)
                self._table_reads.clear()
            reads = self._table_reads[updated] = tuple([(s.ok, s.rule) for s in (self.table_step(*t) for t in updated)])
        return reads

    def _account_statement(self, sql: str, current_db: str | None, model_parse: StatementInfo | None,
                           info: StatementInfo, decision: Decision) -> None:
        """What a statement decision does besides answering, whether computed or remembered: the
        assumed count, the schema model's replay of DDL, the rule-hit counters, derived tables."""
        if decision.assumption is not None:
            self.assumed += 1
        if info.kind in SCHEMA_KINDS and self.timeline is None:
            # DDL replayed into the model after the decision (the decision sees the schema before it).
            self._record_trigger(info, decision.apply, self._at)
            if self.replay_ddl:
                self.schema.observe(sql, current_db, model_parse)
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
        return (len(sql) <= _STATEMENT_LEN and self._rules_alone and info.kind not in READS_STATE
                and (info.parse_ok or not self.table_rules_on))

    def _knowledge(self) -> TriggerKnowledge:
        """This replica's trigger knowledge, brought up to the decision's position first when the
        engine is on a timeline (only decisions that need it pay for reading the log)."""
        self.consulted = True
        if self.timeline is not None and self._at is not None:
            self._fold(self._at)
        return self.triggers

    def _fold(self, at: Any) -> None:
        """Bring the trigger knowledge up to `at` from the timeline's log, in log order: each
        CREATE/DROP TRIGGER before `at` decided as this replica would (not counted)."""
        assert self.timeline is not None  # folded only from a timeline (_knowledge)
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

    def _decide_by_database(self, info: StatementInfo, current_db: str | None, rewritten: str,
                            counted: tuple[str, ...]) -> Decision:
        """`_decide_statement`, remembered per (kind, named database, default database) when the
        rules have no table rule: rpl_filter.cc then checks databases only, so the answer cannot
        depend on the tables (the many schema-per-replica setups decide each DDL by a dict lookup)."""
        if self.table_rules_on or info.kind is Kind.UPDATE_MULTI:
            return self._decide_statement(info, current_db, rewritten, counted)
        key = (info.kind, info.db_statement_name, current_db)
        known = self._by_database.get(key)
        tables = table_names(info.updated)
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

    # The kinds `_decide_statement` reads (the others': the database, exemption and tables alone)
    KINDS_READ = DATABASE_KINDS | READS_STATE | {Kind.TRANSACTION, Kind.ACCOUNT, Kind.CREATE_TRIGGER}

    def _decide_statement(self, info: StatementInfo, current_db: str | None, rewritten: str,
                          counted: tuple[str, ...]) -> Decision:
        if info.kind is Kind.TRANSACTION:
            return Decision(True, "BEGIN/COMMIT/ROLLBACK/SAVEPOINT/XA are never filtered")
        binlog_db = info.db_statement_name if info.kind in DATABASE_KINDS and info.db_statement_name else current_db
        binlog = self.binlog_db_ok(binlog_db)
        if binlog.ok is False:
            return decision_from(binlog, ())
        tables = table_names(info.updated)
        db_step = self._database_check(info, rewritten)
        if db_step.ok is False:
            return decision_from(db_step, tables, counted)
        if not info.parse_ok and self.table_rules_on:
            self.unparsed += self._counting
            return Decision(True, "statement could not be parsed; kept (counted as unparsed, never dropped)",
                            None, tables, counted + db_step.counted, _UNPARSED + ": its tables are unknown")
        table_step = self._statement_table_check(info)
        if table_step is None or (table_step.ok and table_step.rule is None and db_step.rule):
            return decision_from(db_step, tables, counted)
        return decision_from(table_step, tables, counted + db_step.counted)

    def _database_check(self, info: StatementInfo, rewritten: str) -> Step:
        """sql_parse.cc check_database_filters on the event db (§1.1: for DATABASE statements the source
        writes the target database as the event db, write_db_cmd_to_binlog)."""
        if info.kind not in DATABASE_KINDS:
            return self.db_ok(rewritten)
        name = info.db_statement_name
        if self.settings.flavor == "mariadb":
            # MariaDB 10.11 (observed, §1.4): db rules on lex->name (not rewritten) AND the wild check, always.
            name = name if name is not None else rewritten
            step = self.db_ok(name)
            return step if step.ok is False else merge_steps(step, self.db_ok_with_wild_table(name))
        # 8.0 filters DATABASE statements on the (rewritten) event db; 5.x/MariaDB on lex->name.
        target = self.rewrite_db(name)[0] if name is not None else rewritten
        step = self.db_ok(target)
        if step.ok is not False and not self.rules.db_rules_on:
            # BUG#46110: any do/ignore-db rule turns the wild check for DATABASE statements off.
            return self.db_ok_with_wild_table(target)
        return step

    def _statement_table_check(self, info: StatementInfo) -> Step | None:
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
                return Step(False, acl.rule, "account management checks every mysql ACL table: " + acl.reason,
                             acl.counted)
            return step or acl
        return step

    def _drop_trigger_step(self, info: StatementInfo) -> Step:
        assert info.trigger is not None  # a DROP TRIGGER names its trigger (statement_tables)
        table = self._knowledge().table(info.trigger, self._at)
        if table is None:
            # Bug#24478: the trigger's table cannot be loaded (CREATE TRIGGER was filtered): silently skipped.
            return Step(False, "replicate-*-table",
                         f"trigger '{info.trigger[0]}.{info.trigger[1]}' is unknown on the replica (Bug#24478)")
        return self.tables_ok([table])

    # ------------------------------------------------------------------ the schema model
    def _record_trigger(self, info: StatementInfo, applied: bool, at: Any) -> None:
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
        unplaced = any(qualifier is None for qualifier, _ in info.set_columns)  # (placed: never an empty list)
        updated = (self._place_set_columns(info, notes) if unplaced else None) or list(info.updated)
        if triggers:
            updated += self._trigger_tables(updated, notes)
        return dataclasses.replace(info, updated=tuple(updated))

    def _place_set_columns(self, info: StatementInfo, notes: list[str]) -> list[TableRef] | None:
        chosen: set[int] = set()
        joined, model = info.joined, self._model()
        for qualifier, column in info.set_columns:
            if qualifier is not None:
                chosen.update(i for i, ref in enumerate(joined) if qualifier in ref_names(ref))
                continue
            owners: list[int] = []
            unknown: list[int] = []
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
        placed = list(dict.fromkeys(joined[i][0] for i in sorted(chosen)))  # (each table once, in order)
        return placed or None

    def _trigger_tables(self, updated: list[TableRef], notes: list[str]) -> list[TableRef]:
        """Tables written by the triggers the statement fires on this replica (nested triggers too)."""
        extra: list[TableRef] = []
        fired: set[TriggerKey] = set()
        model = self._model()
        queue = [(table, "UPDATE") for table in updated]
        while queue:
            table, event = queue.pop(0)
            if not model.knows(*table) or model.is_view(*table):
                why = "is a view: the {} triggers of its tables" if model.knows(*table) else "is not in the schema model: its {} triggers"
                notes.append(f"table {table[0]}.{table[1]} {why.format(event)} are unknown, none counted")
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


_BY_DATABASE_MAX = 4096  # remembered statement answers per engine (no table rules): cleared when full
# decide_statement's memory by text: texts up to _STATEMENT_LEN characters, at most _STATEMENTS_MAX
# of them (cleared when full). Statements whose decision reads the schema model or the trigger
# knowledge are never remembered: their answer can change with the stream.
_STATEMENT_LEN = 2048
_STATEMENTS_MAX = 4096
_UNPARSED = "unparsed statement"  # how an unparsed statement's assumption starts (both semantics: `account`)
# statement_kept: the plain statements decided by their default database without a parse.
_DATABASE_ONLY_VERBS = frozenset({"INSERT", "REPLACE", "DELETE"})


def parse_statement(sql: str, default_db: str, parses: Parses | None) -> StatementInfo:
    """statement_tables through a parse memo (`parses`, keyed by text and default database) shared by
    the engines deciding the same event, so that it is parsed once whatever the number of rule sets."""
    if parses is None:
        return statement_tables(sql, default_db)
    info = parses.get((sql, default_db))
    if info is None:
        info = parses[(sql, default_db)] = statement_tables(sql, default_db)
    return info
