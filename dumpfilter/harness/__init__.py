"""dumpfilter's public Python API for integration harnesses (issue #44): the names in `__all__`
are the promise, documented in docs/api.md and kept stable; every module of this package whose
name starts with `_` is private, and so is everything else in `dumpfilter`.

    from dumpfilter.harness import Master, Rules, Slave, generate_binlog, lint

    generate_binlog(binlog_dir, transactions=300)
    with Master(binlog_dir) as master, Slave(master, ["replicate-do-db=db1"]) as slave:
        slave.catch_up()
        slave.received.bytes, slave.position, list(slave.relay_log.transactions())
    assert lint(binlog_dir, ["replicate-do-db=db1"]).ok

What it owns: `Master` (a dump master over a binlog directory, gRPC and optionally the MySQL
protocol), `Slave` (a dumpfilter slave from rule strings, my.cnf or CHANGE text), `Replica` (a real
MariaDB replica behind the master's MySQL endpoint), `simulate`, `lint`, `explain`,
`explain_binlog`, `generate_binlog`, and the typed values they return. The pytest fixtures over
them are in `dumpfilter.pytest_plugin`. Internals of the master and slave edges are reached
through `dumpfilter.harness._wiring` only.
"""

from dumpfilter.errors import DumpFilterError
from dumpfilter.harness._master import Master
from dumpfilter.harness._offline import explain, explain_binlog, generate_binlog, lint
from dumpfilter.harness._replica import Replica, ReplicaError
from dumpfilter.harness._rules import Rules
from dumpfilter.harness._simulate import simulate
from dumpfilter.harness._slave import RelayLog, Slave
from dumpfilter.harness._types import (
    Decision,
    EventDecision,
    LintBreak,
    LintResult,
    Position,
    Received,
    SimulatedSlave,
    Simulation,
    TransactionExplanation,
)
from dumpfilter.skip_policy import NAMES as _SKIP_POLICY_NAMES

SKIP_POLICIES: tuple[str, ...] = tuple(_SKIP_POLICY_NAMES)
"""The skip policies a `Slave` may ask for (what the master sends for a skipped stretch)."""

__all__ = [
    "SKIP_POLICIES",
    "Decision",
    "DumpFilterError",
    "EventDecision",
    "LintBreak",
    "LintResult",
    "Master",
    "Position",
    "Received",
    "RelayLog",
    "Replica",
    "ReplicaError",
    "Rules",
    "SimulatedSlave",
    "Simulation",
    "Slave",
    "TransactionExplanation",
    "explain",
    "explain_binlog",
    "generate_binlog",
    "lint",
    "simulate",
]
