"""`dumpfilter simulate`: a master and every slave of a topology over real gRPC on loopback, the
bytes master-side filtering saves each slave, and the differential check that a slave still
receives what slave-side filtering of the full stream would have kept.

Layers: `source` (where the binlog comes from: a directory, files, the generator or a real
MariaDB), `streams` (the master and the slave threads over gRPC), `equivalence` (the differential
property), `report` (table, JSON, CSV, chart), `orchestration` (what the command calls). Only
`streams` and `source` touch gRPC, servers or the file system beyond the output directory.
"""

from dumpfilter.lab.simulate.orchestration import SimulationResult, default_topology_text, load_default_topology, run_simulation

__all__ = ["SimulationResult", "default_topology_text", "load_default_topology", "run_simulation"]
