"""Splitting an SQL script into statements, as the `mariadb` command-line client does.

The workload has to run on ONE server session (so that `USE` persists, exactly as it would for
an application), which rules out piping it through the client; pymysql executes one statement
per call, so the script is split here. Handled like the client:

* `;` ends a statement, except inside '...' / "..." / `...` quotes and comments;
* `DELIMITER xx` lines change the terminator (needed for triggers and routines whose bodies
  contain `;`), and the line itself is not sent to the server;
* `-- ` / `#` line comments and `/* ... */` comments are dropped, but `/*! ... */` and `/*M! ... */`
  version comments are kept: the server executes what is inside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dumpfilter.errors import InvalidArgumentError

_DELIMITER = re.compile(r"^\s*delimiter\s+(\S+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Statement:
    sql: str
    line: int  # 1-based line of the statement's first character in the script

    def __str__(self) -> str:
        return self.sql


class ScriptError(InvalidArgumentError):
    """An unterminated quote or comment."""


def split_statements(text: str) -> list[Statement]:
    """The statements of a script, without their terminators, in order.

    One character loop on purpose, like the mysql client's own splitter: quotes, comments and
    DELIMITER interact, and one state machine in one place is easier to check than pieces."""
    out: list[Statement] = []
    delimiter = ";"
    buf: list[str] = []
    start_line = None
    line_no = 0
    # State carried across lines: inside a quote or a block comment.
    quote: str | None = None
    in_comment = False
    keep_comment = False

    def flush() -> None:
        nonlocal buf, start_line
        sql = "".join(buf).strip()
        if sql:
            out.append(Statement(sql, start_line or line_no))
        buf = []
        start_line = None

    for line in text.splitlines(keepends=True):
        line_no += 1
        if quote is None and not in_comment and not "".join(buf).strip():
            match = _DELIMITER.match(line)
            if match:
                delimiter = match.group(1)
                continue
        i = 0
        n = len(line)
        while i < n:
            ch = line[i]
            if in_comment:
                end = line.find("*/", i)
                if end < 0:
                    if keep_comment:
                        buf.append(line[i:])
                    i = n
                    continue
                if keep_comment:
                    buf.append(line[i:end + 2])
                i = end + 2
                in_comment = False
                continue
            if quote is not None:
                if ch == "\\" and quote != "`":
                    buf.append(line[i:i + 2])
                    i += 2
                    continue
                if ch == quote:
                    if line.startswith(quote * 2, i):  # doubled quote inside a quoted string
                        buf.append(quote * 2)
                        i += 2
                        continue
                    quote = None
                buf.append(ch)
                i += 1
                continue
            if line.startswith(delimiter, i):
                flush()
                i += len(delimiter)
                continue
            if ch in "'\"`":
                quote = ch
                if start_line is None:
                    start_line = line_no
                buf.append(ch)
                i += 1
                continue
            if ch == "#" or (line.startswith("--", i) and (i + 2 >= n or line[i + 2] in " \t\r\n")):
                buf.append("\n")
                i = n
                continue
            if line.startswith("/*", i):
                keep_comment = line.startswith(("/*!", "/*M!"), i)
                in_comment = True
                if keep_comment:
                    if start_line is None:
                        start_line = line_no
                    buf.append("/*")
                else:
                    buf.append(" ")
                i += 2
                continue
            if start_line is None and not ch.isspace():
                start_line = line_no
            buf.append(ch)
            i += 1
    if quote is not None:
        raise ScriptError(f"unterminated {quote} quote (statement starting on line {start_line})")
    if in_comment:
        raise ScriptError("unterminated /* comment")
    flush()
    return out
