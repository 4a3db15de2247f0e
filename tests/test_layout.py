"""The house rules, checked over the source tree (issue #12):

* imports only point down the layers below (codec -> rules -> binlogs -> ... -> edges -> lab ->
  cli): a module never imports a layer above its own, and the three edges (master, slave,
  spark_jobs) never import one another;
* pyproject.toml installs every package of the tree, each under the one `dumpfilter` namespace;
* no module is generated or imported at run time from proto/ (the build makes dumpfilter/v1);
* every module opens with a docstring that says what it owns;
* the compiled core is typed: dumpfilter/_core.pyi names everything `dumpfilter._core` exports,
  and the wheel carries it with py.typed (issue #29, item 5);
* grpcio-tools is a build-time requirement only, imported by nothing outside proto/ (item 7);
* master/ is rooms (issue #46 goal 4): at most ten modules at its top, its sub-packages the named
  set, SlaveStream without mixins, and no master class reading another object's private state.
* the Rust core's modules (core/src) without circles through their `crate::`/`super::` paths, and
  none over MAX_LINES lines (issue #57 goal 7).
"""

from __future__ import annotations

import ast
import os
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Where each installed package lives in the checkout (pyproject's package-dir).
FOLDERS = {"dumpfilter": "dumpfilter", "dumpfilter.master": "master", "dumpfilter.slave": "slave",
           "dumpfilter.spark_jobs": "spark_jobs", "dumpfilter.lab": "lab", "dumpfilter.cli": "cli"}

# The layers, lowest first. A module may import its own unit and any unit of a lower layer.
LAYERS: list[set[str]] = [
    {"dumpfilter._core", "dumpfilter.children", "dumpfilter.errors", "dumpfilter.regular_file", "dumpfilter.v1", "dumpfilter.data"},
    {"dumpfilter.codec"},
    {"dumpfilter.rules"},
    {"dumpfilter.sent"},
    {"dumpfilter.skip_policy"},                   # counts into sent's SentCounts
    {"dumpfilter.binlogs"},
    {"dumpfilter.workload"},
    {"dumpfilter.topology", "dumpfilter.wire", "dumpfilter.charts", "dumpfilter.progress"},
    {"dumpfilter.master", "dumpfilter.slave", "dumpfilter.spark_jobs"},   # the edges: not one another
    {"dumpfilter.lab"},
    {"dumpfilter.harness"},                       # the public Python API (issue #44): lab, master, slave
    {"dumpfilter.cli", "dumpfilter.pytest_plugin"},  # the two front ends: the command line, the pytest fixtures
    {"dumpfilter.__main__"},
]
RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}


def unit_of(module: str) -> str | None:
    """The layer unit a dotted module name belongs to (the longest known prefix)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in RANK:
            return prefix
    return None


def source_modules() -> list[tuple[str, Path]]:
    out = []
    for package, folder in FOLDERS.items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("")
            if "v1" in rel.parts or "__pycache__" in rel.parts:
                continue
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            if package == "dumpfilter" and parts and f"dumpfilter.{parts[0]}" in FOLDERS:
                continue
            out.append((name, path))
    return out


def imports_of(name: str, path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found += [(node.lineno, module)]
            # `from dumpfilter import codec` imports the unit dumpfilter.codec
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names
                      if unit_of(f"{module}.{alias.name}") not in (None, unit_of(module))]
    return [(line, m) for line, m in found if m == "dumpfilter" or m.startswith("dumpfilter.")]


def test_every_module_belongs_to_a_layer():
    homeless = [name for name, _ in source_modules() if name != "dumpfilter" and unit_of(name) is None]
    assert not homeless, f"modules outside every layer (add them to LAYERS): {homeless}"


def test_imports_only_point_down():
    upward = []
    for name, path in source_modules():
        mine = unit_of(name)
        for line, module in imports_of(name, path):
            theirs = unit_of(module)
            if theirs is None or theirs == mine or mine is None:
                continue
            if RANK[theirs] >= RANK[mine]:
                upward.append(f"{path.relative_to(ROOT)}:{line}: {name} imports {module}")
    assert not upward, "imports that run up (or across the edges):\n" + "\n".join(upward)


def test_the_import_check_sees_an_upward_import(tmp_path):
    """The check above must be able to fail: an upward import in a module is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text('"""x"""\nfrom dumpfilter.cli.app import main\nfrom ..master import service\n')
    found = {m: line for line, m in imports_of("dumpfilter.codec.bad", bad)}
    assert unit_of("dumpfilter.cli.app") in {unit_of(m) for m in found}
    assert RANK[unit_of("dumpfilter.cli.app")] > RANK["dumpfilter.codec"]
    relative = imports_of("dumpfilter.slave.bad", bad)
    assert any(unit_of(m) == "dumpfilter.master" for _, m in relative)


