"""Issue #44 item 2: lint follows the live binlog. Lint at Register (master/lint_jobs.py) read the
binlog as it was at Register and no more, and went "not run" once the binlog grew past
--lint-max-mb: `master status` said `Lint: no break` for a replica stopped on 1146. Now a follower
per rule set reads, at each change of the binlog directory, only the whole units written since its
last look (at most --lint-max-mb of them per look), `master status` says how far (`no break up to
FILE:POS`), and a break found later is in status and in the log at once. A lint worker that cannot
be started is `failed: <reason>`, and the master serves on."""

from __future__ import annotations

import logging
import os
import sys

import grpc
import pytest

from dumpfilter.binlogs import binlog_paths
from dumpfilter.binlogs.lint import lint_files
from dumpfilter.master import lint_jobs
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from tests.rules.test_lint_cases import Build
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

FILE = "master-bin.000001"


def _stages() -> list[bytes]:
    """The same MariaDB binlog cut after each stage: CREATE DATABASE shop (which a wild-do-table
    `shop.t%` skips, breaking nothing yet); then CREATE TABLE t1 and an INSERT under USE shop (which
    stop that replica: 1049, then 1146)."""
    build = Build("mariadb").q("CREATE DATABASE shop")
    first = build.bytes()
    build.q("CREATE TABLE t1 (a int)", db="shop").q("INSERT INTO t1 VALUES (1)", db="shop")
    whole = build.bytes()
    assert whole.startswith(first)
    return [first, whole]


def _register(stub, server_id: int, value: str) -> list[str]:
    rule = dump_pb2.FilterRule(type=dump_pb2.REPLICATE_WILD_DO_TABLE, value=value)
    filters = [dump_pb2.ChannelFilters(rules=dump_pb2.RuleList(rules=[rule]))]
    reply = stub.Register(dump_pb2.RegisterRequest(server_id=server_id, filters=filters, flavor="mariadb"), timeout=30)
    return list(reply.warnings)


def _stats(stub, server_id: int):
    return stub.Stats(dump_pb2.StatsRequest(server_id=server_id), timeout=30).slaves[0]


def _read_up_to(stub, server_id: int, file: str, pos: int) -> bool:
    mine = _stats(stub, server_id)
    return mine.lint_state == "done" and (mine.lint_position.file, mine.lint_position.pos) == (file, pos)


def _ours(message: str) -> bool:
    """A lint break this test's master logs: its workload is schema `shop`. (The logger is every
    master's: a master of an earlier test, its lint still at work on a loaded machine, logs the
    breaks of its own slaves, db1..db6, meanwhile.)"""
    return "would stop" in message and "shop" in message


