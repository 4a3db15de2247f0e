"""Every write into the binlog directory wakes every waiting stream (issue #30): a wake that cannot
have brought a stream anything (its file has the size it had when it last found the end, and the
directory's listing has not changed) costs it a stat, not a segment read; a write that does bring
something is read and sent, and a change of the listing (a new file) is always looked at."""

from __future__ import annotations

import queue
import threading

import pytest

from dumpfilter.binlogs import TailingReader
from dumpfilter.codec import EventType
from dumpfilter.master import service as service_module
from dumpfilter.master.model import Registration
from dumpfilter.master.service import DumpService
from dumpfilter.master.stream.slave_stream import SlaveStream
from dumpfilter.workload import WorkloadSpec, generate

from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

HOURS = 3 * 3600.0
SPURIOUS = 12


def _cut_before_last_transaction(directory):
    """The series' one file, cut before its last transaction's GTID; the bytes cut away."""
    path = next(p for p in sorted(directory.iterdir()) if p.name.endswith(".000001"))
    data = path.read_bytes()
    gtids = [e.pos for _, e in TailingReader(directory, path.name)
             if e.type_code == EventType.MARIADB_GTID]
    path.write_bytes(data[: gtids[-1]])
    return path, data[gtids[-1]:], len(data)


def _consume(svc: DumpService, server_id: int, stop: threading.Event):
    """The batches of a stream of `server_id`, put on a queue by a thread of their own."""
    batches: queue.Queue = queue.Queue()

    def consume() -> None:
        for batch in svc.stream(server_id, heartbeat_period=HOURS, is_active=lambda: not stop.is_set()):
            batches.put(batch)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    return batches, thread


def test_a_wake_that_brings_nothing_costs_a_stat_not_a_segment_read(tmp_path, monkeypatch):
    generate(WorkloadSpec(seed=11, transactions=40, flavor="mariadb"), tmp_path)
    binlog, rest, full_size = _cut_before_last_transaction(tmp_path)
    other = tmp_path / "notes.txt"  # a file that is no binlog's, written while the stream waits
    other.write_bytes(b"")
    streams: list[SlaveStream] = []

    class Recorded(SlaveStream):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            streams.append(self)

    monkeypatch.setattr(service_module, "SlaveStream", Recorded)
    svc = DumpService(tmp_path, safety_poll=HOURS)
    svc.register(Registration(server_id=1))
    stop = threading.Event()
    batches, thread = _consume(svc, 1, stop)
    try:
        while not (batch := batches.get(timeout=60)).caught_up:
            pass
        assert batch.position[1] == full_size - len(rest)
        assert svc.watch.event_driven
        stream = streams[0]
        # The look after the caught-up batch finds nothing (the file has the size the read saw):
        # a stat, no segment read; then the stream waits.
        assert wait_for(lambda: stream.quiet_wakes == 1, give_up=30)
        assert stream.looks == 1
        looks = stream.looks

        for _ in range(SPURIOUS):
            quiet = stream.quiet_wakes
            with open(other, "ab") as f:
                f.write(b"x")
            assert wait_for(lambda: stream.quiet_wakes > quiet, give_up=30), "the stream was not woken"
        assert stream.looks == looks, "a wake with nothing new read a segment"
        assert stream.quiet_wakes >= SPURIOUS + 1

        # The server writes the last transaction: read and sent.
        with open(binlog, "ab") as f:
            f.write(rest)
        got = None
        while got is None or got.position[1] < full_size:
            got = batches.get(timeout=60)
        assert got.position == (binlog.name, full_size) and got.caught_up
        assert stream.looks > looks

        # A new file (the listing changed) is always looked at, though the stream's file did not grow.
        looks = stream.looks
        (tmp_path / "notes-2.txt").write_bytes(b"")
        assert wait_for(lambda: stream.looks > looks, give_up=30), "a change of the listing was not looked at"
    finally:
        stop.set()
        svc.shutdown()
        thread.join(30)


def test_a_segment_from_the_cache_read_before_the_file_grew_is_no_reason_to_wait(tmp_path):
    """A segment the cache kept says where the binlog ended when it was read: a stream that starts
    with it (at_end) must still read what was written since, with no write to wake it."""
    generate(WorkloadSpec(seed=12, transactions=40, flavor="mariadb"), tmp_path)
    binlog, rest, full_size = _cut_before_last_transaction(tmp_path)
    svc = DumpService(tmp_path, safety_poll=HOURS)
    stop = threading.Event()
    threads = []
    try:
        for server_id in (1, 2):
            svc.register(Registration(server_id=server_id))
        first, thread = _consume(svc, 1, stop)
        threads.append(thread)
        while not (batch := first.get(timeout=60)).caught_up:
            pass
        assert batch.position[1] == full_size - len(rest)
        with open(binlog, "ab") as f:  # written before the second stream starts: nothing wakes it
            f.write(rest)
        hits = svc.segments.hits
        second, thread = _consume(svc, 2, stop)
        threads.append(thread)
        got = None
        while got is None or got.position[1] < full_size:
            got = second.get(timeout=60)
        assert got.position == (binlog.name, full_size) and got.caught_up
        assert svc.segments.hits > hits  # it did start with the segment the first stream read
    finally:
        stop.set()
        svc.shutdown()
        for thread in threads:
            thread.join(30)


def test_a_stream_catching_up_stats_no_file_per_segment(tmp_path, monkeypatch):
    """Only a look that reaches the end of what is written reads its file's size (for the next
    wake's check): a stream catching up over many segments stats none of the files it passes."""
    generate(WorkloadSpec(seed=12, transactions=600, flavor="mariadb", max_binlog_size=60_000), tmp_path)
    sizes: list[str] = []
    real = SlaveStream._size
    monkeypatch.setattr(SlaveStream, "_size", lambda self, file: sizes.append(file) or real(self, file))
    looks: list[int] = []
    real_look = SlaveStream._look
    monkeypatch.setattr(SlaveStream, "_look", lambda self: looks.append(1) or real_look(self))
    svc = DumpService(tmp_path, segment_bytes=4_000)
    svc.register(Registration(server_id=1))
    for batch in svc.stream(1, heartbeat_period=HOURS):
        if batch.caught_up:
            break
    files = len([p for p in tmp_path.iterdir() if p.name[-1].isdigit()])
    assert files > 2 and len(looks) > 4 * files
    assert len(sizes) <= 2, sizes  # the last file's end, once or twice
