"""Topology files (TOML): the slaves of an experiment and their filter rules. Shared by
`dumpfilter experiment` and `dumpfilter simulate`. Errors name the key and its line.

    [master]                      # optional; the source is read by simulate (experiment takes --binlogs),
                                  #   the policy by both
    binlogs = "data/binlogs"      # the source: a directory of binlogs (index or name.NNNNNN files),
    # files = ["a.000001", "a.000002"]   # or a list of files, in order,
    # [master.workload]           # or the built-in generator (dumpfilter.workload.WorkloadSpec fields:
    # seed = 1                    #   seed, schemas, tables_per_schema, transactions, binlog_format,
    # transactions = 8000         #   ddl_share, cross_db_share, flavor, rows_per_statement, ...;
                                  #   each count in its range: WORKLOAD_RANGES below),
    # [master.mariadb]            # or a real MariaDB that simulate starts and drives with its
    # transactions = 1500         #   built-in SQL workload (seed, schemas, transactions)
    policy = "policy.toml"        # optional master policy (master/policy.py); relative paths are
                                  # resolved against the topology file's directory
    # Other keys under [master] are left to the command (simulate rejects them).

    [[slaves]]
    name = "reporting"            # required, unique
    server_id = 2                 # required, unique, 1..4294967295 (optional in a --candidates file:
                                  #   a candidate is counted and linted, never connected)
    defaults_file = "my.cnf"      # replicate-* options from its [mysqld]/[mariadbd] groups (relative
                                  # to the topology file's directory), read before `rules`
    rules = ["replicate-do-db=db1", "replicate-wild-ignore-table=db1.tmp%"]   # mysqld options
    change_replication_filter = "CHANGE REPLICATION FILTER REPLICATE_IGNORE_TABLE = (db1.t2)"
    # or a list of statements; WL#2516 `CHANGE MASTER TO DO='db1.%'` text is accepted too
    channel = ""                  # WL#7361 channel whose rules apply (default "")
    filter_semantics = "mysql"    # mysql | effective
    skip_policy = "heartbeat"     # heartbeat | placeholder | empty-transaction
    flavor = "mariadb"            # mysql | mariadb: the replica's name-comparison rules
    lower_case_table_names = 0
    user = "analytics"            # identity presented to the master policy (optional; none: the
    password = ""                 #   policy's [default]); its gate bounds what simulate and
                                  #   experiment send this slave (`slave_gates`)
    kind = "dumpfilter"           # dumpfilter | mariadb: verify and simulate also run a real MariaDB
                                  #   replica on the master's MySQL endpoint (master serve --mysql-listen)
    replica_schema = "replica.sql"  # the replica's own starting schema when it is not the master's
                                  #   (objects created on it outside replication): a DDL file (relative
                                  #   to the topology file) or mysql://USER@HOST:PORT; lint predicts
                                  #   with it, and verify loads the file on this slave's servers

    [experiment]                  # optional; read by simulate
    master_vs_slave = true        # also stream everything once: the slave-side filtering baseline
    skip_policies = ["heartbeat", "placeholder", "empty-transaction"]   # bytes per policy, per slave

Rules apply in this order: `defaults_file`, then `rules` (accumulating, as repeated options do), then each
`change_replication_filter` statement (replacing the types it lists). A slave with no rules
receives everything.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from dumpfilter.errors import DumpFilterError, InvalidArgumentError, RuleError
from dumpfilter.rules import toml_text
from dumpfilter.rules.assembly import channel_rules, merge_startup
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.skip_policy import DEFAULT as DEFAULT_SKIP_POLICY, NAMES as SKIP_POLICIES

if TYPE_CHECKING:  # loaded where a policy (a workload) is read
    from dumpfilter.rules.gate import Gate
    from dumpfilter.workload.generator import WorkloadSpec

SEMANTICS = ("mysql", "effective")
FLAVORS = ("mysql", "mariadb")
_SLAVE_KEYS = {"name", "server_id", "defaults_file", "rules", "change_replication_filter", "channel", "filter_semantics",
               "skip_policy", "flavor", "lower_case_table_names", "user", "password", "kind", "replica_schema"}
# dumpfilter: dumpfilter's own gRPC slave; mariadb: also a real MariaDB replica on the master's MySQL
# protocol endpoint (CHANGE MASTER TO), with the slave's rules applied by the master (verify, simulate).
KINDS = ("dumpfilter", "mariadb")
_SOURCE_KEYS = ("binlogs", "files", "workload", "mariadb")
# Built-in generator options (dumpfilter.workload.WorkloadSpec) and their TOML types.
_WORKLOAD_KEYS: dict[str, type | tuple[type, ...]] = {
    "seed": int, "schemas": int, "tables_per_schema": int, "transactions": int, "binlog_format": str,
    "ddl_share": (int, float), "cross_db_share": (int, float), "flavor": str, "rows_per_statement": int,
    "statements_per_transaction": int, "max_binlog_size": int, "server_id": int, "schema_prefix": str,
    "insert_select_share": (int, float)}
_MARIADB_KEYS: dict[str, type | tuple[type, ...]] = {"seed": int, "schemas": int, "transactions": int}
# The range of each integer option: what a lab run can generate, stream and report on (the
# generator writes all it is asked for: 100000 schemas made a 70 MB binlog of 10 transactions).
# `binlog generate` reads its options in these ranges too.
_SEED = (0, (1 << 63) - 1)
WORKLOAD_RANGES: dict[str, tuple[int, int]] = {
    "seed": _SEED, "schemas": (1, 1000), "tables_per_schema": (1, 100), "transactions": (0, 1_000_000),
    "rows_per_statement": (1, 1000), "statements_per_transaction": (1, 100),
    "max_binlog_size": (4096, 1 << 30),   # MySQL's own range for max_binlog_size
    "server_id": (1, 0xFFFFFFFF)}         # MySQL's; 0 is refused for a master that has slaves
_MARIADB_RANGES: dict[str, tuple[int, int]] = {"seed": _SEED, "schemas": (1, 1000), "transactions": (0, 100_000)}
_WORKLOAD_ROWS = 10_000_000  # transactions x statements_per_transaction x rows_per_statement
_NAME_LENGTH = 64  # MySQL's longest database name
_EXPERIMENT_KEYS = {"master_vs_slave", "skip_policies"}


class TopologyError(InvalidArgumentError):
    """A malformed topology file; the message names the file, the key and the line."""


@dataclass(frozen=True)
class SlaveSpec:
    name: str
    server_id: int
    rules: RuleSet = field(default_factory=RuleSet)
    settings: Settings = field(default_factory=Settings)
    skip_policy: str = DEFAULT_SKIP_POLICY
    channel: str = ""
    rule_text: tuple[str, ...] = ()  # the rules as written, for reports
    user: str = ""
    password: str = ""
    kind: str = "dumpfilter"
    replica_schema: str | None = None  # a file path (resolved) or a mysql:// URL; None: the master's schema


@dataclass(frozen=True)
class MasterSource:
    """Where the master's binlog comes from (simulate). `kind` is directory | files | workload |
    mariadb; `options` holds the generator's (or the MariaDB workload's) keyword arguments."""

    kind: str = "workload"
    directory: Path | None = None
    files: tuple[Path, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    policy: Path | None = None
    where: str = ""   # "FILE:LINE" of the key that named it, for the errors found when it is read


@dataclass(frozen=True)
class ExperimentSpec:
    master_vs_slave: bool = True
    skip_policies: tuple[str, ...] = SKIP_POLICIES


@dataclass(frozen=True)
class Topology:
    slaves: tuple[SlaveSpec, ...]
    master: dict[str, Any] = field(default_factory=dict)  # the [master] table, as TOML gives it
    path: str = "<topology>"
    source: MasterSource | None = None        # None: no source key under [master]
    experiment: ExperimentSpec = field(default_factory=ExperimentSpec)
    unknown_master_keys: tuple[tuple[str, str], ...] = ()  # (key, "file:line") left to the command


def load_candidates(path: str | os.PathLike[str]) -> Topology:
    """`experiment --candidates FILE`: a topology whose slaves are rule sets counted and linted, never
    connected, so none needs a server_id (one given is checked as a slave's)."""
    return load_topology(path, server_id_needed=False)


def load_topology(path: str | os.PathLike[str], *, by_user: bool = False, server_id_needed: bool = True) -> Topology:
    path = Path(path)
    if path.exists() and not path.is_file():  # a FIFO or a device is read forever, a directory not at all
        raise TopologyError(f"{path}: cannot read topology file: {path} is not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read topology file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise TopologyError(f"{path}:{line}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                            f"{exc.start})") from None
    return parse_topology(text, str(path), by_user=by_user, server_id_needed=server_id_needed)


def parse_topology(text: str, name: str = "<topology>", *, by_user: bool = False,
                   server_id_needed: bool = True) -> Topology:
    """`by_user` (`master serve --replicas`): a slave may be named by its `user` alone (server_id 0:
    none), as long as no other slave names that user. `server_id_needed` False (candidates): none
    needs one (server_id 0: none)."""
    data = toml_text.loads(text, name, TopologyError)
    where = toml_text.Locator(text, name)
    base = Path(name).parent if name != "<topology>" else Path(".")
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
    slaves = [_slave(entry, i, where, base, by_user, server_id_needed) for i, entry in enumerate(entries)]
    users: dict[str, list[int]] = {}
    for i, slave in enumerate(slaves):
        users.setdefault(slave.user, []).append(i)
    for i, slave in enumerate(slaves):
        if by_user and not slave.server_id and len(users[slave.user]) > 1:  # a user named twice maps no replica
            other = next(j for j in users[slave.user] if j != i)
            raise TopologyError(f"{where.slave(i, 'user')}: slaves.user {slave.user!r} is also slave #{other + 1}'s: "
                                "a replica named by its user alone needs a user of its own (or give its server_id)")
    for attr in ("name", "server_id"):
        seen: dict[object, int] = {}
        for i, slave in enumerate(slaves):
            value = getattr(slave, attr)
            if attr == "server_id" and not value:
                continue  # (by_user: named by its user)
            if value in seen:
                raise TopologyError(f"{where.slave(i, attr)}: slaves.{attr} {value!r} is already used by slave "
                                    f"#{seen[value] + 1}")
            seen[value] = i
    source, unknown_master = _master(master, where, base)
    experiment = _experiment(data.get("experiment", {}), where)
    return Topology(tuple(slaves), master, name, source, experiment, unknown_master)


def _master(master: dict[str, Any], where: toml_text.Locator,
            base: Path) -> tuple[MasterSource | None, tuple[tuple[str, str], ...]]:
    """The [master] keys simulate reads; others are returned with their location."""
    def fail(key: str, message: str, table: str = "master") -> NoReturn:
        raise TopologyError(f"{where.table(table, key.rpartition('.')[2])}: {key}: {message}")

    given = [key for key in _SOURCE_KEYS if key in master]
    if len(given) > 1:
        fail(f"master.{given[1]}", f"give one binlog source, not both master.{given[0]} and master.{given[1]}")
    policy = master.get("policy")
    if policy is not None and (not isinstance(policy, str) or not policy):
        fail("master.policy", "must be the path of a policy TOML file")
    policy_path = base / policy if policy else None
    unknown = tuple((key, where.table("master", key)) for key in master
                    if key not in _SOURCE_KEYS and key != "policy")
    if not given:
        return (MasterSource(policy=policy_path) if policy else None), unknown
    key = given[0]
    value = master[key]
    if key == "binlogs":
        if not isinstance(value, str) or not value:
            fail("master.binlogs", "must be the path of a directory of binlog files")
        return MasterSource("directory", directory=base / value, policy=policy_path,
                            where=where.table("master", key)), unknown
    if key == "files":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            fail("master.files", "must be a non-empty list of binlog file paths, in order")
        names = [Path(v).name for v in value]
        if len(set(names)) != len(names):
            fail("master.files", "two files have the same name; the master serves them from one directory")
        return MasterSource("files", files=tuple(base / v for v in value), policy=policy_path,
                            where=where.table("master", key)), unknown
    allowed = _WORKLOAD_KEYS if key == "workload" else _MARIADB_KEYS
    if not isinstance(value, dict):
        fail(f"master.{key}", f"must be a table ([master.{key}])")
    table = f"master.{key}"
    for option, option_value in value.items():
        if option not in allowed:
            fail(f"{table}.{option}", f"unknown key (expected one of {', '.join(sorted(allowed))})", table)
        expected = allowed[option]
        if isinstance(option_value, bool) or not isinstance(option_value, expected):
            kind = "a number" if expected == (int, float) else f"an {expected.__name__}" if expected is int \
                else "a string"
            fail(f"{table}.{option}", f"{option_value!r} is not {kind}", table)
    for option, (low, high) in (WORKLOAD_RANGES if key == "workload" else _MARIADB_RANGES).items():
        if option in value and not low <= value[option] <= high:
            fail(f"{table}.{option}", f"{value[option]!r} is not an integer in {low}..{high}", table)
    for option in ("ddl_share", "cross_db_share", "insert_select_share"):
        if option in value and not 0 <= value[option] <= 1:
            fail(f"{table}.{option}", f"{value[option]!r} is not a share between 0 and 1", table)
    if key == "workload":
        from dumpfilter.workload.generator import WorkloadSpec

        _workload_size(value, WorkloadSpec(), lambda option, message: fail(f"{table}.{option}", message, table))
        try:
            WorkloadSpec(**value)
        except ValueError as exc:
            bad = next((k for k in value if k in str(exc)), "")
            fail(f"{table}.{bad}" if bad else table, str(exc), table)
    return MasterSource(key, options=dict(value), policy=policy_path), unknown


def _workload_size(value: dict[str, Any], default: WorkloadSpec, fail: Callable[[str, str], NoReturn]) -> None:
    """The [master.workload] checks that span options: the rows it writes in all, and the schema
    names its prefix makes (`default`: a WorkloadSpec, for the options not given)."""
    counts = [int(value.get(k, getattr(default, k))) for k in ("transactions", "statements_per_transaction",
                                                               "rows_per_statement")]
    if counts[0] * counts[1] * counts[2] > _WORKLOAD_ROWS:
        option = next(k for k in ("transactions", "statements_per_transaction", "rows_per_statement") if k in value)
        fail(option, f"{counts[0]} transactions x {counts[1]} statements x {counts[2]} rows is "
                     f"{counts[0] * counts[1] * counts[2]} rows, more than the {_WORKLOAD_ROWS} a workload may write")
    prefix = str(value.get("schema_prefix", default.schema_prefix))
    if not re.fullmatch(r"[A-Za-z0-9_$]+", prefix):
        fail("schema_prefix", f"{prefix!r} is not a name of letters, digits, '_' and '$'")
    longest = prefix + str(value.get("schemas", default.schemas))
    if len(longest) > _NAME_LENGTH:
        fail("schema_prefix", f"makes schema names of up to {len(longest)} characters, longer than the "
                              f"{_NAME_LENGTH} MySQL allows")


def _experiment(experiment: object, where: toml_text.Locator) -> ExperimentSpec:
    def fail(key: str, message: str) -> NoReturn:
        raise TopologyError(f"{where.table('experiment', key)}: experiment.{key}: {message}")

    if not isinstance(experiment, dict):
        raise TopologyError(f"{where.top('experiment')}: 'experiment' must be a table ([experiment])")
    for key in experiment:
        if key not in _EXPERIMENT_KEYS:
            fail(key, f"unknown key (expected one of {', '.join(sorted(_EXPERIMENT_KEYS))})")
    master_vs_slave = experiment.get("master_vs_slave", True)
    if not isinstance(master_vs_slave, bool):
        fail("master_vs_slave", f"{master_vs_slave!r} is not true or false")
    policies = experiment.get("skip_policies", list(SKIP_POLICIES))
    if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
        fail("skip_policies", "must be a list of skip policy names")
    for policy in policies:
        if policy not in SKIP_POLICIES:
            fail("skip_policies", f"{policy!r} is not one of {', '.join(SKIP_POLICIES)}")
    return ExperimentSpec(master_vs_slave, tuple(dict.fromkeys(policies)))


def _slave(entry: dict[str, Any], index: int, where: toml_text.Locator, base: Path = Path("."),
           by_user: bool = False, server_id_needed: bool = True) -> SlaveSpec:
    def fail(key: str, message: str) -> NoReturn:
        raise TopologyError(f"{where.slave(index, key)}: slaves.{key}: {message}")

    for key in entry:
        if key not in _SLAVE_KEYS:
            fail(key, f"unknown key (expected one of {', '.join(sorted(_SLAVE_KEYS))})")
    if "name" not in entry:
        fail("name", "missing (every slave needs a name)")
    name = entry["name"]
    if not isinstance(name, str) or not name.strip():
        fail("name", "must be a non-empty string")
    if "server_id" not in entry and server_id_needed and not (by_user and isinstance(entry.get("user"), str) and entry["user"]):
        fail("server_id", f"missing for slave {name!r}" + (" (give it, or the replica's user)" if by_user else ""))
    server_id = entry.get("server_id", 0)
    if not isinstance(server_id, int) or isinstance(server_id, bool) or not (
            1 <= server_id <= 0xFFFFFFFF or (server_id == 0 and "server_id" not in entry)):
        fail("server_id", f"{server_id!r} is not an integer in 1..4294967295")
    choices = {"filter_semantics": (SEMANTICS, "mysql"), "skip_policy": (SKIP_POLICIES, DEFAULT_SKIP_POLICY),
               "flavor": (FLAVORS, "mysql"), "kind": (KINDS, "dumpfilter")}
    values = {}
    for key, (allowed, default) in choices.items():
        value = entry.get(key, default)
        if value not in allowed:
            fail(key, f"{value!r} is not one of {', '.join(allowed)}")
        values[key] = value
    identity = {}
    for key in ("user", "password"):
        identity[key] = entry.get(key, "")
        if not isinstance(identity[key], str):
            fail(key, "must be a string")
    lctn = entry.get("lower_case_table_names", 0)
    if not isinstance(lctn, int) or isinstance(lctn, bool) or lctn not in (0, 1, 2):  # (1.0 == 1, True == 1)
        fail("lower_case_table_names", f"{lctn!r} is not the integer 0, 1 or 2")
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
    replica_schema = entry.get("replica_schema")
    if replica_schema is not None:
        if not isinstance(replica_schema, str) or not replica_schema:
            fail("replica_schema", "must be the path of a DDL file or a mysql://USER@HOST:PORT URL")
        if not replica_schema.startswith("mysql://"):
            replica_schema = str(base / replica_schema)
            if not Path(replica_schema).is_file():
                fail("replica_schema", f"{replica_schema} is not a file")
    defaults_file = entry.get("defaults_file")
    startup = StartupFilters()
    if defaults_file is not None:
        if not isinstance(defaults_file, str) or not defaults_file:
            fail("defaults_file", "must be the path of a my.cnf file")
        from dumpfilter.rules.mycnf import startup_filters_from_file

        if (base / defaults_file).exists() and not (base / defaults_file).is_file():  # a FIFO, /dev/zero...
            fail("defaults_file", f"{base / defaults_file} is not a file")
        try:
            startup = startup_filters_from_file(base / defaults_file)
        except DumpFilterError as exc:
            fail("defaults_file", str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            fail("defaults_file", f"cannot read {base / defaults_file}: {getattr(exc, 'strerror', None) or exc}")
    try:
        startup = merge_startup(startup, StartupFilters.from_texts(options))
    except RuleError as exc:
        fail("rules", str(exc))
    try:
        rules = channel_rules(startup, statements, channel, lambda name: f'set channel = "{name}" for this slave')
    except RuleError as exc:
        fail("change_replication_filter", str(exc))
    try:
        settings = Settings(flavor=values["flavor"], lower_case_table_names=lctn,
                            semantics=values["filter_semantics"])
        from dumpfilter.rules.evaluate import RuleEngine
        RuleEngine(rules, settings)  # rejects WL#2516 rules without effective semantics, here
    except RuleError as exc:
        fail("filter_semantics", str(exc))
    return SlaveSpec(name, server_id, rules, settings, values["skip_policy"], channel,
                     ((f"defaults-file={defaults_file}",) if defaults_file else ()) + tuple(options) + tuple(statements),
                     identity["user"], identity["password"], values["kind"], replica_schema)


def slave_gates(topology: Topology) -> list[Gate | None]:
    """Each slave's master-policy gate (`rules.gate.Gate`), in slave order, as the master derives it
    from `master.policy` for the slave's `user`, `password` and `server_id` (rules/policy_gates.py);
    None for every slave when the topology names no policy. A slave the master would refuse is an
    error naming it."""
    policy = topology.source.policy if topology.source is not None else None
    if policy is None:
        return [None for _ in topology.slaves]
    if not Path(policy).is_file():
        raise TopologyError(f"{topology.path}: master.policy: {policy} is not a file")
    from dumpfilter.rules.policy_gates import PolicyGates

    gates = PolicyGates.load(policy)
    out: list[Gate | None] = []
    for spec in topology.slaves:
        try:
            out.append(gates.gate_for_slave(spec.user, spec.password, spec.server_id))
        except DumpFilterError as exc:
            raise TopologyError(f"{topology.path}: slave {spec.name!r}: master.policy {policy}: {exc}") from None
    return out
