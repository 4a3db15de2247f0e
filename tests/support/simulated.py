"""What `simulate`'s real gRPC streams carried, per slave, beside what `experiment` counts for the
same topology: the reference every test of experiment's counting holds it to (a real master and
real slaves over loopback gRPC, never a copy of the send model)."""

from __future__ import annotations

from rich.console import Console

from dumpfilter.lab.simulate import run_simulation
from dumpfilter.spark_jobs.tasks import bandwidth
from dumpfilter.spark_jobs.tasks.counts import merge_counts
from dumpfilter.spark_jobs.tasks.chunks import input_files, plan_chunks

# The master's counts (Stats RPC) that no idle heartbeat after the caught-up batch can move.
MASTER_COUNTS = ("events_read", "bytes_read", "events_skipped", "bytes_skipped", "placeholder_bytes",
                 "empty_transactions", "empty_transaction_bytes", "transactions_kept", "transactions_partial",
                 "transactions_skipped")


def simulated(topology) -> dict[str, dict]:
    """Per slave: what it received over gRPC (events, bytes, heartbeats, placeholders) and the
    master's counts, from `simulate` run in this process on `topology` (its [master] binlogs)."""
    result = run_simulation(topology, None, progress=False, console=Console(file=None, quiet=True))
    out = {}
    for stream in result.streams:
        c, s = stream.counters, stream.stats
        out[stream.plan.label] = {"events_sent": c["events_received"], "bytes_sent": c["bytes_received"],
                                  "heartbeats": c["heartbeats"], "placeholders": c["placeholders"],
                                  **{k: s.get(k, 0) for k in MASTER_COUNTS}}
    return out


def counted(row) -> dict:
    """The same counts of one experiment row (its report's names)."""
    keys = ("events_sent", "bytes_sent", "heartbeats", "placeholders", *MASTER_COUNTS)
    named = {**row, "events_read": row["events_all"], "bytes_read": row["bytes_all"]}
    return {k: named[k] for k in keys}


def experiment_rows(paths, slaves, chunk_bytes: int | None, gates=None) -> list[dict]:
    """experiment's counting (spark_jobs.tasks.bandwidth) of `paths` cut into chunks of
    `chunk_bytes` (None: a chunk per file), one row per slave."""
    chunks = plan_chunks(input_files(paths), chunk_bytes)
    parts = [p for chunk in chunks for p in bandwidth.count_chunk(chunk, slaves, gates)]
    return [t.as_row() for t in merge_counts(parts, [s.name for s in slaves])]


def assert_same(streams: dict[str, dict], rows: list[dict]) -> None:
    """Every slave's experiment counts equal what its real stream carried."""
    assert {r["slave"] for r in rows} == set(streams)
    differ = {r["slave"]: (streams[r["slave"]], counted(r)) for r in rows if counted(r) != streams[r["slave"]]}
    assert not differ, "experiment differs from simulate:\n" + "\n".join(
        f"{name}: " + ", ".join(f"{k} simulate {a[k]} experiment {b[k]}" for k in a if a[k] != b[k])
        for name, (a, b) in differ.items())
