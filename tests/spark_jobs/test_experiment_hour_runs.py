"""`experiment` walks each slave hour by hour (a Heartbeat counts in the hour it is sent): a
compiled run that ends at an hour's end is taken up again by the core at the next hour's start,
never by the Python unit path (rules.walk_driver: a walk's memo of where it stopped is the hour's).
With the hour made a few seconds, a generated ROW binlog spans many hours; the units the Python
path counts must be those it counts when the whole binlog is one hour (its DDL, lone statements)."""

from __future__ import annotations

import pytest

from dumpfilter.codec.transactions import CONTROL
from dumpfilter.spark_jobs.tasks import bandwidth
from dumpfilter.spark_jobs.tasks.chunks import input_files, plan_chunks
from dumpfilter.topology import parse_topology
from dumpfilter.workload import WorkloadSpec, generate

TOPOLOGY = '[[slaves]]\nname = "all"\nserver_id = 2\n[[slaves]]\nname = "db1"\nserver_id = 3\n' \
           'rules = ["replicate-do-db=db1"]\nskip_policy = "placeholder"\n'


def _by_python(paths, monkeypatch, hour: int) -> tuple[list[int], int]:
    """(positions of the transactions the Python path counted, the hours the counts span)."""
    monkeypatch.setattr(bandwidth, "HOUR", hour)
    monkeypatch.setattr(bandwidth, "MINUTE_BUCKETS", 0)  # walked by (these) hours, never by minutes
    seen: list[int] = []
    unit = bandwidth._SlaveCounter.unit

    def counted(self, txn, k):
        if txn.kind != CONTROL:
            seen.append(txn.events[0].pos)
        return unit(self, txn, k)
    monkeypatch.setattr(bandwidth._SlaveCounter, "unit", counted)
    parts = [p for chunk in plan_chunks(input_files(paths), 1 << 30)
             for p in bandwidth.count_chunk(chunk, parse_topology(TOPOLOGY).slaves)]
    return sorted(seen), len({h for p in parts for h in p.by_hour})


@pytest.mark.parametrize("hour", [10, 37])
def test_hours_end_no_compiled_run(tmp_path, monkeypatch, hour):
    paths = generate(WorkloadSpec(seed=3, transactions=1500, binlog_format="row", flavor="mariadb", ddl_share=0.0,
                                  max_binlog_size=1 << 30), tmp_path / "binlog")
    whole, one = _by_python(paths, monkeypatch, 1 << 30)
    cut, hours = _by_python(paths, monkeypatch, hour)
    assert one == 1 and hours > 20, "the premise: one hour, then many"
    assert cut == whole, f"{len(cut) - len(whole)} more transactions counted by the Python path at hour starts"
