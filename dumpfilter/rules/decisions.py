"""A decision engine's answers and the steps they are made of (rpl_filter.cc's db_ok, tables_ok
results, with the rule that decided), the name folding of lower_case_table_names, and the small
helpers the engine's checks share."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import overload

from dumpfilter.errors import RuleError
from dumpfilter.rules.percent_captures import PercentCaptures
from dumpfilter.rules.ruleset import Settings, filter_name
from dumpfilter.rules.statement_info import StatementInfo, TableRef
from dumpfilter.rules.wildcards import LikeIndex, compile_like


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

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"decision": self.verdict, "reason": self.reason, "rule": self.rule, "tables": list(self.tables)}
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


# The dataclass's signature stays what callers are checked against; only its body is replaced.
Decision.__init__ = _decision_init  # type: ignore[method-assign]


@dataclass(frozen=True)
class Step:
    """One rpl_filter.cc check: ok is True/False, or None when no rule decided (caller's final step)."""

    ok: bool | None
    rule: str | None = None
    reason: str = ""
    counted: tuple[str, ...] = ()


def _step_init(self: Step, ok: bool | None, rule: str | None = None, reason: str = "",
               counted: tuple[str, ...] = ()) -> None:
    self.__dict__.update(ok=ok, rule=rule, reason=reason, counted=counted)  # (as _decision_init)


Step.__init__ = _step_init  # type: ignore[method-assign]  # (as Decision.__init__)


class Names:
    """Case rules: MySQL compares with table_alias_charset (ci iff lctn>=1); MariaDB uses strcmp for db and
    rewrite rules and system_charset_info (always ci) for table and wild rules (filter-semantics §8)."""

    def __init__(self, settings: Settings) -> None:
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


NO_DATABASE_RULES = Step(None, None, "no database rules")
NO_RULE = Step(None)  # (one for every table no rule decides: a Step is frozen)


def db_list_check(fold: Callable[[str], str], db: str | None, do_list: Collection[str], ignore_list: Collection[str],
                  prefix: str, what: str) -> Step:
    if not do_list and not ignore_list:
        return NO_DATABASE_RULES
    if db is None:
        # "Previous behaviour 'if the user has specified restrictions on which databases to
        # replicate and db was not selected, do not replicate' has been replaced with 'do replicate'".
        return Step(True, None, f"no {what} (NULL db passes db_ok)")
    folded = fold(db)
    # (sql_parse.cc: the applier passes '' (not NULL) when the source had no default database)
    what = f"no {what} ('')" if db == "" else f"{what} '{db}'"
    if do_list:  # the ignore list is never consulted when a do list exists
        counter = (filter_name("do_db"),) if prefix == "replicate" else ()
        if folded in do_list:
            return Step(True, f"{prefix}-do-db", f"{what} is in the do list", counter)
        return Step(False, f"{prefix}-do-db", f"{what} is not in the do list")
    if folded in ignore_list:
        counter = (filter_name("ignore_db"),) if prefix == "replicate" else ()
        return Step(False, f"{prefix}-ignore-db", f"{what} is in the ignore list", counter)
    return Step(True, None, f"{what} is not in the ignore list")


def table_names(updated: Sequence[TableRef]) -> tuple[str, ...]:
    """`db.table` of each table (as Decision.tables lists them)."""
    if len(updated) == 1:
        db, table = updated[0]
        return (db + "." + table,)
    return tuple([f"{db}.{table}" for db, table in updated])


def like_index(patterns: Sequence[str], fold: Callable[[str], str]) -> LikeIndex:
    folded = [fold(p) for p in patterns]
    return LikeIndex([(compile_like(f), p) for f, p in zip(folded, patterns)], folded)


def merge_steps(first: Step, second: Step) -> Step:
    return Step(second.ok, second.rule or first.rule, second.reason, first.counted + second.counted)


def decision_from(step: Step, tables: Iterable[str], counted: Iterable[str] = ()) -> Decision:
    ok = step.ok is not False
    reason = f"{step.rule}: {step.reason}" if step.rule else step.reason
    return Decision(ok, reason, step.rule, tuple(tables), tuple(counted) + step.counted)


def lower_tables(info: StatementInfo) -> StatementInfo:
    """lctn: the applier lower-cases the names it opens, so rules see lower-case db.table."""

    @overload
    def lower(ref: TableRef) -> TableRef: ...
    @overload
    def lower(ref: TableRef | None) -> TableRef | None: ...

    def lower(ref: TableRef | None) -> TableRef | None:
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


def compile_pattern_rewrite(old: str, new: str) -> tuple[PercentCaptures, str]:
    """WL#2516 `REWRITE=db1.%->db2.%`: each `%` of FROM is captured and fills the next `%` of TO.

    The worklog allows "simple regular expressions only" at first: `%` is the only wildcard here.
    """
    if old.count("%") != new.count("%"):
        raise RuleError(f"REWRITE: '{old}->{new}' must use as many '%' on both sides")
    return PercentCaptures(old), new  # the regex a(.*)b(.*)... backtracked through every split


def fill_pattern(replacement: str, groups: tuple[str, ...]) -> str:
    pieces = replacement.split("%")
    out = [pieces[0]]
    for group, piece in zip(groups, pieces[1:]):
        out += [group, piece]
    return "".join(out)
