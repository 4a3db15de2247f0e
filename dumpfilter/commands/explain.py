"""`dumpfilter explain`: what a replica with these rules does with one statement or table, and why."""

from __future__ import annotations

import argparse
import json
import sys

from binlog_codec.errors import RuleError
from dumpfilter.rule_options import add_rule_options, ruleset_from_args
from filter_rules.evaluate import Decision, RuleEngine
from filter_rules.parse import StartupFilters
from filter_rules.ruleset import RuleSet, Settings

BATCH_FILTER_KEYS = frozenset({"replicate_do_db", "replicate_ignore_db", "replicate_do_table",
                               "replicate_ignore_table", "replicate_wild_do_table", "replicate_wild_ignore_table",
                               "replicate_rewrite_db", "binlog_do_db", "binlog_ignore_db"})


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "explain", help="decide one statement or table against filter rules and say which rule decided",
        description="Prints apply or skip and the rule and step that decided, e.g. "
                    "`skip: replicate-do-db: default database 'a' is not in the do list`.")
    add_rule_options(parser)
    parser.add_argument("--binlog-format", type=str.upper, choices=("STATEMENT", "ROW"), default="STATEMENT",
                        help="STATEMENT: --sql is a Query event; ROW: --table is a Table_map (DDL stays a Query)")
    parser.add_argument("--current-db", default=None, help="the Query event's default database (none if omitted)")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--sql", help="the statement text of a Query event")
    target.add_argument("--table", metavar="DB.TBL", help="the table of a Table_map (rows) event")
    target.add_argument("--batch", metavar="FILE", help="JSON lines in, one JSON decision per line out ('-': stdin)")
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.batch:
        return _run_batch(args.batch)
    rules, settings = ruleset_from_args(args)
    decision = decide(RuleEngine(rules, settings), args.sql, args.table, args.current_db)
    print(json.dumps(decision.to_json()) if args.json else str(decision))
    return 0


def decide(engine: RuleEngine, sql: str | None, table: str | None, current_db: str | None) -> Decision:
    if table is not None:
        db, dot, name = table.partition(".")
        if not dot:
            raise RuleError(f"--table: {table!r} is not of the form db.table")
        return engine.decide_table(db, name)
    return engine.decide_statement(sql, current_db)


def _run_batch(path: str) -> int:
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    with stream:
        for number, line in enumerate(stream, 1):
            if line.strip():
                print(json.dumps(_batch_decision(line, f"{path}:{number}").to_json()), flush=False)
    return 0


def _batch_decision(line: str, where: str) -> Decision:
    try:
        request = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RuleError(f"--batch {where}: not JSON: {exc.msg}") from None
    engines_key = json.dumps(request.get("filters") or {}, sort_keys=True), request.get("flavor", "mysql"), \
        int(request.get("lower_case_table_names", 0)), request.get("filter_semantics", "mysql")
    engine = _engine_for(engines_key, where)
    if "table" in request:
        return decide(engine, None, request["table"], None)
    if "sql" not in request:
        raise RuleError(f"--batch {where}: needs 'sql' or 'table'")
    return decide(engine, request["sql"], None, request.get("current_db"))


_ENGINES: dict[tuple, RuleEngine] = {}


def _engine_for(key: tuple, where: str) -> RuleEngine:
    """One compiled engine per distinct (filters, flavor, lctn, semantics) in a batch."""
    if key not in _ENGINES:
        filters_json, flavor, lctn, semantics = key
        filters = json.loads(filters_json)
        unknown = set(filters) - BATCH_FILTER_KEYS
        if unknown:
            raise RuleError(f"--batch {where}: unknown filter key(s) {', '.join(sorted(unknown))}")
        options = [(name, value) for name, values in filters.items() for value in values]
        rules: RuleSet = StartupFilters.from_options(options).for_channel("")
        _ENGINES[key] = RuleEngine(rules, Settings(flavor=flavor, lower_case_table_names=lctn, semantics=semantics))
    return _ENGINES[key]
