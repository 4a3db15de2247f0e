"""What a command sets up in its own process: SIGTERM taken as Ctrl-C is (`Terminated`), a server's
wait for SIGTERM or SIGINT (`StopSignals`), glibc malloc's thresholds for `slave run` (fixed for the
large buffers a received stream makes and drops by the hundred), and a password scrubbed from the
command line `ps` shows."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable
from typing import Any

# What a shell reports for a process SIGTERM ended (128 + the signal's number).
EXIT_TERMINATED = 128 + signal.SIGTERM


# Seconds between two looks, by the main thread, for a SIGTERM or SIGINT another thread received.
SIGNAL_TURN = 0.5


class StopSignals:
    """SIGTERM and SIGINT for a server command (`master serve`): the handler records the signal and nothing more, and
    the main thread looks every SIGNAL_TURN. Python runs a handler in the main thread between two
    of its steps, whatever it holds then: a handler that set a threading.Event deadlocked when the
    signal came while the main thread was inside that Event's own wait, holding its lock (a CI
    run's master did not end in 30 s of SIGTERM). A look in turns, not one blocking wait: the
    kernel may hand the signal to any thread (grpc's, inotify's), and nothing then wakes the main
    thread for Python to run the handler."""

    def __init__(self) -> None:
        self.received: list[int] = []

    def handler(self, signum: int, _frame: object) -> None:
        self.received.append(signum)

    def wait(self) -> int:
        """The first signal received (SIGTERM or SIGINT), once one has come."""
        while not self.received:
            time.sleep(SIGNAL_TURN)
        return self.received[0]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread where Ctrl-C raises KeyboardInterrupt: every cleanup an
    interrupt runs (each `finally`, `except KeyboardInterrupt` and `except BaseException`) runs for
    it too, so `kill PID` leaves no more behind than Ctrl-C does (issue #62)."""


# Whether SIGTERM has come (`terminate` ran): the command is ending, whatever its cleanup raises.
_terminating = False


def terminate(_signum: int, _frame: Any) -> None:
    """The SIGTERM handler: `Terminated` raised in the main thread, a second SIGTERM ignored."""
    global _terminating
    _terminating = True
    # A second SIGTERM during the cleanup the first one started is not let cut it short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


def terminating() -> bool:
    """Whether SIGTERM has come. What a call the signal cut short raises afterwards replaces
    `Terminated` on its way up: a Spark session's py4j connection, interrupted in the middle of an
    answer, fails the next call made on it during the cleanup (`Py4JNetworkError: Answer from Java
    side is empty`). The command still ends as terminated."""
    return _terminating


def sigterm_as_interrupt() -> Callable[[], None]:
    """SIGTERM raises `Terminated` in the main thread from now on, where it would end the process
    at once (its default); returns what puts the previous handler back. Elsewhere (not the main
    thread, SIGTERM ignored or handled already): nothing changes."""
    try:
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_DFL:
            return lambda: None
        signal.signal(signal.SIGTERM, terminate)
        global _terminating
        _terminating = False
    except ValueError:  # not the main thread of the main interpreter
        return lambda: None

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore

# glibc serves a block of 128 KiB or more with a mapping of its own (the threshold then rises
# with the blocks freed, up to 32 MiB) and hands the top of its heap back to the kernel beyond
# 128 KiB free. A stream's buffers (1 MiB batches and replies, the relay runs, segments read
# whole) are made and dropped by the hundred: each one faulted in fresh pages the kernel had to
# zero first, about a tenth of a slave's CPU and 4-7% of a one-slave stream's time end to end
# (bench_dump, A/B through GLIBC_TUNABLES). Fixed thresholds keep such buffers in the heap,
# reused; memory stays bounded by the largest set of buffers alive at once, plus up to
# TRIM_THRESHOLD kept free for the next ones. The master is left as it is: the same setting
# gained nothing measurable there, and its heap, kept, raised the peak RSS of eight streams by a
# third (it keeps smaller ones of its own: master.serve.malloc_arenas, whose mallopt sets these too).
MMAP_THRESHOLD = 64 << 20
TRIM_THRESHOLD = 128 << 20


def raise_open_files_limit() -> None:
    """The soft limit on open files raised to the hard one, as mysqld raises its open_files_limit
    (`master serve`): every cached or kept segment of a closed binlog is a mapping holding a
    descriptor (up to 768, master/read/segments.py), besides each replica's socket, and a soft
    limit of 1024 (the usual default) would refuse replicas with EMFILE long before the master's
    own bounds."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        with contextlib.suppress(ValueError, OSError):  # left as it is: the bounds still hold, with fewer replicas
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard))


def tune_allocator() -> bool:
    """Sets the thresholds where the C library is glibc; whether it did (elsewhere: nothing)."""
    from dumpfilter.master.serve.malloc_arenas import steady_thresholds

    return steady_thresholds(MMAP_THRESHOLD, TRIM_THRESHOLD)


def scrub_argv(argument: str, secret: str) -> bool:
    """Overwrites `secret` with x's inside the command-line argument `argument` (or `--opt=argument`),
    in the memory the kernel shows as /proc/PID/cmdline and `ps` prints, as the mysql client does
    with -pPASSWORD; returns whether it did (Linux only). The secret stays visible for the moment
    between the exec and this call: a password file or environment variable never shows."""
    if not secret or secret not in argument:
        return False
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()  # from field 3 (state) on: comm may hold spaces
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49 of proc(5))
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            args = mem.read(end - start)
            target, needle = argument.encode(), secret.encode()
            at = 0
            for arg in args.split(b"\0"):
                if arg == target or arg.endswith(b"=" + target):
                    cut = arg.replace(needle, b"x" * len(needle))
                    mem.seek(start + at)
                    mem.write(cut)
                    return True
                at += len(arg) + 1
    return False
