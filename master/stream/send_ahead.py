"""The Dump handler's read-ahead: a stream's next replies made on a thread while grpc sends the
one before, within one byte budget over every stream (OutputBudget), and a live stream run by
the handler itself."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Generator, Iterator, Sequence, Sized
from typing import Generic, TypeVar

# A reply: (the message, its pieces of bytes, which the budget counts)
ReplyT = TypeVar("ReplyT", bound="tuple[object, Sequence[Sized]]")


class OutputBudget:
    """The bytes of Dump replies made and not yet sent, over every stream, bounded: a stream
    that holds replies not sent waits before making more while the budget is spent; one that
    holds none always makes its next (so a slave that stops reading holds a few replies, never
    the others' turn). Without it each stream holds up to DEPTH + 2 replies of up to a batch
    each (queued, in the thread's hands, in grpc's): 64 slaves that read slowly held 64 x 4 MB,
    over the master's 300 MB (bench fanout_procs)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._cond = threading.Condition()

    def take(self, n: int, go: Callable[[], bool], holding: Callable[[], bool]) -> bool:
        """Waits, if the stream is `holding` replies not sent, for room for `n` bytes while
        `go()`; False when it stopped waiting."""
        with self._cond:
            while holding() and self.used + n > self.limit:
                if not go():
                    return False
                self._cond.wait(0.1)
            self.used += n
            return True

    def give(self, n: int) -> None:
        if n:
            with self._cond:
                self.used -= n
                self._cond.notify_all()


OUTPUT_BYTES = 48 << 20  # the Dump replies in flight, see OutputBudget


class _Mark:
    """A mark the thread queues besides replies (SendAhead._END, SendAhead._PARKED)."""

    __slots__ = ()


class SendAhead(Generic[ReplyT]):
    """Makes a stream's next replies while grpc sends the one before: a thread runs the stream
    (the binlog read, the scan, the decisions, the protobuf reply) up to DEPTH replies ahead of
    the Dump handler, which waits in each send until flow control lets it out (MySQL's dump
    thread likewise fills its net buffer while the socket drains). Replies keep their order, an
    error reaches the handler after the replies made before it, and memory stays bounded: DEPTH
    replies of at most one batch each. The stream's counters (Stats, P_S) count a batch when it
    is made, up to DEPTH batches before grpc has sent it. Stopped (`close`) when the handler
    ends, for whatever reason; the stream's own cleanup then runs on the thread.

    A live stream has nothing to read ahead: once a reply says the stream reached the binlog's
    end, the thread steps aside (`_PARKED`) and the handler runs the stream itself, so that a
    live batch goes from the binlog to the socket on one thread, without a hand-over through
    the queue (a wake-up under the GIL, 0.1-0.3 ms here). The first reply that is not at the end
    (the primary wrote faster than the stream sends) gives the stream back to the thread. The
    stream is run by one thread at a time. The Dump handler also keeps the stream while the master
    is crowded (more streams than CPUs, DumpFilterServicer._made_by_handler): reading ahead then
    only adds two thread switches per reply, while the other streams keep the CPUs busy."""

    DEPTH = 2
    _END = _Mark()
    _PARKED = _Mark()  # queued after a caught-up reply: the handler runs the stream from here

    def __init__(self, replies: Generator[ReplyT, None, None], name: str,
                 is_active: Callable[[], bool] = lambda: True, budget: OutputBudget | None = None,
                 at_end: Callable[[ReplyT], bool] = lambda reply: False) -> None:
        self._queue: queue.Queue[ReplyT | _Raised | _Mark] = queue.Queue(self.DEPTH)
        # (reply, parts): the parts' bytes are taken from `budget` when made, given back once sent
        self._budget = budget
        self._taken = self._given = 0  # written by the thread and by the handler, one each
        self._settled, self._settled_lock = False, threading.Lock()
        self._stop = threading.Event()
        self._resume = threading.Event()  # set by the handler: the thread runs the stream again
        self._active = is_active  # the RPC's: a handler grpc dropped without closing stops it too
        self._finished = threading.Event()  # the thread is done: nothing more will be queued
        self._replies = replies
        self._at_end = at_end  # a reply says the stream reached the binlog's end
        self._lent = False  # the handler runs the stream (from _PARKED until it gives it back)
        self.handled = 0  # replies the handler made itself (a test looks)
        self._thread = threading.Thread(target=self._run, args=(replies,), name=name, daemon=True)
        self._thread.start()

    def _run(self, replies: Generator[ReplyT, None, None]) -> None:
        budget = self._budget
        try:
            for reply in replies:
                if budget is not None:
                    n = sum(len(part) for part in reply[1])
                    if not budget.take(n, self._going, self._holding):
                        return
                    self._taken += n
                if not self._put(reply) or self._stop.is_set() or (self._at_end(reply) and not self._park()):
                    return
            self._put(self._END)
        except Exception as exc:  # noqa: BLE001 - carried to the handler, which maps it to a status
            self._put(_Raised(exc))
        finally:
            try:
                if not self._lent:  # else `close` closes it, on the handler's thread
                    replies.close()
            finally:
                self._finished.set()
                if self._stop.is_set():  # closed (the handler is done) before the thread ended
                    self._settle()

    def _park(self) -> bool:
        """Lends the stream to the handler until it gives it back; False once stopped (`close`,
        which the handler calls when it is done, also with the stream lent)."""
        self._resume.clear()
        self._lent = True
        if not self._put(self._PARKED):
            self._lent = False
            return False
        self._resume.wait()
        return not self._stop.is_set()

    def _holding(self) -> bool:
        return self._taken > self._given

    def _going(self) -> bool:
        return not self._stop.is_set() and self._active()

    def _put(self, item: ReplyT | _Raised | _Mark) -> bool:
        while self._going():
            with contextlib.suppress(queue.Full):
                self._queue.put(item, timeout=0.1)
                return True
        return False

    def __iter__(self) -> Iterator[ReplyT]:
        while True:
            try:
                item = self._queue.get(timeout=0.1)
            except queue.Empty:
                # Stopped without an end mark (the RPC is gone, or closed): nothing more comes.
                if self._finished.is_set() and self._queue.empty():
                    return
                continue
            if isinstance(item, _Raised):
                raise item.exc
            if isinstance(item, _Mark):
                if item is self._END:
                    return
                # _PARKED. The thread waits, its stream at the binlog's end: run it here until a reply
                # that is not (its error, or its end, is this handler's at once).
                while not self._stop.is_set():
                    reply = next(self._replies, self._END)
                    if isinstance(reply, _Mark):  # the stream's end
                        return
                    self.handled += 1
                    yield reply
                    if not self._at_end(reply):
                        break
                self._lent = False
                self._resume.set()
                continue
            budget = self._budget  # (a reply's bytes counted before grpc's serializer takes its parts)
            n = 0 if budget is None else sum(len(part) for part in item[1])
            yield item
            if budget is not None:  # grpc has sent it
                self._given += n
                budget.give(n)

    def close(self) -> None:
        """Ends the stream: the thread stops before its next reply (a put it waits in is freed)
        and closes the stream, whose cleanup frees its slot; waited for, but never for good."""
        self._stop.set()
        self._resume.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
        self._thread.join(timeout=2.0)
        if self._lent:  # the stream was the handler's, which is done with it (this is its thread)
            self._replies.close()
        if self._finished.is_set():
            self._settle()

    def _settle(self) -> None:
        """Once the handler is done and the thread too: the budget taken for replies not sent back."""
        with self._settled_lock:
            if self._budget is not None and not self._settled:
                self._settled = True
                self._budget.give(self._taken - self._given)


class _Raised:
    __slots__ = ("exc",)

    def __init__(self, exc: Exception) -> None:
        self.exc = exc
