"""The rule options shared by `explain`, `filter`, `slave` and `simulate`: argparse group and RuleSet building."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from dumpfilter.rules.assembly import RULE_OPTION_TYPES, channel_rules, startup_from_options
from dumpfilter.rules.ruleset import REPLICATE_TYPES, RuleSet, Settings, option_name

if TYPE_CHECKING:  # imported when --schema is read: it pulls in the SQL parser
    from dumpfilter.rules.schema import SchemaModel


def add_rule_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("filter rules (mysqld options; repeat an option for several rules)")
    for rule_type in RULE_OPTION_TYPES:
        name = option_name(rule_type)
        metavar = "FROM->TO" if rule_type == "rewrite_db" else "DB.TBL" if "table" in rule_type else "DB"
        group.add_argument(f"--{name}", dest=rule_type, action="append", default=[], metavar=metavar,
                           help=f"a {name} rule; '[channel]:rule' sets it for one channel (WL#7361)"
                           if rule_type in REPLICATE_TYPES else f"the master's {name} binlog write filter")
    group.add_argument("--defaults-file", metavar="FILE",
                       help="read replicate-*/binlog-*-db from the [mysqld] and [mariadbd] groups of a my.cnf; "
                            "an unknown replicate-* option there is an error, as mysqld refuses it")
    group.add_argument("--defaults-extra-file", metavar="FILE",
                       help="a my.cnf read after --defaults-file, as mysqld reads it after its main option files")
    group.add_argument("--change-replication-filter", metavar="SQL", action="append", default=[],
                       help="apply a CHANGE REPLICATION FILTER (or WL#2516 CHANGE MASTER ... TO DO=...) statement")
    group.add_argument("--channel", default="", help="the replication channel whose rules apply (default '')")
    group.add_argument("--filter-semantics", choices=("mysql", "effective"), default="mysql",
                       help="mysql: rpl_filter.cc; effective: WL#2516 DO/IGNORE on the effective db.table")
    group.add_argument("--lower-case-table-names", type=int, choices=(0, 1, 2), default=0)
    group.add_argument("--flavor", choices=("mysql", "mariadb"), default="mysql",
                       help="the replica's server: case rules and DATABASE statements differ")
    group.add_argument("--track-derived-tables", action="store_true",
                       help="WL#40: tables created LIKE/SELECT or renamed from an ignored table are ignored too")


def add_schema_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", metavar="FILE|mysql://USER@HOST:PORT",
                        help="the master's schema before the binlog: a mysqldump/mariadb-dump --no-data file "
                             "(triggers included) or a server to read information_schema from; the binlog's "
                             "DDL updates it. Multi-table UPDATE decisions use its columns and triggers")


def schema_from_args(args: argparse.Namespace) -> SchemaModel:
    """The starting schema model of --schema (an empty model without it: the binlog's DDL fills it)."""
    from dumpfilter.rules.schema import SchemaModel, load_schema

    source = getattr(args, "schema", None)
    return load_schema(source) if source else SchemaModel()


def ruleset_from_args(args: argparse.Namespace) -> tuple[RuleSet, Settings]:
    """Options file first, then command-line options (both accumulate), then CHANGE statements in order;
    the result is the rule set of `--channel` (its own rules, global ones for types it has none of)."""
    startup = startup_from_options(getattr(args, "defaults_file", None),
                                   [(option_name(rule_type), value) for rule_type in RULE_OPTION_TYPES
                                    for value in getattr(args, rule_type, [])],
                                   getattr(args, "defaults_extra_file", None))
    rules = channel_rules(startup, args.change_replication_filter, args.channel, lambda name: f"add --channel {name}")
    settings = Settings(flavor=args.flavor, lower_case_table_names=args.lower_case_table_names,
                        semantics=args.filter_semantics, track_derived_tables=args.track_derived_tables)
    return rules, settings
