"""The series writer's raw path and the segment-file split (what the Spark job runs): byte for byte
the writer's Event path and the single-process split's output, whatever the chunking."""

from __future__ import annotations

import shutil
import tempfile

import pytest

from dumpfilter.codec import EventType, group_transactions, read_events
from dumpfilter.codec import encode as enc
from dumpfilter.binlogs import BinlogSeriesWriter, binlog_paths
from dumpfilter.binlogs.series import encode_unit, renumber
from dumpfilter.rules.ruleset import Settings
from dumpfilter.spark_jobs.tasks.chunks import input_files, plan_chunks, source_header
from dumpfilter.spark_jobs.tasks.local import check_output_dir, split_local
from dumpfilter.spark_jobs.tasks.output import OutputSet
from dumpfilter.spark_jobs.tasks.routing import Router, SplitConfig, config_from_maps
from dumpfilter.spark_jobs.tasks.segments import JOIN_BLOCK_BYTES, join_output, join_tasks, write_chunk_segments
from dumpfilter.spark_jobs.split_by_schema import balanced_groups, split_spark
from tests.oracles.split import ReferenceOutputSet
from tests.spark_jobs.helpers import check_series, same_tree
from tests.oracles.chunk_units import read_units

CONFIGS = {
    "schema": SplitConfig(),
    "effective": SplitConfig(settings=Settings(semantics="effective")),
    "maps": config_from_maps(["low=db1%", "low=db2%", "high=replicate-wild-do-table=db3.%"]),
    "maps-no-unassigned": config_from_maps(["a=db1%", "b=db2.%"], unassigned=None),
}


def _route_all(src, config, output_set):
    paths = input_files([src])
    router = Router(config)
    for chunk in plan_chunks(paths, None):
        for txn in read_units(chunk):
            for name, events in router.route(txn):
                output_set.unit(name, events)
    return output_set.close()


@pytest.mark.parametrize("workload", ["row-mariadb", "statement-mariadb", "mixed-mysql"])
@pytest.mark.parametrize("config", ["schema", "maps"])
@pytest.mark.parametrize("max_size", [1 << 30, 9_000])
def test_raw_path_equals_event_path(workloads, tmp_path, workload, config, max_size):
    src = workloads[workload]
    header = source_header(input_files([src]))
    fast = _route_all(src, CONFIGS[config], OutputSet(tmp_path / "fast", header, max_size))
    ref = _route_all(src, CONFIGS[config], ReferenceOutputSet(tmp_path / "ref", header, max_size))
    assert fast == ref
    same_tree(tmp_path / "fast", tmp_path / "ref")
    for summary in fast:
        files = check_series(tmp_path / "fast", summary.name, header.start_state)
        assert (len(files) > 1) == (max_size < 1 << 20)


def test_raw_path_copies_a_series_unchanged_like_the_event_path(workloads, tmp_path):
    """log_pos already right: the event is left alone (even a CRC the writer would not have
    computed); log_pos 0 stays 0."""
    paths = binlog_paths(workloads["mixed-mysql"])
    header = source_header(paths)
    events = [e for e in read_events(paths[0].read_bytes())[2:] if e.type_code != EventType.ROTATE]
    bad = bytearray(events[3].raw)
    bad[-1] ^= 0xFF
    events[3] = read_events(b"\xfebin" + header.fde.raw + bytes(bad), verify_checksums=False)[1]
    zero = events[5].with_header(log_pos=0)
    events[5] = zero
    units = [u.events for u in group_transactions(events)]
    data, ends = bytearray(), []
    for unit in units:
        data += encode_unit(unit)
        ends.append(len(data))
    with BinlogSeriesWriter(tmp_path / "fast", "x-bin", header.fde, start_state=header.start_state) as writer:
        writer.write_run(data, ends)
    with BinlogSeriesWriter(tmp_path / "ref", "x-bin", header.fde, start_state=header.start_state) as ref:
        for unit in units:
            ref.write_transaction(unit)
    same_tree(tmp_path / "fast", tmp_path / "ref")
    written = (tmp_path / "fast" / "x-bin.000001").read_bytes()
    assert bytes(bad) in written and zero.raw[:-4] in written


def test_renumber_in_place():
    fde = enc.format_description("10.11.6-MariaDB-log")
    fmt = fde.fmt
    events = [enc.build_event(EventType.QUERY, enc.query_body(f"INSERT INTO t VALUES ({i})", "d"), fmt=fmt,
                              log_pos=1, timestamp=100 + i) for i in range(3)]
    buf = bytearray(b"".join(e.raw for e in events))
    assert renumber(buf, 0, len(buf), 1000, fmt.checksum_len, fmt) == 102
    out = read_events(b"\xfebin" + fde.raw + bytes(buf))[1:]  # CRCs verified
    size = events[0].size
    assert [e.log_pos for e in out] == [1000 + size, 1000 + 2 * size, 1000 + 3 * size]


