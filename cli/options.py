"""Argument groups several sub-commands share (binlog inputs, the Spark switch) and the one output
convention of every command: `--out DIR` for a directory of results, `-o/--output FILE` for one
file, `--json [FILE]` for the machine-readable result (stdout, or FILE beside the human output);
and the reading of the small side files options name (a policy, a PEM, a token). The rule options
are the rules' own (dumpfilter.rules.options), the connection options the master client's."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, NoReturn

from dumpfilter.cli.output_paths import OutputError, atomic_output, is_stream, writable_file
from dumpfilter.errors import BinlogError, InvalidArgumentError, TruncatedBinlogError
from dumpfilter.regular_file import SIDE_FILE_BYTES, read_regular

STDOUT = "-"
BINLOG_MAGIC = b"\xfebin"
GZIP_MAGIC = b"\x1f\x8b"


def add_binlog_inputs(parser: argparse.ArgumentParser, metavar: str = "FILE") -> None:
    parser.add_argument("files", nargs="+", metavar=metavar,
                        help="binlog files or directories (a directory stands for its index or numbered files)")


def add_spark_options(parser: argparse.ArgumentParser, without: str) -> None:
    """--spark-master, --spark-conf and --no-spark; `without` says what --no-spark does instead."""
    parser.add_argument("--spark-master", default=None, metavar="URL",
                        help="Spark master URL (default $SPARK_MASTER, else local[*])")
    parser.add_argument("--spark-conf", action="append", default=[], type=_spark_conf, metavar="KEY=VALUE",
                        help="a Spark setting for the session, applied last (repeatable), e.g. spark.ui.port=4050, "
                             "spark.driver.port=7078, spark.blockManager.port=7079 to pin its ports")
    parser.add_argument("--no-spark", action="store_true", help=without)


# -- numbers ---------------------------------------------------------------------------------
# Every numeric option is read by one of these argparse types: a negative, zero, NaN or huge value
# that means nothing is refused as the option's one line (argparse names it), never passed on to
# loop forever, overflow a C integer or be ignored.
_SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def number_in(low: float, high: float, *, kind: Callable[[str], float] = float,
              what: str = "a number") -> Callable[[str], Any]:
    """An argparse type: `kind(text)` (int or float) from `low` to `high`, both included (NaN and
    infinities are out of every range)."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            value = None
        if value is None or not low <= value <= high:  # NaN fails both comparisons
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} from {_plain(low)} to {_plain(high)}")
        return value

    return parse


def count_in(low: int, high: int) -> Callable[[str], Any]:
    """A whole number from `low` to `high`."""
    return number_in(low, high, kind=int, what="a whole number")


def seconds_in(low: float, high: float) -> Callable[[str], Any]:
    """A number of seconds from `low` to `high` (a fraction allowed)."""
    return number_in(low, high, what="a number of seconds")


