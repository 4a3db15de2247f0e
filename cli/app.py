"""The `dumpfilter` command: parses arguments, hands off to one command module, maps errors to exit codes.

Each module in `dumpfilter.cli.commands` exposes `register(subparsers)`, which adds its
sub-command and sets `func` on the parser defaults to a callable taking the parsed args
and returning an exit status. Errors from the core (`DumpFilterError`) become a one-line
message on stderr and exit status 2; nothing here prints a Python traceback for bad input.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from dumpfilter.cli.options import Parser, check_outputs
from dumpfilter.cli.process import EXIT_TERMINATED, Terminated, sigterm_as_interrupt
from dumpfilter.errors import EXIT_CODE, DumpFilterError

# The cyclic garbage collector's first threshold, raised from CPython's 700 allocations: the
# binlog paths allocate millions of short-lived tuples and slices whose references never form
# cycles (reference counting frees them), and at 700 the collector's passes over them took about
# a sixth of the master's read time. Set by the command (the application), never by the library.
GC_GEN0_THRESHOLD = 50_000

# Sub-command modules, in the order `dumpfilter --help` lists them.
COMMAND_MODULES = (
    "dumpfilter.cli.commands.binlog",
    "dumpfilter.cli.commands.filter",
    "dumpfilter.cli.commands.explain",
    "dumpfilter.cli.commands.lint",
    "dumpfilter.cli.commands.master",
    "dumpfilter.cli.commands.slave",
    "dumpfilter.cli.commands.simulate",
    "dumpfilter.cli.commands.split",
    "dumpfilter.cli.commands.experiment",
    "dumpfilter.cli.commands.verify",
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dumpfilter")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0.1.0 (not installed)"


class _VersionAction(argparse.Action):
    """`--version`, with the installed version looked up only when asked (importlib.metadata costs
    about 40 ms of every command's start)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, default=default, nargs=0,
                         help=help or "show program's version number and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"dumpfilter {_version()}")
        parser.exit()


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the arguments, only the named command's module is imported (the others
    cost a quarter of a second of imports); every command's without one (`--help`, a typo)."""
    parser = Parser(
        prog="dumpfilter",
        description="Master-side replication filter simulator for MySQL and MariaDB (WL#2387).",
    )
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    wanted = next((arg for arg in argv or () if not arg.startswith("-")), None)
    modules = [name for name in COMMAND_MODULES if name.rpartition(".")[2] == wanted] or COMMAND_MODULES
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that command is not built yet
                continue
            raise
        module.register(subparsers)
    return parser


def mysqld_spelling(argv: list[str]) -> list[str]:
    """Options as mysqld reads them: `--replicate_do_db` is `--replicate-do-db` (my_getopt treats
    '_' and '-' in an option name alike). Only the name changes, never a value (`--x_y=a_b`)."""
    out = []
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + argv[i:]
        if arg.startswith("--") and "_" in arg.partition("=")[0]:
            name, eq, value = arg.partition("=")
            arg = name.replace("_", "-") + eq + value
        out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    # grpc's C core logs to stderr by itself (a failed bind, a refused connection...), before grpc
    # is first imported or never: the commands report every error in one line of their own.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)
    # `kill PID` ends a command as Ctrl-C does: its cleanup runs, one line, exit 143. The daemons
    # (`master serve`, `slave run`) put their own handler in place: SIGTERM drains them.
    restore = sigterm_as_interrupt()
    try:
        argv = mysqld_spelling(sys.argv[1:] if argv is None else list(argv))
        args = build_parser(argv).parse_args(argv)
        check_outputs(args)  # a --json FILE that cannot be written is told before any work
        return int(args.func(args) or 0)
    except DumpFilterError as exc:
        print(f"dumpfilter: error: {exc}", file=sys.stderr)
        return EXIT_CODE
    except BrokenPipeError:  # `dumpfilter binlog inspect big.bin | head`
        sys.stderr.close()
        return 0
    except Terminated:
        print("dumpfilter: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("dumpfilter: interrupted", file=sys.stderr)
        return 130
    finally:
        restore()


def run() -> None:
    """The process entry (`dumpfilter`, `python -m dumpfilter`): `main`, then exit. Everything is
    frozen out of the cyclic collector first: the interpreter's last collection at shutdown then
    walks none of the imported modules' objects (grpc's and protobuf's among them), which took
    about 35 ms of every command's end. Files are closed and streams flushed as before (reference
    counting and the interpreter's own flush do that, not the collector); only in-process callers
    of `main` (the tests) keep collecting as usual."""
    try:
        status = main()
    finally:  # argparse's exit on bad options too
        gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    run()
