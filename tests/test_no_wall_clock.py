"""The house rule "no test asserts a wall-clock time", checked over tests/ (issue #27): a loaded CI
machine stretches seconds, so a test that asserts them fails there for no fault of the code.

* no `assert` reads a wall clock (time.time, time.monotonic, time.perf_counter and their _ns
  forms), directly or through a name computed from one in the same test function. CPU time of the
  thread (time.thread_time) is work, not wall-clock time, and stays allowed. An upper bound on a
  count over an elapsed time (heartbeats never more often than their period) cannot fail on a
  loaded machine: such a line says so with `# not a speed bound`;
* no hypothesis setting gives a `deadline` other than None (the profiles in conftest.py turn the
  200 ms default off).

Waiting for a state with a give-up (tests/support/waiting.py) is how a test waits.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
WALL_CLOCKS = {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns"}
ALLOWED = "# not a speed bound"


def _reads_wall_clock(node: ast.AST, tainted: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else "time"
            if name in WALL_CLOCKS and owner == "time":
                return True
        elif isinstance(sub, ast.Name) and sub.id in tainted:
            return True
    return False


def _tainted_targets(node: ast.AST, tainted: set[str]) -> list[ast.AST]:
    """What `node` makes hold a clock's reading: an assignment's targets, or a list it appends to."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None \
            and _reads_wall_clock(node.value, tainted):
        return node.targets if isinstance(node, ast.Assign) else [node.target]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.attr in ("append", "add", "extend") and any(_reads_wall_clock(a, tainted) for a in node.args):
        return [node.func.value]  # took.append(time.monotonic() - started)
    return []


def _scopes(tree: ast.Module) -> list[list[ast.AST]]:
    """The nodes of each test function (functions nested in it included: a thread's list is read
    by the test around it) and of each method, apart; the module's other statements together."""
    scopes, module = [], []
    for statement in tree.body:
        units = statement.body if isinstance(statement, ast.ClassDef) else [statement]
        for unit in units:
            if isinstance(unit, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scopes.append(list(ast.walk(unit)))
            else:
                module.extend(ast.walk(unit))
    return [module, *scopes]


def wall_clock_asserts(source: str) -> list[int]:
    """Line numbers of the asserts in `source` that read a wall clock."""
    lines = source.splitlines()
    found = []
    for nodes in _scopes(ast.parse(source)):
        tainted: set[str] = set()
        changed = True
        while changed:  # names computed from a clock, or from such a name
            changed = False
            for node in nodes:
                for target in _tainted_targets(node, tainted):
                    while isinstance(target, (ast.Subscript, ast.Attribute)):
                        target = target.value  # times[n] = ...: `times`, not `n`
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id not in tainted:
                            tainted.add(name.id)
                            changed = True
        found += [node.lineno for node in nodes if isinstance(node, ast.Assert)
                  and _reads_wall_clock(node.test, tainted) and ALLOWED not in lines[node.lineno - 1]]
    return sorted(found)


def timed_hypothesis_settings(source: str) -> list[int]:
    """Line numbers of settings(...) / register_profile(...) calls with a deadline that is not None."""
    found = []
    for node in ast.walk(ast.parse(source)):
        func = node.func if isinstance(node, ast.Call) else None
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("settings", "register_profile"):  # not any call's deadline= (a read's own deadline)
            for keyword in node.keywords:
                if keyword.arg == "deadline" and not (isinstance(keyword.value, ast.Constant)
                                                      and keyword.value.value is None):
                    found.append(node.lineno)
    return found


def test_the_checks_see_what_they_look_for():
    assert wall_clock_asserts("import time\nt = time.perf_counter()\nf()\nassert time.perf_counter() - t < 2\n") == [4]
    assert wall_clock_asserts("def f():\n    a = time.monotonic()\n    b = time.monotonic() - a\n"
                              "    assert b < 5, b\n") == [4]
    assert wall_clock_asserts("took = []\nt = time.time()\ntook.append(time.time() - t)\nassert max(took) < 2\n") == [4]
    assert wall_clock_asserts("t = time.thread_time()\nassert time.thread_time() - t < 1\n") == []
    assert wall_clock_asserts("d = time.monotonic() + 9\nwhile time.monotonic() < d:\n    pass\nassert ok\n") == []
    assert wall_clock_asserts(f"assert n <= time.monotonic() / 2  {ALLOWED}: a rate\n") == []
    assert timed_hypothesis_settings("@settings(max_examples=5, deadline=500)\ndef f(): pass\n") == [1]
    assert timed_hypothesis_settings("@settings(deadline=None)\ndef f(): pass\n") == []
    assert timed_hypothesis_settings("settings.register_profile('ci', deadline=200)\n") == [1]
    assert timed_hypothesis_settings("stream.read(deadline=time.monotonic() + 0.5)\n") == []


def test_no_test_asserts_a_wall_clock_time():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        source = path.read_text()
        offenders += [f"{path.relative_to(TESTS)}:{line}: an assert on a wall-clock time"
                      for line in wall_clock_asserts(source)]
        offenders += [f"{path.relative_to(TESTS)}:{line}: a hypothesis deadline" for line in timed_hypothesis_settings(source)]
    assert offenders == []


def test_hypothesis_has_no_deadline():
    from hypothesis import settings

    assert settings().deadline is None
