"""Parsers for rule text: mysqld-style options (WL#7361 channels), CHANGE REPLICATION FILTER, WL#2516 CHANGE MASTER."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from dumpfilter import _core
from dumpfilter.errors import RuleError, one_line
from dumpfilter.rules.ruleset import (
    BINLOG_TYPES,
    REPLICATE_TYPES,
    WILD_TYPES,
    RuleSet,
    RuleValue,
    RuleValues,
    option_name,
    validate_rule,
)

OPTION_TYPES = {option_name(rule_type): rule_type for rule_type in REPLICATE_TYPES + BINLOG_TYPES}
CRF_TYPES = {f"REPLICATE_{rule_type.upper()}": rule_type for rule_type in REPLICATE_TYPES}
CHANGE_MASTER_TYPES = {"DO": "effective_do", "IGNORE": "effective_ignore", "REWRITE": "effective_rewrite"}
# The connection options of MySQL's CHANGE MASTER / CHANGE REPLICATION SOURCE (SOURCE_* is read
# as MASTER_*) and MariaDB's: accepted and ignored here. Any other key is a typo (IGNOR='db2.%')
# that would silently mean no filter, so it is an error naming the key.
CHANGE_MASTER_OPTIONS = frozenset("""
    MASTER_BIND MASTER_HOST MASTER_USER MASTER_PASSWORD MASTER_PORT MASTER_CONNECT_RETRY MASTER_RETRY_COUNT
    MASTER_DELAY MASTER_HEARTBEAT_PERIOD MASTER_LOG_FILE MASTER_LOG_POS MASTER_AUTO_POSITION RELAY_LOG_FILE
    RELAY_LOG_POS MASTER_SSL MASTER_SSL_CA MASTER_SSL_CAPATH MASTER_SSL_CERT MASTER_SSL_CRL MASTER_SSL_CRLPATH
    MASTER_SSL_KEY MASTER_SSL_CIPHER MASTER_SSL_VERIFY_SERVER_CERT MASTER_TLS_VERSION MASTER_TLS_CIPHERSUITES
    MASTER_PUBLIC_KEY_PATH GET_MASTER_PUBLIC_KEY MASTER_COMPRESSION_ALGORITHMS MASTER_ZSTD_COMPRESSION_LEVEL
    NETWORK_NAMESPACE IGNORE_SERVER_IDS PRIVILEGE_CHECKS_USER REQUIRE_ROW_FORMAT REQUIRE_TABLE_PRIMARY_KEY_CHECK
    ASSIGN_GTIDS_TO_ANONYMOUS_TRANSACTIONS GTID_ONLY MASTER_CONNECTION_AUTO_FAILOVER MASTER_USE_GTID
    DO_DOMAIN_IDS IGNORE_DOMAIN_IDS MASTER_DEMOTE_TO_SLAVE MASTER_SSL_VERIFY_SERVER_CERT
