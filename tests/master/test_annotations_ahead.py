"""What a master policy's gated stream needs of a segment's Annotate_rows texts, read on the
segment's scan thread (issue #57 goal 3): `UnitList.scan_start(..., annotations=True)`, asked by
the segment reader when the master serves a policy (`SegmentCache.annotations_ahead`, set by
DumpService), so that the policy check (`guard_row` -> `UnitList.annotations_unshown`) finds
them read, off the stream's path. The answers must be the ones the stream's own read gives, for
any keep bytes; a part read under another format than the one asked for is read anew, by the
stream; and a gated stream of a master with a policy reads none itself, unless it keeps too
little of each segment for a read of every unit's texts to pay (SegmentCache.texts_wanted)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dumpfilter.codec.scanner import Scanner, UnitList
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.policy import MasterPolicy, PolicyEntry
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.master.service import DumpService
from dumpfilter.rules.policy_gates import PLAIN, Secret
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.workload.generator import WorkloadSpec, generate

USER, PASSWORD = "app", "pw"


def _row_binlog(tmp: Path, max_binlog_size: int = 120_000, statements: int = 3) -> Path:
    generate(WorkloadSpec(seed=21, schemas=3, tables_per_schema=2, transactions=900, binlog_format="row",
                          flavor="mariadb", cross_db_share=0.3, statements_per_transaction=statements,
                          max_binlog_size=max_binlog_size), tmp)
    return tmp


def _keeps(n: int) -> list[bytes]:
    """Keep bytes per name id: every name kept, every other one, none but the first."""
    return [b"\x01" * n, bytes(i % 2 for i in range(n)), bytes(int(i == 0) for i in range(n))]


def _answers(directory: Path, ahead: bool, segment_bytes: int) -> tuple[list, int]:
    """Per segment, `annotations_unshown` under each of `_keeps`' keep bytes (with the stream's
    row for them), and how many units' texts the calls read themselves."""
    cache = SegmentCache(directory, segment_bytes=segment_bytes, read_ahead=False)
    cache.annotations_ahead = ahead
    first = sorted(p.name for p in directory.iterdir() if p.name.rsplit(".", 1)[-1].isdigit())[0]
    start, out, here = (first, 4), [], 0
    while True:
        seg = cache.get(start)
        if not seg.units:
            break
        index = seg.index
        got = []
        for keep in _keeps(len(index.names)):
            row, keep = index.rows_for(lambda names, keep=keep: keep)
            got.append(index.unit_list.annotations_unshown(row, keep, index.names, index.formats()))
        out.append((seg.start, got))
        here += index.unit_list.annotations_read_here
        if seg.at_end:
            break
        start = seg.end
    return out, here


def test_the_scan_thread_reads_what_the_stream_would(tmp_path):
    _same_answers(_row_binlog(tmp_path), generated=True)


@pytest.mark.fixtures
@pytest.mark.parametrize("name", ["mariadb-bin.000001", "mysql-bin.checksum-crc32"])
def test_real_row_binlogs_read_ahead_as_the_stream_would(shared_fixtures, tmp_path, name):
    """Real ROW binlogs: MariaDB 10.5's Annotate_rows texts, MySQL 5.7's Rows_query texts."""
    directory = tmp_path / "binlog"
    directory.mkdir()
    shutil.copy(next(shared_fixtures.rglob(name)), directory / f"{name.split('.')[0]}.000001")
    _same_answers(directory, generated=False)


def _same_answers(directory: Path, generated: bool) -> None:
    for segment_bytes in (20_000, 1 << 20):
        stream, read_by_stream = _answers(directory, False, segment_bytes)
        ahead, read_here = _answers(directory, True, segment_bytes)
        assert ahead == stream
        assert read_by_stream > (100 if generated else 0)
        # Only a file's first units (before and at its FDE, which the segment reader's formats
        # leave out) may be read by the stream.
        assert read_here <= read_by_stream // (20 if generated else 1), f"{read_here} of {read_by_stream}"
        if generated and segment_bytes == 20_000:
            assert any(units for _, got in stream for units in got), "no text left unshown: nothing compared"


