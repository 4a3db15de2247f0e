"""With many streams running, each makes smaller batches (`DumpService.reply_bytes`), so that all
their replies in flight fit the master's output budget; with few, batches are `batch_bytes`
again. 64 slaves started together held 64 replies of 1 MiB and grpc's copies of them, and the
master's private memory went past 300 MB (issue #42, bench fanout_procs)."""

from __future__ import annotations

from dumpfilter.master.model import Registration
from dumpfilter.master.service import BATCH_BYTES, MIN_BATCH_BYTES, DumpService
from dumpfilter.master.stream.send_ahead import OUTPUT_BYTES
from dumpfilter.workload.generator import WorkloadSpec, generate

STREAMS = 40


def _size(batch) -> int:
    return sum(len(p) for p in batch.parts)



def test_batches_shrink_while_many_streams_run_and_grow_back(tmp_path):
    generate(WorkloadSpec(seed=5, transactions=8000, rows_per_statement=6), tmp_path)
    svc = DumpService(tmp_path)
    for sid in range(1, STREAMS + 2):
        svc.register(Registration(server_id=sid))
    share = OUTPUT_BYTES // (2 * STREAMS)
    assert MIN_BATCH_BYTES < share < BATCH_BYTES

    # One stream alone: batches of batch_bytes (the binlog holds several).
    alone = []
    for b in svc.stream(STREAMS + 1):
        alone.append(_size(b))
        if b.caught_up:
            break
    assert max(alone) >= BATCH_BYTES and svc.live_streams == 0
    assert svc.reply_bytes() == BATCH_BYTES

    # STREAMS streams at once: past each one's first two batches (the first made, and the second's
    # limit set, before the others started), every batch stays within the shared budget, and one unit.
    streams = [svc.stream(sid) for sid in range(1, STREAMS + 1)]
    sizes: list[list[int]] = [[] for _ in streams]
    for k, stream in enumerate(streams):
        sizes[k].append(_size(next(stream)))
    assert svc.live_streams == STREAMS and svc.reply_bytes() == share
    ended = [False] * STREAMS
    while not all(ended):
        for k, stream in enumerate(streams):
            if ended[k]:
                continue
            b = next(stream)
            sizes[k].append(_size(b))
            ended[k] = b.caught_up
    unit = max(alone) - BATCH_BYTES + 1  # what the unit that filled a batch took past the limit
    for k in range(STREAMS):
        later = sizes[k][2:]
        assert len(later) >= 2 and max(later) < share + max(unit, 64 << 10), f"stream {k + 1}: batches {sizes[k]}"
        assert sum(sizes[k]) == sum(alone), f"stream {k + 1} was sent other bytes than the stream alone"
    for stream in streams:
        stream.close()
    assert svc.live_streams == 0 and svc.reply_bytes() == BATCH_BYTES