""".split())


# ---------------------------------------------------------------------------------------------
# mysqld-style options


def normalize_option_name(name: str) -> str | None:
    """`--loose-replicate_do_db` -> `replicate-do-db`; None for options that are not filter rules."""
    name = name.strip().lstrip("-").replace("_", "-").lower().removeprefix("loose-")
    return name if name in OPTION_TYPES else None


def parse_option(name: str, value: str) -> tuple[str | None, str, RuleValue]:
    """One `--replicate-*=value` option -> (channel or None for global, rule type, rule value).

    WL#7361: the *first* colon separates a channel name (`ch1:db2`; `:db` is the default
    channel ''), later colons are literal. binlog-do/ignore-db have no channel form.
    Values are single names: `--replicate-do-db=a,b` is one database called `a,b`.
    """
    option = normalize_option_name(name)
    if option is None:
        raise RuleError(f"{name}: not a replication filter option")
    rule_type = OPTION_TYPES[option]
    channel = None
    if rule_type in REPLICATE_TYPES and ":" in value:
        channel, value = value.split(":", 1)
    rule = parse_rewrite_option(value) if rule_type == "rewrite_db" else value
    validate_rule(rule_type, rule)
    if option in COMMA_WARNED and isinstance(rule, str):
        warn_comma(option, rule)
    return channel, rule_type, rule


# The options whose value is one database name, where `a,b` is read as a list by many a user (issue #60).
COMMA_WARNED = ("replicate-do-db", "replicate-ignore-db")
_comma_warned: set[tuple[str, str]] = set()


def warn_comma(option: str, value: str) -> None:
    """A comma inside a one-database option's value: a warning on stderr, once per option and value
    in a process (mysqld accepts the value silently; the rules keep what it keeps)."""
    if "," not in value or (option, value) in _comma_warned:
        return
    _comma_warned.add((option, value))
    names = [name.strip() for name in value.split(",") if name.strip()]
    repeated = " ".join(f"--{option}={name}" for name in names)
    print(f"dumpfilter: warning: --{option}={value}: MySQL takes '{value}' as one database name (a comma does "
          f"not separate names); for several databases repeat the option: {repeated}", file=sys.stderr, flush=True)


def parse_rewrite_option(value: str) -> tuple[str, str]:
    """`from->to` with the spaces around the arrow trimmed (mysqld.cc OPT_REPLICATE_REWRITE_DB; MariaDB rpl_rewrt_db)."""
    if "->" not in value:
        raise RuleError(f"replicate-rewrite-db: {value!r} has no '->' (expected from_name->to_name)")
    old, new = (part.strip() for part in value.split("->", 1))
    if not old:
        raise RuleError(f"replicate-rewrite-db: {value!r} has an empty FROM database")
    if not new:
        raise RuleError(f"replicate-rewrite-db: {value!r} has an empty TO database")
    return old, new


@dataclass
class StartupFilters:
    """Rules from startup options: the global set and, per WL#7361, the per-channel rules by type."""

    global_rules: RuleSet = field(default_factory=RuleSet)
    channel_rules: dict[str, dict[str, RuleValues]] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Iterable[tuple[str, str]]) -> StartupFilters:
        """Accumulate (name, value) pairs in order; repeated options add rules, they never replace."""
        global_lists: dict[str, list[RuleValue]] = {}
        channel_lists: dict[str, dict[str, list[RuleValue]]] = {}
        for name, value in options:
            channel, rule_type, rule = parse_option(name, value)
            target = global_lists if channel is None else channel_lists.setdefault(channel, {})
            target.setdefault(rule_type, []).append(rule)
        by_type: dict[str, RuleValues] = {rule_type: tuple(rules) for rule_type, rules in global_lists.items()}
        return cls(RuleSet(**by_type), {name: {t: tuple(r) for t, r in lists.items()}
                                        for name, lists in channel_lists.items()})

    @classmethod
    def from_texts(cls, options: Iterable[str]) -> StartupFilters:
        """`from_options` of "option=value" texts (a topology's rules, the harness's Rules)."""
        pairs = []
        for option in options:
            key, eq, value = option.partition("=")
            if not eq:
                raise RuleError(f"{option!r} is not of the form option=value (e.g. replicate-do-db=db1)")
            pairs.append((key.strip(), value.strip()))
        return cls.from_options(pairs)

    def for_channel(self, channel: str) -> RuleSet:
        """WL#7361: a channel copies the global rules of every type it has no channel rule for."""
        return self.global_rules.replace(**self.channel_rules.get(channel, {}))


# ---------------------------------------------------------------------------------------------
# CHANGE REPLICATION FILTER (WL#7057, WL#7361) and WL#2516 CHANGE MASTER


@dataclass(frozen=True)
class FilterChange:
    """A parsed CHANGE statement: the types it lists with their new rules, and the channel it names."""

    changes: tuple[tuple[str, RuleValues], ...]
    channel: str | None = None
    binlog: str | None = None  # the name of a WL#2516 CHANGE BINLOG statement (it names no channel)

    def apply(self, rules: RuleSet) -> RuleSet:
        """Listed types replace that type's rules; unlisted types stay as they were."""
        return rules.replace(**dict(self.changes))


_SET_GLOBAL = re.compile(r"\s*SET\s+(?:GLOBAL\s+|@@GLOBAL\.)(?:(?P<conn>'[^']*'|`[^`]*`|\w+)\s*\.\s*)?"
                         r"(?P<name>[\w-]+)\s*=\s*(?P<value>.*?)\s*;?\s*$", re.IGNORECASE | re.DOTALL)