def test_a_break_written_after_register_is_in_status_with_its_position_and_in_the_log(
        tmp_path, master_factory, caplog, capsys):
    caplog.set_level(logging.WARNING, logger="dumpfilter.master.lint")
    first, whole = _stages()
    last = tmp_path / FILE
    last.write_bytes(first)
    (tmp_path / "master-bin.index").write_text(f"./{FILE}\n")
    master, address = master_factory(tmp_path)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        _register(stub, 5, "shop.t%")   # skips CREATE DATABASE shop
        _register(stub, 7, "shop.%")    # keeps everything
        # At Register: nothing breaks yet, and lint says how far it has read.
        assert wait_for(lambda: _read_up_to(stub, 5, FILE, len(first)), give_up=60), _stats(stub, 5)
        assert _stats(stub, 5).lint_breaks == 0 and not _stats(stub, 5).lint_warnings
        assert not [r for r in caplog.records if _ours(r.getMessage())]

        with open(last, "ab") as f:  # the master's binlog grows: the break is written now
            f.write(whole[len(first):])
        assert wait_for(lambda: _read_up_to(stub, 5, FILE, len(whole)), give_up=60), _stats(stub, 5)
        mine = _stats(stub, 5)
        assert mine.lint_breaks == 2, mine
        assert f"would stop at {FILE}:{len(first)}" in mine.lint_warnings[0] and "error 1049" in mine.lint_warnings[0]
        assert "error 1146" in mine.lint_warnings[1]
        assert wait_for(lambda: _read_up_to(stub, 7, FILE, len(whole)), give_up=60)
        assert _stats(stub, 7).lint_breaks == 0

        # A second file: lint goes on into it (the first is read to its end).
        second = tmp_path / "master-bin.000002"
        third = Build("mariadb").q("INSERT INTO t1 VALUES (2)", db="shop").bytes()
        second.write_bytes(third)
        (tmp_path / "master-bin.index").write_text(f"./{FILE}\n./master-bin.000002\n")
        assert wait_for(lambda: _read_up_to(stub, 7, second.name, len(third)), give_up=60), _stats(stub, 7)
        assert wait_for(lambda: _read_up_to(stub, 5, second.name, len(third)), give_up=60), _stats(stub, 5)
        assert _stats(stub, 5).lint_breaks == 3 and _stats(stub, 7).lint_breaks == 0

    # The log: one WARNING line per break, naming the slave, the position and the error.
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and _ours(r.getMessage())]
    assert any(line.startswith("server_id 5: ") and f"{FILE}:{len(first)}" in line and "error 1049" in line
               for line in lines), lines
    assert not [line for line in lines if "server_id 7" in line]
    # Lint read each byte once: the binlog as it was at Register, then only what was appended; once
    # for both rule sets where their looks went together, once each where they did not.
    assert len(whole) + len(third) <= master.service.lint.bytes_read <= 2 * (len(whole) + len(third))

    from dumpfilter.cli.app import main

    assert main(["master", "status", "--master", address]) == 0
    out = capsys.readouterr().out
    assert f"no break up to master-bin.000002:{len(third)}" in out
    assert f"3 break(s) up to master-bin.000002:{len(third)}" in out
    assert f"server_id 5: lint: a replica with these filters would stop at {FILE}:{len(first)}" in out


def test_a_binlog_that_grows_past_the_budget_is_followed_in_looks_of_at_most_the_budget(
        binlog_copy, master_factory):
    """--lint-max-mb bounds each look: the first (the whole binlog at Register) and every later one.
    A binlog that grows by far more than the budget after Register is read on in several looks,
    to its end, with the breaks `dumpfilter lint` finds over the whole of it."""
    paths = binlog_paths(binlog_copy)
    index = binlog_copy / "master-bin.index"
    lines = index.read_text().splitlines(keepends=True)
    index.write_text(lines[0])  # at Register: the first file only
    budget = paths[0].stat().st_size + 1
    total = sum(p.stat().st_size for p in paths)
    assert total > 4 * budget
    master, address = master_factory(binlog_copy, lint_bytes=budget)
    rules = RuleSet(wild_do_table=("db1.t%",))
    expected = lint_files(paths, rules, Settings(flavor="mariadb"))
    assert len(expected) > 5
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        assert not [w for w in _register(stub, 5, "db1.t%") if "not run" in w]
        assert wait_for(lambda: _read_up_to(stub, 5, paths[0].name, paths[0].stat().st_size), give_up=60), \
            _stats(stub, 5)
        index.write_text("".join(lines))  # the binlog grows by every other file at once
        end = paths[-1]
        assert wait_for(lambda: _read_up_to(stub, 5, end.name, end.stat().st_size), give_up=120), _stats(stub, 5)
        mine = _stats(stub, 5)
    assert mine.lint_breaks == len(expected)
    first = expected[0]
    assert f"would stop at {first.file}:{first.pos}" in mine.lint_warnings[0]
    lint = master.service.lint
    # Each byte read once, but for the unit a look stopped inside (read again by the next one).
    assert total <= lint.bytes_read < total + lint.looks * (64 << 10)
    # No look read more than about the budget (a 64 KiB chunk and the unit that passes it more).
    assert lint.largest_look <= budget + (1 << 16) + (16 << 10)
    assert lint.looks >= total // lint.largest_look


