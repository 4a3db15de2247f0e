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

from dumpfilter import __version__
from dumpfilter.cli.options import Parser, check_outputs
from dumpfilter.cli.process import EXIT_TERMINATED, Terminated, sigterm_as_interrupt, terminating
from dumpfilter.errors import EXIT_CODE, DumpFilterError

# The cyclic garbage collector's first threshold, raised from CPython's 700 allocations: the
# binlog paths allocate millions of short-lived tuples and slices whose references never form
# cycles (reference counting frees them), and at 700 the collector's passes over them took about
# a sixth of the master's read time. Set by the command (the application), never by the library.
GC_GEN0_THRESHOLD = 50_000

# The sub-commands, in the order `dumpfilter --help` lists them: name -> (module, one-line help).
# A command's module is imported only when that command runs or its --help is asked: the others
# are listed by name and help alone (every module together is about 300 ms of imports: rich, the
# lint and Spark planners, the master's jobs). Each module's `register` gives its parser the same
# help (tests/cli/test_startup_imports.py compares them).
COMMANDS: dict[str, tuple[str, str]] = {
    "binlog": ("dumpfilter.cli.commands.binlog", "read binlog files"),
    "filter": ("dumpfilter.cli.commands.filter",
               "filter binlog files offline with replicate-* rules into a valid binlog"),
    "explain": ("dumpfilter.cli.commands.explain",
                "decide one statement or table against filter rules and say which rule decided"),
    "lint": ("dumpfilter.cli.commands.lint",
             "predict where a replica with these rules would stop (1146, 1049, 1136, ...) and why, "
             "and the writes it would silently get wrong"),
    "master": ("dumpfilter.cli.commands.master", "run the master-side dump service (gRPC)"),
    "slave": ("dumpfilter.cli.commands.slave", "run a filtering slave, or show its status"),
    "simulate": ("dumpfilter.cli.commands.simulate",
                 "master + slaves over gRPC: bytes saved by master-side filtering, per slave"),
    "split": ("dumpfilter.cli.commands.split",
              "split binlogs into one binlog per schema or per --map rule set (Spark or --no-spark)"),
    "experiment": ("dumpfilter.cli.commands.experiment",
                   "bytes master-side filtering would send each slave of a topology (Spark)"),
    "verify": ("dumpfilter.cli.commands.verify", "prove master-side filtering against real MariaDB replicas"),
}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser. Given the arguments, only the named command's module is imported and registers
    its parser; every other command is a placeholder with its name and help (for `dumpfilter
    --help`, `--version`, a typo's "invalid choice"). Without arguments (the tests, the docs'
    checks): every command's module and full parser."""
    parser = Parser(
        prog="dumpfilter",
        description="Master-side replication filter simulator for MySQL and MariaDB (WL#2387).",
    )
    parser.add_argument("--version", action="version", version=f"dumpfilter {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # The sub-command `argv` names: its first word that is not an option (the top level takes no
    # option with a value), None without one (`--version`, `--help`).
    wanted = None if argv is None else next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (module_name, help_text) in COMMANDS.items():
        if argv is not None and name != wanted:
            subparsers.add_parser(name, help=help_text, add_help=False)
            continue
        importlib.import_module(module_name).register(subparsers)
    return parser


def mysqld_spelling(argv: list[str]) -> list[str]:
    """Options as mysqld reads them: `--replicate_do_db` is `--replicate-do-db` (my_getopt treats
    '_' and '-' in an option name alike). Only the name changes, never a value (`--x_y=a_b`)."""
    out: list[str] = []
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
    # `kill PID` ends a command as Ctrl-C does: its cleanup runs, one line, exit 143. `master
    # serve` puts its own handler in place for both signals (they drain it), then raises as they do.
    restore = sigterm_as_interrupt()
    try:
        argv = mysqld_spelling(sys.argv[1:] if argv is None else list(argv))
        args = build_parser(argv).parse_args(argv)
        check_outputs(args)  # a --json FILE that cannot be written is told before any work
        return int(args.func(args) or 0)
    except Terminated:
        print("dumpfilter: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("dumpfilter: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if terminating():  # raised by the cleanup SIGTERM started, in place of `Terminated`
            print("dumpfilter: terminated", file=sys.stderr)
            return EXIT_TERMINATED
        if _raised_while_interrupted(exc):
            print("dumpfilter: interrupted", file=sys.stderr)
            return 130
        if isinstance(exc, BrokenPipeError):  # `dumpfilter binlog inspect big.bin | head`
            sys.stderr.close()
            return 0
        if not isinstance(exc, DumpFilterError):
            raise
        print(f"dumpfilter: error: {exc}", file=sys.stderr)
        return EXIT_CODE
    finally:
        restore()


def _raised_while_interrupted(exc: BaseException) -> bool:
    """Whether `exc` was raised while a Ctrl-C unwound: a KeyboardInterrupt in its context chain.
    Ctrl-C reaches the whole process group, so a Spark session's JVM can die before the interrupt
    leaves `collect`, and PySpark's own cleanup there (`SCCallSiteSync.__exit__`) then fails with
    `Py4JNetworkError: Answer from Java side is empty`, replacing the KeyboardInterrupt."""
    seen: set[int] = set()
    cause: BaseException | None = exc.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__context__
    return False


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
