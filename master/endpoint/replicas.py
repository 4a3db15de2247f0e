"""Which rules apply to a real replica. A MySQL or MariaDB replica cannot send its filters over the
replication protocol, so the master reads them from a topology file (`--replicas FILE`, the TOML
`simulate` and `experiment` read): each [[slaves]] entry's server_id (or, failing that, its `user`)
names a replica, and its rules, skip policy and flavor become that replica's Registration. A
replica named nowhere registers with no rules (it receives what the master policy lets through)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.topology import SlaveSpec, load_topology
from dumpfilter.master.model import ChannelSpec, Registration


@dataclass(frozen=True)
class ReplicaMap:
    by_server_id: dict[int, SlaveSpec]
    by_user: dict[str, SlaveSpec]
    path: str = ""

    @classmethod
    def load(cls, path: str | Path | None) -> ReplicaMap:
        if path is None:
            return cls({}, {})
        topology = load_topology(path, by_user=True)  # an entry may name its replica by `user` alone
        # A user maps a replica only when one entry names it: otherwise the server_id must decide.
        users = Counter(spec.user for spec in topology.slaves if spec.user)
        return cls({s.server_id: s for s in topology.slaves if s.server_id},
                   {s.user: s for s in topology.slaves if s.user and users[s.user] == 1}, str(path))

    def registration(self, server_id: int, user: str, hostname: str) -> Registration:
        spec = self.by_server_id.get(server_id) or self.by_user.get(user)
        if spec is None:
            return Registration(server_id, hostname, ("",), (), user=user)
        return Registration(server_id, hostname or spec.name, ("",), (ChannelSpec(None, rules=spec.rules),),
                            spec.settings, spec.skip_policy, user=user)
