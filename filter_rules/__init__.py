"""The pure replication filter rule engine: rule sets, parsers, per-channel filters and rpl_filter.cc decisions."""

from filter_rules.evaluate import Decision, RuleEngine
from filter_rules.parse import FilterChange, StartupFilters, parse_change_replication_filter, parse_filter_statement
from filter_rules.ruleset import RuleSet, Settings
from filter_rules.statements import Kind, StatementInfo, statement_tables

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