def test_pyproject_installs_every_package_under_one_namespace():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == FOLDERS
    listed = set(config["packages"])
    on_disk = set()
    for package, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            name = ".".join([package, *rel.parts])
            if package == "dumpfilter" and rel.parts and f"dumpfilter.{rel.parts[0]}" in FOLDERS:
                continue
            on_disk.add(name)
    on_disk.add("dumpfilter.lab.verify.data")  # package data (the built-in verification's files)
    assert listed == on_disk, f"missing from pyproject: {on_disk - listed}; not in the tree: {listed - on_disk}"
    assert all(name == "dumpfilter" or name.startswith("dumpfilter.") for name in listed)


@pytest.mark.parametrize("name,path", source_modules(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_module_opens_with_what_it_owns(name, path):
    tree = ast.parse(path.read_text())
    if path.name == "__init__.py" and not tree.body:
        return
    assert ast.get_docstring(tree), f"{path.relative_to(ROOT)} has no opening docstring"


def test_nothing_is_generated_at_import():
    offenders = [str(path.relative_to(ROOT)) for _, path in source_modules()
                 if "grpc_tools" in path.read_text() or "proto_gen" in path.read_text()]
    assert not offenders, offenders


def test_test_files_have_unique_names():
    """pytest imports test files by basename (rootdir-less folders): two of one name break collection."""
    names: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {n: p for n, p in names.items() if len(p) > 1}


def _production_trees():
    for name, path in source_modules():
        yield name, path, ast.parse(path.read_text(), filename=str(path))


def test_skip_policy_names_are_spelled_in_skip_policy_only():
    """One home for the skip policy (issue #29): every consumer asks a policy object
    (dumpfilter.skip_policy.named), none compares or spells a policy's name."""
    from dumpfilter.skip_policy import NAMES

    offenders = []
    for name, path, tree in _production_trees():
        if name == "dumpfilter.skip_policy":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in NAMES:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.ImportFrom) and node.module == "dumpfilter.skip_policy":
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno}: imports {a.name}" for a in node.names
                              if a.name in ("HEARTBEAT", "PLACEHOLDER", "EMPTY_TRANSACTION")]
    assert not offenders, "skip policy names spelled outside dumpfilter/skip_policy.py:\n" + "\n".join(offenders)


MAX_LINES = 600


def test_no_module_is_longer_than_a_newcomer_can_hold():
    """Rooms of a size a newcomer can hold (issue #29): split a module by what it owns."""
    long = [f"{path.relative_to(ROOT)}: {n} lines" for _, path in source_modules()
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert not long, f"modules over {MAX_LINES} lines:\n" + "\n".join(long)


def test_production_has_one_path():
    """No `fast=` switch keeping a slow reference path in production (issue #29): the references
    the differential tests compare against live under tests/oracles/."""
    offenders = []
    for _, path, tree in _production_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.arguments):
                names = [a.arg for a in node.args + node.kwonlyargs]
                if "fast" in names:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.args[0].lineno if node.args else 0}: "
                                     "a `fast` parameter")
            elif isinstance(node, ast.keyword) and node.arg == "fast":
                offenders.append(f"{path.relative_to(ROOT)}:{node.value.lineno}: fast=")
            elif isinstance(node, ast.Attribute) and node.attr == "fast" and isinstance(node.ctx, ast.Store):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: .fast = ...")
    assert not offenders, "reference-path switches in production:\n" + "\n".join(offenders)


# --- issue #29 item 5: a typed core --------------------------------------------------------------

def _stub_names(body: list[ast.stmt]) -> set[str]:
    """The names a stub's module or class body defines (functions, classes, annotated names,
    assignments, a property's setter counted once)."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _public(names) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def test_the_core_stub_names_everything_the_core_exports():
    """dumpfilter/_core.pyi names every public attribute of the compiled module, and of each of its
    classes, and nothing the module lacks (its private helpers, `_`-prefixed, aside)."""
    from dumpfilter import _core

    stub = ast.parse((ROOT / "dumpfilter" / "_core.pyi").read_text())
    assert ast.get_docstring(stub)
    assert _public(_stub_names(stub.body)) == _public(dir(_core)), "_core.pyi and dumpfilter._core differ"
    classes = {node.name: node for node in stub.body if isinstance(node, ast.ClassDef)}
    for name, node in classes.items():
        if name.startswith("_"):
            continue
        cls = getattr(_core, name)
        exported = _public(dir(cls)) - _public(dir(object))
        assert _public(_stub_names(node.body)) == exported, f"_core.pyi's {name} and _core.{name} differ"


def test_the_stub_check_sees_a_missing_name():
    """The comparison above can fail: a stub without one of the module's functions differs."""
    from dumpfilter import _core

    stub = ast.parse((ROOT / "dumpfilter" / "_core.pyi").read_text())
    body = [n for n in stub.body if not (isinstance(n, ast.FunctionDef) and n.name == "hop")]
    assert _public(_stub_names(body)) != _public(dir(_core))


