"""Checked habits (issue #46, goal 5): `make test` runs the checks before the tests, and the
checks' configuration is the project's own. The tools themselves run in `make lint`; this file
checks that they are wired in and configured as agreed:

* the test extra installs ruff and mypy (a fresh machine gets them from `make setup`);
* mypy is strict on every package listed in STRICT_PACKAGES (every flag of
  `--strict` that is a per-module option, spelled out: python/mypy#11401);
* ruff's configuration exists, with at least its default rules;
* the Makefile's `test` target runs `lint`, and `lint` runs ruff, mypy, mypy's stubtest over the
  compiled core's stub (issue #80 goal 5) and clippy with -D warnings.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MAKEFILE = (ROOT / "Makefile").read_text()

# mypy --strict's flags that are per-module options (--warn-unused-configs and --warn-redundant-casts
# are global only).
STRICT_FLAGS = ("disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls",
                "disallow_untyped_defs", "disallow_incomplete_defs", "check_untyped_defs",
                "disallow_untyped_decorators", "warn_return_any", "warn_unused_ignores",
                "no_implicit_reexport", "strict_equality", "extra_checks")
# Each package (or module) typed strictly: its path in [tool.mypy] files, its module name (a package
# under typecheck/dumpfilter/ is named as installed: typecheck/dumpfilter/cli is dumpfilter.cli).
STRICT_PACKAGES = (
    ("dumpfilter", "dumpfilter"),  # every module of dumpfilter/ but the generated v1 (mypy's `exclude`)
    ("typecheck/dumpfilter/cli", "dumpfilter.cli"),
    ("typecheck/dumpfilter/master", "dumpfilter.master"),
    ("typecheck/dumpfilter/slave", "dumpfilter.slave"),
    ("typecheck/dumpfilter/lab", "dumpfilter.lab"),
    ("typecheck/dumpfilter/spark_jobs", "dumpfilter.spark_jobs"),
)
STRICT_MODULES = tuple(name for path, module in STRICT_PACKAGES
                       for name in ([module] if path.endswith(".py") else [module, f"{module}.*"]))


def _requirement_names(specs: list[str]) -> set[str]:
    return {re.split(r"[\s;\[<>=!~]", spec, maxsplit=1)[0].lower() for spec in specs}


def _target(name: str) -> tuple[list[str], str]:
    """A Makefile target's prerequisites and recipe."""
    match = re.search(rf"^{re.escape(name)}:([^\n]*)\n((?:\t[^\n]*\n?)*)", MAKEFILE, re.MULTILINE)
    assert match, f"the Makefile has no `{name}` target"
    return match.group(1).split(), match.group(2)


def test_the_test_extra_installs_the_checkers():
    assert {"ruff", "mypy"} <= _requirement_names(PYPROJECT["project"]["optional-dependencies"]["test"])


def test_mypy_is_strict_on_every_package_made_strict():
    mypy = PYPROJECT["tool"]["mypy"]
    assert mypy["python_version"] == "3.11"
    unchecked = [path for path, _ in STRICT_PACKAGES if path not in mypy["files"]]
    assert not unchecked, f"[tool.mypy] files lacks {unchecked}"
    strict = [o for o in mypy.get("overrides", []) if "dumpfilter" in o["module"]]
    assert strict, "no [[tool.mypy.overrides]] for dumpfilter"
    lenient = [name for name in STRICT_MODULES if name not in strict[0]["module"]]
    assert not lenient, f"the strict override lacks {lenient}"
    missing = [flag for flag in STRICT_FLAGS if strict[0].get(flag) is not True]
    assert not missing, f"the strict override lacks {missing}"
    # dumpfilter/v1 is generated (proto/, at build time): never among the files checked, and the one
    # override that turns a strict flag off is its own
    assert any(re.search(pattern, "dumpfilter/v1/dump_pb2.pyi") for pattern in mypy["exclude"])
    relaxed = [o["module"] for o in mypy.get("overrides", []) if any(o.get(flag) is False for flag in STRICT_FLAGS)]
    assert relaxed == [["dumpfilter.v1", "dumpfilter.v1.*"]], relaxed
    # `strict = true` in an override would turn the flags on for every module (python/mypy#11401)
    assert all("strict" not in o for o in mypy.get("overrides", []))


def test_ruff_is_configured():
    ruff = PYPROJECT["tool"]["ruff"]
    assert ruff["target-version"] == "py311"
    assert {"E4", "E7", "E9", "F"} <= set(ruff["lint"]["select"])
    assert "dumpfilter/v1" in ruff["extend-exclude"]


def test_make_test_runs_lint_first():
    prerequisites, _ = _target("test")
    assert "lint" in prerequisites


def test_lint_runs_ruff_mypy_and_clippy():
    _, recipe = _target("lint")
    assert "ruff check ." in recipe
    assert "/mypy" in recipe
    assert "cargo clippy" in recipe and "-D warnings" in recipe
    assert "--features stubs" in recipe  # the Python extension's code and its stub's are linted too


def _lint_stubtest() -> list[str]:
    """The arguments of `make lint`'s stubtest, after the interpreter."""
    _, recipe = _target("lint")
    match = re.search(r"\$\(PY\) (-m mypy\.stubtest\b[^;|]* dumpfilter\._core)\b", recipe)
    assert match, "lint does not run stubtest over dumpfilter._core"
    return match.group(1).split()


