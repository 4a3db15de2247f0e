"""Issue #17: with lint at Register on (DumpService lint_bytes; off by default), a slave's Register
reply carries `lint`'s predictions as warnings when the master already holds the binlog it will
read (and says so when the binlog is too big to lint then)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc

from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from tests.rules.test_lint_cases import Build


def _binlog(directory):
    # A wild-do-table rule whose table part is not % skips CREATE DATABASE; the kept CREATE TABLE
    # under USE shop then stops the replica with 1049 (observed on MariaDB, see tests/rules/test_lint_cases.py).
    Build("mariadb").q("CREATE DATABASE shop").q("CREATE TABLE t1 (a int)", db="shop") \
        .q("INSERT INTO t1 VALUES (1)", db="shop").write(directory / "master-bin.000001")
    (directory / "master-bin.index").write_text("./master-bin.000001\n")
    return directory


def _register(address, server_id, value):
    with grpc.insecure_channel(address) as channel:
        rule = dump_pb2.FilterRule(type=dump_pb2.REPLICATE_WILD_DO_TABLE, value=value)
        filters = [dump_pb2.ChannelFilters(rules=dump_pb2.RuleList(rules=[rule]))]
        return dump_pb2_grpc.DumpFilterStub(channel).Register(
            dump_pb2.RegisterRequest(server_id=server_id, filters=filters, flavor="mariadb"), timeout=30)


def test_register_reply_warns_where_lint_predicts_a_break(tmp_path, master_factory):
    _, address = master_factory(_binlog(tmp_path), lint_bytes=16 << 20)
    reply = _register(address, 5, "shop.t%")
    lint = [w for w in reply.warnings if w.startswith("lint:")]
    assert len(lint) == 2, reply.warnings
    assert "master-bin.000001:355" in lint[0] and "error 1049" in lint[0] and "Unknown database 'shop'" in lint[0]
    assert "skipped at master-bin.000001:298 by replicate-wild-do-table" in lint[0]
    assert "error 1146" in lint[1]
    # Rules that keep the database predict nothing.
    assert not [w for w in _register(address, 6, "shop.%").warnings if w.startswith("lint:")]


def test_register_says_when_the_binlog_is_too_big_to_lint(tmp_path, master_factory):
    _, address = master_factory(_binlog(tmp_path), lint_bytes=100)
    warnings = _register(address, 5, "shop.t%").warnings
    assert [w for w in warnings if w.startswith("lint: not run at Register")], warnings


def test_slave_run_prints_the_masters_warnings(tmp_path, master_factory):
    binlog_dir = tmp_path / "binlog"
    binlog_dir.mkdir()
    _, address = master_factory(_binlog(binlog_dir), lint_bytes=16 << 20)
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address, "--server-id", "9",
                          "--relay-log-dir", str(tmp_path / "relay"), "--replicate-wild-do-table", "shop.t%",
                          "--until-caught-up"], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr
    assert "master warns: lint: a replica with these filters would stop at master-bin.000001:355" in run.stderr
