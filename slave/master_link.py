"""The slave's gRPC link to the master: the master's errors as the CLI reports them, which ones a
retry cannot fix, the call metadata carrying the slave's identity, and the watchdog that ends a
stream on which nothing arrived for --net-timeout seconds."""

from __future__ import annotations

import sys
import threading
import time

import grpc

from dumpfilter.errors import BinlogError, DumpFilterError, PositionError, RuleError, UnknownSlaveError


class MasterError(DumpFilterError):
    """The master ended an RPC with an error; `code` is the gRPC status code name."""

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(f"master: {code}: {message}")


# Errors a retry cannot fix: the master refused this request as such (bad rules, unknown or
# foreign server_id, bad credentials, a purged or corrupt binlog, a newer registration that took
# this server_id). Every other status (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED,
# CANCELLED by a master that ended a stalled stream, INTERNAL, UNKNOWN) is retried with backoff.
FINAL_CODES = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.DATA_LOSS,
    grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.ABORTED,
    grpc.StatusCode.ALREADY_EXISTS})
MAX_BACKOFF = 30.0


class LinkTimeoutError(grpc.RpcError):
    """No batch (heartbeats included) for --net-timeout seconds on an open stream: the link is
    taken for dead and the slave reconnects, as a replica does after slave_net_timeout."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return f"no batch or heartbeat from the master for {self.seconds:g}s (--net-timeout)"


class NetWatch:
    """Cancels a Dump call that waits longer than `timeout` for its next batch."""

    def __init__(self, call: grpc.RpcContext, timeout: float | None):
        self.call, self.timeout = call, timeout
        self.waiting_since: float | None = None
        self.fired = False
        self._stop = threading.Event()
        if timeout:
            threading.Thread(target=self._run, args=(timeout,), name="slave-net-watch", daemon=True).start()

    def _run(self, timeout: float) -> None:
        while not self._stop.wait(min(1.0, timeout / 4)):
            since = self.waiting_since
            if since is not None and time.monotonic() - since > timeout:
                self.fired = True
                self.call.cancel()
                return

    def stop(self) -> None:
        self._stop.set()


def say(message: str) -> None:
    print(f"dumpfilter slave: {message}", file=sys.stderr, flush=True)


# The master's mapping mirrored, so that the CLI exits the same way for the same cause.
_ERRORS: dict[grpc.StatusCode, type[DumpFilterError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: RuleError, grpc.StatusCode.NOT_FOUND: UnknownSlaveError,
    grpc.StatusCode.OUT_OF_RANGE: PositionError, grpc.StatusCode.DATA_LOSS: BinlogError}


def master_error(exc: grpc.RpcError) -> DumpFilterError:
    code, details = exc.code(), exc.details() or ""
    kind = _ERRORS.get(code)
    return kind(f"master: {details}") if kind is not None else MasterError(code.name, details)
