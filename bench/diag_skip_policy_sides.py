"""Diagnostic (not in `make bench`, no test asserts it): each skip policy's stream split into its
two sides, in process, so that a slow policy's time can be laid at the master's walk or at the
slave's relay (issue #57 goal 3). One DumpService, a replicate-do-db slave, best of N, the
policies interleaved:

* master: the stream thread's CPU in SlaveStream._fast_runs (the compiled send walk and the
  Python around it), after a warm-up stream (the segments scanned once, as in `master serve`),
  and the whole process's CPU over the stream (every thread: the scans of segments not kept too);
* slave: the DumpBatch wire bytes that stream sends, as `master serve` writes them, fed to a
  Slave's `_batch` (parse, scan, own check, relay run, relay log write, commit) without gRPC:
  the process's CPU, with the allocator tuned as `slave run` tunes it.

`bench skip_policies` gives the production figure (`master serve` and `slave run` apart, over
real gRPC); this one says whose side moved.

    python -m bench.diag_skip_policy_sides bench/data/mixed-sysbench-8s-500mb [--repeat 5]
        [--replicate-do-db sbtest1]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from dumpfilter.cli.process import tune_allocator
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.serve import grpc_server
from dumpfilter.master.service import DumpService
from dumpfilter.master.read.units import Segment
from dumpfilter.master.stream import slave_stream
from dumpfilter.rules.keep_table import KeyRows
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.skip_policy import NAMES as POLICIES
from dumpfilter.slave.config import SlaveConfig
from dumpfilter.slave.node import Slave
from dumpfilter.v1 import dump_pb2


class Walks:
    """Thread CPU spent in SlaveStream._fast_runs since the last `reset`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        walk = slave_stream.SlaveStream._fast_runs

        def timed(stream: slave_stream.SlaveStream, seg: Segment, i: int, keys: KeyRows | None) -> object:
            started = time.thread_time()
            try:
                return walk(stream, seg, i, keys)
            finally:
                self.seconds += time.thread_time() - started

        slave_stream.SlaveStream._fast_runs = timed  # type: ignore[method-assign]


def master_side(svc: DumpService, walks: Walks, server_id: int, policy: str, db: str) -> tuple[float, list[bytes]]:
    """One stream from the start to the end of the binlog: its walk's CPU, its replies' wire bytes."""
    svc.register(Registration(server_id=server_id, skip_policy=policy,
                              filters=(ChannelSpec(None, RuleSet(do_db=(db,))),)))
    walks.seconds = 0.0
    wire = []
    for batch in svc.stream(server_id, placeholder_runs=True, skip_stretches=True):  # (as `slave run` asks)
        message = dump_pb2.DumpBatch(position=grpc_server._position(batch.position),
                                     transactions=batch.transactions, skipped_bytes=batch.skipped_bytes,
                                     caught_up=batch.caught_up, heartbeat=batch.heartbeat,
                                     gtid_state=batch.gtid_state)
        wire.append(grpc_server._dump_reply_bytes((message, batch.parts)))
        if batch.caught_up:
            break
    return walks.seconds, wire


def slave_side(wire: list[bytes], policy: str, db: str, relay: Path) -> float:
    """A Slave's CPU over the batches `wire`, the first one (its rule engine loads) not counted."""
    shutil.rmtree(relay, ignore_errors=True)
    slave = Slave(SlaveConfig(master="-", server_id=11, relay_dir=relay, rules=RuleSet(do_db=(db,)),
                              skip_policy=policy))
    slave._batch(dump_pb2.DumpBatch.FromString(wire[0]))
    started = time.process_time()
    for reply in wire[1:]:
        slave._batch(dump_pb2.DumpBatch.FromString(reply))
    slave.relay.committer.close()
    seconds = time.process_time() - started
    slave.relay.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--replicate-do-db", default="sbtest1")
    args = parser.parse_args()
    tune_allocator()
    walks = Walks()
    svc = DumpService(args.directory)
    master_side(svc, walks, 1, "heartbeat", args.replicate_do_db)  # the segments scanned once
    best = {policy: [float("inf"), float("inf"), 0, 0, float("inf")] for policy in POLICIES}
    with tempfile.TemporaryDirectory(prefix="diag-sides-") as tmp:
        server_id = 1
        for _ in range(args.repeat):
            for policy in POLICIES:
                server_id += 1
                started = time.process_time()
                walk, wire = master_side(svc, walks, server_id, policy, args.replicate_do_db)
                process = time.process_time() - started
                relay = slave_side(wire, policy, args.replicate_do_db, Path(tmp) / "relay")
                mine = best[policy]
                mine[0], mine[1] = min(mine[0], walk), min(mine[1], relay)
                mine[2], mine[3], mine[4] = len(wire), sum(map(len, wire)), min(mine[4], process)
    for policy, (walk, relay, batches, size, process) in best.items():
        print(f"{policy:18s} master walk {walk:.3f} CPU s ({walk / best['heartbeat'][0]:.2f}x heartbeat's), "
              f"process {process:.3f}  slave {relay:.3f} CPU s ({relay / best['heartbeat'][1]:.2f}x)  "
              f"{batches} batches, {size / 1e6:.1f} MB sent", flush=True)
    print(f"segments scanned: {svc.segments.reads}", flush=True)


if __name__ == "__main__":
    main()