def test_the_wheel_carries_the_stub_and_py_typed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert {"py.typed", "_core.pyi"} <= set(config["dumpfilter"])
    assert (ROOT / "dumpfilter" / "py.typed").exists()


# --- issue #29 item 7: the contract's compiler is build-time only --------------------------------

def test_grpcio_tools_is_build_time_only():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())

    def requirement(spec: str) -> str:
        return spec.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip()

    assert "grpcio-tools" not in {requirement(d).lower() for d in project["project"]["dependencies"]}
    assert "grpcio-tools" in {requirement(d).lower() for d in project["build-system"]["requires"]}


def _grpc_tools_importers() -> list[str]:
    skip = {".venv", "build", "target", "proto", ".git", "__pycache__"}
    paths = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith(".")]
        paths += [Path(folder) / f for f in files if f.endswith(".py")]
    found = []
    for path in paths:
        rel = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n == "grpc_tools" or n.startswith("grpc_tools.") for n in names):
                found.append(f"{rel}:{node.lineno}")
    return found


def test_nothing_outside_proto_imports_grpc_tools():
    assert not _grpc_tools_importers()


# -- issue #46: one decision seam -------------------------------------------------------------
def _classes():
    for name, path in source_modules():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                yield name, path, node


def _base_names(node: ast.ClassDef) -> set[str]:
    return {b.id if isinstance(b, ast.Name) else b.attr for b in node.bases if isinstance(b, (ast.Name, ast.Attribute))}


def _answers_statements(node: ast.ClassDef) -> bool:
    """A class with TransactionFilter's statement question: decide_statement(self, sql, current_db)."""
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "decide_statement":
            params = [a.arg for a in item.args.args]
            return params[1:2] == ["sql"]
    return False


def test_one_decider_type():
    """Every class that answers "is this statement kept" is a rules.decider.Decider (its answers
    Decisions, its hooks declared), never a duck-typed look-alike returning bools."""
    classes = list(_classes())
    deciders = {"Decider"}
    grew = True
    while grew:  # the Decider subclasses, by name, through the tree
        grew = False
        for _, _, node in classes:
            if node.name not in deciders and _base_names(node) & deciders:
                deciders.add(node.name)
                grew = True
    ducks = [f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}" for _, path, node in classes
             if _answers_statements(node) and node.name not in deciders]
    assert not ducks, "deciders that are not rules.decider.Decider:\n" + "\n".join(ducks)


