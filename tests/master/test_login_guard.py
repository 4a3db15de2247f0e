"""The login guard (issue #62 goal 1) on its own, its clock held still or moved by hand: the
back-off of an address, an identity and their pair (free failures, a growing delay, then a block
that ends), the trusted address of an identity, and the check pool's bound. Counts and states
only, never durations."""

from __future__ import annotations

import threading

import pytest

from dumpfilter.master.login_guard import (
    BLOCK_AFTER,
    BLOCK_SECONDS,
    FIRST_DELAY,
    FREE_FAILURES,
    MAX_DELAY,
    CheckPool,
    ChecksBusy,
    LoginGuard,
    LoginThrottled,
    address_key,
)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _no_sleep(_seconds: float) -> None:
    """The guard's holds and turns pass at once: these tests count, they never wait."""


def _attempts(guard: LoginGuard, address: str, name: str, n: int, known: bool = True) -> int:
    """`n` wrong-password logins; how many were checked (the rest were refused unchecked)."""
    checked = 0
    for _ in range(n):
        try:
            guard.admit(address, name)
        except LoginThrottled:
            continue
        checked += 1
        guard.failed(address, name, known)
    return checked


def test_failures_earn_a_growing_delay_then_a_block_that_ends():
    clock = Clock()
    guard = LoginGuard(clock, sleep=_no_sleep)
    assert _attempts(guard, "10.0.0.1", "app", 100) == FREE_FAILURES + 1   # the clock holds still
    assert guard.refused["pair"] + guard.refused["address"] + guard.refused["identity"] == 100 - FREE_FAILURES - 1
    clock.now += FIRST_DELAY
    assert _attempts(guard, "10.0.0.1", "app", 10) == 1                     # the delay passed: one more check
    checked = FREE_FAILURES + 2
    while checked < BLOCK_AFTER:                                           # the delays double; then the block
        clock.now += MAX_DELAY
        checked += _attempts(guard, "10.0.0.1", "app", 1)
    assert guard.snapshot()["pairs"] == {"blocked": 1} and guard.snapshot()["addresses"] == {"blocked": 1}
    clock.now += BLOCK_SECONDS - 1
    assert _attempts(guard, "10.0.0.1", "app", 5) == 0
    clock.now += 2
    assert _attempts(guard, "10.0.0.1", "app", 5) == 1                      # one try, then blocked again
    assert guard.failed_by_identity == {"app": BLOCK_AFTER + 1}
    assert guard.failed_by_address == {"10.0.0.1": BLOCK_AFTER + 1}


def test_a_name_the_policy_lacks_backs_off_as_a_known_one_and_counts_apart():
    guard = LoginGuard(Clock(), sleep=_no_sleep)
    assert _attempts(guard, "10.0.0.1", "app", 20) == _attempts(guard, "10.0.0.2", "nobody", 20, known=False)
    assert guard.failed_by_identity == {"app": FREE_FAILURES + 1, "": FREE_FAILURES + 1}


def test_a_flood_cannot_lock_an_identity_out_of_the_address_it_proved_itself_from():
    guard = LoginGuard(Clock(), sleep=_no_sleep)
    guard.succeeded("10.0.0.9", "app")                       # the slave's host
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):     # an attacker's hosts, against the slave's name
        _attempts(guard, address, "app", 30)
    _attempts(guard, "10.0.0.9", "other", 30)                # and from the slave's host, under another name
    with pytest.raises(LoginThrottled):
        guard.admit("10.0.0.4", "app")                       # the name waits, elsewhere
    with pytest.raises(LoginThrottled):
        guard.admit("10.0.0.9", "third")                     # the address waits, for other names
    guard.admit("10.0.0.9", "app")                           # the slave gets its check
    assert guard.trusted("10.0.0.9", "app") and not guard.trusted("10.0.0.1", "app")


def test_ipv6_addresses_count_by_their_64():
    assert address_key("2001:db8:1:2::5") == address_key("2001:db8:1:2:ffff::1") == "2001:db8:1:2::/64"
    assert address_key("::ffff:127.0.0.1") == "127.0.0.1"
    guard = LoginGuard(Clock(), sleep=_no_sleep)
    checked = sum(_attempts(guard, f"2001:db8:1:2::{i:x}", f"name{i}", 1) for i in range(1, 30))
    assert checked == FREE_FAILURES + 1


