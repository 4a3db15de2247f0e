"""A SQL script (a `mysqldump --no-data` file) cut into its statements as the mysql client cuts it:
`DELIMITER` lines change the delimiter; quotes, backticks and comments are respected (the dumps'
`/*!...*/` are code). One pass, each statement as it is reached, with its offset."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from dumpfilter.rules.lazy_pattern import lazy_compile

# A DELIMITER line (the mysql client's command: read only where no statement has begun).
_DELIMITER = lazy_compile(r"[^\S\n]*DELIMITER[^\S\n]+(\S+)[^\S\n]*(?:\n|\Z)", re.IGNORECASE)
# Blanks and line comments: what the mysql client discards between statements.
_BLANK = lazy_compile(r"(?:\s|--[ \t][^\n]*|--(?=\n|\Z)|#[^\n]*)*")
_COMMENT_LINE = lazy_compile(r"\s*(--\s|--$|#)")
# Inside a quote: its end, or a backslash escaping the next character (not in backticks).
_QUOTE_END = {"'": lazy_compile(r"[\\']"), '"': lazy_compile(r'[\\"]'), "`": lazy_compile("`")}


def iter_script(text: str) -> Iterator[tuple[int, str]]:
    """(offset of its first character, statement) for each statement of `text`; comment lines
    inside a statement are dropped."""
    delimiter, pos, n, line_start = ";", 0, len(text), True
    while pos < n:
        directive = _DELIMITER.match(text, pos) if line_start else None
        if directive:
            delimiter, pos = directive.group(1), directive.end()
            continue
        blank = pos if (run := _BLANK.match(text, pos)) is None else run.end()
        newline = text.find("\n", pos, blank)
        if newline >= 0 or blank == n:  # the rest of the line is blank: discarded
            pos, line_start = (newline + 1 if newline >= 0 else n), True
            continue
        cut = _find_delimiter(text, delimiter, blank)
        statement = _drop_comment_lines(text[blank:n if cut is None else cut].strip())
        if statement:
            yield blank, statement
        if cut is None:
            return
        pos, line_start = cut + len(delimiter), False


def _drop_comment_lines(statement: str) -> str:
    return "\n".join(line for line in statement.splitlines() if not _COMMENT_LINE.match(line)).strip()


@functools.lru_cache(maxsize=8)
def _marks(delimiter: str) -> re.Pattern[str]:
    """Where the scan outside quotes and comments stops, in the mysql client's order at one offset:
    a quote, a line comment (`--` needs a blank after it), a comment (`/*!` is code), the delimiter."""
    return re.compile(r"(?P<quote>['\"`])|(?P<line>#|--(?=[ \t\r\n]|\Z))|(?P<comment>/\*(?!!))|"
                      + re.escape(delimiter))


def _find_delimiter(text: str, delimiter: str, at: int) -> int | None:
    """Offset of the first delimiter from `at` outside quotes and comments; None if none ends."""
    marks = _marks(delimiter)
    while (mark := marks.search(text, at)) is not None:
        if mark.lastgroup == "quote":
            end, at = _QUOTE_END[mark.group()], mark.end()
            while (close := end.search(text, at)) is not None and close.group() == "\\":
                at = close.end() + 1
            if close is None:
                return None
            at = close.end()
        elif mark.lastgroup == "line":
            at = text.find("\n", mark.end()) + 1
            if at == 0:
                return None
        elif mark.lastgroup == "comment":
            at = text.find("*/", mark.end()) + 2
            if at == 1:
                return None
        else:
            return mark.start()
    return None
