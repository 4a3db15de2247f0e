"""Topology files (TOML): the slaves of an experiment and their filter rules. Shared by
`dumpfilter experiment` and `dumpfilter simulate`. Errors name the key and its line.

    [master]                      # optional; read by simulate, ignored by experiment
    binlogs = "data/binlogs"      # any extra keys under [master] are left to the command

    [[slaves]]
    name = "reporting"            # required, unique
    server_id = 2                 # required, unique, 1..4294967295
    rules = ["replicate-do-db=db1", "replicate-wild-ignore-table=db1.tmp%"]   # mysqld options
    change_replication_filter = "CHANGE REPLICATION FILTER REPLICATE_IGNORE_TABLE = (db1.t2)"
    # or a list of statements; WL#2516 `CHANGE MASTER TO DO='db1.%'` text is accepted too
    channel = ""                  # WL#7361 channel whose rules apply (default "")
    filter_semantics = "mysql"    # mysql | effective
    skip_policy = "heartbeat"     # heartbeat | placeholder | empty-transaction
    flavor = "mariadb"            # mysql | mariadb: the replica's name-comparison rules
    lower_case_table_names = 0

Rules apply in this order: `rules` (accumulating, as repeated options do), then each
`change_replication_filter` statement (replacing the types it lists). A slave with no rules
receives everything.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from binlog_codec.errors import DumpFilterError, RuleError
from filter_rules.parse import StartupFilters, parse_filter_statement
from filter_rules.ruleset import RuleSet, Settings

SKIP_POLICIES = ("heartbeat", "placeholder", "empty-transaction")
SEMANTICS = ("mysql", "effective")
FLAVORS = ("mysql", "mariadb")
_SLAVE_KEYS = {"name", "server_id", "rules", "change_replication_filter", "channel", "filter_semantics",
               "skip_policy", "flavor", "lower_case_table_names"}


class TopologyError(DumpFilterError):
    """A malformed topology file; the message names the file, the key and the line."""


@dataclass(frozen=True)
class SlaveSpec:
    name: str
    server_id: int
    rules: RuleSet = field(default_factory=RuleSet)
    settings: Settings = field(default_factory=Settings)
    skip_policy: str = "heartbeat"
    channel: str = ""
    rule_text: tuple[str, ...] = ()  # the rules as written, for reports


@dataclass(frozen=True)
class Topology:
    slaves: tuple[SlaveSpec, ...]
    master: dict = field(default_factory=dict)
    path: str = "<topology>"


def load_topology(path: str | os.PathLike) -> Topology:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read topology file: {exc.strerror}") from None
    return parse_topology(text, str(path))


def parse_topology(text: str, name: str = "<topology>") -> Topology:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{name}: not valid TOML: {exc}") from None
    where = _Locator(text, name)
    unknown = set(data) - {"master", "slaves", "experiment"}
    if unknown:
        key = sorted(unknown)[0]
        raise TopologyError(f"{where.top(key)}: unknown top-level key '{key}' (expected master, slaves, experiment)")
    master = data.get("master", {})
    if not isinstance(master, dict):
        raise TopologyError(f"{where.top('master')}: 'master' must be a table ([master])")
    entries = data.get("slaves")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise TopologyError(f"{where.top('slaves')}: needs at least one [[slaves]] table")
    slaves = [_slave(entry, i, where) for i, entry in enumerate(entries)]
    for attr in ("name", "server_id"):
        seen: dict = {}
        for i, slave in enumerate(slaves):
            value = getattr(slave, attr)
            if value in seen:
                raise TopologyError(f"{where.slave(i, attr)}: slaves.{attr} {value!r} is already used by slave "
                                    f"#{seen[value] + 1}")
            seen[value] = i
    return Topology(tuple(slaves), master, name)


def _slave(entry: dict, index: int, where: "_Locator") -> SlaveSpec:
    def fail(key: str, message: str):
        raise TopologyError(f"{where.slave(index, key)}: slaves.{key}: {message}")

    for key in entry:
        if key not in _SLAVE_KEYS:
            fail(key, f"unknown key (expected one of {', '.join(sorted(_SLAVE_KEYS))})")
    if "name" not in entry:
        fail("name", "missing (every slave needs a name)")
    name = entry["name"]
    if not isinstance(name, str) or not name.strip():
        fail("name", "must be a non-empty string")
    if "server_id" not in entry:
        fail("server_id", f"missing for slave {name!r}")
    server_id = entry["server_id"]
    if not isinstance(server_id, int) or isinstance(server_id, bool) or not 1 <= server_id <= 0xFFFFFFFF:
        fail("server_id", f"{server_id!r} is not an integer in 1..4294967295")
    choices = {"filter_semantics": (SEMANTICS, "mysql"), "skip_policy": (SKIP_POLICIES, "heartbeat"),
               "flavor": (FLAVORS, "mysql")}
    values = {}
    for key, (allowed, default) in choices.items():
        value = entry.get(key, default)
        if value not in allowed:
            fail(key, f"{value!r} is not one of {', '.join(allowed)}")
        values[key] = value
    lctn = entry.get("lower_case_table_names", 0)
    if lctn not in (0, 1, 2) or isinstance(lctn, bool):
        fail("lower_case_table_names", f"{lctn!r} is not 0, 1 or 2")
    channel = entry.get("channel", "")
    if not isinstance(channel, str):
        fail("channel", "must be a string")
    options = entry.get("rules", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        fail("rules", "must be a list of strings like \"replicate-do-db=db1\"")
    statements = entry.get("change_replication_filter", [])
    statements = [statements] if isinstance(statements, str) else statements
    if not isinstance(statements, list) or not all(isinstance(s, str) for s in statements):
        fail("change_replication_filter", "must be a string or a list of strings")
    try:
        pairs = []
        for option in options:
            key, eq, value = option.partition("=")
            if not eq:
                raise RuleError(f"{option!r} is not of the form option=value")
            pairs.append((key.strip(), value.strip()))
        rules = StartupFilters.from_options(pairs).for_channel(channel)
    except RuleError as exc:
        fail("rules", str(exc))
    try:
        for statement in statements:
            change = parse_filter_statement(statement)
            if change.channel is None or change.channel == channel:
                rules = change.apply(rules)
    except RuleError as exc:
        fail("change_replication_filter", str(exc))
    try:
        settings = Settings(flavor=values["flavor"], lower_case_table_names=lctn,
                            semantics=values["filter_semantics"])
        from filter_rules.evaluate import RuleEngine
        RuleEngine(rules, settings)  # rejects WL#2516 rules without effective semantics, here
    except RuleError as exc:
        fail("filter_semantics", str(exc))
    return SlaveSpec(name, server_id, rules, settings, values["skip_policy"], channel,
                     tuple(options) + tuple(statements))


class _Locator:
    """Line numbers for keys: tomllib reports them only for syntax errors."""

    def __init__(self, text: str, name: str):
        self.lines = text.splitlines()
        self.name = name

    def _find(self, pattern: str, start: int = 0, stop: int | None = None) -> int | None:
        regex = re.compile(pattern)
        for number in range(start, len(self.lines) if stop is None else stop):
            if regex.match(self.lines[number]):
                return number
        return None

    def top(self, key: str) -> str:
        line = self._find(rf"\s*(\[\[?\s*{re.escape(key)}\s*\]\]?|{re.escape(key)}\s*=)")
        return f"{self.name}:{line + 1}" if line is not None else self.name

    def slave(self, index: int, key: str) -> str:
        headers = [i for i, line in enumerate(self.lines) if re.match(r"\s*\[\[\s*slaves\s*\]\]", line)]
        if index >= len(headers):  # inline array `slaves = [{...}]`
            return self.top("slaves")
        start = headers[index]
        stop = next((i for i, line in enumerate(self.lines) if i > start and re.match(r"\s*\[", line)), None)
        line = self._find(rf"\s*{re.escape(key)}\s*=", start + 1, stop)
        return f"{self.name}:{(line if line is not None else start) + 1}"
