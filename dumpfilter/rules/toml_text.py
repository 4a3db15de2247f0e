"""The one reading of a TOML file's text (policy files, topologies, candidates, `--replicas`):
tomllib's parse, with every way it can fail turned into one line that names the file, after a
linear scan that bounds what tomllib reads in time quadratic in a key's dotted parts; and where a
table or key stands (`Locator`), for the error lines of what tomllib read."""

from __future__ import annotations

import re
import tomllib
from typing import Any

from dumpfilter.errors import InvalidArgumentError


def loads(text: str, name: str, error: type[InvalidArgumentError] = InvalidArgumentError) -> dict[str, Any]:
    """`tomllib.loads(text)`, or `error("{name}: not valid TOML: ...")` in one line: a syntax error (with
    its line and column), or arrays and inline tables nested deeper than the parser's recursion
    (tomllib parses them recursively: thousands of `[` raise RecursionError, not TOMLDecodeError)."""
    refusal = dotted_key_refusal(text)
    if refusal is not None:
        line, reason = refusal
        raise error(f"{name}:{line}: refused before it is parsed: {reason}")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{name}: not valid TOML: {exc}") from None
    except RecursionError:
        raise error(f"{name}: not valid TOML: arrays or inline tables nested too deep (line "
                    f"{_deepest_line(text)})") from None


def _deepest_line(text: str) -> int:
    """The line where the nesting of `[` and `{` outside strings and comments (`_TOKEN`'s) first goes
    deepest (an estimate of where the parse gave up: good enough to find it in an editor)."""
    depth = best = 0
    line = best_line = 1
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > best:
                best, best_line = depth, line
        elif token in ("]", "}"):
            depth -= 1
        line += token.count("\n")
    return best_line


# tomllib checks each prefix of a dotted key against the table it is in: a key of K parts under a
# [header] of H costs it about H + K * (H + K) steps (a 20,000-part key took 88 s, 100,000 parts
# minutes). Real policies and topologies use a few parts; these bounds keep the worst file to
# a fraction of a second.
MAX_KEY_PARTS = 64  # parts of one dotted key, or of one [table] / [[array]] header
MAX_KEY_WORK = 1 << 22  # the sum of H + K * (H + K) over the file's keys

_TOKEN = re.compile("|".join((
    r"'{3}.*?'{3}",  # a multi-line literal string
    r'"{3}(?:[^\\]|\\.)*?"{3}',  # a multi-line basic string
    r'"(?:[^"\\\n]|\\.)*"',  # a basic string
    r"'[^'\n]*'",  # a literal string
    r"#[^\n]*",  # a comment
    r"[^\"'#\n\[\]{}=,.]+",  # anything else up to a token of interest
    r".",  # one of those (or a lone quote), or a newline
)), re.S)


def dotted_key_refusal(text: str) -> tuple[int, str] | None:
    """Why tomllib must not read TEXT ((its line, the reason): a dotted key or a header of more than
    MAX_KEY_PARTS parts, or keys whose parts would cost it more than MAX_KEY_WORK steps), or None.
    One pass over the tokens outside strings and comments: a run of dots between two of `=`, `,`,
    `[`, `]`, `{`, `}` or a newline is a key's (a float's one dot counts as a part too: harmless)."""
    line = run_line = 1
    dots = header = work = depth = 0
    in_header = line_start = True
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token == ".":
            if dots == 0:
                run_line = line
            dots += 1
            if dots >= MAX_KEY_PARTS:
                what = "table header" if in_header else "dotted key"
                return run_line, (f"a {what} of more than {MAX_KEY_PARTS} parts (a file's keys have a few; "
                                  "tomllib takes time quadratic in their number)")
            continue
        if token[0] in "\"'" and "\n" in token:  # a multi-line string
            line += token.count("\n")
        elif token == "\n" or token[0] == "#":  # a key ends with its line
            line += token == "\n"
            line_start, dots = token == "\n", 0
            continue
        elif token.isspace():
            continue
        elif token == "[" and line_start and depth == 0:
            in_header, dots = True, 0
        elif token == "]" and in_header:
            if text.startswith("]", match.end()):  # [[array]]'s second bracket
                continue
            header, in_header, dots = dots + 1, False, 0
        elif token == "=":
            key = dots + 1
            work += (header + key * (header + key)) if depth == 0 else key * key
            if work > MAX_KEY_WORK:
                return line, (f"dotted keys of more than {MAX_KEY_WORK} parts weighed (a key of K parts under a "
                              "header of H weighs H + K * (H + K): tomllib takes time quadratic in them)")
            dots = 0
        elif token in "[{":
            depth += 1 if not in_header else 0
            dots = 0
        elif token in "]},":
            depth -= 1 if token != "," and depth else 0
            dots = 0
        line_start = False
    return None


class Locator:
    """Line numbers for keys (`key =`, or a dotted `key.x =`) and tables: tomllib reports them only for
    syntax errors. `name` heads every place (a topology's path, "policy file PATH")."""

    def __init__(self, text: str, name: str):
        self.lines = text.splitlines()
        self.name = name

    def _find(self, pattern: str, start: int = 0, stop: int | None = None) -> int | None:
        regex = re.compile(pattern)
        numbers = range(start, len(self.lines) if stop is None else stop)
        return next((number for number in numbers if regex.match(self.lines[number])), None)

    def top(self, key: str) -> str:
        line = self._find(rf"\s*(\[\[?\s*{re.escape(key)}\s*[\].]\]?|{re.escape(key)}\s*[.=])")
        return f"{self.name}:{line + 1}" if line is not None else self.name

    def table(self, table: str, key: str) -> str:
        """The line of `key` inside `[table]` (or of `[table]` itself, or of a dotted `x.key =`)."""
        start = self._find(rf"\s*\[\s*{re.escape(table)}\s*\]")
        if start is None:
            parent, _, leaf = table.rpartition(".")
            if parent:  # [master] with `workload = {...}` or `workload.seed = 1`
                parent_start = self._find(rf"\s*\[\s*{re.escape(parent)}\s*\]")
                line = None if parent_start is None else self._in_section(parent_start, leaf)
                return f"{self.name}:{line + 1}" if line is not None else self.top(parent)
            return self.top(table)
        line = self._in_section(start, key)
        return f"{self.name}:{(line if line is not None else start) + 1}"

    def _in_section(self, start: int, key: str, quote: str = "") -> int | None:
        """The line of `key =` (or a dotted `key.x =`; `quote`: a pattern around the key) in the table
        whose header is line `start`."""
        stop = next((i for i, line in enumerate(self.lines) if i > start and re.match(r"\s*\[", line)), None)
        return self._find(rf"\s*{quote}{re.escape(key)}{quote}\s*[.=]", start + 1, stop)

    def slave(self, index: int, key: str) -> str:
        headers = [i for i, line in enumerate(self.lines) if re.match(r"\s*\[\[\s*slaves\s*\]\]", line)]
        if index >= len(headers):  # inline array `slaves = [{...}]`
            return self.top("slaves")
        line = self._in_section(headers[index], key)
        return f"{self.name}:{(line if line is not None else headers[index]) + 1}"

    def at(self, section: str, key: str | None = None) -> str:
        """A policy file's section `[slave.SECTION]` or `[SECTION]` (names quoted or not), or the
        line of `key` in it (the section's line when the key is not there)."""
        start = self._find(r"\s*\[\s*(slave\s*\.\s*)?[\"']?" + re.escape(section) + r"[\"']?\s*\]")
        line = None if start is None or key is None else self._in_section(start, key, "[\"']?")
        return f"{self.name}:{(line if line is not None else start) + 1}" if start is not None else self.name
