"""Diagnostic (in process, session 49): `simulate --verify`'s check alone (`verify_slaves`) over the
work directory a `dumpfilter simulate --verify --keep-work WORK` run kept, its CPU seconds (best of
N) and, per slave, the units whose relay forms the core made and those it left to the rules' kept
events or the skip policy's `relayed`.

    python -m bench.diag_verify_cpu TOPOLOGY WORK/relay [N] [SLAVE,...]"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from dumpfilter.lab.simulate.equivalence import verify_slaves
from dumpfilter.lab.simulate.orchestration import plan_streams
from dumpfilter.topology import parse_topology


def main(topology: str, relay: str, repeat: str = "1", only: str | None = None) -> None:
    topo = parse_topology(Path(topology).read_text())
    plans = plan_streams(topo, Path(relay), everything=True)
    names = only.split(",") if only else [spec.name for spec in topo.slaves]
    checks = [(spec, {p.skip_policy: p.relay_dir for p in plans if p.spec is spec}, None, None)
              for spec in topo.slaves if spec.name in names]
    best = float("inf")
    for _ in range(int(repeat)):
        t = time.process_time()
        found = verify_slaves(plans[0].relay_dir, checks)
        best = min(best, time.process_time() - t)
    print(f"cpu {best:.3f} s", [(v.slave, v.ok, v.by_core, v.by_python) for v in found])


if __name__ == "__main__":
    main(*sys.argv[1:])
