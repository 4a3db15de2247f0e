"""The binlog directory watch (dumpfilter.binlogs.watch): a write into the directory wakes every
waiter, with no poll to do it (the safety net is set to hours); a waiter whose owner sets its
event is woken too; without inotify the safety net takes over, said once in the log."""

from __future__ import annotations

import threading

import pytest

from dumpfilter.binlogs import watch as watch_module
from dumpfilter.binlogs.watch import DirectoryWatch

from tests.support.waiting import wait_for

HOURS = 3 * 3600.0
WAITERS = 40


def _waiters(watch: DirectoryWatch, n: int):
    """n threads, each waiting for the directory's next change with its own event."""
    woken: list[int] = []
    lock = threading.Lock()
    events = [threading.Event() for _ in range(n)]
    for wake in events:
        watch.add(wake)  # before the change, as a stream adds its wake before it reads

    def wait(i: int) -> None:
        watch.wait(events[i], HOURS)
        with lock:
            woken.append(i)

    threads = [threading.Thread(target=wait, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return woken, threads, events


@pytest.mark.parametrize("change", ["append", "create", "rename"])
def test_a_change_in_the_directory_wakes_every_waiter(tmp_path, change):
    binlog = tmp_path / "mariadb-bin.000001"
    binlog.write_bytes(b"\xfebin")
    watch = DirectoryWatch(tmp_path, safety_poll=HOURS)
    woken, threads, _ = _waiters(watch, WAITERS)
    try:
        assert watch.event_driven
        assert woken == []  # nothing changed yet: nobody is woken
        if change == "append":
            with open(binlog, "ab") as f:
                f.write(b"x" * 19)
        elif change == "create":
            (tmp_path / "mariadb-bin.000002").write_bytes(b"\xfebin")
        else:
            (tmp_path / "incoming").mkdir()
            (tmp_path / "incoming" / "mariadb-bin.000002").write_bytes(b"\xfebin")
            (tmp_path / "incoming" / "mariadb-bin.000002").rename(tmp_path / "mariadb-bin.000002")
        assert wait_for(lambda: len(woken) == WAITERS, give_up=30), f"{len(woken)} of {WAITERS} woken"
        assert watch.changes >= 1
    finally:
        watch.close()  # wakes whatever still waits
        for t in threads:
            t.join(10)


def test_two_watches_of_one_directory_and_one_of_another(tmp_path):
    """One inotify instance serves the process: each directory's changes wake its own waiters only."""
    one, other = tmp_path / "one", tmp_path / "other"
    one.mkdir()
    other.mkdir()
    first, second, third = (DirectoryWatch(one, safety_poll=HOURS), DirectoryWatch(one, safety_poll=HOURS),
                            DirectoryWatch(other, safety_poll=HOURS))
    woken = [_waiters(w, 3) for w in (first, second, third)]
    try:
        (one / "bin.000001").write_bytes(b"\xfebin")
        assert wait_for(lambda: len(woken[0][0]) == 3 and len(woken[1][0]) == 3, give_up=30)
        assert woken[2][0] == []
        first.close()  # the other watch of the same directory keeps its inotify watch
        extra, threads, _ = _waiters(second, 2)
        (one / "bin.000002").write_bytes(b"\xfebin")
        assert wait_for(lambda: len(extra) == 2, give_up=30)
        assert second.event_driven
    finally:
        for w in (first, second, third):
            w.close()


def test_the_owner_of_a_wait_ends_it(tmp_path):
    watch = DirectoryWatch(tmp_path, safety_poll=HOURS)
    woken, threads, events = _waiters(watch, 3)
    try:
        events[1].set()  # a cancel, or a ChangeFilter waiting for the stream
        assert wait_for(lambda: woken == [1], give_up=30)
        assert not events[1].is_set()  # cleared on the way out: the next wait waits
    finally:
        watch.close()


def test_without_inotify_the_safety_net_polls_and_says_so_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(watch_module, "_hub", None)
    monkeypatch.setattr(watch_module, "_hub_failed", False)
    monkeypatch.setattr(watch_module, "_said", set())

    def no_inotify():
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(watch_module, "_Inotify", no_inotify)
    caplog.set_level("WARNING", logger="dumpfilter.binlogs.watch")
    watches = [DirectoryWatch(tmp_path, safety_poll=0.01) for _ in range(3)]
    returned = []
    for w in watches:
        wake = threading.Event()
        w.add(wake)
        w.wait(wake, HOURS)  # returns at the safety-net poll: nothing else would end it
        returned.append(w.event_driven)
    assert returned == [False, False, False]
    lines = [r.getMessage() for r in caplog.records if "inotify is unavailable" in r.getMessage()]
    assert len(lines) == 1 and "polled every" in lines[0]


def test_only_a_change_of_the_listing_moves_listing_changes(tmp_path):
    """A binlog's growth wakes the waiters but leaves `listing_changes` (a stream woken by it may
    trust the file list it has); a file created, renamed in or deleted, or an index written,
    moves it. Without inotify it is None (nothing can be trusted between two looks)."""
    binlog = tmp_path / "bin.000001"
    binlog.write_bytes(b"\xfebin")
    (tmp_path / "bin.index").write_text("./bin.000001\n")
    watch = DirectoryWatch(tmp_path, safety_poll=HOURS)
    wake = threading.Event()
    watch.add(wake)
    try:
        assert watch.event_driven
        listing = watch.listing_changes

        def after(change) -> int:
            before = watch.changes
            change()
            assert wait_for(lambda: watch.changes > before, give_up=30)
            return watch.listing_changes

        for _ in range(5):
            assert after(lambda: binlog.open("ab").write(b"x" * 19)) == listing
        for change in (lambda: (tmp_path / "bin.000002").write_bytes(b"\xfebin"),
                       lambda: (tmp_path / "bin.index").open("a").write("./bin.000002\n"),
                       lambda: (tmp_path / "bin.000002").rename(tmp_path / "bin.000003"),
                       lambda: (tmp_path / "bin.000003").unlink()):
            # (waited for itself: a change counted first may be the last one's late event, a
            # file's close after its creation, which moves `changes` and not the listing)
            change()
            assert wait_for(lambda: watch.listing_changes > listing, give_up=30)
            listing = watch.listing_changes
    finally:
        watch.close()
    assert watch.listing_changes is None
