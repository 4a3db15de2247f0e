"""The pure replication filter rule engine: rule sets, parsers, per-channel filters and rpl_filter.cc decisions.

The names below are imported from their modules on first use (PEP 562): importing one module of
the package (the rule options of a command's parser, say) does not import the engine."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each exported name and the module of this package that defines it.
_EXPORTS = {
    "Decision": "decisions",
    "FilterChange": "parse",
    "Kind": "statement_info",
    "RuleEngine": "evaluate",
    "RuleSet": "ruleset",
    "Settings": "ruleset",
    "StartupFilters": "parse",
    "StatementInfo": "statement_info",
    "parse_change_replication_filter": "parse",
    "parse_filter_statement": "parse",
    "statement_tables": "statements",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # the exports, for the checker (`X as X`: re-exported; at run time __getattr__ imports them)
    from dumpfilter.rules.decisions import Decision as Decision
    from dumpfilter.rules.evaluate import RuleEngine as RuleEngine
    from dumpfilter.rules.parse import FilterChange as FilterChange
    from dumpfilter.rules.parse import StartupFilters as StartupFilters
    from dumpfilter.rules.parse import parse_change_replication_filter as parse_change_replication_filter
    from dumpfilter.rules.parse import parse_filter_statement as parse_filter_statement
    from dumpfilter.rules.ruleset import RuleSet as RuleSet
    from dumpfilter.rules.ruleset import Settings as Settings
    from dumpfilter.rules.statement_info import Kind as Kind
    from dumpfilter.rules.statement_info import StatementInfo as StatementInfo
    from dumpfilter.rules.statements import statement_tables as statement_tables


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
