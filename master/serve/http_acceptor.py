"""The /metrics endpoint's acceptor: one selector thread accepts every connection and reads its TLS
handshake and its request head without a thread of its own, each under a deadline; a few
workers answer the heads that are complete. A slow sender (slowloris), from any address, the
scraper's own included, never holds a worker, so a scraper is answered as soon as its head is in.

- At most MAX_PENDING connections wait for their head; a newcomer past them closes the oldest
  waiting (`evicted`), a connection whose head is not in HEAD_TIMEOUT seconds after it came is
  closed (`_expire`), and a head over MAX_HEAD bytes is closed unanswered.
- At most MAX_READY complete heads wait for the WORKERS workers (past them: closed unanswered);
  a worker writes its answer with a HEAD_TIMEOUT socket timeout.
"""

from __future__ import annotations

import logging
import selectors
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("dumpfilter.master")
MAX_PENDING = 256      # connections reading their head at once; a newcomer past them closes the oldest
HEAD_TIMEOUT = 10.0    # seconds a connection has for its TLS handshake and request head
MAX_HEAD = 16384       # bytes of a request head (request line and headers)
WORKERS = 4            # threads that answer complete heads
MAX_READY = 64         # complete heads waiting for a worker
_END = b"\r\n\r\n"

# What answers a complete head: (the connection, blocking, with a timeout; the client's address;
# the head's bytes). The acceptor closes the connection afterwards.
Answer = Callable[[socket.socket, Any, bytes], None]


@dataclass(eq=False)
class _Pending:
    sock: socket.socket
    address: Any
    deadline: float
    handshaking: bool
    head: bytearray = field(default_factory=bytearray)


class HeadAcceptor:
    """Accepts on `listener` (bound and listening) and hands each complete request head to
    `answer` on a worker; `tls` wraps each connection server-side. `stop()` ends it."""

    def __init__(self, listener: socket.socket, answer: Answer, tls: ssl.SSLContext | None = None) -> None:
        self.listener, self.answer, self.tls = listener, answer, tls
        listener.setblocking(False)
        self.pending: OrderedDict[socket.socket, _Pending] = OrderedDict()   # oldest first
        self.evicted = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._stopping = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, None)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self.workers = ThreadPoolExecutor(WORKERS, thread_name_prefix="metrics-answer")
        self.thread = threading.Thread(target=self._loop, name="metrics", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stopping = True
        with suppress(OSError):
            self._wake_w.send(b"x")
        self.thread.join(30)
        self.workers.shutdown(wait=False, cancel_futures=True)
        for pending in list(self.pending.values()):
            self._close(pending)
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _loop(self) -> None:
        while not self._stopping:
            oldest = next(iter(self.pending.values()), None)
            wait = 1.0 if oldest is None else min(1.0, max(0.0, oldest.deadline - time.monotonic()))
            for key, _ in self.selector.select(wait):
                if key.fileobj is self.listener:
                    self._accept()
                elif key.fileobj is self._wake_r:
                    with suppress(OSError):
                        self._wake_r.recv(64)
                else:
                    self._read(key.data)
            self._expire()

    def _accept(self) -> None:
        while True:
            try:
                sock, address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:   # (EMFILE and the like: the next round tries again)
                log.debug("metrics: accept failed", exc_info=True)
                return
            sock.setblocking(False)
            if self.tls is not None:
                try:
                    sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                except (OSError, ValueError):
                    sock.close()
                    continue
            if len(self.pending) >= MAX_PENDING:
                self._close(next(iter(self.pending.values())))
                self.evicted += 1
                log.debug("metrics: %d connections were reading their request: the oldest was closed", MAX_PENDING)
            pending = _Pending(sock, address, time.monotonic() + HEAD_TIMEOUT, self.tls is not None)
            self.pending[sock] = pending
            self.selector.register(sock, selectors.EVENT_READ, pending)

    def _read(self, pending: _Pending) -> None:
        sock = pending.sock
        try:
            if pending.handshaking:
                assert isinstance(sock, ssl.SSLSocket)
                sock.do_handshake()
                pending.handshaking = False
                self.selector.modify(sock, selectors.EVENT_READ, pending)
            while True:
                data = sock.recv(8192)
                if not data:
                    self._close(pending)
                    return
                pending.head += data
                if _END in pending.head or len(pending.head) > MAX_HEAD:
                    break
        except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
            return
        except ssl.SSLWantWriteError:
            self.selector.modify(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, pending)
            return
        except OSError:   # a reset, a failed TLS handshake
            log.debug("metrics: a connection from %s failed", pending.address, exc_info=True)
            self._close(pending)
            return
        if _END not in pending.head:   # over MAX_HEAD bytes without its end
            self._close(pending)
            return
        self._hand_over(pending)

    def _hand_over(self, pending: _Pending) -> None:
        self.selector.unregister(pending.sock)
        del self.pending[pending.sock]
        with self._lock:
            busy = self._in_flight >= MAX_READY + WORKERS
            if not busy:
                self._in_flight += 1
        if busy:
            pending.sock.close()
            return
        self.workers.submit(self._answer, pending)

    def _answer(self, pending: _Pending) -> None:
        sock = pending.sock
        try:
            sock.setblocking(True)
            sock.settimeout(HEAD_TIMEOUT)
            self.answer(sock, pending.address, bytes(pending.head))
        except Exception:  # a broken client: one debug line, never a traceback
            log.debug("metrics: a request from %s failed", pending.address, exc_info=True)
        finally:
            with suppress(OSError):
                sock.close()
            with self._lock:
                self._in_flight -= 1

    def _expire(self) -> None:
        now = time.monotonic()
        while self.pending:
            oldest = next(iter(self.pending.values()))
            if oldest.deadline > now:
                return
            self._close(oldest)

    def _close(self, pending: _Pending) -> None:
        if self.pending.pop(pending.sock, None) is not None:
            with suppress(KeyError, ValueError, OSError):
                self.selector.unregister(pending.sock)
        with suppress(OSError):
            pending.sock.close()
