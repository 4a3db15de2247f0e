"""The immutable rule-set value (`RuleSet`), the evaluation context (`Settings`) and rendering back to text."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from dumpfilter.errors import RuleError

# The seven replicate-* types in the order CHANGE REPLICATION FILTER and P_S list them.
REPLICATE_TYPES = (
    "do_db",
    "ignore_db",
    "do_table",
    "ignore_table",
    "wild_do_table",
    "wild_ignore_table",
    "rewrite_db",
)
BINLOG_TYPES = ("binlog_do_db", "binlog_ignore_db")
EFFECTIVE_TYPES = ("effective_do", "effective_ignore", "effective_rewrite")
# WL#2516 `CHANGE BINLOG 'name' TO DO=..., IGNORE=...`: the binlog side of the seed (no REWRITE there).
BINLOG_EFFECTIVE_TYPES = ("binlog_effective_do", "binlog_effective_ignore")
ALL_TYPES = REPLICATE_TYPES + BINLOG_TYPES + EFFECTIVE_TYPES + BINLOG_EFFECTIVE_TYPES

TABLE_TYPES = ("do_table", "ignore_table")
WILD_TYPES = ("wild_do_table", "wild_ignore_table")
PAIR_TYPES = ("rewrite_db", "effective_rewrite")


def option_name(rule_type: str) -> str:
    """`do_db` -> `replicate-do-db`, `binlog_do_db` -> `binlog-do-db`, `effective_do` -> `DO`,
    `binlog_effective_do` -> `CHANGE BINLOG DO`."""
    if rule_type in BINLOG_EFFECTIVE_TYPES:
        return "CHANGE BINLOG " + rule_type.removeprefix("binlog_effective_").upper()
    if rule_type in EFFECTIVE_TYPES:
        return rule_type.removeprefix("effective_").upper()
    if rule_type in BINLOG_TYPES:
        return rule_type.replace("_", "-")
    return "replicate-" + rule_type.replace("_", "-")


def filter_name(rule_type: str) -> str:
    """`do_db` -> `REPLICATE_DO_DB`, the FILTER_NAME of performance_schema.replication_applier_filters."""
    return "REPLICATE_" + rule_type.upper()


@dataclass(frozen=True)
class Settings:
    """How names compare and which semantics decide: the replica's flavor, lower_case_table_names, mysql|effective."""

    flavor: str = "mysql"
    lower_case_table_names: int = 0
    semantics: str = "mysql"
    track_derived_tables: bool = False

    def __post_init__(self) -> None:
        if self.flavor not in ("mysql", "mariadb"):
            raise RuleError(f"--flavor: {self.flavor!r} is not one of mysql, mariadb")
        if self.lower_case_table_names not in (0, 1, 2):
            raise RuleError(f"--lower-case-table-names: {self.lower_case_table_names!r} is not 0, 1 or 2")
        if self.semantics not in ("mysql", "effective"):
            raise RuleError(f"--filter-semantics: {self.semantics!r} is not one of mysql, effective")


# One rule: a name or pattern, or a (from, to) pair of the rewrite types.
RuleValue = str | tuple[str, str]
# One rule type's rules: which of the two by the type (PAIR_TYPES), so Any to the checker.
RuleValues = tuple[Any, ...]


