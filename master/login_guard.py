"""Failed logins, for every face of the master (gRPC, the MySQL endpoint): the failures in a row of
each source address and of each identity name, the back-off that follows them (MySQL's
connection_control and max_connect_errors), the small pool where expensive password checks run
off the serving threads, and the counts /metrics shows.

The back-off, per key (an address; an identity name; the pair of both, as connection_control
counts user@host), a name the policy does not know tracked as a known one is, so the back-off
tells nothing about which names exist:
- the first FREE_FAILURES failures in a row cost nothing more;
- each further one makes the key wait before its next check: FIRST_DELAY seconds, doubling up to
  MAX_DELAY; a login arriving before then is refused without a check (RESOURCE_EXHAUSTED, MySQL's
  ER_HOST_IS_BLOCKED);
- BLOCK_AFTER failures in a row refuse the key for BLOCK_SECONDS; after that it has one try before
  the next block;
- a refusal without a check has its answer held up to HOLD_SECONDS (no longer than its key still
  waits), as connection_control holds a failing login's answer, on at most HOLD_SLOTS sleeping
  threads at once (beyond them: answered at once): a client that retries at once, as a flood does,
  makes about one try a second per slot instead of hundreds, and a held refusal costs no CPU;
- a success clears its pair and its address (unless they are backing off: the flood would get its
  free failures again), and remembers the address as one the identity proved itself from: there only the pair's back-off applies, so a flood from elsewhere, against the
  name or from the slave's own address under other names, cannot lock the slave out;
- a flood from the slave's own address under its own name cannot either (issue #82): the back-off
  refuses unchecked only a login over a connection that already failed one (a gRPC channel that
  sent a wrong password; `connection` is the transport's peer, address and port). A login over a
  fresh connection is never refused for the back-off: it takes the next of its waiting key's
  reserved checks, one per first_delay seconds per key, first come first served (it sleeps until
  its turn, on at most RESERVED_SLOTS threads; past them, or more than RESERVED_SLOTS turns
  ahead, it is refused as before), and its password is checked. A connection that logged in
  as a name skips the back-off for that name (its password is still checked, by the policy's
  proved-password cache). The flood's checks stay bounded (one per first_delay per key, besides
  its FREE_FAILURES), a known and an unknown name wait and answer alike, and every failure is
  counted as before. A MySQL endpoint login is a new connection every time: each is checked in
  its turn.
An IPv6 address counts by its /64 (what one host is usually given).

The constants below are the defaults; the policy file's [login] table sets each (LoginLimits)."""

from __future__ import annotations

import functools
import ipaddress
import math
import os
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NoReturn

from dumpfilter.errors import ResourceExhaustedError

