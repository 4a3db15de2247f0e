"""The slave's group commit of relay-log.info (slave.relay_log.Committer): a recorded position
never names relay bytes that were not fsync'd before it was written, batches received while a
commit waits share one, everything received is recorded when the stream ends, a failed fsync
stops the slave with its error, and --relay-commit-interval is checked like any option."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from dumpfilter.codec.encode import format_description
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.slave import relay_log
from dumpfilter.errors import PositionError
from dumpfilter.slave.info_file import info_text, parse_info, read_info, write_in_place
from dumpfilter.slave.relay_log import INFO, SYNCED, Committer, RelayInfo

from tests.support.dump_helpers import relay_units, run_slave
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _name(fd: int) -> str:
    return Path(os.readlink(f"/proc/self/fd/{fd}")).name


class DiskTrace:
    """os.fsync, os.pwrite and os.replace as the slave calls them: for each fsync of a relay
    file, its name and size then; for each relay-log.info written (in place, or put in place
    by a rename), the relay position it names."""

    def __init__(self, monkeypatch, relay_dir: Path):
        self.relay_dir = relay_dir
        self.lock = threading.Lock()
        self.log: list[tuple] = []
        real_fsync, real_replace, real_pwrite = os.fsync, os.replace, os.pwrite

        def fsync(fd):
            real_fsync(fd)
            target = os.readlink(f"/proc/self/fd/{fd}")
            if Path(target).name.startswith("relay-bin.0"):
                with self.lock:
                    self.log.append(("fsync", Path(target).name, os.fstat(fd).st_size))

        def replace(src, dst):
            real_replace(src, dst)
            if Path(dst).name == INFO:
                info = json.loads(Path(dst).read_text())
                with self.lock:
                    self.log.append(("info", info["relay_file"], info["relay_pos"]))

        def pwrite(fd, data, offset):
            n = real_pwrite(fd, data, offset)
            if _name(fd) == INFO:
                info = parse_info(data)
                with self.lock:
                    self.log.append(("info", info["relay_file"], info["relay_pos"]))
            return n

        monkeypatch.setattr(relay_log.os, "fsync", fsync)
        monkeypatch.setattr(relay_log.os, "replace", replace)
        monkeypatch.setattr(relay_log.os, "pwrite", pwrite)

    def check(self) -> int:
        """Every recorded position is covered by an earlier fsync of its file, and every earlier
        relay file was fsync'd whole (with its Rotate) before a position in a later one was
        recorded; the number of positions recorded."""
        durable: dict[str, int] = {}
        final = {p.name: p.stat().st_size for p in self.relay_dir.glob("relay-bin.0*")}
        recorded = 0
        for kind, name, value in self.log:
            if kind == "fsync":
                durable[name] = max(durable.get(name, 0), value)
            elif name:
                assert value <= durable.get(name, -1), f"relay-log.info names {name}:{value} before it was fsync'd"
                for earlier in (n for n in final if n < name):
                    assert durable.get(earlier) == final[earlier], \
                        f"relay-log.info names {name} before {earlier} was fsync'd whole"
                recorded += 1
        return recorded


@pytest.mark.grpc
@pytest.mark.parametrize("interval", [0.0, 0.05, 0.3])
def test_position_never_ahead_of_fsynced_relay_bytes(workload_dir, master_factory, tmp_path, monkeypatch, interval):
    _, address = master_factory(workload_dir)
    reference = tmp_path / "reference"
    run_slave(address, reference, 61, rules=RuleSet(ignore_db=("db2",)), relay_log_size=300_000,
              relay_commit_interval=0.0)
    relay = tmp_path / "relay"
    trace = DiskTrace(monkeypatch, relay)
    slave = run_slave(address, relay, 62, rules=RuleSet(ignore_db=("db2",)), relay_log_size=300_000,
                      relay_commit_interval=interval)
    recorded = trace.check()
    assert recorded >= 2
    assert len(list(relay.glob("relay-bin.0*"))) >= 2  # a rotation (300 kB files) was crossed
    assert relay_units(relay) == relay_units(reference)
    info = RelayInfo.load(relay)
    # The last batch is recorded when the stream ends, whatever the interval.
    assert (info.master_file, info.master_pos) == (slave.info.master_file, slave.info.master_pos)
    assert info.relay_pos == (relay / info.relay_file).stat().st_size
    assert info.stats["batches"] == slave.counters.batches


def test_waiting_hand_overs_share_one_commit(tmp_path, monkeypatch):
    data = tmp_path / "relay-bin.000001"
    fd = os.open(data, os.O_WRONLY | os.O_CREAT)
    gate, entered = threading.Event(), threading.Event()
    real_fsync = os.fsync
    fsyncs = []

    def slow_fsync(n):
        entered.set()
        gate.wait(10)
        fsyncs.append(n)
        real_fsync(n)

    monkeypatch.setattr(relay_log.os, "fsync", slow_fsync)
    committer = Committer(tmp_path / INFO)
    try:
        for pos in range(1, 21):
            os.write(fd, b"x")
            committer.submit(fd, {"relay_file": data.name, "relay_pos": pos})
            if pos == 1:
                assert entered.wait(10)  # the first commit is under way
        gate.set()  # the first commit was held up: the 19 hand-overs after it wait as one
        committer.drain()
        assert json.loads((tmp_path / INFO).read_text())["relay_pos"] == 20
        assert committer.commits == 2
        assert len([n for n in fsyncs if n == fd]) == 2
    finally:
        committer.close()
        os.close(fd)


def test_interval_bounds_the_commits(tmp_path):
    data = tmp_path / "relay-bin.000001"
    fd = os.open(data, os.O_WRONLY | os.O_CREAT)
    # An interval no test run reaches: the first hand-over is committed at once, none of the 50
    # after it until a drain, which cuts the interval short and covers all of them in one commit.
    committer = Committer(tmp_path / INFO, interval=3600)
    try:
        os.write(fd, b"x")
        committer.submit(fd, {"relay_pos": 1})
        assert wait_for(lambda: committer.commits == 1)
        for pos in range(2, 52):
            os.write(fd, b"x")
            committer.submit(fd, {"relay_pos": pos})
        time.sleep(0.3)  # room for a commit the interval forbids (a loaded machine can only hide one)
        assert committer.commits == 1
        assert json.loads((tmp_path / INFO).read_text())["relay_pos"] == 1
        committer.drain()  # does not wait for the interval (an hour: the test's timeout would end it)
        assert committer.commits == 2
        assert json.loads((tmp_path / INFO).read_text())["relay_pos"] == 51
    finally:
        committer.close()
    # A short interval: commits go on by themselves while hand-overs keep coming.
    live = Committer(tmp_path / INFO, interval=0.05)
    try:
        pos = 0

        def handed_over() -> bool:
            nonlocal pos
            pos += 1
            os.write(fd, b"x")
            live.submit(fd, {"relay_pos": pos})
            return live.commits >= 3
        assert wait_for(handed_over)
        live.drain()
        assert json.loads((tmp_path / INFO).read_text())["relay_pos"] == pos
    finally:
        live.close()
        os.close(fd)


def test_a_batch_that_reaches_the_masters_end_is_committed_without_the_interval(tmp_path):
    """A live slave's batch (the master says it is caught up) starts its commit at once, at any
    interval: the hand-overs waiting for the interval go with it, in one commit."""
    data = tmp_path / "relay-bin.000001"
    fd = os.open(data, os.O_WRONLY | os.O_CREAT)
    committer = Committer(tmp_path / INFO, interval=3600)  # no test run reaches it
    try:
        os.write(fd, b"x")
        committer.submit(fd, {"relay_file": data.name, "relay_pos": 1})
        assert wait_for(lambda: committer.commits == 1)
        os.write(fd, b"y" * 99)
        committer.submit(fd, {"relay_file": data.name, "relay_pos": 100})  # waits for the interval
        os.write(fd, b"z" * 100)
        committer.submit(fd, {"relay_file": data.name, "relay_pos": 200}, now=True)
        assert wait_for(lambda: committer.commits == 2, give_up=30)
        assert json.loads((tmp_path / INFO).read_text())["relay_pos"] == 200
        assert committer._pending is None
    finally:
        committer.close()
        os.close(fd)


def test_a_live_batch_is_committed_on_the_receiving_thread(tmp_path, monkeypatch):
    """A batch that reached the master's end, with nothing waiting or under way, is fsync'd and
    recorded by the thread that received it, before `submit` returns: no hand-over to the
    committer's thread on the way to the disk (each was a wake-up under the GIL). One that
    finds a commit under way goes to the thread, after it, so that positions never go back."""
    data = tmp_path / "relay-bin.000001"
    fd = os.open(data, os.O_WRONLY | os.O_CREAT)
    real_fsync = os.fsync
    threads: list[str] = []
    gate, entered = threading.Event(), threading.Event()

    synced_at: list[int] = []

    def fsync(n):
        if _name(n) == data.name:
            threads.append(threading.current_thread().name)
            if not gate.is_set():
                entered.set()
                assert gate.wait(10)
        real_fsync(n)
        if _name(n) == data.name:
            synced_at.append(len(synced_at) + 1)

    monkeypatch.setattr(relay_log.os, "fsync", fsync)
    # The committer's clock, as a count of the relay fsyncs done: committed_at names the fsync
    # it was taken after (a logical clock: nothing here reads the wall clock).
    monkeypatch.setattr(relay_log, "time", types.SimpleNamespace(
        time=lambda: float(len(synced_at)), monotonic=time.monotonic, sleep=time.sleep))
    committer = Committer(tmp_path / INFO)
    try:
        os.write(fd, b"x" * 10)
        committer.submit(fd, {"relay_file": data.name, "relay_pos": 10})  # catching up: the thread's
        assert entered.wait(10)
        os.write(fd, b"y" * 10)
        committer.submit(fd, {"relay_file": data.name, "relay_pos": 20}, now=True)  # one is under way
        assert committer._pending is not None
        gate.set()
        committer.drain()
        assert threads == ["slave-relay-commit"] * 2
        assert parse_info((tmp_path / INFO).read_bytes())["relay_pos"] == 20
        for pos in (30, 40):
            os.write(fd, b"z" * 10)
            committer.submit(fd, {"relay_file": data.name, "relay_pos": pos}, now=True)
            assert committer.commits == 2 + pos // 10 - 2  # done when submit returns
            info = parse_info((tmp_path / INFO).read_bytes())
            assert info["relay_pos"] == pos
            assert info["committed_at"] == synced_at[-1] == pos // 10  # taken after its own fsync
        assert threads[2:] == [threading.current_thread().name] * 2
        assert wait_for(lambda: committer.checkpoints >= 1 and not committer._unsynced, give_up=30)
    finally:
        committer.close()
        os.close(fd)


def _disk_order(monkeypatch) -> list[tuple[str, str]]:
    """("fsync", name), ("in place", name) (a rename) and ("over", name) (a write over a file's
    first bytes) as the slave calls them, in order."""
    order: list[tuple[str, str]] = []
    real_fsync, real_replace, real_pwrite = os.fsync, os.replace, os.pwrite

    def fsync(n):
        real_fsync(n)
        order.append(("fsync", _name(n)))

    def replace(src, dst):
        real_replace(src, dst)
        order.append(("in place", Path(dst).name))

    def pwrite(fd, data, offset):
        n = real_pwrite(fd, data, offset)
        order.append(("over", _name(fd)))
        return n

    monkeypatch.setattr(relay_log.os, "fsync", fsync)
    monkeypatch.setattr(relay_log.os, "replace", replace)
    monkeypatch.setattr(relay_log.os, "pwrite", pwrite)
    return order


def test_a_commit_waits_for_one_disk_flush(tmp_path, monkeypatch):
    """Each commit is the relay file's fsync, then relay-log.info written over in place, with no
    other flush or rename in between (the old commit fsync'd the info and the directory too:
    two flushes in a row before a live batch counted as durable; then a rename, which on ext4
    starts the new file's writeback). The info's own durability is the checkpoint's, which a
    drain waits for: a copy fsync'd, renamed to relay-log.info.synced, the directory fsync'd."""
    data = tmp_path / "relay-bin.000001"
    fd = os.open(data, os.O_WRONLY | os.O_CREAT)
    order = _disk_order(monkeypatch)
    committer = Committer(tmp_path / INFO)
    committer.checkpoint_interval = 3600  # no test run reaches it: checkpoints by drains only
    try:
        for i, pos in enumerate((10, 20, 30), 1):
            os.write(fd, b"x" * 10)
            committer.submit(fd, {"relay_file": data.name, "relay_pos": pos}, now=True)
            assert wait_for(lambda i=i: committer.commits == i, give_up=30)
        assert order == [("fsync", data.name), ("over", INFO)] * 3
        assert committer.checkpoints == 0
        committer.drain()
        assert committer.checkpoints == 1
        assert order[6:] == [("fsync", SYNCED + ".tmp"), ("in place", SYNCED), ("fsync", tmp_path.name)]
        assert (tmp_path / SYNCED).read_bytes() == (tmp_path / INFO).read_bytes()
        assert json.loads((tmp_path / SYNCED).read_text())["relay_pos"] == 30
    finally:
        committer.close()
        os.close(fd)


def test_a_checkpoint_follows_by_itself_once_nothing_waits(tmp_path, monkeypatch):
    """With no drain and no further batch, relay-log.info is checkpointed within the interval."""
    data = tmp_path / "relay-bin.000001"
    fd = os.open(data, os.O_WRONLY | os.O_CREAT)
    order = _disk_order(monkeypatch)
    committer = Committer(tmp_path / INFO)
    committer.checkpoint_interval = 0.05
    try:
        os.write(fd, b"x")
        committer.submit(fd, {"relay_file": data.name, "relay_pos": 1}, now=True)
        assert wait_for(lambda: committer.checkpoints == 1, give_up=30)
        assert order[:2] == [("fsync", data.name), ("over", INFO)] and ("in place", SYNCED) in order
        assert json.loads((tmp_path / SYNCED).read_text())["relay_pos"] == 1
    finally:
        committer.close()
        os.close(fd)


def test_an_unreadable_relay_log_info_falls_back_to_its_checkpoint(tmp_path):
    """What a crash can leave of a relay-log.info not yet checkpointed: empty, cut, or (written
    in place) a mix of two versions, which may well be valid JSON. The start takes the
    checkpoint, which named durable relay bytes too; with none, one line naming the file."""
    RelayInfo(master_file="bin.000002", master_pos=1234, relay_file="relay-bin.000001", relay_pos=999).save(tmp_path)
    os.link(tmp_path / INFO, tmp_path / SYNCED)
    older = (tmp_path / INFO).read_bytes()
    newer = info_text(RelayInfo(master_file="bin.000002", master_pos=5678, relay_file="relay-bin.000001",
                                relay_pos=15).snapshot())  # shorter
    cut = older.index(b'"relay_pos"')  # the new version's first bytes over the old one's last
    mixed = newer[:cut] + older[cut:]
    assert json.loads(mixed)["master_pos"] == 5678 and json.loads(mixed)["relay_pos"] == 999  # valid JSON
    for torn in (b"", newer[: len(newer) // 2], b"\0" * 40, mixed):
        (tmp_path / INFO).unlink()
        (tmp_path / INFO).write_bytes(torn)
        info = RelayInfo.load(tmp_path)
        assert (info.master_file, info.master_pos, info.relay_pos) == ("bin.000002", 1234, 999)
    (tmp_path / SYNCED).unlink()
    with pytest.raises(PositionError, match=f"{INFO}: unreadable .* no checkpoint"):
        RelayInfo.load(tmp_path)
    write_in_place(tmp_path / INFO, newer)  # a whole one is taken as it is, padded or not
    assert (tmp_path / INFO).stat().st_size == len(mixed) > len(newer)
    assert RelayInfo.load(tmp_path).master_pos == 5678
    (tmp_path / INFO).write_text('{"master_pos": 42}')  # written before relay-log.info had a check
    assert RelayInfo.load(tmp_path).master_pos == 42


def test_slave_run_on_an_unreadable_relay_log_info_is_one_line_and_exit_2(tmp_path):
    (tmp_path / INFO).write_text('{"master_file": "bin.0')
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", "127.0.0.1:1",
                          "--server-id", "7", "--relay-log-dir", str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{tmp_path / INFO}: unreadable" in lines[0], run.stderr


def test_a_position_over_skipped_stretches_only_waits_for_company(tmp_path):
    """Batches that wrote no relay byte (heartbeats for what the master skipped) are recorded
    with the next batch that carries data, or at a drain: they do not queue a live slave's data
    behind fsyncs of their own."""
    relay = relay_log.RelayLog(tmp_path)
    relay.committer.idle_interval = 3600  # no test run reaches it
    relay.format_event(format_description())
    relay.write_raw(b"x" * 100)
    relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position, master_pos=100), now=True)
    assert wait_for(lambda: relay.committer.commits == 1, give_up=30)
    for pos in (200, 300, 400):  # heartbeats only: the relay position stays
        relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position, master_pos=pos), now=True)
    assert relay.committer._idle and relay.committer._pending is not None  # waiting, not committed
    relay.write_raw(b"y" * 50)  # a batch with data: committed at once, the idle ones with it
    relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position, master_pos=500), now=True)
    assert wait_for(lambda: relay.committer.commits == 2, give_up=30)
    info = RelayInfo.load(tmp_path)
    assert (info.master_pos, info.relay_pos) == (500, relay.position)
    relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position, master_pos=600), now=True)
    relay.committer.drain()  # the stream's end records the idle one too
    assert RelayInfo.load(tmp_path).master_pos == 600 and relay.committer.commits == 3
    relay.close()
    # At an interval: a batch with data waits for it, until a caught-up one comes, heartbeats only.
    relay = relay_log.RelayLog(tmp_path / "interval", commit_interval=3600)
    relay.committer.idle_interval = 3600
    relay.format_event(format_description())
    relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position, master_pos=100))
    assert wait_for(lambda: relay.committer.commits == 1, give_up=30)  # the first: at once
    relay.write_raw(b"z" * 10)
    relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position, master_pos=700))
    assert not relay.committer._idle and relay.committer._pending is not None  # waits for the interval
    relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position, master_pos=800), now=True)
    assert wait_for(lambda: relay.committer.commits == 2, give_up=30)
    info = RelayInfo.load(tmp_path / "interval")
    assert (info.master_pos, info.relay_pos) == (800, relay.position)
    relay.close()


def test_a_rotation_does_not_wait_for_the_disk(tmp_path, monkeypatch):
    """The finished relay file goes to the committer (`Committer.retire`): the receiving thread
    rotates while an fsync is held up, and the file is fsync'd whole and closed before the
    position in the next file is recorded."""
    gate, entered = threading.Event(), threading.Event()
    real_fsync = os.fsync
    synced: list[tuple[str, int]] = []

    def held_fsync(fd):
        target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        size = os.fstat(fd).st_size  # what this fsync makes durable at least
        if target.name.startswith("relay-bin.0") and size > 1000 and not gate.is_set():
            entered.set()
            assert gate.wait(10)
        real_fsync(fd)
        synced.append((target.name, size))

    real_pwrite = os.pwrite

    def put(fd, text, offset):
        if _name(fd) == INFO:
            synced.append(("info", parse_info(text)["relay_file"]))
        return real_pwrite(fd, text, offset)

    monkeypatch.setattr(relay_log.os, "fsync", held_fsync)
    monkeypatch.setattr(relay_log.os, "pwrite", put)
    relay = relay_log.RelayLog(tmp_path, max_size=4_000)
    relay.format_event(format_description())
    relay.write_raw(b"x" * 5_000)
    relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position))
    assert entered.wait(10)  # the commit's fsync of the first file is held up
    first = relay.current
    rotated = threading.Thread(target=relay.maybe_rotate)
    rotated.start()
    rotated.join(5)
    assert not rotated.is_alive(), "the rotation waited for the held fsync"
    assert relay.current != first and (tmp_path / first).stat().st_size > 5_000
    relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position))
    gate.set()
    relay.committer.drain()
    # Whole, with its Rotate, before the first position in the next file was recorded.
    assert synced.index((first, (tmp_path / first).stat().st_size)) < synced.index(("info", relay.current))
    assert json.loads((tmp_path / INFO).read_text())["relay_file"] == relay.current
    assert relay.committer._retired == []
    relay.close()


def test_a_commit_waiting_for_its_interval_when_its_file_is_finished(tmp_path, monkeypatch):
    """A hand-over made before a rotation and still waiting for its interval is committed with
    the finished file: its descriptor stays open until its fsync (closed first, the fsync failed
    with EBADF, or hit the next file once the number was reused)."""
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        real_fsync(fd)
        synced.append((os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[1], os.fstat(fd).st_size))

    monkeypatch.setattr(relay_log.os, "fsync", fsync)
    relay = relay_log.RelayLog(tmp_path, max_size=4_000, commit_interval=30)  # the drain cuts it short
    relay.format_event(format_description())
    relay.write_raw(b"x" * 5_000)
    relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position))  # the first: at once
    relay.committer.drain()
    first = relay.current
    relay.write_raw(b"y" * 100)
    relay.commit(RelayInfo(relay_file=first, relay_pos=relay.position))  # waits for its interval
    relay.maybe_rotate()
    assert relay.current != first
    relay.committer.drain()  # commits the waiting hand-over, with the finished file
    info = json.loads((tmp_path / INFO).read_text())
    assert (info["relay_file"], info["relay_pos"]) == (first, 4 + format_description().size + 5_100)
    assert (first, (tmp_path / first).stat().st_size) in synced  # whole, with its Rotate
    relay.write_raw(b"z" * 10)
    relay.commit(RelayInfo(relay_file=relay.current, relay_pos=relay.position))
    relay.close()
    assert json.loads((tmp_path / INFO).read_text())["relay_file"] == relay.names[-1]


def test_batches_head_for_the_disk_while_the_commit_interval_runs(tmp_path, monkeypatch):
    """Each hand-over waiting for its commit has its file's whole pages, short of the last one
    (a page being written back would stall the next write into it), sent toward the disk at
    once (sync_file_range), so that the commit's fsync, and the one the stream's end waits for,
    find little left to write."""
    assert relay_log.start_writeback is not None  # Linux: libc has sync_file_range
    started = []
    real = relay_log.start_writeback
    monkeypatch.setattr(relay_log, "start_writeback", lambda fd, end: started.append((fd, end)) or real(fd, end))
    data = tmp_path / "relay-bin.000001"
    fd = os.open(data, os.O_WRONLY | os.O_CREAT)
    committer = Committer(tmp_path / INFO, interval=30)  # the drain cuts it short
    try:
        os.write(fd, b"x" * 100)
        committer.submit(fd, {"relay_file": data.name, "relay_pos": 100})  # committed at once
        committer.drain()
        for pos in (6_000, 50_000, 100_003):
            os.write(fd, b"y" * (pos - os.fstat(fd).st_size))
            committer.submit(fd, {"relay_file": data.name, "relay_pos": pos})  # waits for the interval
            deadline = time.monotonic() + 5
            while not any(end > pos - 8192 for _, end in started) and time.monotonic() < deadline:
                if pos < 8192:
                    break
                time.sleep(0.005)
        committer.drain()
        assert started == [(fd, 45_056), (fd, 94_208)]  # none below two pages; whole pages, the last left
        assert json.loads((tmp_path / INFO).read_text())["relay_pos"] == 100_003
    finally:
        committer.close()
        os.close(fd)


def test_failed_fsync_is_raised_and_nothing_after_it_is_recorded(tmp_path, monkeypatch):
    data = tmp_path / "relay-bin.000001"
    fd = os.open(data, os.O_WRONLY | os.O_CREAT)
    RelayInfo(relay_file=data.name, relay_pos=4).save(tmp_path)

    def failing_fsync(n):
        raise OSError(errno.EIO, "Input/output error")

    real_fsync = os.fsync
    monkeypatch.setattr(relay_log.os, "fsync", failing_fsync)
    committer = Committer(tmp_path / INFO)
    try:
        committer.submit(fd, {"relay_file": data.name, "relay_pos": 100})
        with pytest.raises(OSError, match="Input/output error"):
            committer.drain()
        assert json.loads((tmp_path / INFO).read_text())["relay_pos"] == 4
        committer.drain()  # raised once
        # A live batch, committed on the receiving thread: raised by its submit, nothing recorded,
        # and the committer free for the next (its thread not left waiting on the commit).
        with pytest.raises(OSError, match="Input/output error"):
            committer.submit(fd, {"relay_file": data.name, "relay_pos": 200}, now=True)
        assert json.loads((tmp_path / INFO).read_text())["relay_pos"] == 4
        assert committer.commits == 0 and not committer._busy
        monkeypatch.setattr(relay_log.os, "fsync", real_fsync)
        committer.submit(fd, {"relay_file": data.name, "relay_pos": 300}, now=True)
        assert json.loads((tmp_path / INFO).read_text())["relay_pos"] == 300
    finally:
        committer.close()
        os.close(fd)


@pytest.mark.parametrize("value", ["-1", "nan", "soon", "4000"])
def test_bad_commit_interval_is_one_line_and_exit_2(tmp_path, value):
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", "127.0.0.1:1",
                          "--server-id", "5", "--relay-log-dir", str(tmp_path / "r"),
                          "--relay-commit-interval", value], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == (
        f"dumpfilter slave run: error: argument --relay-commit-interval: {value!r} is not a number of seconds "
        "from 0 to 3600")
    assert "Traceback" not in run.stderr


def test_a_reader_beside_writes_in_place_gets_whole_versions_only(tmp_path):
    """`slave status` reads relay-log.info while the committer writes it over in place: every
    version it gets is whole (its fields written together), never a mix of two, which is valid
    JSON when the versions have the same layout, as here; a reader that keeps meeting writes
    takes the checkpoint."""
    def version(n: int) -> dict:  # 8 KB between the two numbers: a read that meets a write splits them
        return {"a_master": f"{n:09d}", "b_pad": "x" * 8192, "c_relay": f"{2 * n:09d}"}

    (tmp_path / SYNCED).write_bytes(info_text(version(0)))
    write_in_place(tmp_path / INFO, info_text(version(0)))
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            write_in_place(tmp_path / INFO, info_text(version(n)))
            written[0] = n

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    got = []
    try:
        assert wait_for(lambda: written[0] > 100)
        for _ in range(8000):
            info = read_info(tmp_path)
            got.append((int(info["a_master"]), int(info["c_relay"])))
    finally:
        stop.set()
        thread.join(10)
    assert all(relay == 2 * master for master, relay in got)  # whole versions (the checkpoint's is 0, 0)
    assert len({m for m, _ in got}) > 10  # it did read the versions being written