def whole_in(low: int, high: int, noun: str, what: str) -> Callable[[str], int]:
    """A whole number from `low` to `high`, refused in mysqld's words: "'x' is not NOUN", "N is
    out of range: WHAT is LOW to HIGH"."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} is {low} to {high}")
        return value

    return parse


port_type = whole_in(0, 65535, "a port number", "a TCP port")


def size_in(low: int, high: int) -> Callable[[str], Any]:
    """A byte count from `low` to `high`: 1048576, 1024K, 1M, 1G, as mysqld reads one."""
    def parse(text: str) -> int:
        number, scale = text.strip(), 1
        if number[-1:].upper() in _SIZE_UNITS:
            number, scale = number[:-1], _SIZE_UNITS[number[-1].upper()]
        try:
            value: int | None = int(number) * scale
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not a size from {_plain(low, size=True)} to "
                                             f"{_plain(high, size=True)} (bytes, or a number with K, M or G)")
        return value

    return parse


def _plain(value: float, size: bool = False) -> str:
    """1073741824 as 1G (a size), 5.0 as 5."""
    if size and value:
        for unit, scale in reversed(_SIZE_UNITS.items()):
            if value % scale == 0:
                return f"{int(value) // scale}{unit}"
    return f"{value:g}" if isinstance(value, float) else str(value)


# A series' base name leaves room in a file name (NAME_MAX, 255 bytes) for `.NNNNNN`, `.index`
# and the staging directory's `.<name>.XXXXXXXX.tmp`.
MAX_BASENAME_BYTES = 200


def series_basename(text: str) -> str:
    """An argparse type for --basename: a plain file name (no '/', not '.' or '..'), of at most
    MAX_BASENAME_BYTES bytes of UTF-8 (the index file names its files in UTF-8)."""
    if not text or text in (".", "..") or "/" in text or "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a plain file name (no '/', not '.' or '..')")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not UTF-8 (the index file names the series in UTF-8)") from None
    if size > MAX_BASENAME_BYTES:
        raise argparse.ArgumentTypeError(f"{text[:20]!r}... is {size} bytes long: at most {MAX_BASENAME_BYTES}")
    return text


def retype(parser: argparse.ArgumentParser, dest: str, kind: Callable[[str], Any]) -> None:
    """Give the option stored in `dest` the argparse type `kind` (options another layer adds to a
    command's parser: `experiment`'s come from the Spark job's own)."""
    for action in parser._actions:
        if action.dest == dest:
            action.type = kind
            return
    raise AssertionError(f"no option stores {dest!r}")


# -- side files ----------------------------------------------------------------------------------


def side_file(path: str | os.PathLike[str], option: str, limit: int = SIDE_FILE_BYTES) -> str:
    """The text of the side file `option` names: a regular file (a FIFO, a directory or /dev/zero is
    refused unread, never waited on), of at most `limit` bytes, in UTF-8; else the option's one line.
    The message never quotes the file (it may hold a key or a password)."""
    try:
        data = read_regular(path, limit)
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"{option} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"{option} {path}: not UTF-8 text (at byte offset {exc.start})") from None


def check_side_files(args: argparse.Namespace, *options: str) -> None:
    """Each of `options` (`--policy`) that `args` gives read as side_file, before the command starts
    anything: a bad one is its one line, not a blocked start or a later error in other words."""
    for option in options:
        path = getattr(args, option.lstrip("-").replace("-", "_"))
        if path:
            side_file(path, option)


def _spark_conf(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (e.g. spark.ui.port=4050)")
    return key.strip(), value


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    """--spark-conf's pairs as the session's conf (a key given twice: the last wins)."""
    return dict(getattr(args, "spark_conf", None) or [])


# -- the output convention -----------------------------------------------------------------
def add_out_dir(parser: argparse._ActionsContainer, help: str, **kwargs: Any) -> argparse.Action:
    """`--out DIR`: the directory a command writes its results into."""
    return parser.add_argument("--out", metavar="DIR", help=help, **kwargs)


def add_output_file(parser: argparse._ActionsContainer, help: str, **kwargs: Any) -> argparse.Action:
    """`-o/--output FILE`: the one file a command writes."""
    return parser.add_argument("-o", "--output", metavar="FILE", help=help, **kwargs)


def add_json_option(parser: argparse._ActionsContainer, what: str) -> argparse.Action:
    """`--json [FILE]`: `what` (the machine-readable result) as JSON on stdout instead of the human
    output, or written to FILE while the human output still goes to stdout."""
    return parser.add_argument(
        "--json", nargs="?", const=STDOUT, default=None, metavar="FILE",
        help=f"{what} as JSON: on stdout instead of the human output; with FILE, written to FILE and the human "
             f"output still printed ('-': stdout)")


class _Unparsed(Exception):
    """An argparse error during a trial parse (Parser.parse_args)."""


class Parser(argparse.ArgumentParser):
    """argparse without abbreviated long options, and with `--json X` read as `--json` and then the argument X when X taken as --json's
    FILE leaves the command without a required argument (`lint --json a.bin`, `master change-filter
    --json "CHANGE ..."`): an optional value must not swallow what the command needs."""

    _trying = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No abbreviated long options (`experiment --binlog` taken for `--binlogs`): a prefix that
        # means one option today means another once an option is added. Sub-commands' parsers are
        # made of this class too (argparse's add_parser takes the parent's class).
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        # (typeshed's overloads give a namespace of any class; this parser is only asked for its own)
        args = list(sys.argv[1:] if args is None else args)
        alternative = _json_without_value(args)
        if alternative is not None:
            for attempt in (args, alternative):
                Parser._trying = True
                try:
                    return super().parse_args(attempt, namespace)
                except _Unparsed:
                    pass
                finally:
                    Parser._trying = False
        return super().parse_args(args, namespace)  # neither parses: argparse's own message

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        # (typeshed's overloads as parse_args'). A sub-command's parser is called here with its own
        # arguments: an unknown option is told first, with the nearest known one (argparse
        # told a missing required option first: `experiment --binlog X` said `--binlogs` was required).
        mine = sys.argv[1:] if args is None else list(args)
        if any(isinstance(action, argparse._SubParsersAction) for action in self._actions):
            # a parser of sub-commands: its own options are those before the sub-command's name
            mine = mine[:next((i for i, arg in enumerate(mine) if not arg.startswith("-")), len(mine))]
        unknown = self.unknown_option(mine)
        if unknown is not None:
            self.error(unknown)
        return super().parse_known_args(args, namespace)

    def unknown_option(self, args: list[str]) -> str | None:
        """The message for the first long option in `args` (up to `--`) this parser does not know,
        with "did you mean" and the nearest of its own when one is near; None if all are known. A
        token with a space is a value, as argparse reads it."""
        for arg in args:
            if arg == "--":
                return None
            name = arg.partition("=")[0]
            if not name.startswith("--") or len(name) == 2 or " " in arg or name in self._option_string_actions:
                continue
            import difflib  # (only for a mistyped option: `filter`'s start imports no more than it uses)

            known = sorted(option for option in self._option_string_actions if option.startswith("--"))
            near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            return f"unrecognized arguments: {arg}" + (f" (did you mean {near[0]}?)" if near else "")
        return None

    def error(self, message: str) -> NoReturn:
        """One line, as every other error of the command is (argparse printed its usage block, 7 to 21
        lines, before the one that says what is wrong); --help prints the usage."""
        if Parser._trying:
            raise _Unparsed(message)
        choice = re.match(r"argument .*: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:  # a sub-command's name mistyped: the nearest one
            import difflib

            near = difflib.get_close_matches(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)), n=1)
            message += f" (did you mean {near[0]}?)" if near else ""
        self.exit(2, f"{self.prog}: error: {message.replace(chr(10), ' ')}\n")


if TYPE_CHECKING:
    # What `add_subparsers()` returns and each command's `register` is given (typeshed's name;
    # the sub-commands' parsers are of the top parser's class).
    Subparsers = argparse._SubParsersAction[Parser]


def _json_without_value(args: list[str]) -> list[str] | None:
    """`args` with each `--json X` (X not an option) read as `--json=-` then X; None without one."""
    end = args.index("--") if "--" in args else len(args)
    spots = [i for i in range(end - 1) if args[i] == "--json" and not args[i + 1].startswith("-")]
    return [("--json=" + STDOUT) if i in spots else arg for i, arg in enumerate(args)] if spots else None


def deprecated(old: str, new: str) -> None:
    """The one-line warning of an old spelling kept for scripts."""
    print(f"dumpfilter: warning: {old} is deprecated: use {new}", file=sys.stderr, flush=True)


def check_outputs(args: argparse.Namespace) -> None:
    """Every output option of the convention, checked before the command's work starts: a --json FILE
    whose directory cannot take it, a directory, or a binlog (an input taken as --json's FILE, as in
    `lint --json a.bin b.bin`) is one line and exit 2. --out is checked by the commands (some create
    it, some want it new or empty)."""
    target = getattr(args, "json", None)
    if target in (None, STDOUT) or is_stream(target):  # /dev/stdout, a pipe: never read, written as it comes
        return
    try:
        with open(target, "rb") as handle:
            head = handle.read(4)
    except OSError:  # missing (to be written), a directory, unreadable: writable_file says which
        head = b""
    if head == BINLOG_MAGIC or head.startswith(GZIP_MAGIC):
        raise OutputError(f"--json {target}: is a binlog, not a JSON output; put --json after the input files, "
                          "or write --json=FILE")
    for option, other in (("--out", getattr(args, "out", None)), ("-o", getattr(args, "output", None))):
        # the command's other output, made later (a directory --out creates): not a file for --json too
        if isinstance(other, str) and other != STDOUT and os.path.realpath(other) == os.path.realpath(target):
            raise OutputError(f"--json {target}: is the {option} output too; write the JSON elsewhere")
    out_dir = getattr(args, "out", None)
    if isinstance(out_dir, str) and not os.path.exists(out_dir) \
            and os.path.realpath(os.path.dirname(os.path.abspath(target))) == os.path.realpath(out_dir):
        return  # `--out DIR --json DIR/FILE`: the command makes DIR (with its parents) before it writes FILE
    writable_file(target, "--json")


def json_on_stdout(args: argparse.Namespace) -> bool:
    """True when --json replaces the human output on stdout."""
    return getattr(args, "json", None) == STDOUT


@contextlib.contextmanager
def json_sink(args: argparse.Namespace) -> Iterator[IO[str] | None]:
    """Where --json goes: None without it, stdout for `--json` / `--json -`, else FILE (written whole
    or not at all)."""
    target = getattr(args, "json", None)
    if target is None:
        yield None
    elif target == STDOUT or _is_stdout(target):  # /dev/stdout: in turn with the human output
        yield sys.stdout
        sys.stdout.flush()
    else:
        with atomic_output(target, "w", "--json") as handle:
            yield handle


def _is_stdout(path: str) -> bool:
    try:
        return os.path.samestat(os.stat(path), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, io.UnsupportedOperation):  # no such file; a stdout without a descriptor
        return False


def emit_json(args: argparse.Namespace, document: object) -> bool:
    """Write `document` (one line) where --json says; True when it took stdout (the human output is then left out).
    A callable `document` is made only then (lint's breaks: 0.05 s of JSON a run that asked for none)."""
    with json_sink(args) as out:
        if out is not None:
            import json  # only when asked for: not every command's start

            out.write(json.dumps(document() if callable(document) else document) + "\n")
    return json_on_stdout(args)


def raise_cut(cut: BinlogError | None, done: str) -> None:
    """A binlog input cut inside an event (a truncated file), told after the command's output up to
    it: one line naming the file and the cut event's offset, and exit 2. `done`: what the command
    did with the whole events before it."""
    if cut is not None:
        raise TruncatedBinlogError(f"{cut.message}: the file is cut there; {done}", path=cut.path, offset=cut.offset)
