"""`Rules`: one replica's filter rules for the harness, from the three ways a DBA writes them
(mysqld options such as "replicate-do-db=db1", my.cnf text, CHANGE REPLICATION FILTER / WL#2516
CHANGE MASTER text), assembled as a replica does at startup (rules.assembly) and checked by the
rule engine at once, so a typo fails where the rules are written, not in a stream."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dumpfilter.rules.assembly import channel_rules, merge_startup
from dumpfilter.rules.mycnf import startup_filters_from_file
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.topology import SlaveSpec

@dataclass(frozen=True)
class Rules:
    """A replica's filter rules and the settings they are decided with.

    `options` are mysqld options ("replicate-do-db=db1", with or without the leading dashes,
    dashes or underscores, WL#7361's "channel:rule" form); `mycnf` is the text of an option file
    whose [mysqld]/[mariadbd] groups are read first; `change` holds CHANGE REPLICATION FILTER (or
    WL#2516 `CHANGE MASTER 'name' TO DO=...`) statements applied after, in order. `channel` is the
    WL#7361 channel whose rules apply, `semantics` "mysql" or "effective" (WL#2516), `flavor`
    "mysql" or "mariadb" (the replica's name comparisons; None: "mysql" for a slave, the binlog's
    server for `lint` and `explain_binlog`). No rules at all keeps everything."""

    options: tuple[str, ...] = ()
    mycnf: str | None = None
    change: tuple[str, ...] = ()
    channel: str = ""
    semantics: str = "mysql"
    flavor: str | None = None
    lower_case_table_names: int = 0
    _ruleset: RuleSet = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        options = (self.options,) if isinstance(self.options, str) else tuple(self.options)
        change = (self.change,) if isinstance(self.change, str) else tuple(self.change)
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "change", change)
        startup = _mycnf_startup(self.mycnf) if self.mycnf is not None else StartupFilters()
        startup = merge_startup(startup, StartupFilters.from_texts(options))
        hint = lambda name: f"pass channel={name!r} to Rules"  # noqa: E731
        ruleset = channel_rules(startup, list(change), self.channel, hint)
        from dumpfilter.rules.evaluate import RuleEngine

        RuleEngine(ruleset, self.settings_for())  # rejects WL#2516 rules without effective semantics, here
        object.__setattr__(self, "_ruleset", ruleset)

    @classmethod
    def from_options(cls, *options: str, **settings: Any) -> Rules:
        """Rules from mysqld options: `Rules.from_options("replicate-do-db=db1")`."""
        return cls(options=options, **settings)

    @classmethod
    def from_mycnf(cls, text: str, **settings: Any) -> Rules:
        """Rules from the text of a my.cnf ([mysqld] / [mariadbd] groups; other options ignored)."""
        return cls(mycnf=text, **settings)

    @classmethod
    def from_change(cls, *statements: str, **settings: Any) -> Rules:
        """Rules from CHANGE REPLICATION FILTER (or WL#2516 CHANGE MASTER ... TO DO=...) text."""
        return cls(change=statements, **settings)

    @property
    def lines(self) -> list[str]:
        """The assembled rules, one mysqld option a line (WL#2516 patterns as DO=/IGNORE=/REWRITE=)."""
        return self._ruleset.lines()

    def settings_for(self, flavor: str | None = None) -> Settings:
        """The rule engine's settings (`flavor` when these rules name none)."""
        return Settings(flavor=self.flavor or flavor or "mysql", lower_case_table_names=self.lower_case_table_names,
                        semantics=self.semantics)

    def _spec(self, name: str, server_id: int, skip_policy: str, user: str = "", password: str = "") -> SlaveSpec:
        return SlaveSpec(name, server_id, self._ruleset, self.settings_for(), skip_policy, self.channel,
                         tuple(self.options) + tuple(self.change), user, password)


def as_rules(rules: Rules | Sequence[str] | str | None) -> Rules:
    """`rules` as Rules: a Rules as it is, option strings (one or a sequence), or None for no rules."""
    if rules is None:
        return Rules()
    if isinstance(rules, Rules):
        return rules
    if isinstance(rules, str):
        return Rules(options=(rules,))
    return Rules(options=tuple(rules))


def _mycnf_startup(text: str) -> StartupFilters:
    """The filter rules of my.cnf text (read through the option-file reader, `!include` and all,
    relative to the current directory)."""
    handle, name = tempfile.mkstemp(prefix="dumpfilter-", suffix=".cnf")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        return startup_filters_from_file(Path(name))
    finally:
        os.unlink(name)
