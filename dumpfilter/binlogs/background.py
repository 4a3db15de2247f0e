"""File I/O on a thread of its own for the offline filter loop: the input's next chunk read ahead
(`ReadAhead`) and the filtered output written behind (`WriteBehind`) while the loop scans and
decides. The copies between the page cache and the process are a fifth of a 500 MB `filter`'s
time; the system calls that make them release the GIL, so on a second core they overlap the
loop instead of adding to it. Both keep the order of their calls, and an OSError on the thread
is raised in the caller's next call, as the same exception."""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from typing import BinaryIO


class _Worker:
    """One daemon thread running calls in the order given, at most `depth` waiting (`submit`
    blocks beyond them, so that the memory they hold stays bounded). A call delivers its own
    result and catches its own errors."""

    def __init__(self, name: str, depth: int):
        self._jobs: deque[tuple[Callable[..., object] | None, tuple[object, ...]]] = deque()
        self._queued = threading.Semaphore(0)
        self._free = threading.Semaphore(depth)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., object] | None, *args: object) -> None:
        self._free.acquire()
        self._jobs.append((fn, args))
        self._queued.release()

    def stop(self) -> None:
        """Ends the thread once the calls given before have run."""
        self.submit(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            self._queued.acquire()
            fn, args = self._jobs.popleft()
            if fn is None:
                return
            try:
                fn(*args)
            finally:
                self._free.release()


def pread_full(fd: int, size: int, offset: int) -> bytes:
    """`size` bytes of `fd` from `offset`, fewer only at the end of the file."""
    data = os.pread(fd, size, offset)
    while 0 < len(data) < size:  # a regular file reads short only at its end; anything else is asked again
        more = os.pread(fd, size - len(data), offset + len(data))
        if not more:
            break
        data += more
    return data


class ReadAhead:
    """Reads of a regular file's descriptor at given offsets, each started (`start`) before the
    caller needs it and taken (`take`) when it does, in the same order."""

    def __init__(self, fd: int):
        self._fd = fd
        self._results: deque[bytes | Exception] = deque()
        self._ready = threading.Semaphore(0)
        self._worker = _Worker("dumpfilter-read-ahead", depth=2)

    def start(self, offset: int, size: int) -> None:
        self._worker.submit(self._read, offset, size)

    def _read(self, offset: int, size: int) -> None:
        result: bytes | Exception
        try:
            result = pread_full(self._fd, size, offset)
        except Exception as exc:  # noqa: BLE001 - raised in the caller's thread by take()
            result = exc
        self._results.append(result)
        self._ready.release()

    def take(self) -> bytes:
        """The oldest started read's bytes (waiting for them); its error raised."""
        self._ready.acquire()
        result = self._results.popleft()
        if isinstance(result, Exception):
            raise result
        return result

    def close(self) -> None:
        """Ends the thread (a read still under way finishes first; its bytes are dropped)."""
        self._worker.stop()


_IOV_MAX = 1024  # the buffers one writev takes at most (Linux's IOV_MAX)


def _write_all(fd: int, pieces: list[bytes]) -> None:
    """Every piece written, in order, by writev (the pieces are not joined: no copy of them)."""
    for first in range(0, len(pieces), _IOV_MAX):
        views = [memoryview(p) for p in pieces[first : first + _IOV_MAX]]
        at = 0
        while at < len(views):
            n = os.writev(fd, views[at:])
            while at < len(views) and n >= views[at].nbytes:  # the pieces written whole
                n -= views[at].nbytes
                at += 1
            if n:  # a short write stopped inside this piece
                views[at] = views[at][n:]


class WriteBehind:
    """A write-only binary file whose writes reach the file on a thread of their own, gathered
    into batches of at least `batch` bytes. What `write` is given is copied unless it is
    `bytes` (immutable: a caller may reuse a bytearray at once). `close` writes what is left and
    closes the file. The first error of a write on the thread (OSError: ENOSPC, EPIPE...) stops
    the writes after it and is raised by the next `write` or by `close`."""

    def __init__(self, file: BinaryIO, *, batch: int = 1 << 20, depth: int = 4):
        self._file = file
        self._fd = file.fileno()
        self._batch = batch
        self._pieces: list[bytes] = []
        self._size = 0
        self._worker: _Worker | None = _Worker("dumpfilter-write-behind", depth)
        self._error: Exception | None = None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._error is not None:
            raise self._error
        if self._worker is None:
            raise ValueError("write to closed file")
        if type(data) is not bytes:
            data = bytes(data)
        self._pieces.append(data)
        self._size += len(data)
        if self._size >= self._batch:
            self.flush()
        return len(data)

    def flush(self) -> None:
        """Hands what is gathered to the thread (it is written there, in order)."""
        if self._pieces and self._worker is not None:
            pieces, self._pieces, self._size = self._pieces, [], 0
            self._worker.submit(self._write, pieces)

    def _write(self, pieces: list[bytes]) -> None:
        if self._error is None:
            try:
                _write_all(self._fd, pieces)
            except Exception as exc:  # noqa: BLE001 - raised in the caller's thread
                self._error = exc

    @property
    def closed(self) -> bool:
        return self._worker is None

    def close(self) -> None:
        """Writes what is left, ends the thread, closes the file; raises the first write error."""
        if self._worker is None:
            return
        try:
            self.flush()
        finally:
            self._worker.stop()
            self._worker = None
            self._file.close()
        if self._error is not None:
            raise self._error


__all__ = ["ReadAhead", "WriteBehind", "pread_full"]
