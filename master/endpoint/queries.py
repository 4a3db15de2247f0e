"""The SQL a replica's IO thread sends before it asks for the binlog, answered as a real server
answers it: `SET @var = ...` (kept per connection: @master_binlog_checksum, @master_heartbeat_period,
@slave_connect_state, @mariadb_slave_capability, ...), `SELECT` of user variables, system variables,
UNIX_TIMESTAMP(), VERSION() and binlog_gtid_pos(), `SHOW [GLOBAL] VARIABLES LIKE` and `SHOW BINARY
LOGS`. Anything else is refused with ER_NOT_SUPPORTED_YET: this endpoint is a binlog source, not a database.

Every step over the query text is linear in its length, whatever the client sends: the LIKE of
SHOW VARIABLES is matched by the rules' backtracking-free LIKE (`dumpfilter.rules.wildcards`),
comments are read by the core's lexer and aliases by hand, not by regexes that retry at every
position. A query is answered in the connection's own thread, so a slow one would stall only that client,
but regex matching holds the GIL: the master's other clients would wait with it."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from dumpfilter import _core
from dumpfilter.master.protocol.packets import ER_NET_PACKET_TOO_LARGE, ER_NOT_SUPPORTED_YET, ER_PARSE_ERROR, ER_TOO_LONG_IDENT
from dumpfilter.master.protocol.packets import TYPE_LONGLONG, TYPE_VAR_STRING, OK_PACKET, text_result_set
from dumpfilter.rules.wildcards import like_to_regex

ER_UNKNOWN_SYSTEM_VARIABLE = 1193
ER_OUT_OF_RESOURCES = 1041
ER_TOO_MANY_FIELDS = 1117
NAME_LEN = 64                 # MySQL's longest identifier (and user variable name)
SESSION_BYTES = 256 << 10     # the variables one session may hold (a replica sets a few hundred bytes)
# A SELECT's columns (MySQL's limit of a table's, MAX_FIELDS) and the bytes of its one row's
# values (at most max_allowed_packet, as MySQL's rows): a replica selects one to three
# values. Unbounded, `SELECT 1,1,...` in one 1 MiB packet made 524 000 columns, about 100 MB of
# the master's memory per connection, which the allocator kept after the connection ended.
MAX_SELECT_COLUMNS = 4096
RESULT_BYTES = 1 << 20        # when the endpoint sets no max_allowed_packet (ServerFacts.extra)


class QueryError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class ServerFacts:
    """What the master tells a replica about itself. `gtid_at(file, pos)` is binlog_gtid_pos()."""

    server_id: int
    server_uuid: str
    version: str
    checksum: str                       # CRC32 | NONE: @@global.binlog_checksum
    gtid_mode: str = "OFF"              # MySQL's @@gtid_mode
    gtid_domain_id: int = 0
    gtid_at: Callable[[str, int], str | None] = lambda file, pos: None
    binary_logs: Callable[[], list[tuple[str, int]]] = list  # SHOW BINARY LOGS: (name, size) per file
    # SHOW BINARY LOG STATUS: (file, position, MySQL's executed set or None), or None
    binlog_status: Callable[[], tuple[str, int, object] | None] = lambda: None
    # @@binlog_row_metadata as the served Table_maps show it (row_metadata.py); None: not known
    row_metadata: Callable[[], str | None] = lambda: None
    extra: dict[str, str | int] = field(default_factory=dict)

    def system_variables(self) -> dict[str, str | int]:
        values: dict[str, str | int] = {
            "server_id": self.server_id, "server_uuid": self.server_uuid, "version": self.version,
            "version_comment": "dumpfilter master-side filter (WL#2387)", "binlog_checksum": self.checksum,
            "gtid_mode": self.gtid_mode, "enforce_gtid_consistency": "OFF" if self.gtid_mode == "OFF" else "ON",
            "gtid_domain_id": self.gtid_domain_id, "gtid_strict_mode": 0, "gtid_ignore_duplicates": 0,
            "log_bin": 1, "binlog_format": "ROW", "time_zone": "SYSTEM", "system_time_zone": "UTC",
            "character_set_server": "utf8mb4", "collation_server": "utf8mb4_general_ci",
            "character_set_client": "utf8mb4", "character_set_connection": "utf8mb4",
            "character_set_results": "utf8mb4", "collation_connection": "utf8mb4_general_ci",
            "max_allowed_packet": 1 << 30, "lower_case_table_names": 0, "auto_increment_increment": 1,
            "auto_increment_offset": 1, "sql_mode": "", "autocommit": 1, "wait_timeout": 28800,
            "net_write_timeout": 60, "net_read_timeout": 30, "transaction_isolation": "REPEATABLE-READ",
            "tx_isolation": "REPEATABLE-READ", "read_only": 1, "license": "GPL", "skip_replication": 0,
        }
        row_metadata = self.row_metadata()
        if row_metadata is not None:
            values["binlog_row_metadata"] = row_metadata
        values.update(self.extra)
        return values


# One `SET` item: @user = value, @@[global.|session.]name = value, NAMES x [COLLATE y], name = value.
_SET_ITEM = re.compile(r"""\s*(?:(?P<user>@(?!@)`?[\w$.]+`?)|(?P<names>NAMES\s+\S+(?:\s+COLLATE\s+\S+)?)|
                           (?:@@(?:(?:GLOBAL|SESSION|LOCAL)\.)?|(?:GLOBAL|SESSION|LOCAL)\s+)?(?P<sys>[\w$]+))
                           \s*(?:=|:=)?\s*""", re.I | re.X)
_VALUE = re.compile(r"""\s*(?P<value>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|NULL|ON|OFF|TRUE|FALSE
                        |@@(?:(?:GLOBAL|SESSION)\.)?[\w$]+|@`?[\w$.]+`?|DEFAULT|[\w$]+)\s*(?:,|$)""", re.I | re.X)
_VAR = re.compile(r"@@(?:(GLOBAL|SESSION|LOCAL)\.)?([\w$]+)$", re.I)
_USER_VAR = re.compile(r"@(?!@)`?([\w$.]+)`?$")
_V = TypeVar("_V")
_GTID_POS = re.compile(r"binlog_gtid_pos\s*\(\s*'((?:[^'\\]|\\.)*)'\s*,\s*(\d+)\s*\)$", re.I)


class Session:
    """One connection's variables and the answers to its queries."""

    def __init__(self, facts: ServerFacts):
        self.facts = facts
        self.user_vars: dict[str, str | None] = {}
        self.session_vars: dict[str, str | int] = {}
        self.status: dict[str, str | int] = {"Ssl_cipher": "", "Ssl_version": ""}  # SHOW STATUS
        self._held = 0  # bytes of names and values in both
        # The system variables, looked up once per statement (they read the binlog index): each
        # `@@server_id` of `SET @a=@@server_id, ...` read it anew, 5 s of CPU for one 1 MiB packet.
        self._variables: dict[str, str | int] | None = None

    # what the dump reads
    def user_var(self, name: str) -> str | None:
        return self.user_vars.get(name.lower())

    def has_user_var(self, name: str) -> bool:
        return name.lower() in self.user_vars

    # -- answering ----------------------------------------------------------------------------
    def answer(self, sql: str) -> list[bytes]:
        """The response packets for one COM_QUERY (raises QueryError for an ERR packet)."""
        self._variables = None
        text = sql.strip().rstrip(";").strip()
        text = _strip_comments(text).strip()
        head = text.split(None, 1)[0].upper() if text else ""
        if head == "SET":
            self._set(text[3:])
            return [OK_PACKET]
        if head == "SELECT":
            return self._select(text[6:].strip())
        if head == "SHOW":
            return self._show(text[4:].strip())
        if head in ("BEGIN", "COMMIT", "ROLLBACK", "USE", "DO"):
            return [OK_PACKET]
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise QueryError(ER_NOT_SUPPORTED_YET, "This version of MySQL doesn't yet support this statement: dumpfilter's "
                         f"replication endpoint answers only what a replica asks when it connects ({shown!r})")

    def _value(self, token: str) -> str | None:
        upper = token.upper()
        if upper == "NULL":
            return None
        if token[:1] in "'\"":
            inner = token[1:-1]
            return re.sub(r"\\(.)", r"\1", inner.replace("''", "'") if token[0] == "'" else inner)
        if token.startswith("@@"):
            return str(self._system(token))
        if token.startswith("@"):
            return self.user_var(_user_var_name(token))
        return token

    def _set(self, rest: str) -> None:
        at = 0
        rest = rest.strip()
        while at < len(rest):
            item = _SET_ITEM.match(rest, at)
            if item is None or item.end() == at:
                raise QueryError(ER_PARSE_ERROR, f"You have an error in your SQL syntax near {rest[at:at + 60]!r}")
            if item.group("names"):
                at = item.end()
                if at < len(rest) and rest[at] == ",":
                    at += 1
                continue
            value = _VALUE.match(rest, item.end())
            if value is None:
                raise QueryError(ER_PARSE_ERROR, f"You have an error in your SQL syntax near {rest[item.end():item.end() + 60]!r}")
            parsed = self._value(value.group("value"))
            if item.group("user"):
                self._remember(self.user_vars, _user_var_name(item.group("user")).lower(), parsed)
            else:
                # Session variables are accepted and remembered (SET skip_replication=1, sql_mode...).
                self._remember(self.session_vars, item.group("sys").lower(), "" if parsed is None else parsed)
            at = value.end()

    def _remember(self, store: dict[str, _V], name: str, value: _V) -> None:
        """Keep a variable, within NAME_LEN and the session's SESSION_BYTES: a client cannot
        make the master hold more for it than a replica ever sets."""
        if len(name) > NAME_LEN:
            raise QueryError(ER_TOO_LONG_IDENT, f"Identifier name '{name[:NAME_LEN]}...' is too long")
        held = self._held - (_size(name, store[name]) if name in store else 0) + _size(name, value)
        if held > SESSION_BYTES:
            raise QueryError(ER_OUT_OF_RESOURCES, f"Out of resources: a session of dumpfilter's replication endpoint "
                             f"holds at most {SESSION_BYTES} bytes of variables")
        store[name] = value
        self._held = held

    def _system(self, token: str) -> str | int:
        match = _VAR.match(token.strip())
        name = match.group(2).lower() if match else token.lower()
        if match and (match.group(1) or "").upper() != "GLOBAL" and name in self.session_vars:
            return self.session_vars[name]
        values = self._system_variables()
        if name not in values:
            raise QueryError(ER_UNKNOWN_SYSTEM_VARIABLE, f"Unknown system variable '{name}'")
        return values[name]

    def _system_variables(self) -> dict[str, str | int]:
        if self._variables is None:
            self._variables = self.facts.system_variables()
        return self._variables

    def _select(self, rest: str) -> list[bytes]:
        columns, row = [], []
        limit = int(self.facts.extra.get("max_allowed_packet", RESULT_BYTES))
        size = 0
        for expr in _split_top(rest, MAX_SELECT_COLUMNS):
            expr, alias = _alias(expr)
            value, kind = self._expression(expr)
            columns.append((alias or expr, kind))
            row.append(value)
            size += len(str(value)) if value is not None else 0  # (names: the query's own text)
            if size > limit:
                raise QueryError(ER_NET_PACKET_TOO_LARGE, f"Result of SELECT was larger than max_allowed_packet "
                                 f"({limit} bytes)")
        if not columns:
            raise QueryError(ER_PARSE_ERROR, "You have an error in your SQL syntax: SELECT without expressions")
        return text_result_set(columns, [row])

    def _expression(self, expr: str) -> tuple[str | int | None, int]:
        upper = re.sub(r"\s+", "", expr.upper())
        if upper in ("UNIX_TIMESTAMP()", "UNIX_TIMESTAMP(NOW())"):
            return int(time.time()), TYPE_LONGLONG
        if upper in ("VERSION()", "@@VERSION"):
            return self.facts.version, TYPE_VAR_STRING
        if upper in ("DATABASE()", "SCHEMA()"):
            return None, TYPE_VAR_STRING
        if upper in ("CONNECTION_ID()",):
            return 1, TYPE_LONGLONG
        if re.fullmatch(r"-?\d+", expr.strip()):
            return int(expr), TYPE_LONGLONG
        if expr.strip()[:1] in "'\"":
            return self._value(expr.strip()), TYPE_VAR_STRING
        if expr.strip().startswith("@@"):
            value = self._system(expr.strip())
            return value, TYPE_LONGLONG if isinstance(value, int) else TYPE_VAR_STRING
        user = _USER_VAR.match(expr.strip())
        if user:
            return self.user_var(user.group(1)), TYPE_VAR_STRING
        gtid = _GTID_POS.match(expr.strip())
        if gtid:
            return self.facts.gtid_at(gtid.group(1), int(gtid.group(2))), TYPE_VAR_STRING
        raise QueryError(ER_NOT_SUPPORTED_YET, f"This version of MySQL doesn't yet support SELECT {expr[:100]!r} on "
                         "dumpfilter's replication endpoint")

    def _show(self, rest: str) -> list[bytes]:
        if re.fullmatch(r"(?:BINARY|MASTER)\s+LOGS", rest, re.I):
            # What a binlog server downstream (`master serve --source` from this endpoint) asks
            # for the first file of the series, as a primary's SHOW BINARY LOGS answers it.
            return text_result_set([("Log_name", TYPE_VAR_STRING), ("File_size", TYPE_LONGLONG)],
                                   [[name, size] for name, size in self.facts.binary_logs()])
        if re.fullmatch(r"(?:MASTER|BINARY\s+LOG|BINLOG)\s+STATUS", rest, re.I):
            return self._binlog_status()
        match = re.fullmatch(r"(?:(GLOBAL|SESSION)\s+)?(VARIABLES|STATUS)(?:\s+LIKE\s+'((?:[^'\\]|\\.)*)')?", rest,
                             re.I)
        if not match:
            raise QueryError(ER_NOT_SUPPORTED_YET, f"This version of MySQL doesn't yet support SHOW {rest[:100]!r} on "
                             "dumpfilter's replication endpoint")
        pattern = match.group(3)
        if match.group(2).upper() == "STATUS":   # the session's TLS (Ssl_cipher, Ssl_version), as MySQL shows it
            values = dict(self.status)
        else:
            values = self._system_variables()
            if match.group(1) is None or match.group(1).upper() == "SESSION":
                values = {**values, **self.session_vars}
        matches = _like_matcher(pattern) if pattern is not None else None
        rows = [[name, value] for name, value in sorted(values.items()) if matches is None or matches(name)]
        return text_result_set([("Variable_name", TYPE_VAR_STRING), ("Value", TYPE_VAR_STRING)], rows)

    def _binlog_status(self) -> list[bytes]:
        """SHOW MASTER STATUS (MariaDB; SHOW BINLOG STATUS from 10.5.2) and SHOW BINARY LOG STATUS
        (MySQL 8.2+, MASTER STATUS before): where the newest file ends. python-mysql-replication
        asks it when given no start. MySQL adds Executed_Gtid_Set; no row when nothing is served."""
        status = self.facts.binlog_status()
        mysql = status is not None and status[2] is not None
        columns = [("File", TYPE_VAR_STRING), ("Position", TYPE_LONGLONG), ("Binlog_Do_DB", TYPE_VAR_STRING),
                   ("Binlog_Ignore_DB", TYPE_VAR_STRING)] + ([("Executed_Gtid_Set", TYPE_VAR_STRING)] if mysql else [])
        rows: list[list[str | int | None]] = [] if status is None else [
            [status[0], status[1], "", "", *([str(status[2])] if mysql else [])]]
        return text_result_set(columns, rows)


