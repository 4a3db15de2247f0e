"""SHOW BINARY LOG STATUS over a live MySQL file (binlogs.gtid_start.BinlogStatus): as the file
grows, cut anywhere (inside a transaction, inside an event), the answer is the end of its last
whole transaction and the GTIDs of its whole transactions, as for the file read whole, and each
call walks only what was added since the last (a GB file is not walked again at each commit)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpfilter.binlogs import gtid_start
from dumpfilter.binlogs.gtid_start import BinlogStatus
from dumpfilter.codec.reader import read_events

MYSQL_57 = "rust-us-mysql-cdc-rs/5.7_14_user_var/log.bin"
# Real MySQL files with GTIDs: 5.7, 8.0 (a Previous_GTIDs of many transactions), 8.4+ tagged GTIDs.
MYSQL_FILES = [MYSQL_57, "rust-us-mysql-cdc-rs/binlog.000733",
               "blackbeam-rust_mysql_common/binlog_transaction_with_GTID_TAG.000001"]
GTID, ANONYMOUS_GTID, TAGGED_GTID, PREVIOUS_GTIDS, QUERY, XID = 33, 34, 42, 35, 2, 16


def _whole_transactions_to(data: bytes, size: int) -> tuple[int, set[tuple[str, str, int | None]]]:
    """The end of the last whole event outside a transaction in data[:size] (a transaction ends
    at its XID or COMMIT, or, without a BEGIN, at its one statement: DDL), and the GTIDs (source,
    tag, gno) of its Previous_GTIDs and of the transactions ended there: read from the events."""
    end, gtids, pending, inside = 4, set(), None, False
    for e in read_events(data, "fixture", verify_checksums=False):
        stop = e.pos + len(e.raw)
        if stop > size:
            break
        sql = e.query.sql if e.type_code == QUERY else None
        if e.type_code in (GTID, ANONYMOUS_GTID, TAGGED_GTID):  # a transaction opens
            info = e.gtid_info
            pending, inside = (info.source, info.tag or "", None if info.anonymous else info.gno), False
        elif pending is None:
            if e.type_code == PREVIOUS_GTIDS:
                gtids = {(src, tag, gno) for (src, tag), ivs in e.gtid_set.intervals.items()
                         for lo, hi in ivs for gno in range(lo, hi)}
            end = stop  # a control event between transactions
        elif sql == "BEGIN":
            inside = True
        elif e.type_code == XID or sql == "COMMIT" or (sql is not None and not inside):
            if pending[2] is not None:  # an anonymous transaction adds no GTID
                gtids.add(pending)
            pending, end = None, stop
    return end, gtids


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=st.sampled_from(MYSQL_FILES), cuts=st.lists(st.floats(0.05, 1.0), min_size=1, max_size=5))
def test_a_growing_file_answers_as_the_file_read_whole(shared_fixtures, tmp_path_factory, monkeypatch, source, cuts):
    data = (shared_fixtures / source).read_bytes()
    path = tmp_path_factory.mktemp("live") / "mysql_bin.000001"
    starts: list[int] = []  # where each walk's first read began

    class Spying(gtid_start.Scanner):
        def scan_into(self, unit_list, buf, off, base, file, limit=1 << 62, at_eof=False):
            if not getattr(self, "began", False):
                self.began = True
                starts.append(base)
            return super().scan_into(unit_list, buf, off, base, file, limit, at_eof)

    monkeypatch.setattr(gtid_start, "Scanner", Spying)
    status = BinlogStatus()
    sizes = sorted({max(300, int(c * len(data))) for c in cuts} | {len(data)})
    previous_end = None
    for size in sizes:
        path.write_bytes(data[:size])
        answer = status.of([path])
        assert answer is not None
        end, gtids = _whole_transactions_to(data, size)
        name, got_end, executed = answer
        assert (name, got_end) == ("mysql_bin.000001", end)
        assert executed is not None
        assert {(src, tag, gno) for (src, tag), ivs in executed.intervals.items() for lo, hi in ivs
                for gno in range(lo, hi)} == gtids
        if previous_end is not None and previous_end > 4:
            assert starts[-1] == previous_end, "the grown file walked again from its start"
        previous_end = got_end
    monkeypatch.undo()


def test_the_answer_given_for_a_smaller_file_stays_as_it_was(shared_fixtures, tmp_path):
    data = (shared_fixtures / MYSQL_57).read_bytes()
    path = tmp_path / "mysql_bin.000001"
    path.write_bytes(data[: len(data) // 2])
    status = BinlogStatus()
    first = status.of([path])
    assert first is not None and first[2] is not None
    before = str(first[2])
    path.write_bytes(data)
    later = status.of([path])
    assert later is not None and str(later[2]) != before
    assert str(first[2]) == before

