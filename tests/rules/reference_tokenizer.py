"""The slow reference lexer: dumpfilter.rules.sqltokens's character-by-character loop as it was before
the compiled master pattern replaced it; the differential tests in test_sqltokens_differential.py hold the
two equal. One change from the original: a backquoted identifier's `start` is its opening backquote (the
original gave the offset just past the closing one, which cut `DELETE t FROM `t` JOIN ...` short).
"""

from __future__ import annotations

import re

from dumpfilter.rules.sqltokens import STRING_ESCAPES, LexError, Token

BARE_WORD = re.compile(r"[A-Za-z0-9_$\u0080-\U0010ffff]+")


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
            start = pos
            value, pos = _read_quoted(text, pos, "`", escapes=False)
            tokens.append(Token("quoted_ident", value, start))
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