def test_decider_hooks_are_never_probed():
    """The seam's optional hooks have defaults: nobody asks getattr whether a decider has one, or
    whether an answer is a Decision or a bool."""
    probe = ("annotation_kept", "invalidate", "unparsed", '"apply"')
    offenders = []
    for _, path in source_modules():
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            if "getattr(" in line and any(hook in line for hook in probe):
                offenders.append(f"{path.relative_to(ROOT)}:{line_no}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_unit_records_are_decoded_only_in_the_codec():
    """The core's packed unit records (UNIT_WORDS u64 words per unit) are read through the
    codec's named fields (codec/scanner.py: UnitRecord, UnitRecords.is_fast/lone_statement/...),
    never by shifting their words by hand elsewhere."""
    import re

    by_hand = re.compile(r">>\s*40\b|UNIT_WORDS|\bwords\[\s*8\s*\*|_LONE_FLAGS")
    offenders = []
    for name, path in source_modules():
        if name.startswith("dumpfilter.codec"):
            continue
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            if by_hand.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{line_no}: {line.strip()}")
    assert not offenders, "unit records decoded outside dumpfilter.codec:\n" + "\n".join(offenders)


def test_row_codes_have_one_definition():
    """A stream's answer codes per unit are the core's (rows.rs), read in Python from the
    module; nobody writes their numbers."""
    from dumpfilter import _core
    from dumpfilter.codec import scanner

    codes = [scanner.ROW_SKIP, scanner.ROW_PARTIAL, scanner.ROW_KEEP, scanner.ROW_SLOW]
    assert codes == [_core.ROW_SKIP, _core.ROW_PARTIAL, _core.ROW_KEEP, _core.ROW_SLOW]
    assert len(set(codes)) == 4
    import re

    written = re.compile(r"ROW_(SKIP|PARTIAL|KEEP|SLOW)\s*(,\s*ROW_\w+\s*)*=")
    offenders = [str(path.relative_to(ROOT)) for name, path in source_modules()
                 if name != "dumpfilter.codec.scanner" and written.search(path.read_text())]
    assert not offenders, offenders
    assert "pub const SKIP" not in (ROOT / "core/src/send.rs").read_text()



# --- issue #57 goal 1: one keep vocabulary, the core's -------------------------------------------

# A name a module would give a keep code of its own (`_KEY_DROP`, `_UNKNOWN`, `_UNANSWERED`, ...).
_KEEP_CODE_NAME = re.compile(r"^(?:_*(?:KEEP|KEY|ANSWER)_[A-Z_]+|_+(?:UNKNOWN|UNANSWERED|ASK))$")
# An expression that is a keep buffer or a keep answer: what a keep code is written into or read from.
_KEEP_BUFFER = re.compile(r"keep|answer|known", re.I)


def _keep_literal(node: ast.AST) -> bool:
    """An int literal where a keep byte goes: bare, a branch of an if-expression, in a list."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.IfExp):
        return _keep_literal(node.body) or _keep_literal(node.orelse)
    if isinstance(node, (ast.List, ast.Tuple)):
        return any(_keep_literal(e) for e in node.elts)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return _keep_literal(node.elt)
    return False


def keep_code_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """Where a module writes a keep code's number itself: a keep-code name assigned an int, an int
    written into (or appended to) a keep buffer, a keep byte compared with an int."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names = [e for e in (t.elts if isinstance(t, ast.Tuple) else [t]) if isinstance(e, ast.Name)]
                named = any(_KEEP_CODE_NAME.match(n.id) for n in names)
                into = isinstance(t, ast.Subscript) and _KEEP_BUFFER.search(ast.unparse(t.value))
                if (named or into) and _keep_literal(node.value):
                    found.append((node.lineno, ast.unparse(node)))
                    break
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("append", "extend", "insert") and _KEEP_BUFFER.search(ast.unparse(node.func.value))
              and any(_keep_literal(a) for a in node.args)):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            sides = [node.left, node.comparators[0]]
            if (any(isinstance(s, ast.Constant) and type(s.value) is int for s in sides)
                    and any(isinstance(s, ast.Subscript) and _KEEP_BUFFER.search(ast.unparse(s.value)) for s in sides)):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_keep_codes_have_one_definition():
    """The keep byte every compiled walk reads (per table name id, per statement key id, per unit
    answered beforehand) is the core's (keep.rs), exported as `_core.KEEP_*`: no module of
    dumpfilter/, master/, slave/, spark_jobs/, lab/ or cli/ writes its numbers (issue #57 goal 1)."""
    from dumpfilter import _core

    codes = [_core.KEEP_DROP, _core.KEEP_KEEP, _core.KEEP_ASK]  # drop / keep / ask, nothing else
    assert not hasattr(_core, "KEEP_PYTHON")
    assert len(set(codes)) == 3 and all(isinstance(c, int) and 0 <= c < 256 for c in codes)
    assert not hasattr(_core, "ANSWER_KEEP") and not hasattr(_core, "ANSWER_EMPTY")  # one vocabulary
    offenders = [f"{path.relative_to(ROOT)}:{line}: {text}" for _, path in source_modules()
                 for line, text in keep_code_literals(ast.parse(path.read_text()))]
    assert not offenders, "keep codes written as numbers (use _core.KEEP_*):\n" + "\n".join(offenders)
    rust = [p.relative_to(ROOT) for p in (ROOT / "core/src").rglob("*.rs")
            if p.name != "keep.rs" and re.search(r"pub const (KEY|KEEP|ANSWER)_\w+: u8", p.read_text())]
    assert not rust, f"keep codes defined outside core/src/keep.rs: {rust}"


def test_the_keep_code_check_sees_each_form():
    """The check above must be able to fail: each way the codes were written before issue #57."""
    bad = '''
_KEY_DROP, _KEY_KEEP, _KEY_PYTHON = 0, 1, 3
_UNKNOWN = 2
_UNANSWERED: int = 3
def f(keep, answers, known, names, kept):
    keep.extend([1 if kept(n) else 0 for n in names])
    answers[0] = 2 if kept else 0
    keep.append(1)
    return known[0] == 1
'''
    assert sorted(line for line, _ in keep_code_literals(ast.parse(bad))) == [2, 3, 4, 6, 7, 8, 9]
    fine = "from dumpfilter.codec.scanner import KEEP_KEEP\nUNKNOWN = 0\ndef f(keep):\n    return keep[0] == KEEP_KEEP\n"
    assert keep_code_literals(ast.parse(fine)) == []


# --- issue #57 goal 4: named results across the FFI ----------------------------------------------

