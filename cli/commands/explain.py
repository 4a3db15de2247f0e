"""`dumpfilter explain`: what a replica with these rules does with one statement or table, and why."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from dumpfilter.cli.options import add_json_option, emit_json, json_sink
from dumpfilter.cli.output_paths import readable_file
from dumpfilter.errors import RuleError
from dumpfilter.rules.assembly import RULE_OPTION_TYPES, channel_rules, startup_from_options
from dumpfilter.rules.options import add_rule_options, add_schema_option, ruleset_from_args, schema_from_args
from dumpfilter.rules.decisions import Decision
from dumpfilter.rules.evaluate import RuleEngine, parse_statement
from dumpfilter.rules.ruleset import RuleSet, Settings, option_name
from dumpfilter.rules.renamer import renames
from dumpfilter.rules.statement_info import WRITE_KINDS

if TYPE_CHECKING:
    from dumpfilter.cli.options import Subparsers

BATCH_FILTER_KEYS = frozenset(option_name(rule_type).replace("-", "_") for rule_type in RULE_OPTION_TYPES)


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "explain", help="decide one statement or table against filter rules and say which rule decided",
        description="Prints apply or skip and the rule and step that decided, e.g. "
                    "`skip: replicate-do-db: default database 'a' is not in the do list`.")
    add_rule_options(parser)
    add_schema_option(parser)
    parser.add_argument("--binlog-format", type=str.upper, choices=("STATEMENT", "ROW"), default="STATEMENT",
                        help="STATEMENT: --sql is a Query event; ROW: --sql's row changes (INSERT, UPDATE, DELETE, "
                             "REPLACE, LOAD DATA) are the Table_maps of the tables it writes, each decided alone, "
                             "and DDL stays a Query")
    parser.add_argument("--current-db", default=None, help="the Query event's default database (none if omitted)")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--sql", help="the statement text of a Query event")
    target.add_argument("--table", metavar="DB.TBL", help="the table of a Table_map (rows) event")
    target.add_argument("--batch", metavar="FILE",
                        help="JSON lines in, one JSON decision per line out ('-': stdin); a line carries sql|table, "
                             "current_db, binlog_format, filters, change_replication_filter, defaults_file, channel, "
                             "filter_semantics, flavor, lower_case_table_names, track_derived_tables, schema; "
                             "what it leaves out comes from the command line")
    add_json_option(parser, "the decision (with --batch: the decisions, one a line)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.batch:
        return _run_batch(args)
    rules, settings = ruleset_from_args(args)
    engine = RuleEngine(rules, settings, schema=schema_from_args(args))
    decision, document = explained(engine, args.sql, args.table, args.current_db, args.binlog_format)
    if not emit_json(args, document):
        print(decision)
    return 0


def explained(engine: RuleEngine, sql: str | None, table: str | None, current_db: str | None,
              binlog_format: str = "STATEMENT") -> tuple[Decision, dict[str, Any]]:
    """The decision and its JSON document. Where the rules rewrite, the engine names the tables as
    the replica's applier does (rewritten): `tables` then says the master's, as a rule-less
    replica decides them, and `rewritten_tables` where the rows land (single and batch mode alike).
    A write under ROW that changes several tables: `rows` gives each table's decision."""
    decision, each = decide(engine, sql, table, current_db, binlog_format)
    document = decision.to_json()
    if len(each) > 1:
        document["rows"] = [{"table": name, **one.to_json()} for name, one in each]
    if renames(engine.rules, engine.settings):
        master = RuleEngine(RuleSet(), engine.settings, schema=engine.schema.copy())
        document.update(tables=list(decide(master, sql, table, current_db, binlog_format)[0].tables),
                        rewritten_tables=list(decision.tables))
    return decision, document