def _like_matcher(pattern: str) -> Callable[[str], object]:
    """SQL LIKE, case-insensitive as SHOW VARIABLES compares: % any run, _ one character, \\
    escapes. A naive `.*x.*x.*y` regex tries every split of the name between its `.*`s (twelve
    `%` took 53 s); `like_to_regex` keeps each segment at its leftmost place: linear in the name.
    A pattern that needs more characters than a variable name can have matches nothing, and is
    not compiled (a regex of a million segments takes seconds to build)."""
    if (len(pattern) - pattern.count("%")) // 2 > NAME_LEN:  # each character left is half an escape at most
        return lambda name: False
    return re.compile(like_to_regex(pattern), re.I | re.S).fullmatch


def _user_var_name(token: str) -> str:
    """The name in a user variable's token (`@name`, `@`name``: what _SET_ITEM and _VALUE take as one)."""
    match = _USER_VAR.match(token)
    assert match is not None, token
    return match.group(1)


def _size(name: str, value: object) -> int:
    return len(name) + len(str(value)) if value is not None else len(name)


def _strip_comments(text: str) -> str:
    """The query as the server reads it, by the core's lexer (`_core.sql_tokens`, MariaDB's
    reading): each run of comments (`/* */`, `#` and `-- ` to the line's end) one space, a
    versioned comment's code (`/*!100000 ...*/`) read as code, a `/*` inside a string kept; a text
    that does not lex (a quote or a comment left open) as it is. Linear in the text (a lazy regex
    rescanned the rest of the text from every `/*`: 80 000 of them took 52 s)."""
    lexed = _core.sql_tokens(text)
    if lexed.error is not None:
        return text
    out: list[str] = []
    at = 0
    for start, end in [*((t.start, t.end) for t in lexed.tokens), (len(text), len(text))]:
        gap = text[at:start]
        out += (gap if gap.isspace() or not gap else " ", text[start:end])
        at = end
    return "".join(out)