# The one tuple result left on purpose: a MariaDB GTID as a GTID state's (key, value) item
# ((domain, server_id), seq_no), which the master's GTID state is updated with as it is.
TUPLE_RESULTS = {"UnitList.gtid", "UnitList.gtids"}


def tuple_results(stub: ast.Module) -> list[str]:
    """The functions, methods and properties of a stub whose result type holds a tuple (or an
    alias of the module that is one), outside TUPLE_RESULTS."""
    aliases = {n.targets[0].id for n in stub.body if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
               and "tuple[" in ast.unparse(n.value)}
    found = []

    def check(node: ast.AST, owner: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            name = f"{owner}{node.name}"
            returns = ast.unparse(node.returns)
            if name not in TUPLE_RESULTS and ("tuple[" in returns or any(re.search(rf"\b{a}\b", returns) for a in aliases)):
                found.append(f"{name} -> {returns}")
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                check(item, f"{node.name}.")
    for node in stub.body:
        check(node, "")
    return found


def test_the_core_returns_named_records_not_tuples():
    """No call or property of dumpfilter._core answers a tuple: each result is a typed record with
    named fields (_core.pyi), a walk's configuration one typed value (SendConfig)."""
    stub = ast.parse((ROOT / "dumpfilter" / "_core.pyi").read_text())
    assert not tuple_results(stub), "tuple results in _core.pyi:\n" + "\n".join(tuple_results(stub))
    from dumpfilter import _core

    config = _core.SendConfig(skip=_core.SKIP_HEARTBEAT, partial_ok=True, server_id=7, heartbeat_crc=False)
    assert (config.skip, config.server_id, config.batch_bytes) == (_core.SKIP_HEARTBEAT, 7, 0)
    shape = _core.statement_key(b"UPDATE d.t SET a = 1")
    assert shape is not None and (shape.kind, shape.db, shape.table) == (_core.KIND_UPDATE, b"d", b"t")
    facts = _core.statement_facts(b"RENAME TABLE a.b TO c.d")
    assert facts is not None and facts.renames[0].new.name == b"d" and "Rename(" in repr(facts.renames[0])


MAX_CORE_PARAMETERS = 10  # a walk's configuration is one typed value (SendConfig, AssembleConfig)


def long_signatures(stub: ast.Module) -> list[str]:
    """The calls of a stub that take more than MAX_CORE_PARAMETERS parameters (self aside)."""
    found = []
    for node in ast.walk(stub):
        if isinstance(node, ast.FunctionDef):
            a = node.args
            names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
            count = len(names) - (1 if names[:1] in (["self"], ["cls"]) else 0)
            if count > MAX_CORE_PARAMETERS:
                found.append(f"{node.name}: {count} parameters")
    return found


def test_the_core_takes_its_configurations_as_typed_values():
    """Issue #57 goal 4: no call into dumpfilter._core takes a walk's options one by one (UnitList.send
    took 13 arguments, Scanner.assemble 15): each is one typed value."""
    stub = ast.parse((ROOT / "dumpfilter" / "_core.pyi").read_text())
    assert not long_signatures(stub), long_signatures(stub)
    assert long_signatures(ast.parse("class S:\n    def assemble(self, a, b, c, d, e, f, g, h, i, j, k, *, l=0): ...\n")) \
        == ["assemble: 12 parameters"]
    from dumpfilter import _core

    config = _core.AssembleConfig(renumber=True, crc=False, empty_keep=True)
    assert (config.renumber, config.crc, config.empty_keep, config.gtids) == (True, False, True, False)


def test_the_tuple_result_check_sees_each_form():
    """The check above must be able to fail: a tuple result, one inside a list or a property, one
    through an alias."""
    bad = ast.parse('''
_Pair = tuple[int, int]
def hop(buf: bytes) -> tuple[int, int]: ...
def pairs() -> list[tuple[int, int]] | None: ...
def aliased() -> _Pair: ...
class UnitList:
    def end(self, k: int) -> tuple[int, int] | None: ...
    def gtid(self, k: int) -> tuple[tuple[int, int], int] | None: ...
    @property
    def names(self) -> list[tuple[bytes, bytes]]: ...
    def fine(self, formats: list[tuple[int, int]]) -> int: ...
''')
    assert [f.split(" ->")[0] for f in tuple_results(bad)] == ["hop", "pairs", "aliased", "UnitList.end",
                                                               "UnitList.names"]

# --- issue #57 goal 1: one protocol for "the walk needs a decision" -----------------------------

# What a walk that stopped to ask for keys and resume would hand back (the protocol that went).
ASKING_BACK = {"need_keys", "new_keys"}


def walks_that_ask_back(stub: ast.Module) -> list[str]:
    """The records of a stub whose fields tell the caller to answer keys and call again."""
    found = []
    for node in stub.body:
        if isinstance(node, ast.ClassDef):
            found += [f"{node.name}.{item.name}" for item in node.body
                      if isinstance(item, ast.FunctionDef) and item.name in ASKING_BACK]
    return found


def test_every_walk_takes_its_keys_answered_up_front():
    """Every compiled walk takes its statement keys' answers before it walks (the buffer's
    statement units read first: `UnitList.statement_units`, `Scanner.statement_units`), so no
    result of the core asks the caller to answer new keys and call again."""
    stub = ast.parse((ROOT / "dumpfilter" / "_core.pyi").read_text())
    assert not walks_that_ask_back(stub), walks_that_ask_back(stub)
    names = {n.name for n in stub.body if isinstance(n, ast.ClassDef)}
    assert {"StatementUnits", "KeysUsed"} <= names


def test_the_asking_back_check_sees_one():
    bad = ast.parse("class Routed:\n    @property\n    def need_keys(self) -> bool: ...\n"
                    "    @property\n    def next(self) -> int: ...\n")
    assert walks_that_ask_back(bad) == ["Routed.need_keys"]

# The compiled walks over a scanned buffer (their core calls) and the protocol's two steps.
_BUFFER_WALKS = {"assemble", "relay_run", "split_route"}
_DRIVER = "dumpfilter.rules.walk_driver"  # (its module's own text names the calls)


def _called(call: ast.Call) -> str | None:
    """The name a call calls (`f(...)`, `x.f(...)`), but not a class's constructor method
    (`Text.assemble`: rich's)."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id[:1].isupper()):
        return func.attr
    return None


_WALK_METHODS = {"key_space", "statement_units", "run", "step"}  # rules.walk_driver.Walk


def walks_driven_elsewhere(trees) -> list[str]:
    """Where a buffer's statement units are read (`Scanner.statement_units(buf, start, fmt)`)
    other than in a `Walk`'s `statement_units`, which the one driver calls, and which modules call
    a buffer walk without a `Walk` (`key_space`, `statement_units`, `run`, `step`)."""
    found = []
    for name, tree in trees:
        walk_classes = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                        and _WALK_METHODS <= {f.name for f in c.body if isinstance(f, ast.FunctionDef)}]
        allowed = {id(n) for c in walk_classes for f in c.body if isinstance(f, ast.FunctionDef)
                   and f.name == "statement_units" for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "statement_units" \
                    and len(node.args) == 3 and id(node) not in allowed:
                found.append(f"{name}:{node.lineno}: reads a buffer's statement units")
        walks = {_called(n) for n in ast.walk(tree) if isinstance(n, ast.Call)} & _BUFFER_WALKS
        if name == "dumpfilter.codec.scanner":  # the core's Python face, where the walks are defined
            walks = set()
        if walks and not walk_classes:
            found.append(f"{name}: calls {sorted(walks)} outside a Walk")
    return found


def test_every_buffer_walk_is_run_by_the_one_driver():
    """Issue #57 goal 1: `filter`'s assembly, the slave's relay run and split's route are Walks
    that one driver runs (rules.walk_driver: the statement units read, their keys answered and
    accounted); no consumer keeps a loop of that protocol of its own."""
    trees = [(name, tree) for name, _, tree in _production_trees()]
    assert not walks_driven_elsewhere(trees), walks_driven_elsewhere(trees)
    users = {name for name, tree in trees for n in ast.walk(tree)
             if isinstance(n, ast.ImportFrom) and n.module == _DRIVER}
    assert {"dumpfilter.binlogs.filtering", "dumpfilter.slave.node", "dumpfilter.spark_jobs.tasks.compiled",
            "dumpfilter.master.stream.slave_stream", "dumpfilter.lab.simulate.verify_compiled",
            "dumpfilter.spark_jobs.tasks.bandwidth"} <= users


def test_the_driver_check_sees_a_loop_of_its_own():
    loop = ast.parse("def walk(scanner, buf, i, fmt, keeps):\n"
                     "    rows = keeps.rows(scanner.statement_units(buf, i, fmt))\n"
                     "    return scanner.relay_run(buf, i, rows)\n")
    assert walks_driven_elsewhere([("m", loop)]) == ["m:2: reads a buffer's statement units",
                                                     "m: calls ['relay_run'] outside a Walk"]


# --- issue #46 goal 4: the master in rooms that show its architecture ----------------------------

# master/'s sub-packages, each a room of the architecture (docs/architecture.md, "The master's rooms").
MASTER_ROOMS = {
    "decide",    # what each slave is sent of a unit: flag words, statement answers, rule hits
    "read",      # the binlog read once for all slaves: units, windows, segments, the schema feed
    "stream",    # one Dump call per slave (SlaveStream) and the Dump handler's read-ahead
    "serve",     # the gRPC face and /metrics of `master serve`
    "endpoint",  # the MySQL-protocol endpoint real replicas connect to
    "upstream",  # the client of a live primary (`--source`) and the series it keeps
    "protocol",  # the MySQL protocol both of those speak: framing, the replication commands
    "shadow",    # shadow candidates: rule sets counted on the live binlog, never streamed (issue #80 goal 4)
}
MAX_MASTER_MODULES = 10


def test_the_master_is_rooms_with_few_modules_at_its_top():
    master = ROOT / "master"
    top = sorted(p.name for p in master.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_MASTER_MODULES, f"master/ has {len(top)} top-level modules (at most " \
                                           f"{MAX_MASTER_MODULES}): move some into a room: {top}"
    folders = {p.name for p in master.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == MASTER_ROOMS, f"master/'s sub-packages differ from the named rooms: {folders ^ MASTER_ROOMS}"
    for room in MASTER_ROOMS:
        init = master / room / "__init__.py"
        assert init.exists() and ast.get_docstring(ast.parse(init.read_text())), \
            f"master/{room}/__init__.py must open with a docstring saying what the room owns"
        assert not [p for p in (master / room).iterdir() if p.is_dir() and p.name != "__pycache__"], \
            f"master/{room} has rooms of its own"


def test_the_slave_stream_holds_its_collaborators_and_inherits_nothing():
    """SlaveStream's answers for statements and its rule hits are objects it holds and calls with
    what they need, not mixins reading its private attributes."""
    from dumpfilter.master.stream.slave_stream import SlaveStream

    assert SlaveStream.__bases__ == (object,)


# Private attributes of another object the master may touch: pymysql's connection, which has no
# public call to send a raw command (COM_BINLOG_DUMP, COM_REGISTER_SLAVE) or read a raw packet.
FOREIGN_PRIVATE = {"_execute_command", "_read_packet", "_sock"}


def _private_reads_of_others(tree: ast.AST) -> list[tuple[int, str]]:
    """`x._name` where x is not self/cls, outside a class that sets `_name` on its own instances
    (a classmethod building an instance of its own class may)."""
    found = []

    def own_privates(cls: ast.ClassDef) -> set[str]:
        names = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in ast.walk(cls):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
        return {n for n in names if n.startswith("_")}

    def visit(node: ast.AST, allowed: set[str]) -> None:
        if isinstance(node, ast.ClassDef):
            allowed = own_privates(node)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")) \
                    and node.attr not in allowed and node.attr not in FOREIGN_PRIVATE:
                found.append((node.lineno, ast.unparse(node)))
        for child in ast.iter_child_nodes(node):
            visit(child, allowed)

    visit(tree, set())
    return found


def test_no_master_module_reads_another_objects_private_state():
    offenders = []
    for name, path, tree in _production_trees():
        if name.startswith("dumpfilter.master"):
            offenders += [f"{path.relative_to(ROOT)}:{line}: {text}" for line, text in _private_reads_of_others(tree)]
    assert not offenders, "private attributes read across objects in master/:\n" + "\n".join(offenders)


def test_the_private_read_check_sees_one():
    tree = ast.parse("class A:\n    def f(self, other):\n        return other._state\n"
                     "class B:\n    def __init__(self):\n        self._state = 1\n")
    assert _private_reads_of_others(tree) == [(3, "other._state")]


# --- issue #57 goal 7: the Rust core's modules without circles, none over MAX_LINES ----------------

CORE_SRC = ROOT / "core" / "src"


def rust_modules(src: Path = CORE_SRC) -> dict[str, Path]:
    """core/src's modules by path (`send`, `facts::ddl`; lib.rs is `crate`), one per file."""
    out = {}
    for path in sorted(src.rglob("*.rs")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "mod":
            parts.pop()
        out["::".join(parts) if parts != ["lib"] else "crate"] = path
    return out


def _rust_code(text: str) -> str:
    """Rust source without its comments, string and char literals (a path in a doc is no use)."""
    import re

    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'b?r(#*)".*?"\1', '""', text, flags=re.S)
    text = re.sub(r'b?"(?:\\.|[^"\\])*"', '""', text, flags=re.S)
    return re.sub(r"b?'(?:\\.|[^'\\])'", "' '", text)


def _use_paths(tree: str) -> list[list[str]]:
    """The paths a use tree names: `a::{b, c::{d, e}}` gives a::b, a::c::d, a::c::e."""
    tree = tree.replace(" ", "").replace("\n", "")
    depth, start = 0, None
    for i, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
    if start is None:
        return [[p for p in tree.split("::") if p and p != "*"]]
    prefix = [p for p in tree[:start].split("::") if p]
    inner, items, depth, item = tree[start + 1:tree.rindex("}")], [], 0, ""
    for ch in inner + ",":
        if ch == "," and depth == 0:
            if item:
                items.append(item)
            item = ""
            continue
        depth += (ch == "{") - (ch == "}")
        item += ch
    return [prefix + sub for it in items for sub in _use_paths(it)]


def _inline_modules(code: str) -> list[tuple[int, int, str]]:
    """The inline `mod name { ... }` blocks of a module's code: (start, end, name)."""
    import re

    blocks = []
    for m in re.finditer(r"\bmod\s+(\w+)\s*\{", code):
        depth = 0
        for k in range(m.end() - 1, len(code)):
            depth += (code[k] == "{") - (code[k] == "}")
            if depth == 0:
                blocks.append((m.start(), k, m.group(1)))
                break
    return blocks


def rust_uses(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The other core modules `name` names through `crate::`, `super::` or `self::`, in its use
    lines and in paths written inline (in an inline `mod tests { ... }`, `super` is the file's
    module). A module's own `mod` children, which it names bare, are its parts, not counted; a
    child naming its parent (`super::Facts`) is."""
    import re

    code = _rust_code(path.read_text())
    inline = _inline_modules(code)
    paths = []  # (offset, parts)
    for m in re.finditer(r"\buse\s+((?:crate|super|self)::[^;]*);", code):
        paths += [(m.start(), parts) for parts in _use_paths(m.group(1))]
    bare = re.sub(r"\buse\s+[^;]*;", lambda m: " " * len(m.group(0)), code)
    paths += [(m.start(), m.group(0).split("::"))
              for m in re.finditer(r"(?<![\w$])(?:crate|super|self)(?:::\w+)+", bare)]
    found = set()
    for at, parts in paths:
        here = [] if name == "crate" else name.split("::")
        here = here + [n for start, end, n in inline if start <= at <= end]
        if parts[0] == "crate":
            full = parts[1:]
        else:
            while parts and parts[0] in ("self", "super"):
                here = here[:-1] if parts[0] == "super" else here
                parts = parts[1:]
            full = here + parts
        full = [p for p in full if p != "self"]
        for n in range(len(full), -1, -1):
            target = "::".join(full[:n]) or "crate"
            if target in modules:
                if target != name:
                    found.add(target)
                break
    return found


def rust_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def rust_graph(src: Path = CORE_SRC) -> dict[str, set[str]]:
    modules = rust_modules(src)
    return {name: rust_uses(name, path, modules) for name, path in modules.items()}


def test_rust_modules_have_no_circles():
    """core/src's modules point one way (issue #57 goal 7): no module reaches, through others,
    back to itself (UnitList once lived in send.rs, which stmt_units.rs both used and served)."""
    cycles = rust_cycles(rust_graph())
    assert not cycles, "Rust modules in circles (move the shared piece down into a module of its own):\n" \
        + "\n".join(" <-> ".join(c) for c in cycles)


def test_rust_modules_are_not_longer_than_a_newcomer_can_hold():
    long = [f"{path.relative_to(ROOT)}: {n} lines" for path in rust_modules().values()
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert not long, f"Rust modules over {MAX_LINES} lines (split where their responsibilities part):\n" \
        + "\n".join(long)


def test_the_rust_circle_check_sees_one(tmp_path):
    """The checks above can fail: a circle through a use group, a child's `super::` and an
    inline path is found, a one-way chain is not, and comments and strings name nothing."""
    (tmp_path / "lib.rs").write_text("pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod le;\n")
    (tmp_path / "le.rs").write_text("#[cfg(test)]\nmod tests {\n    use super::*;\n}\n")
    (tmp_path / "a.rs").write_text("use crate::{le, b::{self, Thing}};\n// crate::d::x\n")
    (tmp_path / "b.rs").write_text('pub fn f() -> u32 { crate::c::g() }\nconst S: &str = "crate::d::x";\n')
    (tmp_path / "c.rs").write_text("pub fn g() -> u32 { 1 }\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "mod.rs").write_text("mod e;\npub fn h() {}\n")
    (tmp_path / "d" / "e.rs").write_text("use super::h;\nuse crate::a::X;\n")
    graph = rust_graph(tmp_path)
    assert graph["a"] == {"le", "b"} and graph["b"] == {"c"} and graph["le"] == set() and graph["d::e"] == {"d", "a"}
    assert rust_cycles(graph) == []
    (tmp_path / "c.rs").write_text("use crate::d::e::Y;\npub fn g() -> u32 { 1 }\n")
    assert rust_cycles(rust_graph(tmp_path)) == [["a", "b", "c", "d::e"]]
