"""`dumpfilter verify`: master-side filtering checked against real MariaDB replicas.

`against_replicas.Verification` starts the servers and compares each pair; `report` renders the verdicts;
`data/` holds the built-in sharp-edge workload and topology.
"""

from importlib.resources.abc import Traversable

from dumpfilter.lab.verify.against_replicas import (
    DIFFERENT,
    FORMATS,
    IDENTICAL,
    NO_REFERENCE,
    Verification,
    no_reference_reason,
    verify,
)

__all__ = ["DIFFERENT", "FORMATS", "IDENTICAL", "NO_REFERENCE", "Verification", "builtin_paths", "no_reference_reason",
           "verify"]


def builtin_paths() -> tuple[Traversable, Traversable, Traversable]:
    """(topology, workload, seed) paths of the built-in sharp-edge verification."""
    from importlib.resources import files

    data = files("dumpfilter.lab.verify") / "data"
    return data / "builtin_topology.toml", data / "sharp_edges.sql", data / "builtin_seed.sql"