def test_the_check_pool_runs_at_most_its_workers_and_refuses_past_its_queue():
    pool = CheckPool(workers=2, queue=3)
    release = threading.Event()
    results, errors = [], []

    def slow() -> bool:
        release.wait(30)
        return True

    def caller():
        try:
            results.append(pool.run(slow))
        except ChecksBusy as exc:
            errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(2)]
    for t in threads:
        t.start()
    while pool.running < 2:
        release.wait(0.01)
    more = [threading.Thread(target=caller) for _ in range(3)]
    for t in more:
        t.start()
    while pool.waiting < 3:
        release.wait(0.01)
    with pytest.raises(ChecksBusy):
        pool.run(slow)                                        # the queue is full: refused at once, unchecked
    release.set()
    for t in threads + more:
        t.join(30)
    assert results == [True] * 5 and not errors
    assert pool.most_running == 2 and pool.ran == 5


def test_a_fresh_connection_waits_for_its_keys_turn_and_a_failed_one_is_refused():
    """Issue #82: a blocked pair refuses a connection that failed before, unchecked; a fresh one
    sleeps until the key's next reserved turn (one per first_delay, first come first served) and
    is checked; past RESERVED_SLOTS turns ahead, a fresh one is refused too. A connection that
    proved itself as the name skips the back-off. The guard's own clock and sleep: no time."""
    from dumpfilter.master.login_guard import RESERVED_SLOTS

    clock, slept = Clock(), []
    guard = LoginGuard(clock, sleep=slept.append)
    for n in range(BLOCK_AFTER):
        guard.failed("10.0.0.1", "app", True, f"flood:{n}")
    assert guard.snapshot()["pairs"] == {"blocked": 1}
    with pytest.raises(LoginThrottled):
        guard.admit("10.0.0.1", "app", "flood:0")          # failed already: refused unchecked
    with pytest.raises(LoginThrottled):
        guard.admit("10.0.0.1", "app")                     # no connection named: as before
    held = len(slept)
    guard.admit("10.0.0.1", "app", "fresh:0")              # the key's first turn: at once
    guard.admit("10.0.0.1", "app", "fresh:1")              # the next: one first_delay later
    assert slept[held:] == [FIRST_DELAY] and guard.reserved == 2
    for n in range(2, RESERVED_SLOTS + 1):
        guard.admit("10.0.0.1", "app", f"fresh:{n}")
    assert slept[held:] == [n * FIRST_DELAY for n in range(1, RESERVED_SLOTS + 1)]
    with pytest.raises(LoginThrottled, match="too many logins waiting"):
        guard.admit("10.0.0.1", "app", "fresh:late")
    guard.succeeded("10.0.0.1", "app", "fresh:0")
    for n in range(BLOCK_AFTER):                           # the flood blocks the pair again...
        guard.failed("10.0.0.1", "app", True, f"flood:{n}")
    guard.admit("10.0.0.1", "app", "fresh:0")              # ...but not the connection that proved itself
    with pytest.raises(LoginThrottled):
        guard.admit("10.0.0.1", "other", "fresh:0")        # (as that name only)
    assert guard.snapshot()["reserved"] == RESERVED_SLOTS + 1


def test_a_cheap_proof_is_taken_in_a_quick_turn_and_a_guess_waits_for_a_full_one():
    """Issue #82: with a cheap proof (a password proved before), a fresh connection's first turn
    during a block is a quick one (QUICK_TURNS per first_delay): proved, it is admitted there; a
    guess that does not prove books a full turn for its expensive check. The guard's own clock."""
    from dumpfilter.master.login_guard import QUICK_TURNS

    clock, slept = Clock(), []
    guard = LoginGuard(clock, sleep=slept.append)
    for n in range(BLOCK_AFTER):
        guard.failed("10.0.0.1", "app", True, f"flood:{n}")
    assert guard.admit("10.0.0.1", "app", "slave:0", lambda: True) == "proven" and slept == []
    assert guard.admit("10.0.0.1", "app", "slave:1", lambda: True) == "proven"
    assert slept == pytest.approx([FIRST_DELAY / QUICK_TURNS])   # the next quick turn
    assert guard.admit("10.0.0.1", "app", "guess:0", lambda: False) == "turn"
    assert slept[1:] == pytest.approx([2 * FIRST_DELAY / QUICK_TURNS])   # its quick turn; its full turn: now
    assert guard.admit("10.0.0.1", "app", "guess:1", lambda: False) == "turn"
    assert slept[-2:] == pytest.approx([3 * FIRST_DELAY / QUICK_TURNS, FIRST_DELAY])   # full turns: first_delay apart
    assert guard.admit("10.0.0.1", "app", "guess:2") == "turn"    # no proof offered: the next full turn
    assert slept[-1] == pytest.approx(2 * FIRST_DELAY) and guard.reserved == 5 + 2
