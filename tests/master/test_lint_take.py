"""LintJobs.take, which every Dump batch calls: the slave's lint warnings once, then only what is
new, and the lock left alone while nothing that could tell it more has happened (`changes`)."""

from __future__ import annotations

import threading

from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.master.lint_jobs import DONE, LintJobs, _Follower, _Sub


class _CountingLock:
    def __init__(self) -> None:
        self.lock, self.taken = threading.Lock(), 0

    def __enter__(self) -> None:
        self.taken += 1
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def _jobs(tmp_path) -> tuple[LintJobs, _Follower, _CountingLock]:
    jobs = LintJobs(tmp_path)
    key = (RuleSet(do_db=("db1",)), Settings(flavor="mariadb"), None)
    follower = _Follower(key, (RuleSet(wild_do_table=("shop.",)), None, None, None, True))
    follower.state = DONE
    jobs.followers[key] = follower
    jobs.subs[7] = _Sub(key)
    lock = jobs.lock = _CountingLock()  # type: ignore[assignment]
    return jobs, follower, lock


def test_take_tells_once_and_leaves_the_lock_alone_until_something_changes(tmp_path):
    jobs, follower, lock = _jobs(tmp_path)
    first = jobs.take(7)
    assert first and "keeps no table" in first[0], first
    assert lock.taken == 1
    for _ in range(5):
        assert jobs.take(7) == []
    assert lock.taken == 1, "take took the lock with nothing new to tell"
    assert jobs.take(8) == [] and lock.taken == 2, "a server_id without a subscription is looked up under the lock"


def test_a_change_told_under_the_lock_reaches_the_next_take(tmp_path):
    jobs, follower, lock = _jobs(tmp_path)
    jobs.take(7)
    with jobs.lock:  # what `finished` does with a look that found a divergence
        jobs.changes += 1
        follower.diverges = 3
        follower.position = ("master-bin.000001", 400)
    told = jobs.take(7)
    assert len(told) == 1 and "3 write(s)" in told[0] and "master-bin.000001:400" in told[0], told
    assert jobs.take(7) == []


def test_forget_moves_changes_and_ends_what_is_told(tmp_path):
    jobs, follower, lock = _jobs(tmp_path)
    jobs.take(7)
    before = jobs.changes
    jobs.forget(7)
    assert jobs.changes > before
    assert jobs.take(7) == [] and 7 not in jobs.subs