def parse_set_global(text: str) -> FilterChange | None:
    """MariaDB's dynamic filters: `SET GLOBAL replicate_do_db='a,b'`, and per connection
    `SET GLOBAL m1.replicate_ignore_table='a.t1'` (or `'m1'.`): the listed type's rules replaced,
    for that connection (a channel here). None when `text` is not a SET GLOBAL; RuleError for a
    SET GLOBAL of anything but a replicate-* filter."""
    match = _SET_GLOBAL.match(text)
    if match is None:
        return None
    option = normalize_option_name(match["name"])
    if option is None or OPTION_TYPES[option] not in REPLICATE_TYPES:
        raise RuleError(f"SET GLOBAL {match['name']}: not a replicate-* filter variable")
    rule_type = OPTION_TYPES[option]
    raw = _unquote(match["value"])
    values = tuple(parse_rewrite_option(v.strip()) if rule_type == "rewrite_db" else v.strip()
                   for v in raw.split(",") if v.strip())
    for value in values:
        validate_rule(rule_type, value)
    conn = match["conn"].strip("'`") if match["conn"] else None
    return FilterChange(((rule_type, values),), channel=conn)


def parse_filter_statement(text: str) -> FilterChange:
    """A CHANGE REPLICATION FILTER, a WL#2516 `CHANGE MASTER ... TO DO=...` or `CHANGE BINLOG ... TO DO=...`,
    or MariaDB's `SET GLOBAL [conn.]replicate_...='...'`."""
    change = parse_set_global(text)
    if change is not None:
        return change
    if re.match(r"\s*CHANGE\s+BINLOG\b", text, re.IGNORECASE):
        return parse_change_binlog(text)
    if re.match(r"\s*CHANGE\s+(MASTER|REPLICATION\s+SOURCE)\b", text, re.IGNORECASE):
        return parse_change_master(text)
    return parse_change_replication_filter(text)


def apply_changes(rules: RuleSet, statements: Iterable[str | FilterChange], channel: str,
                  hint: Callable[[str], str]) -> RuleSet:
    """Apply CHANGE statements in order to the rules of `channel`. A statement naming another channel
    (`CHANGE MASTER 'foo' TO ...`, `... FOR CHANNEL 'foo'`) is an error, not silently ignored: nothing
    selects that channel here (MySQL: ER_SLAVE_CONFIGURATION). `hint(name)` says how to select it."""
    for statement in statements:
        change = parse_filter_statement(statement) if isinstance(statement, str) else statement
        if change.channel is not None and change.channel != channel:
            head = one_line(statement if isinstance(statement, str) else "CHANGE statement", 60)
            raise RuleError(f"{head}: names connection '{change.channel}', but the rules "
                            f"evaluated are those of channel '{channel}'; {hint(change.channel)}")
        rules = change.apply(rules)
    return rules


def parse_change_replication_filter(text: str) -> FilterChange:
    """Parse `CHANGE REPLICATION FILTER type = (list)[, ...] [FOR CHANNEL 'c']`.

    Same type twice: the later list wins (Sql_cmd_change_repl_filter; WL#7057 e). `()` clears.
    """
    reader = _TokenReader(text, "CHANGE REPLICATION FILTER")
    for word in ("CHANGE", "REPLICATION", "FILTER"):
        reader.expect_keyword(word)
    changes: dict[str, RuleValues] = {}
    while True:
        rule_type = reader.filter_type()
        reader.expect_punct("=")
        changes.pop(rule_type, None)  # keep statement order of the *last* occurrence
        changes[rule_type] = _read_filter_list(reader, rule_type)
        if not reader.accept_punct(","):
            break
    channel = reader.for_channel()
    reader.accept_punct(";")
    reader.expect_end()
    return FilterChange(tuple(changes.items()), channel)


def _read_filter_list(reader: _TokenReader, rule_type: str) -> RuleValues:
    reader.rule = option_name(rule_type)
    reader.expect_punct("(")
    values: list[RuleValue] = []
    if not reader.accept_punct(")"):
        while True:
            values.append(_read_filter_value(reader, rule_type))
            if reader.accept_punct(")"):
                break
            reader.expect_punct(",")
    for value in values:
        validate_rule(rule_type, value)
    return tuple(values)


def _read_filter_value(reader: _TokenReader, rule_type: str) -> RuleValue:
    if rule_type in WILD_TYPES:
        return reader.string()
    if rule_type == "rewrite_db":
        reader.expect_punct("(")
        old = reader.identifier()
        reader.expect_punct(",")
        new = reader.identifier()
        reader.expect_punct(")")
        return old, new
    name = reader.identifier()
    if rule_type in ("do_table", "ignore_table"):
        if not reader.accept_punct("."):
            raise RuleError(f"{reader.rule}: {name!r} is not of the form db.table")
        return name + "." + reader.identifier()
    return name


