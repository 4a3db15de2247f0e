"""`master serve` ends at a SIGTERM whichever of its threads the kernel hands it to. A signal sent
to a process goes to any thread that does not block it, and only the main thread runs Python's
handlers: a main thread blocked in one endless wait was never woken, and the master served on
(a CI run's `stop_master` timed out this way, about once in sixty stops under load)."""

from __future__ import annotations

import ctypes
import threading
import os
import signal
import subprocess

import pytest

from tests.support.master_command import free_port, serve_master, stop_master
from tests.support.waiting import wait_for

GIVE_UP = 5.0  # seconds a wait the handler ended may take to return (it takes a turn of 0.01 s)

pytestmark = pytest.mark.timeout(120)


def _tgkill(pid: int, tid: int, sig: int) -> None:
    """Send `sig` to one thread `tid` of process `pid` (tgkill(2): glibc 2.30 and later)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def _main_thread_sleeps(pid: int) -> bool:
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0] == "S"


def test_a_sigterm_taken_by_another_thread_stops_the_master(workload_dir):
    proc, _address = serve_master(workload_dir, "--mysql-listen", f"127.0.0.1:{free_port()}")
    try:
        for line in proc.stderr:  # the last thing it starts, just before it waits for a signal
            proc.head += line
            if "MySQL protocol for real replicas" in line:
                break
        # then its main thread waits: five looks in a row find it asleep
        assert wait_for(lambda: all(_main_thread_sleeps(proc.pid) for _ in range(5)))
        others = sorted(int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid)
        assert others, "master serve runs its endpoints on threads"
        _tgkill(proc.pid, others[0], signal.SIGTERM)  # the first thread it started (grpc's timer)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("master serve ignored a SIGTERM its main thread did not receive")
    finally:
        stderr = stop_master(proc) if proc.poll() is None else proc.head + proc.stderr.read()
    assert proc.returncode == 143, stderr  # drained, then as every command ends at SIGTERM
    assert "shutting down, draining streams" in stderr and "Traceback" not in stderr, stderr



class _EventStop:
    """What `master serve` did before: the handler set a threading.Event the main thread waited on."""

    def __init__(self) -> None:
        self.event, self.received = threading.Event(), []

    def handler(self, signum: int, _frame: object) -> None:
        self.received.append(signum)
        self.event.set()

    def wait(self) -> int:
        while not self.event.wait(0.01):
            pass
        return self.received[0]


def _first_stuck_step(make, steps: int) -> int | None:
    """Run `make().wait()` once per step k < `steps`, running its handler (as Python runs a signal's,
    in the waiting thread, between two of its steps) at step k: the first k whose wait never ended."""
    import sys

    for k in range(1, steps):
        stopper, count = make(), [0]

        def tracer(frame, event, _arg, stopper=stopper, count=count, k=k):
            frame.f_trace_opcodes = True
            if event == "opcode":
                count[0] += 1
                if count[0] == k:
                    stopper.handler(signal.SIGTERM, None)
            return tracer

        def run(stopper=stopper, tracer=tracer):
            sys.settrace(tracer)
            try:
                stopper.wait()
            finally:
                sys.settrace(None)

        thread = threading.Thread(target=run, daemon=True)  # (one that deadlocks is left behind)
        thread.start()
        thread.join(GIVE_UP)
        if thread.is_alive():
            return k
    return None


def test_a_signal_at_any_step_of_the_wait_ends_it(monkeypatch):
    """The handler runs between two steps of the main thread, whatever it holds: at each step of
    `master serve`'s wait, it ends the wait. The handler that set an Event deadlocked at the steps
    where the Event's own wait held its lock (shown on the former design: it must get stuck)."""
    from dumpfilter.cli import process

    monkeypatch.setattr(process, "SIGNAL_TURN", 0.01)
    assert _first_stuck_step(process.StopSignals, 80) is None
    assert _first_stuck_step(_EventStop, 80) is not None  # the former design: some step deadlocks