def test_following_lint_finds_what_lint_finds_over_the_whole_binlog(workload_dir):
    """FollowingLint over a binlog revealed a few bytes at a time (cut anywhere: inside events and
    units, at file ends) with tiny looks finds the breaks lint_files finds over the whole."""
    import random

    from dumpfilter.binlogs.lint import new_linter
    from tests.support.following_lint import follow_revealed

    paths = binlog_paths(workload_dir)
    sizes = [p.stat().st_size for p in paths]
    rules, settings = RuleSet(wild_do_table=("db1.t%",)), Settings(flavor="mariadb")
    expected = lint_files(paths, rules, settings)
    reveals = random.Random(44).sample(range(sum(sizes)), 150)
    found, following, read = follow_revealed(paths, new_linter(rules, settings), reveals, 20_000, 4096)
    assert found == expected
    assert following.position == (paths[-1].name, sizes[-1])
    assert not following.linter.breaks  # handed back, never kept
    assert sum(sizes) <= read < 2 * sum(sizes)  # a unit still being written is read again, nothing more


def test_a_binlog_too_big_at_register_says_mib(binlog_copy, master_factory):
    """The option is in MiB (64 by default): the warning says MiB, for the binlog and the bound."""
    total = sum(p.stat().st_size for p in binlog_paths(binlog_copy))
    _, address = master_factory(binlog_copy, lint_bytes=1 << 20)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        warnings = [w for w in _register(stub, 5, "db1.t%") if w.startswith("lint:")]
        assert warnings == [f"lint: not run at Register: the binlog holds {total / (1 << 20):.1f} MiB, above 1 MiB "
                            "(see `master serve --lint-max-mb`): run `dumpfilter lint` on it"]
        assert _stats(stub, 5).lint_state == "not run"


def test_a_lint_worker_that_cannot_start_fails_and_the_master_serves_on(tmp_path, master_factory, monkeypatch, caplog):
    """The master runs as a user that cannot exec the venv's python: the lint-dispatch thread died
    with a traceback and every slave showed `Lint: pending` forever. Now lint is `failed: <reason>`
    (status and log), the next rule set fails the same way (the thread lives), and slaves stream."""
    caplog.set_level(logging.WARNING, logger="dumpfilter.master.lint")
    binlog_dir = tmp_path / "binlog"
    binlog_dir.mkdir()
    _, whole = _stages()
    (binlog_dir / FILE).write_bytes(whole)
    (binlog_dir / "master-bin.index").write_text(f"./{FILE}\n")
    cannot = tmp_path / "python"
    cannot.write_text("#!/bin/sh\n")
    os.chmod(cannot, 0o600)  # not executable
    lint_jobs._worker().stop()  # the running worker (of earlier tests) ends: the next look starts one
    monkeypatch.setattr(sys, "executable", str(cannot))
    _, address = master_factory(binlog_dir)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        for server_id, value in ((5, "shop.t%"), (6, "shop.%")):
            _register(stub, server_id, value)
            assert wait_for(lambda: _stats(stub, server_id).lint_state != "pending", give_up=60), "lint stays pending"
            mine = _stats(stub, server_id)
            assert mine.lint_state == "failed", mine
            assert mine.lint_warnings[0].startswith("lint: failed: the lint worker process cannot be started (")
            assert str(cannot) in mine.lint_warnings[0]
        # The master still serves: slave 5 gets the binlog.
        call = stub.Dump(dump_pb2.DumpRequest(server_id=7 - 2, heartbeat_period=0.2), timeout=60)
        got = b""
        for batch in call:
            got += batch.events
            if batch.caught_up:
                break
        call.cancel()
    assert got
    failed = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "failed" in r.getMessage()]
    assert any(m.startswith("server_id 5: lint: failed: the lint worker process cannot be started") for m in failed)
    monkeypatch.undo()