def parse_change_master(text: str) -> FilterChange:
    """WL#2516 `CHANGE MASTER ['name'] TO DO='db1.%', IGNORE='%.t2', REWRITE=db1.%->db2.%`.

    The connection name (MariaDB multi-source) is the channel. DO/IGNORE/REWRITE given in the
    statement replace that type (several DO= in one statement add up); WL#2387's optional
    `REPLICATE_DO_DB='x'` keys set the classic types the same way. CHANGE MASTER's own options
    (MASTER_HOST...) are ignored; any other key is an error naming it.
    """
    match = re.match(r"\s*CHANGE\s+(?:MASTER|REPLICATION\s+SOURCE)\s*(?:(['\"`])(.*?)\1\s*)?TO\b", text,
                     re.IGNORECASE | re.DOTALL)
    if not match:
        raise RuleError(f"CHANGE MASTER: expected CHANGE MASTER ['name'] TO ..., got {text[:60]!r}")
    channel = match.group(2) if match.group(1) else None
    changes: dict[str, list[RuleValue]] = {}
    for key, raw in _assignments(text, match.end(), "CHANGE MASTER"):
        name = key.strip().upper().replace("-", "_")
        rule_type = CHANGE_MASTER_TYPES.get(name) or CRF_TYPES.get(name)
        value: RuleValue = raw
        if rule_type in ("effective_rewrite", "rewrite_db"):
            if "->" not in raw:
                raise RuleError(f"{option_name(rule_type)}: {raw!r} has no '->' (expected from->to)")
            old, new = (part.strip() for part in raw.split("->", 1))
            value = old, new
        if rule_type is not None:
            changes.setdefault(rule_type, []).append(value)
        elif ("MASTER_" + name.removeprefix("SOURCE_") if name.startswith("SOURCE_") else name) \
                not in CHANGE_MASTER_OPTIONS:
            raise RuleError(f"CHANGE MASTER: unknown option {key.strip()[:64]!r} (expected DO, IGNORE, REWRITE, "
                            "REPLICATE_* or a CHANGE MASTER connection option such as MASTER_HOST)")
    for rule_type, values in changes.items():
        for value in values:
            validate_rule(rule_type, value)
    return FilterChange(tuple((rule_type, tuple(values)) for rule_type, values in changes.items()), channel)


CHANGE_BINLOG_TYPES = {"DO": "binlog_effective_do", "IGNORE": "binlog_effective_ignore"}


def parse_change_binlog(text: str) -> FilterChange:
    """WL#2516 `CHANGE BINLOG 'bar' TO DO='db1.%', IGNORE='%_backup.table2'`: the master's binlog write filter
    on the effective db.table. The seed gives it DO and IGNORE only: any other key is an error. The name
    is kept (`binlog`); the simulated master writes one binlog, so every name designates it."""
    match = re.match(r"\s*CHANGE\s+BINLOG\s*(?:(['\"`])(.*?)\1\s*)?TO\b", text, re.IGNORECASE | re.DOTALL)
    if not match:
        raise RuleError(f"CHANGE BINLOG: expected CHANGE BINLOG ['name'] TO DO=..., IGNORE=..., got {text[:60]!r}")
    changes: dict[str, list[str]] = {}
    for key, value in _assignments(text, match.end(), "CHANGE BINLOG"):
        rule_type = CHANGE_BINLOG_TYPES.get(key.strip().upper())
        if rule_type is None:
            raise RuleError(f"CHANGE BINLOG: unknown key {key.strip()!r} (WL#2516 gives CHANGE BINLOG DO= and IGNORE=)")
        validate_rule(rule_type, value)
        changes.setdefault(rule_type, []).append(value)
    if not changes:
        raise RuleError("CHANGE BINLOG: no DO= or IGNORE= given")
    return FilterChange(tuple((t, tuple(v)) for t, v in changes.items()), None, match.group(2) or "")


def _unquote(value: str) -> str:
    """`value` read as the server reads one string (`'a''b'` is a'b), else as written (`db1.%->db2.%`)."""
    lexed = _core.sql_tokens(value)
    if lexed.error is not None:  # '\' : the quote is escaped, the string never ends
        raise RuleError(f"SET GLOBAL: {value[:64]!r}: {lexed.error}")
    tokens = lexed.tokens
    return tokens[0].value if len(tokens) == 1 and tokens[0].kind == "string" else value


