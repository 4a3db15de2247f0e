"""Global and per-channel filters as WL#7361 defines them, with P_S replication_applier_filters rows and counters."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from dumpfilter.errors import RuleError
from dumpfilter.rules.parse import FilterChange, StartupFilters, parse_filter_statement
from dumpfilter.rules.ruleset import REPLICATE_TYPES, RuleSet, RuleValues, filter_name

GROUP_REPLICATION_CHANNELS = ("group_replication_applier", "group_replication_recovery")


class ConfiguredBy(StrEnum):
    STARTUP_OPTIONS = "STARTUP_OPTIONS"
    STARTUP_OPTIONS_FOR_CHANNEL = "STARTUP_OPTIONS_FOR_CHANNEL"
    CHANGE_REPLICATION_FILTER = "CHANGE_REPLICATION_FILTER"
    CHANGE_REPLICATION_FILTER_FOR_CHANNEL = "CHANGE_REPLICATION_FILTER_FOR_CHANNEL"


@dataclass
class FilterEntry:
    """One configured filter type: its rules, who configured it, since when, and its hit counter."""

    rules: RuleValues
    configured_by: ConfiguredBy
    active_since: dt.datetime
    counter: int = 0

    def copy(self, active_since: dt.datetime) -> FilterEntry:
        # A channel copying a global filter keeps CONFIGURED_BY; ACTIVE_SINCE is the channel creation time.
        return FilterEntry(self.rules, self.configured_by, active_since)


@dataclass
class ChannelFilters:
    name: str
    entries: dict[str, FilterEntry] = field(default_factory=dict)

    @property
    def rules(self) -> RuleSet:
        return RuleSet(**{rule_type: entry.rules for rule_type, entry in self.entries.items()})


class FilterRegistry:
    """The replica's global filters and its channels' filters (CHANGE REPLICATION FILTER)."""

    def __init__(self, clock: Callable[[], dt.datetime] | None = None) -> None:
        self.clock = clock or (lambda: dt.datetime.now(dt.UTC))
        self.global_entries: dict[str, FilterEntry] = {}
        self.channels: dict[str, ChannelFilters] = {}
        self.warnings: list[str] = []

    @classmethod
    def from_startup(cls, startup: StartupFilters, channels: Iterable[str],
                     clock: Callable[[], dt.datetime] | None = None) -> FilterRegistry:
        """Server start: global rules, then every existing channel; rules for unknown channels are discarded."""
        registry = cls(clock)
        now = registry.clock()
        for rule_type in REPLICATE_TYPES:
            rules = getattr(startup.global_rules, rule_type)
            if rules:
                registry.global_entries[rule_type] = FilterEntry(rules, ConfiguredBy.STARTUP_OPTIONS, now)
        existing = list(channels)
        for name in existing:
            registry.create_channel(name, startup_rules=startup.channel_rules.get(name, {}))
        for name in startup.channel_rules:
            if name in GROUP_REPLICATION_CHANNELS:
                registry.warnings.append(
                    f"There are per-channel replication filter(s) configured for group replication channel "
                    f"'{name}' which is disallowed. The filter(s) have been discarded.")
            elif name not in existing:
                registry.warnings.append(
                    f"There are per-channel replication filter(s) configured for channel '{name}' which does "
                    f"not exist. The filter(s) have been discarded.")
        return registry

    def create_channel(self, name: str, startup_rules: dict[str, RuleValues] | None = None) -> ChannelFilters:
        """CHANGE REPLICATION SOURCE ... FOR CHANNEL: each type with no channel rule copies the global one."""
        now = self.clock()
        channel = ChannelFilters(name)
        for rule_type, rules in (startup_rules or {}).items():
            if rule_type in REPLICATE_TYPES:
                channel.entries[rule_type] = FilterEntry(rules, ConfiguredBy.STARTUP_OPTIONS_FOR_CHANNEL, now)
        if name not in GROUP_REPLICATION_CHANNELS:
            for rule_type, entry in self.global_entries.items():
                channel.entries.setdefault(rule_type, entry.copy(now))
        self.channels[name] = channel
        return channel

    def change_replication_filter(self, statement: str | FilterChange) -> None:
        """Without FOR CHANNEL: every channel and the global filters; with it: that channel only."""
        change = parse_filter_statement(statement) if isinstance(statement, str) else statement
        now = self.clock()
        if change.channel is not None:
            channel = self._channel(change.channel)
            if change.channel in GROUP_REPLICATION_CHANNELS:
                raise RuleError(f"FOR CHANNEL '{change.channel}': filters are not allowed on group replication "
                                f"channels (ER_SLAVE_CHANNEL_OPERATION_NOT_ALLOWED)")
            for rule_type, rules in change.changes:
                channel.entries[rule_type] = FilterEntry(rules, ConfiguredBy.CHANGE_REPLICATION_FILTER_FOR_CHANNEL, now)
            return
        for rule_type, rules in change.changes:
            self.global_entries[rule_type] = FilterEntry(rules, ConfiguredBy.CHANGE_REPLICATION_FILTER, now)
            for channel in self.channels.values():
                if channel.name not in GROUP_REPLICATION_CHANNELS:
                    channel.entries[rule_type] = FilterEntry(rules, ConfiguredBy.CHANGE_REPLICATION_FILTER, now)

    def _channel(self, name: str) -> ChannelFilters:
        if name not in self.channels:
            raise RuleError(f"FOR CHANNEL '{name}': no such replication channel (ER_SLAVE_CONFIGURATION)")
        return self.channels[name]

    def rules_for(self, channel: str) -> RuleSet:
        return self._channel(channel).rules

    def applier_filters(self) -> list[dict[str, object]]:
        """Rows of performance_schema.replication_applier_filters (only configured types have a row)."""
        return [{"CHANNEL_NAME": channel.name, **_row(rule_type, entry), "COUNTER": entry.counter}
                for channel in self.channels.values() for rule_type, entry in _in_type_order(channel.entries)]

    def applier_global_filters(self) -> list[dict[str, object]]:
        """Rows of performance_schema.replication_applier_global_filters."""
        return [_row(rule_type, entry) for rule_type, entry in _in_type_order(self.global_entries)]


def _in_type_order(entries: dict[str, FilterEntry]) -> list[tuple[str, FilterEntry]]:
    return [(rule_type, entries[rule_type]) for rule_type in REPLICATE_TYPES if rule_type in entries]


def _row(rule_type: str, entry: FilterEntry) -> dict[str, object]:
    return {"FILTER_NAME": filter_name(rule_type), "FILTER_RULE": format_rule(rule_type, entry.rules),
            "CONFIGURED_BY": str(entry.configured_by), "ACTIVE_SINCE": entry.active_since}


def format_rule(rule_type: str, rules: RuleValues) -> str:
    """FILTER_RULE as SHOW REPLICA STATUS prints it: comma-joined, do/ignore-table sorted, rewrite `(a,b)`."""
    if rule_type == "rewrite_db":
        return ",".join(f"({old},{new})" for old, new in rules)
    if rule_type in ("do_table", "ignore_table"):
        return ",".join(sorted(rules))
    return ",".join(rules)
