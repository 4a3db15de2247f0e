"""The Dump handler's send-ahead (master.stream.send_ahead.SendAhead): the stream's replies made on a
thread while grpc sends the one before, in order, at most DEPTH ahead, an error after the
replies made before it, and the stream closed (its cleanup run) whenever the handler ends or
the RPC is gone."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import grpc
import pytest

from dumpfilter.master.serve.grpc_server import _dump_reply_bytes
from dumpfilter.master.stream.send_ahead import OutputBudget, SendAhead
from dumpfilter.v1 import dump_pb2
from tests.support.dump_helpers import run_slave
from dumpfilter.lab.ports import free_port


class Stream:
    """A stream of numbered replies that records how far it got and whether it was closed."""

    def __init__(self, n: int, fail_at: int | None = None):
        self.n, self.fail_at = n, fail_at
        self.made = 0
        self.closed = threading.Event()

    def __call__(self):
        try:
            for i in range(self.n):
                if i == self.fail_at:
                    raise ValueError(f"bad event at {i}")
                self.made += 1
                yield i
        finally:
            self.closed.set()


def _wait(predicate, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_replies_come_in_order_and_the_stream_is_closed_at_its_end():
    stream = Stream(200)
    ahead = SendAhead(stream(), "t")
    assert list(ahead) == list(range(200))
    ahead.close()
    assert stream.closed.is_set()


def test_at_most_depth_replies_are_made_ahead_of_a_reader_that_waits():
    stream = Stream(1000)
    ahead = SendAhead(stream(), "t")
    it = iter(ahead)
    assert next(it) == 0
    time.sleep(0.3)  # the reader waits (grpc in a send): the thread fills the queue, then waits
    assert stream.made <= 1 + SendAhead.DEPTH + 1  # taken, queued, one in hand
    assert [next(it) for _ in range(5)] == [1, 2, 3, 4, 5]
    ahead.close()
    assert stream.closed.is_set() and stream.made < 20


def test_an_error_reaches_the_reader_after_the_replies_made_before_it():
    stream = Stream(10, fail_at=3)
    got = []
    with pytest.raises(ValueError, match="bad event at 3"):
        for reply in SendAhead(stream(), "t"):
            got.append(reply)
    assert got == [0, 1, 2]
    assert _wait(stream.closed.is_set)


def test_close_mid_stream_stops_the_thread_and_runs_the_streams_cleanup():
    stream = Stream(10**9)
    ahead = SendAhead(stream(), "t")
    it = iter(ahead)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    ahead.close()
    assert stream.closed.is_set()  # before close returns: the slot is free for the next stream
    assert not ahead._thread.is_alive()


def test_a_gone_rpc_stops_the_thread_without_close():
    active = threading.Event()
    active.set()
    stream = Stream(10**9)
    ahead = SendAhead(stream(), "t", active.is_set)
    assert next(iter(ahead)) == 0
    reader = threading.Thread(target=lambda: list(it))
    it = iter(ahead)
    assert next(it) == 1
    reader.start()
    active.clear()  # the client went away: the thread stops, and so does a handler still reading
    assert _wait(stream.closed.is_set)
    assert _wait(lambda: not ahead._thread.is_alive())
    reader.join(5)
    assert not reader.is_alive()


def test_a_served_master_stops_at_sigterm_after_its_slave_left(workload_dir, tmp_path):
    """`master serve` streams to a slave that leaves once caught up, then ends within its grace
    period at SIGTERM: no Dump handler is left waiting for replies that never come."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir",
                             str(workload_dir), "--listen", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
        slave = run_slave(f"127.0.0.1:{port}", tmp_path / "relay", 7)
        assert slave.caught_up and slave.counters.events_relayed > 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 143  # drained, then as every command ends at SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in proc.stderr.read()