def test_a_part_read_under_another_format_is_read_anew(tmp_path):
    """The reads ahead are under the scanner's format: formats asked for that are not it (another
    checksum length, another first unit) make the stream read those units itself, with its
    answer for them."""
    directory = _row_binlog(tmp_path, 1 << 30)
    path = sorted(p for p in directory.iterdir() if p.name.rsplit(".", 1)[-1].isdigit())[0]
    data = path.read_bytes()
    seg = SegmentCache(directory, segment_bytes=1 << 30).get((path.name, 4))
    (post, crc, first), = seg.index.formats()
    names = seg.index.names

    def unshown(formats, annotations: bool) -> tuple[list[int], int]:
        scanner, units = Scanner(), UnitList()
        scanner.scan_start(units, data, 4, 0, path.name, at_eof=True, annotations=annotations)
        scanner.scan_finish(units)
        row = units.rows_many([b"\x01" * len(names)])[0]
        got = units.annotations_unshown(row, b"\x01" * len(names), names, formats)
        return got, units.annotations_read_here

    same, here = unshown([(post, crc, first)], True)
    assert (same, here) == (unshown([(post, crc, first)], False)[0], 0)
    assert unshown([(post, crc, first)], False)[1] > 100
    for other in ([(post, 0, first)], [(post, crc, first + 5)]):
        got, here = unshown(other, True)
        assert here > 100 and got == unshown(other, False)[0]


def _gated_stream(directory: Path, ahead: bool, rules: RuleSet | None = None) -> tuple[list, int, bool]:
    """A DumpService with a restricting policy, one keep-all slave of its identity streamed to
    caught-up, the scan threads' reads ahead left on or turned off: its batches, the units its
    segments' texts were read for by the stream, and whether the service had asked for them ahead."""
    policy = MasterPolicy({USER: PolicyEntry(USER, ("db1.%", "db2.t1"), Secret(PLAIN, PASSWORD))}, None)
    svc = DumpService(directory, policy=policy, segment_bytes=20_000)
    asked = svc.segments.annotations_ahead
    svc.segments.annotations_ahead = ahead
    lists: dict[int, UnitList] = {}
    real = svc.segments.get

    def get(start):
        seg = real(start)
        if seg.index is not None:
            lists[id(seg.index.unit_list)] = seg.index.unit_list
        return seg
    svc.segments.get = get  # type: ignore[method-assign]
    reg = Registration(server_id=7, user=USER, password=PASSWORD, filters=(ChannelSpec(None, rules or RuleSet()),))
    svc.register(reg)
    batches = []
    for b in svc.stream(7):
        batches.append((b.events, b.position, b.transactions, b.skipped_bytes, b.gtid_state))
        if b.caught_up:
            break
    batches.append(svc.slaves[7].stats)
    return batches, sum(u.annotations_read_here for u in lists.values()), asked


def test_a_master_serving_a_policy_reads_the_texts_ahead(tmp_path):
    directory = _row_binlog(tmp_path)
    assert DumpService(directory).segments.annotations_ahead is False
    ahead, read_here, asked = _gated_stream(directory, True)
    stream, read_by_stream, _ = _gated_stream(directory, False)
    assert asked is True
    assert ahead == stream and len(stream) > 3
    assert read_by_stream > 100
    assert read_here <= read_by_stream // 20, f"the gated stream read {read_here} units' texts itself"


def test_segments_a_gated_stream_keeps_little_of_are_read_by_the_stream(tmp_path):
    """A gated stream that keeps under half of a segment's units (SegmentCache.texts_wanted) (one
    database of three) leaves the next scans' texts to the stream: the scan thread would read
    every unit's, the stream reads only its own. The batches are the same either way."""
    directory = _row_binlog(tmp_path, statements=1)
    rules = RuleSet(do_db=("db1",))
    ahead, read_here, _ = _gated_stream(directory, True, rules)
    stream, read_by_stream, _ = _gated_stream(directory, False, rules)
    assert ahead == stream
    assert read_by_stream > 30
    assert read_here >= read_by_stream * 0.8, f"{read_here} of {read_by_stream} read by the stream"