@dataclass(frozen=True)
class RuleSet:
    """All filter rules of one replica (or channel), in the order they were given.

    Table rules are kept as the `db.table` key rpl_filter.cc hashes; wild rules as the literal
    LIKE pattern; rewrite rules as (from, to) pairs. `binlog_*` is the master's binlog write filter
    (FILTER_BINLOG_WRITE_F); `effective_*` are WL#2516's DO/IGNORE/REWRITE patterns over db.table.
    """

    do_db: tuple[str, ...] = ()
    ignore_db: tuple[str, ...] = ()
    do_table: tuple[str, ...] = ()
    ignore_table: tuple[str, ...] = ()
    wild_do_table: tuple[str, ...] = ()
    wild_ignore_table: tuple[str, ...] = ()
    rewrite_db: tuple[tuple[str, str], ...] = ()
    binlog_do_db: tuple[str, ...] = ()
    binlog_ignore_db: tuple[str, ...] = ()
    effective_do: tuple[str, ...] = ()
    effective_ignore: tuple[str, ...] = ()
    effective_rewrite: tuple[tuple[str, str], ...] = ()
    binlog_effective_do: tuple[str, ...] = ()
    binlog_effective_ignore: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        total = sum(len(getattr(self, rule_type)) for rule_type in ALL_TYPES)
        if total > MAX_RULES:
            raise RuleError(f"{total} filter rules: at most {MAX_RULES} in one rule set")
        for rule_type in ALL_TYPES:
            values = getattr(self, rule_type)
            if rule_type in PAIR_TYPES:
                values = tuple(tuple(pair) for pair in values)
            object.__setattr__(self, rule_type, tuple(values))
            for value in values:
                validate_rule(rule_type, value)

    def replace(self, **changes: RuleValues) -> RuleSet:
        return dataclasses.replace(self, **changes)

    @property
    def table_rules_on(self) -> bool:
        """rpl_filter.cc `is_on()`: any do/ignore/wild table rule exists."""
        return bool(self.do_table or self.ignore_table or self.wild_do_table or self.wild_ignore_table)

    @property
    def db_rules_on(self) -> bool:
        return bool(self.do_db or self.ignore_db)

    def render(self) -> str:
        """CHANGE REPLICATION FILTER text for the seven replicate-* types; it parses back to this set.

        Every type is listed (`()` when empty) so that applying the text replaces all seven.
        binlog-* and WL#2516 rules have no place in that statement; see `option_lines()`.
        """
        return "CHANGE REPLICATION FILTER " + ", ".join(f"{filter_name(t)} = ({render_values(t, getattr(self, t))})"
                                                        for t in REPLICATE_TYPES)

    def option_lines(self) -> list[str]:
        """mysqld-style `name=value` lines (one rule a line) for the replicate-* and binlog-* rules."""
        return [f"{option_name(rule_type)}=" + (f"{value[0]}->{value[1]}" if rule_type in PAIR_TYPES else value)
                for rule_type in REPLICATE_TYPES + BINLOG_TYPES for value in getattr(self, rule_type)]

    def lines(self) -> list[str]:
        """`option_lines()`, then the WL#2516 patterns as DO=/IGNORE=/REWRITE= lines."""
        return [*self.option_lines(), *(f"DO='{p}'" for p in self.effective_do),
                *(f"IGNORE='{p}'" for p in self.effective_ignore),
                *(f"REWRITE={a}->{b}" for a, b in self.effective_rewrite)]


# Documented limits (README "Limits"): a rule is at most MAX_RULE_LENGTH characters (MySQL names
# are at most 64 characters, so a db.table pattern with every character escaped fits), and one
# rule set holds at most MAX_RULES rules. Matching is linear in the name (wildcards.py), so these
# bound the work one slave's rules can cost the master per table.
MAX_RULE_LENGTH = 512
MAX_RULES = 100_000


def validate_rule(rule_type: str, value: object) -> None:
    """Reject what mysqld rejects at startup: table rules without a dot, wild patterns without a dot."""
    name = option_name(rule_type)
    for text in (value if rule_type in PAIR_TYPES and isinstance(value, tuple) else (value,)):
        if isinstance(text, str) and len(text) > MAX_RULE_LENGTH:
            raise RuleError(f"{name}: {text[:40]!r}... is {len(text)} characters long (at most {MAX_RULE_LENGTH})")
        if isinstance(text, str) and not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # bytes that were not UTF-8 (argv, files: surrogate escapes)
                shown = text.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
                raise RuleError(f"{name}: '{shown}' is not UTF-8 text") from None
    if rule_type in PAIR_TYPES:
        if not isinstance(value, tuple) or len(value) != 2 or not value[0] or not value[1]:
            raise RuleError(f"{name}: {value!r} must be a non-empty from->to pair")
        if rule_type == "effective_rewrite":
            for pattern in value:
                _require_dot(name, pattern, "db.table pattern")
        return
    if not isinstance(value, str) or not value:
        raise RuleError(f"{name}: {value!r} is not a non-empty name")
    if rule_type in TABLE_TYPES:
        _require_dot(name, value, "db.table")
    elif rule_type in WILD_TYPES or rule_type in ("effective_do", "effective_ignore") + BINLOG_EFFECTIVE_TYPES:
        _require_dot(name, value, "db_pattern.table_pattern")


def _require_dot(name: str, value: str, form: str) -> None:
    if "." not in value:
        raise RuleError(f"{name}: {value!r} is not of the form {form}")


def render_values(rule_type: str, values: RuleValues) -> str:
    if rule_type in TABLE_TYPES:
        # The key is db + "." + table; splitting at the first dot rebuilds the same key
        # (add_table_rule_to_hash in rpl_filter.cc also splits at the first dot).
        return ", ".join(".".join(map(quote_identifier, value.split(".", 1))) for value in values)
    if rule_type in WILD_TYPES:
        return ", ".join(quote_string(value) for value in values)
    if rule_type == "rewrite_db":
        return ", ".join(f"({quote_identifier(old)}, {quote_identifier(new)})" for old, new in values)
    return ", ".join(quote_identifier(value) for value in values)


def quote_identifier(name: str) -> str:
    """Backquote an identifier, doubling backquotes inside it."""
    return "`" + name.replace("`", "``") + "`"


def quote_string(value: str) -> str:
    """Quote a string literal so that `_core.sql_tokens` reads back exactly `value` (backslashes doubled)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
