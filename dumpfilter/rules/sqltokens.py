"""A small MySQL lexer: identifiers (bare or backquoted), strings, numbers and punctuation, comments skipped."""

from __future__ import annotations

import re
from dataclasses import dataclass

BARE_WORD = re.compile(r"[A-Za-z0-9_$\u0080-\U0010ffff]+")
STRING_ESCAPES = {"0": "\0", "'": "'", '"': '"', "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "\\": "\\"}


class LexError(ValueError):
    """Text the lexer cannot split into tokens (an unbalanced quote or comment); `offset` says where."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # 'word' | 'quoted_ident' | 'string' | 'punct'
    value: str  # unquoted, unescaped text
    start: int

    @property
    def is_identifier(self) -> bool:
        return self.kind in ("word", "quoted_ident")

    def is_keyword(self, *words: str) -> bool:
        return self.kind == "word" and self.value.upper() in words


def tokenize(text: str) -> list[Token]:
    """Split MySQL text into tokens; `/*! ... */` versioned comments are read as code, as mysqld does."""
    tokens: list[Token] = []
    pos, length, open_versioned = 0, len(text), 0
    while pos < length:
        char = text[pos]
        if char.isspace():
            pos += 1
        elif text.startswith("/*", pos):
            pos, is_versioned = _skip_block_comment(text, pos)
            open_versioned += is_versioned
        elif open_versioned and text.startswith("*/", pos):
            open_versioned -= 1
            pos += 2
        elif char == "#" or (text.startswith("--", pos) and (pos + 2 == length or text[pos + 2].isspace())):
            newline = text.find("\n", pos)
            pos = length if newline < 0 else newline + 1
        elif char == "`":
            value, pos = _read_quoted(text, pos, "`", escapes=False)
            tokens.append(Token("quoted_ident", value, pos))
        elif char in "'\"":
            start = pos
            value, pos = _read_quoted(text, pos, char, escapes=True)
            tokens.append(Token("string", value, start))
        elif match := BARE_WORD.match(text, pos):
            tokens.append(Token("word", match.group(), pos))
            pos = match.end()
        elif text.startswith("->", pos):
            tokens.append(Token("punct", "->", pos))
            pos += 2
        else:
            tokens.append(Token("punct", char, pos))
            pos += 1
    return tokens


def _skip_block_comment(text: str, pos: int) -> tuple[int, int]:
    """Skip `/* ... */`; for `/*!NNNNN` or `/*M!NNNNN` skip only the marker and report an open versioned comment."""
    versioned = re.compile(r"/\*M?!\d*").match(text, pos)
    if versioned:
        return versioned.end(), 1
    end = text.find("*/", pos + 2)
    if end < 0:
        raise LexError(f"unterminated /* comment at offset {pos}", pos)
    return end + 2, 0


def _read_quoted(text: str, pos: int, quote: str, *, escapes: bool) -> tuple[str, int]:
    """Read a quoted token starting at `pos`; a doubled quote stands for itself, backslash escapes in strings."""
    parts: list[str] = []
    index = pos + 1
    while index < len(text):
        char = text[index]
        if char == quote:
            if text.startswith(quote * 2, index):
                parts.append(quote)
                index += 2
                continue
            return "".join(parts), index + 1
        if escapes and char == "\\" and index + 1 < len(text):
            parts.append(_unescape_pair(text[index + 1]))
            index += 2
            continue
        parts.append(char)
        index += 1
    what = "backquoted identifier" if quote == "`" else "string"
    raise LexError(f"unbalanced {quote} in {what} starting at offset {pos}", pos)


def _unescape_pair(char: str) -> str:
    # MySQL keeps the backslash before % and _ so that LIKE patterns survive string literals.
    if char in "%_":
        return "\\" + char
    return STRING_ESCAPES.get(char, char)


def quote_identifier(name: str) -> str:
    """Backquote an identifier, doubling backquotes inside it."""
    return "`" + name.replace("`", "``") + "`"


def quote_string(value: str) -> str:
    """Quote a string literal so that `tokenize` reads back exactly `value` (backslashes doubled)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