FREE_FAILURES = 3          # connection_control_failed_connections_threshold's default
FIRST_DELAY = 1.0          # connection_control_min_connection_delay's default (1000 ms)
MAX_DELAY = 30.0
BLOCK_AFTER = 10           # failures in a row, then refused for BLOCK_SECONDS (max_connect_errors, for a while)
BLOCK_SECONDS = 300.0
FORGET_AFTER = 3600.0      # a key with no failure for this long starts afresh
MAX_KEYS = 4096            # keys of each kind remembered; the least recently failed are forgotten
MAX_ADDRESS_LABELS = 256   # addresses with series of their own in /metrics; later ones count as "other"
TRUSTED_PER_IDENTITY = 16  # addresses an identity proved itself from, remembered per identity
# Expensive checks (PBKDF2, ed25519's key derivation) run on this many threads of their own, at
# most CHECK_QUEUE more waiting (beyond: refused at once, RESOURCE_EXHAUSTED): a flood of
# password guesses takes at most this much CPU from the streams.
CHECK_WORKERS = max(1, min(4, (os.cpu_count() or 2) // 4))
CHECK_QUEUE = 8
# The held refusals' and the reserved turns' sleeping threads (see the module docstring): the gRPC
# face adds both to its pool, so that they never take a stream's thread.
HOLD_SECONDS = 1.0
HOLD_SLOTS = 16
RESERVED_SLOTS = 16
# A fresh connection's first turn is a quick one (QUICK_TURNS per first_delay per key): there the
# caller's cheap proof (a password proved before, by its keyed digest) may admit it at once; if it
# does not prove, it books a full turn (one per first_delay) for the expensive check. A guess is
# answered no faster than the quick turns, and a slave that proved itself before waits little.
QUICK_TURNS = 20
FAILED = "\0failed"       # a connection's state once one of its logins failed
OTHER = "other"            # the address label of the addresses past MAX_ADDRESS_LABELS
ER_HOST_IS_BLOCKED = 1129


Admitted = Literal["open", "turn", "proven"]   # how LoginGuard.admit let a login through


class LoginThrottled(ResourceExhaustedError):
    """A login refused without a check: its address or its identity failed too often lately."""

    mysql_errno = ER_HOST_IS_BLOCKED


class ChecksBusy(ResourceExhaustedError):
    """A login refused without a check: the password check pool's queue is full."""

    mysql_errno = ER_HOST_IS_BLOCKED


@dataclass(frozen=True)
class LoginLimits:
    """The back-off's thresholds, as the policy file's [login] table gives them:

        [login]
        free_failures = 3      # failures in a row that cost nothing more
        first_delay = 1.0      # seconds the next check then waits, doubling at each failure...
        max_delay = 30.0       #   ...up to this
        block_after = 10       # failures in a row that refuse the key for block_seconds
        block_seconds = 300.0
        forget_after = 3600.0  # a key with no failure for this long starts afresh
        hold_seconds = 1.0     # a refusal without a check is answered after up to this long (0: at once)
    """

    free_failures: int = FREE_FAILURES
    first_delay: float = FIRST_DELAY
    max_delay: float = MAX_DELAY
    block_after: int = BLOCK_AFTER
    block_seconds: float = BLOCK_SECONDS
    forget_after: float = FORGET_AFTER
    hold_seconds: float = HOLD_SECONDS

    @classmethod
    def from_table(cls, table: Any, fail: Callable[[str | None, str], NoReturn]) -> LoginLimits:
        """The limits a [login] table sets (the defaults for the keys it leaves out); `fail(key,
        message)` for the first mistake (an unknown key, a value of the wrong kind or range)."""
        if not isinstance(table, dict):
            fail(None, "must be a table")
        known = [f.name for f in fields(cls)]
        unknown = [key for key in table if key not in known]
        if unknown:
            fail(unknown[0], f"unknown key {unknown[0]!r} (known: {', '.join(known)})")
        values: dict[str, Any] = {}
        for key, value in table.items():
            if key in ("free_failures", "block_after"):
                least = 0 if key == "free_failures" else 1
                if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= 1_000_000:
                    fail(key, f"{key} must be a whole number from {least} to 1000000, not {value!r}")
            elif key == "hold_seconds":
                if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 60:
                    fail(key, f"hold_seconds must be a number of seconds from 0 to 60, not {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 31_536_000:
                fail(key, f"{key} must be a number of seconds more than 0 and at most 31536000 (a year), "
                          f"not {value!r}")
            values[key] = value
        limits = cls(**values)
        if limits.block_after <= limits.free_failures:
            fail("block_after", f"block_after ({limits.block_after}) must be more than free_failures "
                                f"({limits.free_failures}): the failures after the free ones back off, then block")
        if limits.first_delay > limits.max_delay:
            fail("first_delay" if "first_delay" in table else "max_delay",
                 f"first_delay ({limits.first_delay:g} s) must be at most max_delay ({limits.max_delay:g} s)")
        if limits.forget_after < max(limits.block_seconds, limits.max_delay):
            fail("forget_after", f"forget_after ({limits.forget_after:g} s) must be at least block_seconds "
                                 f"({limits.block_seconds:g} s) and max_delay ({limits.max_delay:g} s): a key "
                                 "forgotten sooner would start afresh as its wait ends")
        return limits


# ipaddress takes 30 us to read an IPv4 address and up to 0.2 ms to make an IPv6 one's /64, more
# than the rest of a refused login together: a flood comes from few addresses, so each is read once.
@functools.lru_cache(maxsize=MAX_KEYS)
def address_key(address: str) -> str:
    """The key of a source address: itself for IPv4 (and IPv4-mapped IPv6), its /64 for IPv6."""
    try:
        ip = ipaddress.ip_address(address.strip("[]").split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def _newest(recent: OrderedDict[str, Any], key: str, value: Any, most: int = MAX_KEYS) -> None:
    """`recent[key] = value` as its newest entry; the oldest past `most` are forgotten."""
    recent.pop(key, None)
    recent[key] = value
    while len(recent) > most:
        recent.popitem(last=False)


@dataclass
class _Key:
    failures: int = 0
    not_before: float = 0.0
    last: float = 0.0


class _Backoff:
    """The failures in a row of one kind of key, at most MAX_KEYS of them (callers hold the lock)."""

    def __init__(self, limits: LoginLimits) -> None:
        self.limits = limits
        self.keys: OrderedDict[str, _Key] = OrderedDict()

    def wait(self, key: str, now: float) -> float:
        state = self.keys.get(key)
        return 0.0 if state is None else max(0.0, state.not_before - now)

    def failed(self, key: str, now: float) -> None:
        limits = self.limits
        state = self.keys.pop(key, None) or _Key()
        if now - state.last > limits.forget_after:
            state = _Key()
        state.failures += 1
        state.last = now
        n = state.failures
        if n >= limits.block_after:
            state.failures = limits.block_after - 1   # once the block ends: one try, then the next block
            state.not_before = now + limits.block_seconds
        elif n > limits.free_failures:
            doublings = min(n - limits.free_failures - 1, 64)   # 2 ** 64 s is past any max_delay
            state.not_before = now + min(limits.max_delay, limits.first_delay * 2 ** doublings)
        _newest(self.keys, key, state)

    def cleared(self, key: str) -> None:
        self.keys.pop(key, None)

    def states(self, now: float) -> Counter[str]:
        """How many keys wait before their next check ("delayed") and how many are "blocked"."""
        out: Counter[str] = Counter()
        for state in self.keys.values():
            if state.not_before > now:
                out["blocked" if state.failures >= self.limits.block_after - 1 else "delayed"] += 1
        return out


@dataclass(eq=False)
class _CheckJob:
    """One check waiting in a CheckPool, and its answer (or what it raised) once run."""

    check: Callable[[], bool]
    done: threading.Event = field(default_factory=threading.Event)
    result: bool | None = None  # None: the check ended without an answer (its thread was stopped)
    error: Exception | None = None


class CheckPool:
    """At most `workers` threads run expensive checks; callers wait for theirs. Checks of an
    identity from an address it proved itself from go first. More than `queue` waiting: ChecksBusy."""

    def __init__(self, workers: int = CHECK_WORKERS, queue: int = CHECK_QUEUE):
        self.workers, self.queue = workers, queue
        self._cond = threading.Condition()
        self._waiting: tuple[deque[_CheckJob], deque[_CheckJob]] = (deque(), deque())   # (trusted, others)
        self._threads = 0
        self.running = 0
        self.most_running = 0
        self.ran = 0

    @property
    def waiting(self) -> int:
        return sum(map(len, self._waiting))

    def run(self, check: Callable[[], bool], trusted: bool = False) -> bool:
        job = _CheckJob(check)
        with self._cond:
            if self.waiting >= self.queue:
                raise ChecksBusy(f"too many password checks waiting ({self.queue}): try again later")
            self._waiting[0 if trusted else 1].append(job)
            if self._threads < self.workers:
                self._threads += 1
                threading.Thread(target=self._work, name=f"login-check-{self._threads}", daemon=True).start()
            self._cond.notify()
        job.done.wait()
        if job.error is not None:
            raise job.error
        if job.result is None:
            raise RuntimeError("a password check ended without an answer")
        return job.result

    def _work(self) -> None:
        while True:
            with self._cond:
                while not any(self._waiting):
                    self._cond.wait()
                job = (self._waiting[0] or self._waiting[1]).popleft()
                self.running += 1
                self.most_running = max(self.most_running, self.running)
            try:
                job.result = bool(job.check())
            except Exception as exc:  # handed to the caller, raised on its thread
                job.error = exc
            finally:
                with self._cond:
                    self.running -= 1
                    self.ran += 1
                job.done.set()


class LoginGuard:
    """The failed logins of one master, shared by its faces. `admit` before a check, `check` to
    run it, then `failed` or `succeeded`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, pool: CheckPool | None = None,
                 limits: LoginLimits | None = None, sleep: Callable[[float], object] = time.sleep,
                 hold_slots: int = HOLD_SLOTS):
        self.clock, self.sleep = clock, sleep
        self._holds = threading.BoundedSemaphore(hold_slots)
        self._turns = threading.BoundedSemaphore(RESERVED_SLOTS)
        self.held = 0                                  # refusals whose answer was held
        self._connections: OrderedDict[str, str] = OrderedDict()   # peer -> the name it proved, or FAILED
        self._next_turn: dict[str, float] = {}         # a waiting key -> when its next reserved check is due
        self.reserved = 0                              # logins checked in a reserved turn despite the back-off
        self.pool = pool or CheckPool()
        self.limits = limits or LoginLimits()
        self._lock = threading.Lock()
        self._addresses, self._identities, self._pairs = (_Backoff(self.limits) for _ in range(3))
        self._trusted: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()
        self.failed_by_identity: Counter[str] = Counter()   # identity (known ones; "" for names the policy lacks)
        self.failed_by_address: Counter[str] = Counter()    # address key, or OTHER
        self.refused: Counter[str] = Counter()              # logins refused without a check, by the key that
        #                                                 waits ("address" / "identity" / "pair") or "busy"
        self.checks: Counter[str] = Counter()               # checks run, by "pool" / "inline"

    def trusted(self, address: str, name: str) -> bool:
        with self._lock:
            return address_key(address) in self._trusted.get(name, ())

    def admit(self, address: str, name: str, connection: str = "",
              proves: Callable[[], bool] | None = None) -> Admitted:
        """Return when the login may be checked: at once, unless the pair must wait before its
        next check (or, from an address the name has not proved itself from, the address or the
        name); then a fresh `connection` sleeps until its key's reserved turn, and one that failed
        a login before (or an unknown one, "") is refused: LoginThrottled. With `proves` (a cheap
        proof of the password), the fresh connection's first turn is a quick one, where a proof
        admits it ("proven"); else it waits for a full turn ("turn": its check then goes first in
        the pool). "open": admitted without a turn."""
        key = address_key(address) if address else ""
        with self._lock:
            now = self.clock()
            state = self._connections.get(connection) if connection else FAILED
            if state == name:
                return "open"   # this connection proved itself as `name`: its password is checked, unthrottled
            waits = [(self._pairs.wait(f"{key}\0{name}", now), "pair")]
            if key not in self._trusted.get(name, ()):
                waits += [(self._addresses.wait(key, now), "address") if key else (0.0, "address"),
                          (self._identities.wait(name, now), "identity")]
            wait, why = max(waits)
            if not wait:
                return "open"
            fresh = state is None
            turn_key = f"{why}\0{key}\0{name}" if why == "pair" else f"{why}\0{key if why == 'address' else name}"
            interval = self.limits.first_delay / (QUICK_TURNS if proves is not None else 1)
            turn = self._book(("quick\0" if proves is not None else "") + turn_key, now, interval) if fresh else None
            if turn is None:
                self.refused[why] += 1
        if turn is not None:
            if self._wait_turn(turn):
                if proves is None:
                    return "turn"
                if proves():
                    return "proven"
                with self._lock:   # not proved cheaply: a full turn for the expensive check
                    turn = self._book(turn_key, self.clock(), self.limits.first_delay)
                if turn is not None and self._wait_turn(turn):
                    return "turn"
            with self._lock:
                self.refused[why] += 1
        # (one wording whichever key waits: a known and an unknown name are refused alike)
        refusal = LoginThrottled("access denied: too many failed logins, and too many logins waiting for their "
                                 "turn: try again later" if fresh else
                                 f"access denied: too many failed logins; no password is checked for "
                                 f"{math.ceil(wait)} s more")
        self.hold(wait)
        raise refusal

    def _book(self, turn_key: str, now: float, interval: float) -> float | None:
        """The seconds until `turn_key`'s next turn (turns `interval` apart), booked; None when it
        is more than RESERVED_SLOTS turns ahead (callers hold the lock)."""
        turn = max(now, self._next_turn.get(turn_key, 0.0))
        if turn - now > RESERVED_SLOTS * interval:
            return None
        self._next_turn[turn_key] = turn + interval
        if len(self._next_turn) > MAX_KEYS:
            self._next_turn = {k: t for k, t in self._next_turn.items() if t > now}
        return turn - now

    def _wait_turn(self, seconds: float) -> bool:
        """Sleep `seconds` until a reserved turn, on one of RESERVED_SLOTS slots: False when none
        is free. The thread sleeps: no CPU."""
        if seconds > 0:
            if not self._turns.acquire(blocking=False):
                return False
            try:
                self.sleep(seconds)
            finally:
                self._turns.release()
        with self._lock:
            self.reserved += 1
        return True

    def hold(self, wait: float) -> None:
        """Hold a refusal's answer for up to `hold_seconds` (no longer than `wait`), when one of
        the hold slots is free; else return at once. The thread sleeps: no CPU."""
        seconds = min(wait, self.limits.hold_seconds)
        if seconds <= 0 or not self._holds.acquire(blocking=False):
            return
        try:
            with self._lock:
                self.held += 1
            self.sleep(seconds)
        finally:
            self._holds.release()

    def check(self, check: Callable[[], bool], expensive: bool, address: str = "", name: str = "",
              in_turn: bool = False) -> bool:
        """Run `check` (a password comparison): in the pool when it is expensive, first there when
        `in_turn` (admitted in a reserved turn) or from an address the name proved itself from."""
        if not expensive:
            with self._lock:
                self.checks["inline"] += 1
            return bool(check())
        try:
            ok = self.pool.run(check, trusted=in_turn or bool(address) and self.trusted(address, name))
        except ChecksBusy:
            with self._lock:
                self.refused["busy"] += 1
            self.hold(self.limits.hold_seconds)
            raise
        with self._lock:
            self.checks["pool"] += 1
        return ok

    def failed(self, address: str, name: str, known: bool, connection: str = "") -> None:
        key = address_key(address) if address else ""
        with self._lock:
            now = self.clock()
            if connection:
                _newest(self._connections, connection, FAILED)
            self.failed_by_identity[name if known else ""] += 1
            if key:
                label = key if key in self.failed_by_address or len(self.failed_by_address) < MAX_ADDRESS_LABELS \
                    else OTHER
                self.failed_by_address[label] += 1
                self._addresses.failed(key, now)
            self._identities.failed(name, now)
            self._pairs.failed(f"{key}\0{name}", now)

    def succeeded(self, address: str, name: str, connection: str = "") -> None:
        key = address_key(address) if address else ""
        with self._lock:
            now = self.clock()
            if connection:
                _newest(self._connections, connection, name)
            # A key backing off is not cleared: a flood over connections that failed already would
            # get its free failures again at each of the slave's logins (its fresh connections take
            # their turns instead, and a connection that logged in skips the back-off).
            if not self._pairs.wait(f"{key}\0{name}", now):
                self._pairs.cleared(f"{key}\0{name}")
            if key:
                if not self._addresses.wait(key, now):
                    self._addresses.cleared(key)
                mine = self._trusted.get(name) or OrderedDict()
                _newest(mine, key, None, TRUSTED_PER_IDENTITY)
                _newest(self._trusted, name, mine)

    def snapshot(self) -> dict[str, Any]:
        """The counts /metrics shows, taken under the lock."""
        with self._lock:
            now = self.clock()
            return {"by_identity": dict(self.failed_by_identity), "by_address": dict(self.failed_by_address),
                    "refused": dict(self.refused), "checks": dict(self.checks),
                    "addresses": dict(self._addresses.states(now)), "identities": dict(self._identities.states(now)),
                    "pairs": dict(self._pairs.states(now)), "held": self.held, "reserved": self.reserved}
