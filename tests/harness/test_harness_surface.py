"""The public surface of dumpfilter.harness (issue #44): `__all__` is exactly the table of
docs/api.md, each public name is documented and typed, and the package reaches the master and
slave edges through `_wiring` alone (the one place to re-point when those packages move)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest

import dumpfilter.harness as harness

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"


def documented_names() -> list[str]:
    """The first column of docs/api.md's table of public names."""
    text = DOC.read_text()
    table = text[text.index("## The public names"):text.index("## The pytest plugin")]
    return re.findall(r"^\| `([A-Za-z_]+)` \|", table, re.MULTILINE)


def test_all_is_exactly_the_documented_set():
    documented = documented_names()
    assert len(documented) == len(set(documented)), "a name is listed twice in docs/api.md"
    assert sorted(harness.__all__) == sorted(documented)


def test_the_surface_check_sees_a_name_added_by_accident(monkeypatch):
    monkeypatch.setattr(harness, "__all__", [*harness.__all__, "Slave_internal"])
    assert sorted(harness.__all__) != sorted(documented_names())


def test_every_public_name_exists_and_says_what_it_is():
    for name in harness.__all__:
        value = getattr(harness, name)
        if name == "SKIP_POLICIES":
            assert value and all(isinstance(v, str) for v in value)
            continue
        assert inspect.getdoc(value), f"{name} has no docstring"


@pytest.mark.parametrize("name", [n for n in harness.__all__ if inspect.isfunction(getattr(harness, n))])
def test_public_functions_are_fully_annotated(name):
    signature = inspect.signature(getattr(harness, name))
    assert signature.return_annotation is not inspect.Signature.empty, name
    missing = [p.name for p in signature.parameters.values() if p.annotation is inspect.Parameter.empty]
    assert not missing, f"{name}: parameters without a type: {missing}"


def test_result_types_are_frozen_dataclasses():
    for name in ("Position", "Received", "LintBreak", "LintResult", "Decision", "EventDecision",
                 "TransactionExplanation", "SimulatedSlave", "Simulation", "Rules", "RelayLog"):
        cls = getattr(harness, name)
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, name


def test_only_wiring_imports_master_and_slave_internals():
    offenders = []
    for path in sorted((ROOT / "dumpfilter" / "harness").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.startswith(("dumpfilter.master", "dumpfilter.slave")) for n in names) and path.name != "_wiring.py":
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders


def test_the_plugin_is_registered_by_its_entry_point(pytestconfig):
    """Installed dumpfilter registers dumpfilter.pytest_plugin as the pytest11 entry point `dumpfilter`."""
    from importlib.metadata import entry_points

    points = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert points.get("dumpfilter") == "dumpfilter.pytest_plugin", \
        "reinstall (pip install -e .) so pyproject's [project.entry-points.pytest11] is registered"
    assert pytestconfig.pluginmanager.has_plugin("dumpfilter")
