"""A my.cnf reader that keeps repeated keys (configparser cannot) and follows `!include` / `!includedir`;
and the one way the rules read a file named beside their input (a my.cnf, a --schema dump): a
regular file of bounded size, never a FIFO or a device that blocks or reads without end."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from dumpfilter.errors import RuleError
from dumpfilter.regular_file import read_regular
from dumpfilter.rules.parse import OPTION_TYPES, StartupFilters, normalize_option_name
from dumpfilter.rules.ruleset import REPLICATE_TYPES

SERVER_GROUPS = ("mysqld", "mariadbd")
MAX_INCLUDE_DEPTH = 10
MAX_OPTION_FILE_BYTES = 16 << 20  # a my.cnf (each included one too); mysqld's hold a few KB
# An option's name as mysqld reads one: letters, digits, '_' and '-', after a connection's name and a
# '.' (MariaDB's `m1.replicate-do-db`, the name maybe quoted) or a plugin's.
_OPTION_NAME = re.compile(r"(?:'[^']*'\.|\"[^\"]*\"\.|`[^`]*`\.)?[\w.-]+")
# my_default.cc (search_default_file_with_buffers): these escapes are decoded, any other
# backslash is kept, so `replicate-wild-do-table=db\_1.%` keeps its LIKE escape.
VALUE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "s": " ", '"': '"', "'": "'", "\\": "\\"}


# replicate-* options mysqld knows that are not filter rules (MariaDB adds the last two).
OTHER_REPLICATE_OPTIONS = frozenset({"replicate-same-server-id", "replicate-annotate-row-events",
                                     "replicate-events-marked-for-skip"})


def startup_filters_from_file(path: str | os.PathLike[str] | None, groups: Iterable[str] = SERVER_GROUPS,
                              extra_file: str | os.PathLike[str] | None = None) -> StartupFilters:
    """The filter rules (`replicate-*`, `binlog-*-db`) of an option file, then of `extra_file`
    (--defaults-extra-file: mysqld reads it after the main one); other options are not ours and are
    ignored, except a `replicate-*` name mysqld does not know (see check_replicate_option)."""
    located = [*_located_options(path, groups)] if path else []
    if extra_file:
        located += _located_options(extra_file, groups)
    located = [connection_option(key, value, where) for key, value, where in located]
    pairs = [(key, value) for key, value, where in located
             if check_replicate_option(key, value, where) and normalize_option_name(key)]
    return StartupFilters.from_options(pairs)


def connection_option(key: str, value: str, where: str) -> tuple[str, str, str]:
    """MariaDB's per-connection form `m1.replicate_ignore_table=a.t1` (multi-source: the filter of
    the connection named m1, MDEV-8874) as the channel form WL#7361 spells `m1:a.t1`. Any other
    prefixed option is refused naming its line: mysqld would apply it to that connection, and
    dropping it would be silent."""
    name = key.strip()
    if "." not in name:
        return key, value, where
    prefix, _, option = name.partition(".")
    prefix = prefix.strip().strip("'\"`")
    normalized = normalize_option_name(option)
    if not prefix or normalized is None or OPTION_TYPES[normalized] not in REPLICATE_TYPES:
        raise RuleError(f"{where}: '{name}' is a per-connection option that is not a replicate-* filter "
                        "(only replicate-do/ignore-db, -do/ignore-table, -wild-do/ignore-table and "
                        "-rewrite-db take a connection name)")
    return option, f"{prefix}:{value}", where


def check_replicate_option(key: str, value: str, where: str) -> bool:
    """False for an unknown `loose-replicate-*` option (a warning), RuleError for an unknown `replicate-*`.

    mysqld refuses to start on an option it does not know ("unknown variable 'replicate-do-tabel=db1.t1'"),
    unless it has the `loose-` prefix: then it warns and goes on (my_getopt.cc). A my.cnf's [mysqld]
    holds hundreds of options that are not ours (datadir, innodb_*), so only names starting with
    `replicate-` are checked: a misspelled filter there would otherwise mean no filter at all.
    `_` and `-` are interchangeable in option names. Unambiguous prefixes (`replicate-do-d`): MySQL
    removed them in 5.7 (WL#6978, "only accept full option names"), MariaDB still accepts them
    (--getopt-prefix-matching, on by default); a prefix is refused here naming the full option, so
    neither reading is silently chosen."""
    name = key.strip().lstrip("-").replace("_", "-").lower()
    loose = name.startswith("loose-")
    name = name.removeprefix("loose-")
    if not name.startswith("replicate-") or name in OPTION_TYPES or name in OTHER_REPLICATE_OPTIONS:
        return True
    spelled = f"{key.strip()}={value}" if value else key.strip()
    if loose:
        print(f"warning: {where}: unknown variable '{spelled}' ignored (loose- prefix)", file=sys.stderr)
        return False
    completions = sorted(o for o in (*OPTION_TYPES, *OTHER_REPLICATE_OPTIONS) if o.startswith(name))
    if len(completions) == 1:
        raise RuleError(f"{where}: '{key.strip()}' abbreviates {completions[0]}: write the full name "
                        "(MySQL refuses abbreviations, MariaDB accepts them)")
    raise RuleError(f"{where}: unknown variable '{spelled}' (mysqld refuses to start on it; "
                    "prefix it with loose- to have it ignored)")


def _located_options(path: str | os.PathLike[str], groups: Iterable[str]) -> list[tuple[str, str, str]]:
    options: list[tuple[str, str, str]] = []
    _read_into(Path(path), tuple(group.lower() for group in groups), options, depth=0)
    return options


def _read_into(path: Path, groups: tuple[str, ...], options: list[tuple[str, str, str]], depth: int) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        raise RuleError(f"{path}: !include nested more than {MAX_INCLUDE_DEPTH} deep")
    try:
        data = read_regular(path, MAX_OPTION_FILE_BYTES)
    except (OSError, ValueError) as exc:
        raise RuleError(f"--defaults-file: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        at_line = data[: exc.start].count(b"\n") + 1
        raise RuleError(f"{path}:{at_line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") \
            from None
    in_group: bool | None = None  # None: before the first [group] header
    for number, raw_line in enumerate(lines, 1):
        line = raw_line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("!"):
            _follow_directive(path, number, line, groups, options, depth)
        elif line.startswith("["):
            if not line.endswith("]"):
                raise RuleError(f"{path}:{number}: group header {line!r} has no closing ']'")
            in_group = line[1:-1].strip().lower() in groups
        else:
            # mysqld refuses both ("Found option without preceding group", "unknown variable"):
            # a file that is not my.cnf syntax is told, not read as no rules.
            if in_group is None:
                raise RuleError(f"{path}:{number}: {line[:60]!r} comes before any [group] header: not my.cnf syntax")
            key, _, value = (part.strip() for part in line.partition("="))
            if not _OPTION_NAME.fullmatch(key):
                raise RuleError(f"{path}:{number}: {key[:60]!r} is not an option name: not my.cnf syntax")
            if in_group:
                options.append((key, _parse_value(value), f"{path}:{number}"))


def _follow_directive(path: Path, number: int, line: str, groups: tuple[str, ...],
                      options: list[tuple[str, str, str]], depth: int) -> None:
    directive, _, argument = line.partition(" ")
    if "\0" in argument:  # found by the atheris rules target: open() raised ValueError
        raise RuleError(f"{path}:{number}: {directive} names a path with a NUL byte")
    target = path.parent / argument.strip()
    if directive == "!include":
        _read_into(target, groups, options, depth + 1)
    elif directive == "!includedir":
        # mysqld reads only *.cnf in an included directory, in name order.
        for included in sorted(target.glob("*.cnf")):
            _read_into(included, groups, options, depth + 1)
    else:
        raise RuleError(f"{path}:{number}: unknown directive {directive!r}")


def _parse_value(value: str) -> str:
    if value[:1] in ("'", '"'):
        closing = value.find(value[0], 1)
        if closing > 0:
            return _decode_escapes(value[1:closing])
    comment = re.search(r"(?<!\S)#", value)  # a `#` after whitespace starts a comment (`db1  # the main db`)
    return _decode_escapes(value[:len(value) if comment is None else comment.start()].rstrip())


def _decode_escapes(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: VALUE_ESCAPES.get(m[1], m[0]), value, flags=re.DOTALL)