def split_by_segments(targets, out, config, *, max_size, chunk_bytes, block_bytes=JOIN_BLOCK_BYTES):
    """Both stages of the Spark job in this process, chunk by chunk then output by output: what
    the Spark job computes, without Spark."""
    out = check_output_dir(out)
    paths = input_files(targets)
    header = source_header(paths)
    seg_dir = tempfile.mkdtemp(prefix=".segments-", dir=out)
    try:
        router = Router(config)
        results = [write_chunk_segments(chunk, chunk_no, seg_dir, router)
                   for chunk_no, chunk in enumerate(plan_chunks(paths, chunk_bytes))]
        summaries = [join_output(plan, seg_dir, out, header, max_size, block_bytes=block_bytes)
                     for plan in join_tasks(results)]
    finally:
        shutil.rmtree(seg_dir, ignore_errors=True)
    return sorted(summaries, key=lambda s: s.name)


def _segments_then_join(src, out, config, chunk_bytes, max_size):
    return split_by_segments([src], out, config, max_size=max_size, chunk_bytes=chunk_bytes)


@pytest.mark.parametrize("workload, config", [
    ("row-mariadb", "schema"), ("statement-mariadb", "effective"), ("mixed-mysql", "maps"),
    ("mixed-mysql", "maps-no-unassigned"),
])
def test_segments_joined_equal_single_process_whatever_the_chunking(workloads, tmp_path, workload, config):
    src = workloads[workload]
    local = split_local([src], tmp_path / "local", CONFIGS[config], max_size=25_000, chunk_bytes=None)
    assert len(plan_chunks(input_files([src]), 7_000)) > 3 * len(input_files([src]))
    for chunk_bytes in (None, 15_000, 7_000):
        out = tmp_path / f"seg-{chunk_bytes}"
        summaries = _segments_then_join(src, out, CONFIGS[config], chunk_bytes, 25_000)
        assert summaries == local.outputs
        same_tree(tmp_path / "local", out)  # the segment directory is gone


def _incident_binlogs(directory):
    """Several files of DDL units for schemas a, b, c, with incidents before c's first unit, between
    units, and in stretches where some schema has none."""
    fde = enc.format_description("10.11.6-MariaDB-log")
    fmt = fde.fmt

    def ev(t, body):
        return enc.build_event(t, body, fmt=fmt, timestamp=1_700_000_000)

    def ddl(seq, schema):
        return [ev(EventType.MARIADB_GTID, enc.mariadb_gtid_body(seq, standalone=True)),
                ev(EventType.QUERY, enc.query_body(f"CREATE TABLE {schema}.t{seq} (i INT)", schema))]

    seq = 0
    plan = ["a", "b", "!", "a", "a", "!", "b", "c", "a", "!", "!", "c", "b", "a", "!"]
    with BinlogSeriesWriter(directory, "m-bin", fde, max_size=2_000) as series:
        for step in plan:
            if step == "!":
                series.write_transaction([ev(EventType.INCIDENT, b"\x01\x00\x04lost")])
            else:
                for _ in range(3):
                    seq += 1
                    series.write_transaction(ddl(seq, step))
    return directory


@pytest.mark.parametrize("chunk_bytes", [None, 300, 900])
def test_incidents_reach_every_output_in_order_with_segments(tmp_path, chunk_bytes):
    src = _incident_binlogs(tmp_path / "in")
    local = split_local([src], tmp_path / "local", SplitConfig(), max_size=600, chunk_bytes=None)
    assert [s.name for s in local.outputs] == ["a", "b", "c"]
    assert len(input_files([src])) > 1 and (chunk_bytes is None or len(plan_chunks(input_files([src]), chunk_bytes)) > 4)
    header = source_header(input_files([src]))
    ref = _route_all(src, SplitConfig(), ReferenceOutputSet(tmp_path / "ref", header, 600))
    same_tree(tmp_path / "local", tmp_path / "ref")
    summaries = _segments_then_join(src, tmp_path / "seg", SplitConfig(), chunk_bytes, 600)
    assert summaries == local.outputs == ref
    same_tree(tmp_path / "local", tmp_path / "seg")


def test_chunk_tasks_return_counts_and_incidents_only(tmp_path, workloads):
    src = workloads["row-mariadb"]
    chunks = plan_chunks(input_files([src]), 15_000)
    results = [write_chunk_segments(c, i, tmp_path, Router(SplitConfig())) for i, c in enumerate(chunks)]
    plans = join_tasks(results)
    assert [p.bytes for p in plans] == sorted((p.bytes for p in plans), reverse=True)
    units = sum(n for r in results for n, _ in r.outputs.values())
    assert units == sum(n for p in plans for _, n in p.segments)
    assert sum(1 for _ in tmp_path.glob("*.seg")) == sum(len(r.outputs) for r in results)