def test_the_replies_of_every_stream_made_and_not_sent_stay_within_the_output_budget():
    budget = OutputBudget(10_000)
    made = []

    def stream(tag: int):
        for i in range(100):
            made.append(tag)
            yield (tag, i), [b"x" * 3_000]  # (reply, parts) as the Dump handler's

    aheads = [SendAhead(stream(tag), f"t{tag}", budget=budget) for tag in range(4)]
    readers = [iter(a) for a in aheads]
    assert next(readers[0]) == ((0, 0), [b"x" * 3_000])
    # Nobody reads on: past the budget, only a stream holding nothing makes a reply (each thread
    # then waits with one more made): at most the budget plus one reply per stream is held.
    assert _wait(lambda: len(made) >= 8)
    time.sleep(0.3)
    assert budget.used <= 10_000 + 4 * 3_000 and len(made) <= (10_000 // 3_000 + 4) + 4
    assert len(made) < 4 + 4 * (SendAhead.DEPTH + 1)  # fewer than without a budget
    # Each stream is read by a handler of its own: all get to their end, nothing waits for good.
    threads = [threading.Thread(target=lambda r=r: [None for _ in r]) for r in readers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads) and made.count(2) == 100
    for ahead in aheads:
        ahead.close()
    assert budget.used == 0  # everything sent, or closed, gave its bytes back
    stalled = SendAhead(stream(9), "t9", budget=budget)
    assert next(iter(stalled))[0] == (9, 0)
    stalled.close()  # closed with replies made and not sent
    assert _wait(lambda: budget.used == 0)


def test_a_live_stream_is_run_by_the_handler_until_it_falls_behind():
    """Once a reply says the stream reached the binlog's end, the thread steps aside and the
    handler makes the next replies itself (no hand-over between threads for a live batch), until
    one that is not at the end, which gives the stream back to the thread; replies keep their
    order throughout, and closing while the handler has the stream runs its cleanup."""
    made_by: list[tuple[int, str]] = []
    closed = threading.Event()
    # (number, at the end?): caught up at 3, behind again at 6 (a burst), caught up at 9.
    script = [(i, i in (3, 4, 5, 9, 10, 11)) for i in range(12)]

    def stream():
        try:
            for reply in script:
                made_by.append((reply[0], threading.current_thread().name))
                yield reply
            while True:  # live, nothing new: as a stream waits at the binlog's end
                time.sleep(0.01)
                yield (99, True)
        finally:
            closed.set()

    ahead = SendAhead(stream(), "ahead-thread", at_end=lambda reply: reply[1])
    got = []
    for reply in ahead:
        got.append(reply[0])
        if len(got) == 13:
            break
    me = threading.current_thread().name
    assert got == list(range(12)) + [99]
    by = dict(made_by)
    assert [by[i] for i in (0, 1, 2, 3)] == ["ahead-thread"] * 4
    assert [by[i] for i in (4, 5, 6)] == [me] * 3  # after 3 (at the end): the handler's, 6 included
    assert by[7] == "ahead-thread" and by[9] == "ahead-thread"  # 6 was behind: the thread again
    assert by[10] == me and by[11] == me
    assert ahead.handled == 6
    ahead.close()
    assert closed.is_set() and not ahead._thread.is_alive()


def test_with_more_streams_than_cpus_the_handler_makes_each_reply(workload_dir, tmp_path):
    """DumpService.crowded (more live streams than CPUs): each Dump handler makes its stream's
    replies itself, between its sends, instead of a thread of the stream's own ahead of it (two
    thread switches under the GIL per reply; the other streams keep the CPUs busy). The slaves
    relay exactly what they relay from an uncrowded master."""
    from dumpfilter.master.serve.grpc_server import create_server
    from tests.support.dump_helpers import relay_units

    relayed = {}
    for cpus in (64, 0):  # 0: every stream is one too many
        master, port = create_server(workload_dir, "127.0.0.1:0", batch_bytes=16 << 10)  # several replies
        master.service.cpus = cpus
        servicer = master.servicer
        decisions: list[bool] = []
        made_by_handler = servicer._made_by_handler
        servicer._made_by_handler = lambda reply: decisions.append(made_by_handler(reply)) or decisions[-1]
        try:
            relay = tmp_path / f"relay-{cpus}"
            run_slave(f"127.0.0.1:{port}", relay, 7)
            relayed[cpus] = relay_units(relay)
        finally:
            master.stop(1.0)
        assert len(decisions) >= 3, "the workload fits too few replies to tell"
        if cpus:
            assert decisions[:-1] == [False] * (len(decisions) - 1)  # made ahead until caught up
        else:
            assert all(decisions)
    assert relayed[0] == relayed[64] and relayed[0]


def test_a_reply_grpc_has_serialized_holds_its_events_once():
    """grpc keeps each reply (and the handler's loop its own reference) until the stream has made
    the next one: once `_dump_reply_bytes` has its wire bytes, the reply gives up its pieces, so
    that a stream holds the events of the reply being sent once (besides grpc core's copy), not
    also as pieces through the send and the next reply's making; the output budget still gets
    every reply's bytes back."""
    budget = OutputBudget(1 << 20)

    def stream():
        for i in range(20):
            yield dump_pb2.DumpBatch(transactions=i), [bytes([i]) * 3_000, b"y" * 500]

    held = []
    for reply in SendAhead(stream(), "t", budget=budget):
        wire = _dump_reply_bytes(reply)  # as grpc's serializer, before the handler is asked for the next
        assert dump_pb2.DumpBatch.FromString(wire).events[:1] == bytes([reply[0].transactions])
        held.append(reply)  # as grpc's loop holds it while the next is made
        assert sum(len(part) for r in held for part in r[1]) == 0
    assert len(held) == 20
    assert _wait(lambda: budget.used == 0)
