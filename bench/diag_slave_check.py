"""Diagnostic (in process, session 53): the slave's own check of what a faithful master sends
(`MasterTrust.unit`) over every complete unit of the first MB of a binlog, for a keep-all slave
(replicate-ignore-db of a database the binlog lacks): what callgrind counts with `check` less
what it counts without (the read and the grouping alone).

    valgrind --tool=callgrind python -m bench.diag_slave_check BINLOG MB [check]"""

from __future__ import annotations

import sys

from dumpfilter.codec import group_transactions
from dumpfilter.codec.reader import EventSplitter
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import Settings
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.slave.trust import MasterTrust


class _Counters:
    master_schema_kept = 0
    check_disagreements = 0


def main(path: str, mb: str, check: str = "") -> None:
    with open(path, "rb") as f:
        data = f.read(int(mb) << 20)
    splitter = EventSplitter(path)
    splitter.feed(data)
    units = [u for u in group_transactions(splitter.events()) if u.kind != "control" and u.complete]
    rules = StartupFilters.from_options([("replicate-ignore-db", "zzz")]).for_channel("")
    trust = MasterTrust(RuleEngine(rules, Settings(flavor="mariadb")), "error", _Counters(), print, print)  # type: ignore[arg-type]
    if check == "check":
        for unit in units:
            trust.unit(unit)
    print(len(units), "units")


if __name__ == "__main__":
    main(*sys.argv[1:])
