"""A count wanted by hour alone walks each buffer by hours (`count_buffers(minutes=False)`): a live
master's shadow candidates, whose totals keep no minutes (spark_jobs.tasks.shadow_counts), are
counted with the same totals and hours as `experiment`'s minute-by-minute count of a short run,
and with no minute made to be dropped. The Heartbeats owed where a minute ends are the same bytes
whether the walk is cut there or not."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from dumpfilter.spark_jobs.tasks.bandwidth import count_chunk
from dumpfilter.spark_jobs.tasks.chunks import Chunk
from dumpfilter.spark_jobs.tasks.shadow_counts import ShadowCounts
from dumpfilter.topology import parse_topology
from dumpfilter.workload.generator import WorkloadSpec, generate

RULES = (("replicate-do-db=db1",), ("replicate-ignore-db=db2",), ("replicate-wild-do-table=db1.%",),
         ("replicate-do-table=db2.t1", "replicate-ignore-db=db1"))
POLICIES = ("heartbeat", "placeholder", "empty-transaction")


@pytest.fixture(scope="module")
def binlog(tmp_path_factory):
    """About ten minutes of binlog time in its first file (the generator's clock moves 0-1 s a
    transaction)."""
    directory = tmp_path_factory.mktemp("binlogs")
    generate(WorkloadSpec(seed=11, transactions=1_500, max_binlog_size=4_000_000), directory)
    return sorted(p for p in directory.iterdir() if p.name[-1].isdigit())[0]


def _slaves():
    text = "\n".join(f'[[slaves]]\nname = "s{k}-{policy}"\nserver_id = {10 + 3 * k + n}\nskip_policy = "{policy}"\n'
                     f'rules = [{", ".join(repr(r).replace(chr(39), chr(34)) for r in rules)}]\n'
                     for k, rules in enumerate(RULES) for n, policy in enumerate(POLICIES))
    return parse_topology(text).slaves


def _count(path, **how):
    with ThreadPoolExecutor(1) as pool:  # (a thread's rule groups are its own: bandwidth._rule_group)
        return pool.submit(count_chunk, Chunk(0, str(path), 0), _slaves(), **how).result()


def test_a_count_by_hours_has_the_totals_and_hours_of_one_by_minutes(binlog):
    by_minutes, by_hours = _count(binlog), _count(binlog, minutes=False)
    assert [c.counts for c in by_hours] == [c.counts for c in by_minutes]
    assert [c.by_hour for c in by_hours] == [c.by_hour for c in by_minutes]
    assert [(c.tables, c.statements) for c in by_hours] == [(c.tables, c.statements) for c in by_minutes]
    assert all(c.by_minute is None for c in by_hours)
    # (the short run is counted minute by minute when minutes are wanted: several of them)
    assert all(c.by_minute and len(c.by_minute) > 3 for c in by_minutes)
    assert len({c.counts.bytes_sent for c in by_hours}) > 3  # (the rules keep different bytes)


def test_a_live_masters_candidates_are_counted_by_hours(binlog):
    with ThreadPoolExecutor(1) as pool:
        counted = pool.submit(ShadowCounts().count, 0, str(binlog), 0, None, _slaves(), [None] * 12).result()
    assert [c.counts for c in counted] == [c.counts for c in _count(binlog)]
    assert all(c.by_minute is None for c in counted)