def _split_top(text: str, limit: int) -> list[str]:
    """Comma-separated items outside parentheses and quotes; QueryError past `limit` of them."""
    items, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"`":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
            if len(items) >= limit:
                raise QueryError(ER_TOO_MANY_FIELDS, f"Too many columns: a SELECT of dumpfilter's replication "
                                 f"endpoint has at most {limit}")
    tail = text[start:].strip()
    if tail:
        items.append(tail)
    return items


def _alias(expr: str) -> tuple[str, str | None]:
    """`expr [AS] alias` -> (expr, alias): the last word, in backticks or not, after whitespace
    (and an AS before it), when what is left is a whole expression. Read from the end, by hand:
    `(.*?)\\s+(?:AS\\s+)?(\\w+)` retries its whitespace run at every position (quadratic)."""
    end = len(expr) - (expr.endswith("`"))
    start = end
    while start and _is_word(expr[start - 1]):
        start -= 1
    alias = expr[start:end]
    if not alias:
        return expr, None
    before = start - (start > 0 and expr[start - 1] == "`")
    head = expr[:before].rstrip()
    if len(head) == before:
        return expr, None  # no whitespace before the word: it is part of the expression
    if head[-2:].upper() == "AS" and len(head) > 2 and head[-3].isspace():
        if not head[:-2].strip():
            return expr, None  # ` AS word`: the regex took the AS, and its expression is empty
        head = head[:-2]
    head = head.strip()
    if head and not head.endswith(("(", ",")) and head.count("(") == head.count(")"):
        return head, alias
    return expr, None


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"  # what the regex \w matches
