"""Rule assembly: startup options (an options file, then command-line or topology options), then CHANGE
REPLICATION FILTER / CHANGE MASTER statements in order -> each channel's RuleSet, as a replica builds
its filters at startup and then changes them. The CLI options (rules.options), the topology file and
the master's Register all go through here."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from dumpfilter.errors import RuleError
from dumpfilter.rules.mycnf import startup_filters_from_file
from dumpfilter.rules.parse import FilterChange, StartupFilters, apply_changes, parse_filter_statement
from dumpfilter.rules.ruleset import ALL_TYPES, BINLOG_TYPES, REPLICATE_TYPES, RuleSet, RuleValues

if TYPE_CHECKING:  # imported where a registry is built: the CLI's rule options need no engine
    from dumpfilter.rules.channels import FilterRegistry

RULE_OPTION_TYPES = REPLICATE_TYPES + BINLOG_TYPES
# Types WL#2516 / binlog-* rules use that FilterRegistry (replicate-* only, per channel) does not hold.
EXTRA_TYPES = tuple(t for t in ALL_TYPES if t not in REPLICATE_TYPES)


def startup_from_options(defaults_file: str | None, options: Iterable[tuple[str, str]],
                         extra_file: str | None = None) -> StartupFilters:
    """The startup rules of an options file and an extra one (if any) followed by (option, value) pairs;
    repeats accumulate."""
    startup = startup_filters_from_file(defaults_file, extra_file=extra_file) if defaults_file or extra_file \
        else StartupFilters()
    return merge_startup(startup, StartupFilters.from_options(options))


def merge_startup(first: StartupFilters, second: StartupFilters) -> StartupFilters:
    """Repeated options accumulate, whether they come from the file or the command line."""
    global_rules = first.global_rules.replace(**{
        rule_type: getattr(first.global_rules, rule_type) + getattr(second.global_rules, rule_type)
        for rule_type in RULE_OPTION_TYPES})
    channels = {name: dict(types) for name, types in first.channel_rules.items()}
    for name, types in second.channel_rules.items():
        for rule_type, rules in types.items():
            merged = channels.setdefault(name, {})
            merged[rule_type] = merged.get(rule_type, ()) + rules
    return StartupFilters(global_rules, channels)


def channel_rules(startup: StartupFilters, statements: Iterable[str | FilterChange], channel: str,
                  hint: Callable[[str], str]) -> RuleSet:
    """The rule set of `channel`: its startup rules (its own, global ones for types it has none of),
    then the CHANGE statements in order; `hint(name)` says how to select a channel a statement names."""
    return apply_changes(startup.for_channel(channel), statements, channel, hint)


def registry_from_requests(requests: Iterable[tuple[str | None, RuleSet | None, str | None]],
                           channels: tuple[str, ...]) -> tuple[FilterRegistry, dict[str, RuleValues]]:
    """A slave's channels and rules from what it asked for: (channel or None for global, structured
    rules, CHANGE statement text) per request, startup rules first, then the statements in order, as
    a replica applies --replicate-* options and then CHANGE REPLICATION FILTER. Returns the registry
    and the rule types FilterRegistry has no place for (WL#2516 effective_*, binlog_*: global).
    Warnings (filters for a channel that does not exist) are in `registry.warnings`."""
    from dumpfilter.rules.channels import FilterRegistry

    channels = tuple(channels) or ("",)
    startup_global: dict[str, RuleValues] = {}
    startup_channels: dict[str, dict[str, RuleValues]] = {}
    extra: dict[str, RuleValues] = {}
    texts: list[FilterChange] = []
    warnings: list[str] = []
    for channel, given, text in requests:
        if text is not None:
            change = parse_filter_statement(text)
            if channel is not None and change.channel is None:
                change = FilterChange(change.changes, channel)
            elif channel is not None and change.channel != channel:
                raise RuleError(f"FOR CHANNEL '{change.channel}' in filters given for channel '{channel}'")
            texts.append(change)
            continue
        rules = given or RuleSet()
        for rule_type in ALL_TYPES:
            values = getattr(rules, rule_type)
            if not values:
                continue
            if rule_type in EXTRA_TYPES:
                extra[rule_type] = extra.get(rule_type, ()) + values
            elif channel is None:
                startup_global[rule_type] = startup_global.get(rule_type, ()) + values
            else:
                per = startup_channels.setdefault(channel, {})
                per[rule_type] = per.get(rule_type, ()) + values
    startup = StartupFilters(RuleSet(**startup_global), startup_channels)
    registry = FilterRegistry.from_startup(startup, channels)
    for change in texts:
        extra.update((t, r) for t, r in change.changes if t in EXTRA_TYPES)
        change = FilterChange(tuple((t, r) for t, r in change.changes if t not in EXTRA_TYPES), change.channel)
        if change.channel is not None and change.channel not in registry.channels:
            warnings.append(f"filters for channel '{change.channel}' which does not exist were discarded")
            continue
        registry.change_replication_filter(change)
    registry.warnings.extend(warnings)
    return registry, extra
