"""Commands start at once (issue #59, goal 2): each command imports what it runs. `dumpfilter
--version` and `dumpfilter --help` import no command's module, `filter --help` only filter's, and
none of them the heavy libraries or the layers only other commands need (rich, sqlglot, grpc,
pyspark, matplotlib, importlib.metadata, the offline filter's loop, the master). Each process is
run as a user runs it and the modules it imported read at its exit; no time is asserted."""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import dumpfilter
from dumpfilter.cli.app import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
# Never imported by a start that only parses: (a module, or a package with everything under it).
HEAVY = ("rich", "sqlglot", "grpc", "google.protobuf", "pyspark", "matplotlib", "importlib.metadata",
         "dumpfilter.binlogs.filtering", "dumpfilter.binlogs.lint", "dumpfilter.master", "dumpfilter.lab",
         "dumpfilter.spark_jobs", "dumpfilter.harness", "dumpfilter.v1")


# `python -m dumpfilter ARGS...`, then the names in sys.modules at exit on stderr's last line.
# (sys.modules rather than -X importtime: it sees every module, however it was imported.)
PROBE = ("import atexit, runpy, sys\n"
         "atexit.register(lambda: print('MODULES', *sorted(sys.modules), file=sys.stderr))\n"
         "sys.argv = ['dumpfilter', *sys.argv[1:]]\n"
         "runpy.run_module('dumpfilter', run_name='__main__', alter_sys=True)\n")


def imported(*args: str) -> list[str]:
    """The modules a `dumpfilter ARGS...` process has imported when it exits."""
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip(), "the command printed nothing"
    last = done.stderr.strip().splitlines()[-1].split()
    assert last[0] == "MODULES", done.stderr[-2000:]
    return last[1:]


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted({name for name in names for module in modules if module == name or module.startswith(name + ".")})


def _commands(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if m.startswith("dumpfilter.cli.commands."))


@pytest.mark.parametrize("args", [("--version",), ("--help",)], ids=" ".join)
def test_the_top_level_imports_no_command(args):
    modules = imported(*args)
    assert "dumpfilter.cli.app" in modules  # the list is read right
    assert _loaded(modules, HEAVY) == []
    assert _commands(modules) == []
    assert not any(m.startswith(("dumpfilter.rules", "dumpfilter.codec")) for m in modules), modules


def test_filter_help_imports_filter_alone():
    modules = imported("filter", "--help")
    assert "dumpfilter.rules.options" in modules  # its parser's rule options are there
    assert _loaded(modules, HEAVY) == []
    assert _commands(modules) == ["dumpfilter.cli.commands.filter"]
    assert _loaded(modules, ("dumpfilter.codec", "dumpfilter.rules.evaluate", "dumpfilter.binlogs")) == []


@pytest.mark.parametrize("command", ["simulate", "explain", "lint", "binlog", "verify"])
def test_a_command_help_loads_neither_rich_nor_another_command(command):
    modules = imported(command, "--help")
    assert _loaded(modules, ("rich", "grpc", "pyspark", "matplotlib", "importlib.metadata")) == []
    assert f"dumpfilter.cli.commands.{command}" in modules
    assert [m for m in _commands(modules) if m != f"dumpfilter.cli.commands.{command}"] \
        in ([], ["dumpfilter.cli.commands.filter"])  # lint reads its inputs as filter does


def test_the_version_is_the_installed_one():
    installed = importlib.metadata.version("dumpfilter")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert dumpfilter.__version__ == installed == declared
    done = subprocess.run([sys.executable, "-m", "dumpfilter", "--version"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout == f"dumpfilter {installed}\n"


def _listed(parser: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(choice.dest, choice.help) for choice in sub._choices_actions]


def test_the_command_table_says_what_each_module_registers():
    """The placeholders `--help` lists (COMMANDS) and the parsers the modules register: same
    names, same order, same help."""
    every = _listed(build_parser())
    assert every == _listed(build_parser(["--version"])) == [(name, help) for name, (_, help) in COMMANDS.items()]
    assert len(every) == 10
    done = subprocess.run([sys.executable, "-m", "dumpfilter", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and all(name in done.stdout for name in COMMANDS)


def test_the_named_command_parses_in_full():
    """Given a command, its own parser is registered (its options parse), the others stay placeholders."""
    parser = build_parser(["explain", "--replicate-do-db=a", "--sql", "INSERT INTO a.t VALUES (1)"])
    args = parser.parse_args(["explain", "--replicate-do-db=a", "--sql", "INSERT INTO a.t VALUES (1)"])
    assert args.do_db == ["a"] and callable(args.func)
    with pytest.raises(SystemExit) as exc:
        build_parser(["filtr"]).parse_args(["filtr"])
    assert exc.value.code == 2


def test_the_master_client_commands_start_without_the_master():
    """`master status` (and its siblings) are gRPC clients: their parser's --lint-max-mb default is
    written out in the command module, not imported with the lint planner; the two agree."""
    from dumpfilter.cli.commands.master import LINT_MAX_MB
    from dumpfilter.master.lint_jobs import LINT_MAX_BYTES

    assert LINT_MAX_MB * (1 << 20) == LINT_MAX_BYTES
    modules = imported("master", "status", "--help")
    assert "dumpfilter.cli.commands.master" in modules
    assert _loaded(modules, HEAVY) == []