def decide(engine: RuleEngine, sql: str | None, table: str | None, current_db: str | None,
           binlog_format: str) -> tuple[Decision, list[tuple[str, Decision]]]:
    """The decision, and under ROW each table's that a write's rows change."""
    if table is not None:
        db, dot, name = table.partition(".")
        if not dot:
            raise RuleError(f"--table: {table!r} is not of the form db.table")
        return engine.decide_table(db, name), []
    assert sql is not None  # exactly one of sql and table: the callers check
    info = parse_statement(sql, current_db or "", None) if binlog_format == "ROW" else None
    if info is None or not info.parse_ok or info.kind not in WRITE_KINDS or not info.updated:
        return engine.decide_statement(sql, current_db), []  # (DDL stays a Query under ROW)
    # Under ROW the master logs the rows a write changes, behind a Table_map per table, and the
    # replica decides each Table_map alone: by the table's own database, never the default one.
    each = [(f"{db}.{name}", engine.decide_table(db, name)) for db, name in info.updated]
    if len(each) == 1:
        return each[0][1], each
    reason = "rows, each table alone: " + "; ".join(f"{t}: {d}" for t, d in each)
    return Decision(any(d.apply for _, d in each), reason, tables=tuple(t for _, d in each for t in d.tables),
                    counted=tuple(c for _, d in each for c in d.counted)), each


# ---------------------------------------------------------------------------------------------
# --batch: one JSON object a line carrying what single mode takes as options. A line without
# rules of its own ("filters", "change_replication_filter", "defaults_file") gets the command
# line's; each setting a line leaves out comes from the command line too.

_RULE_KEYS = ("filters", "change_replication_filter", "defaults_file")
_SETTING_KEYS: dict[str, type | tuple[type, ...]] = {
    "channel": str, "filter_semantics": str, "flavor": str, "lower_case_table_names": int,
    "track_derived_tables": bool, "schema": (str, type(None))}
_EVENT_KEYS: dict[str, type | tuple[type, ...]] = {"sql": str, "table": str, "current_db": (str, type(None)),
                                                   "binlog_format": str}
BATCH_KEYS = frozenset(_RULE_KEYS) | frozenset(_SETTING_KEYS) | frozenset(_EVENT_KEYS)