def test_lint_holds_the_core_stub_to_the_built_core():
    """`make lint` runs stubtest over dumpfilter._core after `setup` built it, with no allowlist
    (issue #80 goal 5): _core.pyi's names, parameters and classes are the binding's."""
    prerequisites, recipe = _target("lint")
    assert "setup" in prerequisites
    assert _lint_stubtest()[-1] == "dumpfilter._core"
    assert "--allowlist" not in recipe and "--ignore-" not in recipe
    assert "--strict-type-check-only" in recipe  # a stub-only class would have to say so
    assert "failed stubtest" in recipe  # a stub that differs fails lint's last line


def test_lint_holds_the_stub_to_what_the_rust_generates():
    """dumpfilter/_core.pyi has one home, core/src/python/ (issue #80 goal 5): `make stubs` writes it
    with pyo3-stub-gen's stub_gen binary, and `make lint` fails when the committed stub is not what
    that binary prints."""
    generator = re.search(r"^STUB_GEN := (.*)$", MAKEFILE, re.MULTILINE)
    assert generator, "the Makefile does not say how the stub is generated"
    assert "--features stubs --bin stub_gen" in generator.group(1)
    _, stubs = _target("stubs")
    assert "$(STUB_GEN) >" in stubs and "_core.pyi" in stubs
    _, recipe = _target("lint")
    assert "else ($(STUB_GEN) | diff -u ../dumpfilter/_core.pyi -) || failed=\"$$failed stubs\"; fi" in recipe
    assert '"$$($(STUB_STAMP))" = "$$(cat core/stubs.stamp' in recipe  # skipped only for a stamped stub
    assert "($(STUB_STAMP)) > core/stubs.stamp" in stubs
    stub = (ROOT / "dumpfilter" / "_core.pyi").read_text()
    assert stub.startswith("# This file is automatically generated by pyo3_stub_gen")
    assert "dumpfilter/_core.pyi" in PYPROJECT["tool"]["ruff"]["extend-exclude"]  # generated: not linted


def test_the_stub_stamp_follows_every_input_of_the_generator(tmp_path):
    """lint skips the generator only while core/stubs.stamp is the hash of the stub and of every
    file the generator reads: a change to any of them (a Rust source, the lock, the stub) is seen."""
    for name in ("src", "stub-attrs/src"):
        shutil.copytree(ROOT / "core" / name, tmp_path / "core" / name)
    for name in ("Cargo.toml", "Cargo.lock", "stub-attrs/Cargo.toml"):
        shutil.copy(ROOT / "core" / name, tmp_path / "core" / name)
    (tmp_path / "dumpfilter").mkdir()
    shutil.copy(ROOT / "dumpfilter" / "_core.pyi", tmp_path / "dumpfilter" / "_core.pyi")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")

    def stamp() -> str:
        run = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(tmp_path), "stub-stamp"],
                             capture_output=True, text=True, check=True)
        assert re.fullmatch(r"[0-9a-f]{64}\n", run.stdout), run.stdout
        return run.stdout

    first = stamp()
    assert stamp() == first
    seen = {first}
    for changed in ("core/src/lib.rs", "core/Cargo.lock", "core/stub-attrs/src/lib.rs", "dumpfilter/_core.pyi"):
        path = tmp_path / changed
        path.write_bytes(path.read_bytes() + b"\n")
        now = stamp()
        assert now not in seen, changed
        seen.add(now)
    (tmp_path / "core" / "src" / "new.rs").write_text("")
    assert stamp() not in seen  # a file added


def _stubtest_over(stub: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """lint's stubtest with `stub` as dumpfilter/_core.pyi (under `folder`, through mypy_path),
    against the core the checkout built (-P: the folder is not on the import path)."""
    (folder / "dumpfilter").mkdir(parents=True)
    (folder / "dumpfilter" / "__init__.pyi").write_text("")
    (folder / "dumpfilter" / "_core.pyi").write_text(stub)
    (folder / "mypy.ini").write_text(f"[mypy]\nmypy_path = {folder}\n")
    args = _lint_stubtest()
    args[-1:-1] = ["--mypy-config-file", str(folder / "mypy.ini")]
    return subprocess.run([sys.executable, "-P", *args], cwd=folder, capture_output=True, text=True, timeout=300)


def test_lints_stubtest_sees_a_parameter_the_binding_lacks(tmp_path):
    """The check can fail: the stub as it is passes, and with one of SendConfig's parameters
    misspelt (the kind of drift _core.pyi had before stubtest: issue #80 goal 5) it fails, naming it."""
    stub = (ROOT / "dumpfilter" / "_core.pyi").read_text()
    same = _stubtest_over(stub, tmp_path / "same")
    assert same.returncode == 0, same.stdout + same.stderr
    assert stub.count("heartbeat_crc: builtins.bool,") == 1
    drifted = _stubtest_over(stub.replace("heartbeat_crc: builtins.bool,", "heartbeat_crcs: builtins.bool,"), tmp_path / "drifted")
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    assert 'SendConfig.__new__ is inconsistent, stub does not have parameter "heartbeat_crc"' in drifted.stdout
