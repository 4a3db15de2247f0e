"""The rule modules' patterns compiled on first use (rules.lazy_pattern): the same answers as the
patterns compiled at import, nothing compiled or imported before it is needed."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpfilter.rules import schema, statements
from dumpfilter.rules.lazy_pattern import LazyPattern

ROOT = Path(__file__).resolve().parents[2]
MODULES = (statements, schema)


def lazy_patterns() -> list[tuple[str, LazyPattern]]:
    """Every LazyPattern a rule module holds, in a global or in a tuple of (kind, pattern)."""
    found = []
    for module in MODULES:
        for name, value in vars(module).items():
            if isinstance(value, LazyPattern):
                found.append((f"{module.__name__}.{name}", value))
            elif isinstance(value, tuple):
                found += [(f"{module.__name__}.{name}[{i}]", item[1]) for i, item in enumerate(value)
                          if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], LazyPattern)]
    return found


PATTERNS = lazy_patterns()


def test_the_rule_modules_hold_their_patterns_lazily():
    names = {name for name, _ in PATTERNS}
    assert len(PATTERNS) >= 7
    assert {"dumpfilter.rules.statements._DATABASE_WORD",
            "dumpfilter.rules.schema._SCHEMA_DDL"} <= names
    for module in MODULES:  # no compiled pattern left at module level
        assert not [n for n, v in vars(module).items() if isinstance(v, re.Pattern)], module.__name__


# Text built from the pieces the patterns look for, so that they match as often as they fail.
_PIECES = ["CREATE", "TABLE", "DROP", "IF", "NOT", "EXISTS", "TEMPORARY", "INSERT", "INTO", "UPDATE", "SET",
           "DELETE", "FROM", "SELECT", "LIKE", "RENAME", "TO", "AS", "COLUMN", "DATABASE", "SCHEMA", "RETURNING",
           "LOW_PRIORITY", "IGNORE", "VALUES", "`", "``", "`t`", "`a``b`", "'", "''", '"', "\\", "\\n", "/*",
           "*/", "/*!50003 ", "/*!100100", "#", "--", "-- ", ".", ",", "(", ")", ";", "=", " ", "  ", "\n", "\t",
           "t1", "db", "x$", "é", "0", "select", "drop", "create"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=14).map("".join)


def _answers(pattern, text: str):
    def groups(m):
        return None if m is None else (m.span(), m.groups())

    return (groups(pattern.match(text)), groups(pattern.search(text)), groups(pattern.fullmatch(text)),
            [m.span() for m in pattern.finditer(text)], pattern.findall(text),
            pattern.sub(lambda m: "<" + m.group(0) + ">", text), pattern.split(text))


@settings(max_examples=150, deadline=None)
@given(text=_TEXT)
def test_lazy_patterns_answer_as_the_compiled_ones(text):
    for name, lazy in PATTERNS:
        pattern, flags = lazy.pattern, lazy.flags
        assert _answers(lazy, text) == _answers(re.compile(pattern, flags), text), name


def test_the_first_use_compiles_once_and_keeps_the_methods():
    lazy = LazyPattern(r"\bIF\s+NOT\s+EXISTS\b", re.IGNORECASE)
    assert not lazy.is_compiled
    assert lazy.search("create table if  not exists t").span() == (13, 27)
    assert lazy.is_compiled
    compiled = lazy.compiled
    assert lazy.__dict__["search"] == compiled.search  # the bound method, looked up directly from now on
    assert lazy.match("IF NOT EXISTS") and lazy.compiled is compiled
    assert copy.copy(lazy).search("if not exists")
    with pytest.raises(AttributeError):
        lazy.no_such_method  # noqa: B018
    bad = LazyPattern("(")
    try:
        with pytest.raises(re.error):  # a bad pattern says so at its first use
            bad.search("x")
    finally:  # not left for a later compile_all in this worker (the master's warm-up test)
        LazyPattern.made.remove(bad)


def test_importing_the_rules_compiles_no_pattern_and_a_statement_compiles_only_what_it_uses():
    code = """
import sys
from dumpfilter.rules import schema, statements
from dumpfilter.rules.lazy_pattern import LazyPattern
def compiled():
    return sorted(n for m in (statements, schema) for n, v in vars(m).items()
                  if isinstance(v, LazyPattern) and v.is_compiled)
print(compiled())
info = statements.statement_tables("DROP TABLE IF EXISTS `scratch_1`", "db3")
print(info.kind, info.updated, compiled())
print("grpc" in sys.modules, "sqlglot" in sys.modules)
"""
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "[]"
    assert lines[1].startswith("DROP_TABLE (('db3', 'scratch_1'),)")
    used = eval(lines[1].split(") ", 1)[1])  # noqa: S307 - our own printed list
    assert used == []  # read by the core's facts: no pattern at all
    assert lines[2] == "False False"


def test_the_rule_options_import_no_engine():
    code = ("import sys, argparse\nfrom dumpfilter.rules.options import add_rule_options\n"
            "add_rule_options(argparse.ArgumentParser())\n"
            "print(sorted(m for m in ('dumpfilter.rules.evaluate', 'dumpfilter.rules.schema', "
            "'dumpfilter.rules.channels') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