def _run_batch(args: argparse.Namespace) -> int:
    path = args.batch
    if path != "-":
        readable_file(path, "--batch")  # a regular file: a FIFO or /dev/zero would block or never end
    engines: dict[tuple[str, str], RuleEngine] = {}
    # Read as bytes, each line decoded on its own: a line that is not UTF-8 is told with its number.
    stream = sys.stdin.buffer if path == "-" else open(path, "rb")
    # The decisions are JSON lines on stdout (the batch's own output); --json FILE writes them there
    # instead and prints the human lines.
    with stream, json_sink(args) as sink:
        out = sink or sys.stdout
        for number, raw in enumerate(stream, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RuleError(f"--batch {path}:{number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                                f"column {exc.start + 1})") from None
            if line.strip():
                decision, document = _batch_decision(line, f"{path}:{number}", args, engines)
                out.write(json.dumps(document) + "\n")
                if out is not sys.stdout:
                    print(decision, flush=False)
    return 0


def _batch_decision(line: str, where: str, args: argparse.Namespace,
                    engines: dict[tuple[str, str], RuleEngine]) -> tuple[Decision, dict[str, Any]]:
    try:
        request = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RuleError(f"--batch {where}: not JSON: {exc.msg}") from None
    except RecursionError:  # `[[[[...` a hundred thousand deep
        raise RuleError(f"--batch {where}: not JSON this command reads: nested too deep") from None
    if not isinstance(request, dict):
        raise RuleError(f"--batch {where}: expected a JSON object")
    bad = next((key for key, value in request.items() if not _encodable(key) or not _encodable(value)), None)
    if bad is not None:  # JSON's "\ud800": a lone surrogate, which no UTF-8 statement or name holds
        raise RuleError(f"--batch {where}: key {bad!r}: not valid Unicode (a lone surrogate \\uD800-\\uDFFF)")
    unknown = sorted(set(request) - BATCH_KEYS)
    if unknown:
        raise RuleError(f"--batch {where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(BATCH_KEYS))})")
    for key, kind in {**_SETTING_KEYS, **_EVENT_KEYS}.items():
        if key in request and (not isinstance(request[key], kind) or (kind is int and isinstance(request[key], bool))):
            raise RuleError(f"--batch {where}: key {key!r}: {request[key]!r} has the wrong type")
    binlog_format = str(request.get("binlog_format", "STATEMENT")).upper()
    if binlog_format not in ("STATEMENT", "ROW"):
        raise RuleError(f"--batch {where}: key 'binlog_format': {request['binlog_format']!r} is not STATEMENT or ROW")
    if ("sql" in request) == ("table" in request):
        raise RuleError(f"--batch {where}: needs exactly one of 'sql' or 'table'")
    engine = _engine_for(request, where, args, engines)
    if "table" in request:
        try:
            return explained(engine, None, request["table"], None)
        except RuleError as exc:
            raise RuleError(f"--batch {where}: key 'table': {exc}") from None
    return explained(engine, request["sql"], None, request.get("current_db"), binlog_format)


def _encodable(value: object) -> bool:
    """Every string in `value` (a JSON value) is valid Unicode: UTF-8 can carry it."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_encodable(k) and _encodable(v) for k, v in value.items())
    return all(_encodable(item) for item in value) if isinstance(value, list) else True


def _engine_for(request: dict[str, Any], where: str, args: argparse.Namespace,
                engines: dict[tuple[str, str], RuleEngine]) -> RuleEngine:
    """One compiled engine per distinct (rules, channel, settings) in a batch."""
    settings = {key: request.get(key, getattr(args, key)) for key in _SETTING_KEYS}
    own = {key: request[key] for key in _RULE_KEYS if key in request}
    cache_key = (json.dumps(own, sort_keys=True), json.dumps(settings, sort_keys=True))
    engine = engines.get(cache_key)
    if engine is not None:
        return engine
    channel = settings["channel"]
    try:
        if own:
            startup = startup_from_options(own.get("defaults_file"), _filter_options(own.get("filters", {}), where))
            statements = _string_list(own.get("change_replication_filter", []), "change_replication_filter", where)
        else:
            startup = startup_from_options(args.defaults_file,
                                           [(option_name(t), v) for t in RULE_OPTION_TYPES for v in getattr(args, t)],
                                           args.defaults_extra_file)
            statements = args.change_replication_filter
        rules = channel_rules(startup, statements, channel,
                              lambda name: f'add "channel": "{name}" to the line (or --channel {name})')
        engine = RuleEngine(rules, Settings(flavor=settings["flavor"],
                                            lower_case_table_names=settings["lower_case_table_names"],
                                            semantics=settings["filter_semantics"],
                                            track_derived_tables=settings["track_derived_tables"]),
                            schema=schema_from_args(argparse.Namespace(schema=settings["schema"])))
    except RuleError as exc:
        if str(exc).startswith("--batch "):
            raise
        raise RuleError(f"--batch {where}: {exc}") from None
    engines[cache_key] = engine
    return engine


def _filter_options(filters: object, where: str) -> list[tuple[str, str]]:
    """`{"replicate_do_db": ["db1"]}` -> [("replicate-do-db", "db1")]; a string where a list is expected is an
    error (it would otherwise be taken character by character)."""
    if not isinstance(filters, dict):
        raise RuleError(f"--batch {where}: key 'filters': expected an object of option -> list of rules")
    options: list[tuple[str, str]] = []
    for name, values in filters.items():
        if name not in BATCH_FILTER_KEYS:
            raise RuleError(f"--batch {where}: unknown filter key {name!r} in 'filters' "
                            f"(known: {', '.join(sorted(BATCH_FILTER_KEYS))})")
        options += [(name, value) for value in _string_list(values, f"filters.{name}", where)]
    return options


def _string_list(values: object, key: str, where: str) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        got = "a string" if isinstance(values, str) else type(values).__name__
        raise RuleError(f"--batch {where}: key {key!r}: expected a list of strings, got {got}")
    return values
