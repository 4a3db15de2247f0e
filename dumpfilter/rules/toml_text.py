"""The one reading of a TOML file's text (policy files, topologies, candidates, `--replicas`):
tomllib's parse, with every way it can fail turned into one line that names the file."""

from __future__ import annotations

import tomllib
from typing import Any

from dumpfilter.errors import InvalidArgumentError


def loads(text: str, name: str, error: type[InvalidArgumentError] = InvalidArgumentError,
          what: str = "not valid TOML") -> dict[str, Any]:
    """`tomllib.loads(text)`, or `error("{name}: {what}: ...")` in one line: a syntax error (with
    its line and column), or arrays and inline tables nested deeper than the parser's recursion
    (tomllib parses them recursively: thousands of `[` raise RecursionError, not TOMLDecodeError)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{name}: {what}: {exc}") from None
    except RecursionError:
        raise error(f"{name}: {what}: arrays or inline tables nested too deep (line "
                    f"{_deepest_line(text)})") from None


def _deepest_line(text: str) -> int:
    """The line where the nesting of `[` and `{` outside strings and comments first goes deepest
    (an estimate of where the parse gave up: good enough to find it in an editor)."""
    depth = best = 0
    line = best_line = 1
    quote = ""
    comment = False
    for char in text:
        if char == "\n":
            line += 1
            comment = False
            if quote in ('"', "'"):
                quote = ""
            continue
        if comment:
            continue
        if quote:
            if char == quote:
                quote = ""
            continue
        if char in "\"'":
            quote = char
        elif char == "#":
            comment = True
        elif char in "[{":
            depth += 1
            if depth > best:
                best, best_line = depth, line
        elif char in "]}":
            depth -= 1
    return best_line
