"""The pure replication filter rule engine: rule sets, parsers, per-channel filters and rpl_filter.cc decisions."""

from dumpfilter.rules.evaluate import Decision, RuleEngine
from dumpfilter.rules.parse import FilterChange, StartupFilters, parse_change_replication_filter, parse_filter_statement
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.statements import Kind, StatementInfo, statement_tables

__all__ = [
    "Decision",
    "FilterChange",
    "Kind",
    "RuleEngine",
    "RuleSet",
    "Settings",
    "StartupFilters",
    "StatementInfo",
    "parse_change_replication_filter",
    "parse_filter_statement",
    "statement_tables",
]
