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
GTID, QUERY, XID = 33, 2, 16


def _whole_transactions_to(data: bytes, size: int) -> tuple[int, set[int]]:
    """The end of the last whole event outside a transaction in data[:size] (a transaction ends
    at its XID or COMMIT, or, without a BEGIN, at its one statement: DDL), and the gnos of the
    transactions ended there: read from the events themselves."""
    end, gnos, pending, inside = 4, set(), None, False
    for e in read_events(data, MYSQL_57, verify_checksums=False):
        stop = e.pos + len(e.raw)
        if stop > size:
            break
        sql = e.query.sql if e.type_code == QUERY else None
        if e.type_code == GTID:
            pending, inside = e.gtid_info.gno, False
        elif pending is None:
            end = stop  # a control event between transactions
        elif sql == "BEGIN":
            inside = True
        elif e.type_code == XID or sql == "COMMIT" or (sql is not None and not inside):
            gnos.add(pending)
            pending, end = None, stop
    return end, gnos


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.floats(0.05, 1.0), min_size=1, max_size=5))
def test_a_growing_file_answers_as_the_file_read_whole(shared_fixtures, tmp_path_factory, monkeypatch, cuts):
    data = (shared_fixtures / MYSQL_57).read_bytes()
    path = tmp_path_factory.mktemp("live") / "mysql_bin.000001"
    starts: list[int] = []
    reader = gtid_start.BinlogReader

    def spying(stream, name, **kw):
        starts.append(kw.get("start", 0))
        return reader(stream, name, **kw)

    monkeypatch.setattr(gtid_start, "BinlogReader", spying)
    status = BinlogStatus()
    sizes = sorted({max(300, int(c * len(data))) for c in cuts} | {len(data)})
    previous_end = None
    for size in sizes:
        path.write_bytes(data[:size])
        answer = status.of([path])
        assert answer is not None
        end, gnos = _whole_transactions_to(data, size)
        name, got_end, executed = answer
        assert (name, got_end) == ("mysql_bin.000001", end)
        assert executed is not None
        assert {gno for ivs in executed.intervals.values() for lo, hi in ivs for gno in range(lo, hi)} == gnos
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