def test_balanced_groups():
    items = list("abcdefg")
    sizes = [10, 1, 9, 2, 8, 3, 7]
    groups = balanced_groups(items, sizes, 2)
    assert sorted(x for g in groups for x in g) == items
    loads = [sum(sizes[items.index(x)] for x in g) for g in groups]
    assert max(loads) - min(loads) <= 2
    assert all(g == sorted(g) for g in groups)
    assert balanced_groups(["x"], [1], 4) == [["x"]]
    assert balanced_groups(items, sizes, 8) == [[x] for x in "acegfdb"]  # more groups than items: largest first


@pytest.mark.spark
@pytest.mark.parametrize("chunk_bytes", [None, 300])
def test_spark_split_with_incidents_equals_single_process(spark, tmp_path, chunk_bytes):
    src = _incident_binlogs(tmp_path / "in")
    local = split_local([src], tmp_path / "local", SplitConfig(), max_size=600, chunk_bytes=None)
    summaries = split_spark(spark, [src], tmp_path / "spark", SplitConfig(), max_size=600, chunk_bytes=chunk_bytes)
    assert summaries == local.outputs
    same_tree(tmp_path / "local", tmp_path / "spark")


@pytest.mark.spark
def test_spark_split_many_chunks_per_task(spark, workloads, tmp_path):
    src = workloads["row-mariadb"]
    assert len(plan_chunks(input_files([src]), 3_000)) > 8  # many chunks, dealt onto a task per core
    local = split_local([src], tmp_path / "local", SplitConfig(), max_size=25_000, chunk_bytes=None)
    summaries = split_spark(spark, [src], tmp_path / "spark", SplitConfig(), max_size=25_000, chunk_bytes=3_000)
    assert summaries == local.outputs
    same_tree(tmp_path / "local", tmp_path / "spark")


def test_a_failed_chunk_task_leaves_no_segment(workloads, tmp_path):
    from dumpfilter.errors import BinlogError

    src = input_files([workloads["row-mariadb"]])[0]
    data = bytearray(src.read_bytes())
    data[len(data) // 2] ^= 0xFF  # in the middle of the file: units before it are routed
    bad = tmp_path / "bad-bin.000001"
    bad.write_bytes(bytes(data))
    (tmp_path / "seg").mkdir()
    [chunk] = plan_chunks([bad], None)
    with pytest.raises(BinlogError):  # a CRC mismatch, or an impossible event size
        write_chunk_segments(chunk, 0, tmp_path / "seg", Router(SplitConfig()))
    assert list((tmp_path / "seg").iterdir()) == []


@pytest.mark.parametrize("block_bytes", [1, 700, 5_000])
def test_join_in_blocks_writes_the_same_bytes(workloads, tmp_path, block_bytes):
    """The join reads, renumbers and writes a segment a block at a time into one buffer: any block
    size (one unit per block, units longer than the block, blocks across rotations) gives the
    single process's files."""
    src = workloads["row-mariadb"]
    local = split_local([src], tmp_path / "local", SplitConfig(), max_size=25_000, chunk_bytes=None)
    assert any(len(s.files) > 1 for s in local.outputs)  # rotations inside the joined segments
    out = tmp_path / f"seg-{block_bytes}"
    summaries = split_by_segments([src], out, SplitConfig(), max_size=25_000, chunk_bytes=15_000,
                                  block_bytes=block_bytes)
    assert summaries == local.outputs
    same_tree(tmp_path / "local", out)


def test_plan_chunks_for_workers_cuts_only_past_a_fair_share(workloads, tmp_path):
    """With Spark's parallelism given, a file is cut only past a fair share of the input (its size
    over 4 tasks per worker), never finer than `chunk_bytes`: a series of many files is read a
    whole file per task, a file holding most of the input is still cut."""
    from dumpfilter.spark_jobs.tasks.chunks import fair_chunk_bytes

    paths = input_files([workloads["row-mariadb"]])
    total = sum(p.stat().st_size for p in paths)
    assert len(paths) > 1 and max(p.stat().st_size for p in paths) > 2_000
    share = fair_chunk_bytes(paths, 2_000, 1)
    assert share == max(2_000, -(-total // 4))
    assert len(plan_chunks(paths, 2_000)) > len(plan_chunks(paths, 2_000, workers=1)) >= len(paths)
    assert plan_chunks(paths, 2_000, workers=1) == plan_chunks(paths, share)
    assert plan_chunks(paths, 2_000, workers=10**6) == plan_chunks(paths, 2_000)  # never finer
    assert plan_chunks(paths, None, workers=2) == plan_chunks(paths, None)