def _assignments(text: str, start: int, statement: str) -> list[tuple[str, str]]:
    """The `KEY=value, ...` list from offset `start` of `text`, cut at the commas of the core's tokens
    (not one inside a string, a backquoted name or a comment; a trailing `;` dropped): each key as
    written, each value read from the same tokens."""
    lexed = _core.sql_tokens(text)
    if lexed.error is not None:
        raise RuleError(f"{statement}: {lexed.error}")
    tokens = [token for token in lexed.tokens if token.start >= start]
    end = len(text)
    while tokens and _is_punct(tokens[-1], ";"):
        end = tokens.pop().start
    cuts = [i for i, token in enumerate(tokens) if _is_punct(token, ",")]
    assignments: list[tuple[str, str]] = []
    for first, last in zip([-1, *cuts], [*cuts, len(tokens)]):
        if last == first + 1:
            continue  # (nothing between two commas)
        stop = tokens[last].start if last < len(tokens) else end
        eq = next((i for i in range(first + 1, last) if _is_punct(tokens[i], "=")), None)
        if eq is None:
            raise RuleError(f"{statement}: {text[tokens[first + 1].start:stop].strip()!r} is not of the form KEY=value")
        value = tokens[eq + 1:last]  # one string read as the server reads it ('a''b' is a'b), else as written
        raw = value[0].value if len(value) == 1 and value[0].kind == "string" else text[tokens[eq].end:stop].strip()
        assignments.append((text[tokens[first + 1].start:tokens[eq].start], raw))
    return assignments


def _is_punct(token: _core.SqlToken, char: str) -> bool:
    return token.kind == "punct" and token.value == char


class _TokenReader:
    """Cursor over tokens that raises RuleError naming the rule being read."""

    def __init__(self, text: str, statement: str):
        self.rule = statement
        lexed = _core.sql_tokens(text)
        if lexed.error is not None:
            raise RuleError(f"{_rule_at(text, lexed.error_offset) or statement}: {lexed.error}")
        self.tokens: list[_core.SqlToken] = lexed.tokens
        self.index = 0

    def peek(self) -> _core.SqlToken | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def _fail(self, expected: str) -> NoReturn:
        token = self.peek()
        found = "end of text" if token is None else repr(token.value)
        raise RuleError(f"{self.rule}: expected {expected}, found {found}")

    def _take(self, kinds: tuple[str, ...], expected: str, words: Iterable[str] | None = None) -> _core.SqlToken:
        """The next token, if it is of one of `kinds` (and, with `words`, one of them upper-cased)."""
        token = self.peek()
        if token is None or token.kind not in kinds or (words is not None and token.value.upper() not in words):
            self._fail(expected)
        self.index += 1
        return token

    def expect_keyword(self, word: str) -> None:
        self._take(("word",), word, (word,))

    def accept_punct(self, char: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "punct" and token.value == char:
            self.index += 1
            return True
        return False

    def expect_punct(self, char: str) -> None:
        if not self.accept_punct(char):
            self._fail(repr(char))

    def identifier(self) -> str:
        return self._take(("word", "quoted_ident"), "an identifier").value

    def string(self) -> str:
        return self._take(("string",), "a quoted 'db_pattern.table_pattern' string").value

    def filter_type(self) -> str:
        return CRF_TYPES[self._take(("word",), "one of " + ", ".join(CRF_TYPES), CRF_TYPES).value.upper()]

    def for_channel(self) -> str | None:
        token = self.peek()
        if token is None or token.kind != "word" or token.value.upper() != "FOR":
            return None
        self.index += 1
        self.rule = "FOR CHANNEL"
        self.expect_keyword("CHANNEL")
        return self._take(("string", "word", "quoted_ident"), "a channel name").value

    def expect_end(self) -> None:
        if self.peek() is not None:
            self.rule = "CHANGE REPLICATION FILTER"
            self._fail("end of statement")


def _rule_at(text: str, offset: int) -> str | None:
    """The option name of the filter type whose list contains `offset` (to name it in lexer errors)."""
    found = None
    # \b and possessive: one try per word (REPLICATE_REPLICATE_... was rescanned from each R).
    for match in re.finditer(r"\b(REPLICATE_\w++)\s*+=", text[:offset], re.IGNORECASE):
        found = CRF_TYPES.get(match.group(1).upper(), found)
    return option_name(found) if found else None
