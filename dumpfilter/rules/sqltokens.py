"""A small MySQL lexer: identifiers (bare or backquoted), strings, numbers and punctuation, comments skipped."""

from __future__ import annotations

import re
from typing import NamedTuple

from dumpfilter.rules.lazy_pattern import lazy_compile

STRING_ESCAPES = {"0": "\0", "'": "'", '"': '"', "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "\\": "\\"}


class LexError(ValueError):
    """Text the lexer cannot split into tokens (an unbalanced quote or comment); `offset` says where."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


class Token(NamedTuple):
    """One lexeme; a named tuple because statements are lexed per event on the master's hot path."""

    kind: str  # 'word' | 'quoted_ident' | 'string' | 'punct'
    value: str  # unquoted, unescaped text
    start: int  # offset of the token's first character (its opening quote for quoted tokens)

    @property
    def is_identifier(self) -> bool:
        return self.kind in ("word", "quoted_ident")

    def is_keyword(self, *words: str) -> bool:
        return self.kind == "word" and self.value.upper() in words


# One master pattern, tried at each token start (tests/rules/test_sqltokens.py: the tokens of tricky
# text, written out). Possessive quantifiers keep a doubled quote a pair, as mysqld reads it: `a``
# is unbalanced.
_TOKEN = lazy_compile(r"""\s*+(?:
    (?P<word>[A-Za-z0-9_$\u0080-\U0010ffff]+)
  | `(?P<bq>(?:[^`]++|``)*+)`
  | (?P<punct>[(),.;=@])
  | '(?P<sq>(?:[^'\\]++|''|\\.)*+)'
  | "(?P<dq>(?:[^"\\]++|""|\\.)*+)"
  | (?P<versioned>/\*M?!\d*)
  | (?P<comment>/\*.*?\*/)
  | (?P<close>\*/)
  | (?P<line>(?:\#|--(?=\s|\Z))[^\n]*+\n?)
  | (?P<arrow>->)
  | (?P<bad>[`'"]|/\*)
  | (?P<other>.)
  | \Z)""", re.VERBOSE | re.DOTALL)
_STRING_ESCAPE = lazy_compile(r"\\(.)|''|\"\"", re.DOTALL)


def tokenize(text: str) -> list[Token]:
    """Split MySQL text into tokens; `/*! ... */` versioned comments are read as code, as mysqld does."""
    tokens: list[Token] = []
    append = tokens.append
    pos, length, open_versioned = 0, len(text), 0
    while pos < length:
        restart = None
        for match in _TOKEN.finditer(text, pos):
            kind = match.lastgroup
            if kind == "word" or kind == "punct" or kind == "other":
                append(Token("punct" if kind == "other" else kind, match.group(kind), match.start(kind)))
            elif kind == "bq":
                append(Token("quoted_ident", match.group("bq").replace("``", "`"), match.start("bq") - 1))
            elif kind is None or kind == "comment" or kind == "line":
                continue
            elif kind == "sq" or kind == "dq":
                value = match.group(kind)
                if "\\" in value or "''" in value or '""' in value:
                    value = _unescape(value, "'" if kind == "sq" else '"')
                append(Token("string", value, match.start(kind) - 1))
            elif kind == "versioned":
                open_versioned += 1
            elif kind == "close":
                if open_versioned:
                    open_versioned -= 1
                else:  # outside a versioned comment `*/` is punctuation: `*`, then lex again from the `/`
                    append(Token("punct", "*", match.start(kind)))
                    restart = match.start(kind) + 1
                    break
            elif kind == "arrow":
                append(Token("punct", "->", match.start(kind)))
            else:  # "bad": an opening quote or /* the patterns above could not close
                start, opener = match.start(kind), match.group(kind)
                if opener == "/*":
                    raise LexError(f"unterminated /* comment at offset {start}", start)
                what = "backquoted identifier" if opener == "`" else "string"
                raise LexError(f"unbalanced {opener} in {what} starting at offset {start}", start)
        if restart is None:
            break
        pos = restart
    return tokens


def lexes(text: str) -> bool:
    """Whether `text` reads as tokens (no string, name or comment left open)."""
    try:
        tokenize(text)
    except LexError:
        return False
    return True


def _unescape(value: str, quote: str) -> str:
    """A string body's doubled quotes and backslash pairs (the other quote's doubling stays two characters)."""
    def replace(match: re.Match[str]) -> str:
        pair = match.group()
        if pair[0] == "\\":
            return _unescape_pair(match.group(1))
        return quote if pair[0] == quote else pair

    return _STRING_ESCAPE.sub(replace, value)


def _unescape_pair(char: str) -> str:
    # MySQL keeps the backslash before % and _ so that LIKE patterns survive string literals.
    if char in "%_":
        return "\\" + char
    return STRING_ESCAPES.get(char, char)


def quote_identifier(name: str) -> str:
    """Backquote an identifier, doubling backquotes inside it."""
    return "`" + name.replace("`", "``") + "`"


def one_line(sql: str, limit: int) -> str:
    """A statement's text on one line (each run of white space one space), cut at `limit` characters."""
    flat = " ".join(sql.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


def quote_string(value: str) -> str:
    """Quote a string literal so that `tokenize` reads back exactly `value` (backslashes doubled)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