def test_a_diverging_replica_is_not_no_break_in_status_nor_in_metrics(tmp_path, master_factory, capsys):
    """#81 goal 4: `USE crm; UPDATE logs.t1 a JOIN shop.t1 b ... SET a.v, b.v` under
    replicate-ignore-table=logs.t1 is skipped whole (its first written table is ignored), so
    shop.t1 loses each write: lint counts them, and `master status`'s Lint column, Stats and
    /metrics say the same number; `master status` said "no break"."""
    from dumpfilter.cli.app import main
    from dumpfilter.master.serve.metrics import registry_for

    build = Build("mariadb")
    for n in range(2):
        build.q(f"UPDATE logs.t1 a JOIN shop.t1 b ON a.id = b.id SET a.v = {n}, b.v = {n}", db="crm")
    data = build.bytes()
    (tmp_path / FILE).write_bytes(data)
    (tmp_path / "master-bin.index").write_text(f"./{FILE}\n")
    expected = lint_files([tmp_path / FILE], RuleSet(ignore_table=("logs.t1",)), Settings(flavor="mariadb"))
    assert expected == [] and expected.divergence.writes == 2
    master, address = master_factory(tmp_path)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        rule = dump_pb2.FilterRule(type=dump_pb2.REPLICATE_IGNORE_TABLE, value="logs.t1")
        stub.Register(dump_pb2.RegisterRequest(server_id=9, flavor="mariadb", filters=[
            dump_pb2.ChannelFilters(rules=dump_pb2.RuleList(rules=[rule]))]), timeout=30)
        assert wait_for(lambda: _read_up_to(stub, 9, FILE, len(data)), give_up=60), _stats(stub, 9)
        assert (_stats(stub, 9).lint_breaks, _stats(stub, 9).lint_diverges) == (0, 2)
    [rule_set] = master.service.lint.rule_sets()
    metrics = registry_for(master.service)
    assert metrics.get_sample_value("dumpfilter_lint_diverges", {"rule_set": str(rule_set.rule_set)}) == 2
    assert main(["master", "status", "--master", address]) == 0
    out = capsys.readouterr().out
    assert f"no break up to {FILE}:{len(data)}; diverges: 2 writes" in out, out

def test_the_status_cell():
    from dumpfilter.cli.commands.master import _lint_cell

    row = {"Lint": "done", "Lint_warnings": [], "Lint_position": "b.000002:120", "Lint_breaks": 0}
    assert _lint_cell(row) == "no break up to b.000002:120"
    assert _lint_cell({**row, "Lint_breaks": 3}) == "3 break(s) up to b.000002:120"
    assert _lint_cell({**row, "Lint_diverges": 4}) == "no break up to b.000002:120; diverges: 4 writes"
    failed = {"Lint": "failed", "Lint_warnings": ["lint: failed: the lint worker process ended (EOFError)"]}
    assert _lint_cell(failed) == "failed: the lint worker process ended (EOFError)"
    assert _lint_cell({"Lint": "pending", "Lint_warnings": []}) == "pending"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


@pytest.mark.parametrize("verify", [True, False])
def test_lint_reads_the_binlog_with_the_masters_checksum_setting(tmp_path, master_factory, verify):
    """`master serve --no-verify-checksums` (MySQL's source_verify_checksum=OFF) serves an event whose
    CRC32 does not match, and lint reads the binlog as the master does: it finds the break in that
    event. Lint checked every CRC whatever the option: it ran no further than the event before the
    one the master served. With the check on, lint does not run past it and says why."""
    whole = bytearray(_stages()[1])
    value = whole.rindex(b"VALUES (1)") + len("VALUES (")
    whole[value] ^= 0x01  # the INSERT's value (1 -> 0): its event's header and size sound, its CRC32 not
    (tmp_path / FILE).write_bytes(bytes(whole))
    (tmp_path / "master-bin.index").write_text(f"./{FILE}\n")
    _, address = master_factory(tmp_path, verify_checksums=verify)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        _register(stub, 5, "shop.t%")
        assert wait_for(lambda: _stats(stub, 5).lint_state not in ("pending", ""), give_up=60), _stats(stub, 5)
        mine = _stats(stub, 5)
        if verify:
            assert mine.lint_state == "not run" and "CRC32 mismatch" in " ".join(mine.lint_warnings), mine
        else:
            assert wait_for(lambda: _read_up_to(stub, 5, FILE, len(whole)), give_up=60), _stats(stub, 5)
            assert _stats(stub, 5).lint_breaks == 2, _stats(stub, 5)
