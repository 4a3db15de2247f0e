"""`simulate`: a topology run as `dumpfilter simulate` runs it (lab.simulate.run_simulation: a
master on loopback, every slave over gRPC, the report), with its rows as `Simulation` values."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from dumpfilter.harness._types import SimulatedSlave, Simulation
from dumpfilter.lab.simulate.orchestration import run_simulation
from dumpfilter.topology import Topology, load_topology, parse_topology


def _topology(topology: str | os.PathLike[str] | None) -> Topology | None:
    if topology is None:
        return None
    if isinstance(topology, os.PathLike):
        return load_topology(topology)
    if "\n" in topology or topology.lstrip().startswith("["):
        return parse_topology(topology)
    return load_topology(topology)


# SimulatedSlave's fields that report.json's slave rows hold under the same names
_COPIED = ("server_id", "skip_policy", "events_all", "bytes_all", "events_sent", "bytes_sent", "saved_bytes",
           "transactions_kept", "transactions_partial", "transactions_skipped", "empty_transactions", "verified")


def simulate(topology: str | os.PathLike[str] | None = None, *, out: str | os.PathLike[str] | None = None,
             verify: bool = False, listen: str = "127.0.0.1:0",
             keep_work: str | os.PathLike[str] | None = None) -> Simulation:
    """Run a topology: TOML text (a string holding a newline or starting with a table), a file (a
    Path, or any other string), or None for the built-in one. `out`: write report.json, .csv, the
    charts and report.html there. `verify`: check every slave against slave-side filtering of the
    full stream (`Simulation.ok`). `listen`: the master's gRPC address (port 0: a free port).
    `keep_work`: keep the binlog and relay logs in that directory. Prints nothing."""
    result = run_simulation(_topology(topology), Path(out) if out is not None else None, verify=verify,
                            console=Console(quiet=True), progress=False,
                            keep_work=Path(keep_work) if keep_work is not None else None, listen=listen)
    rows = [SimulatedSlave(row["slave"], **{key: row[key] for key in _COPIED},
                           lint_breaks=int((row.get("lint") or {}).get("breaks", 0)),  # lint_process's {"breaks": n}
                           bytes_per_skip_policy=dict(row["policies"])) for row in result.report["slaves"]]
    return Simulation(tuple(rows), result.ok, tuple(result.paths), result.report)
