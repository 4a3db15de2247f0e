"""`dumpfilter master filters|status|change-filter` against a real master on a loopback port:
the CLI's rows are checked against what the slaves actually received and against the binlog."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections import defaultdict

import grpc
import pytest

from dumpfilter.codec import group_transactions
from dumpfilter.binlogs import TailingReader
from dumpfilter.cli.app import main
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.slave.node import Slave
from dumpfilter.slave.config import SlaveConfig
from tests.conftest import skip_or_fail
from tests.support.dump_helpers import relay_units, run_slave

pytestmark = pytest.mark.grpc


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _unit_ends(binlog_dir) -> set[tuple[str, int]]:
    """Every (file, offset) where a transaction (or control event) of the binlog ends."""
    per_file = defaultdict(list)
    for name, event in TailingReader(binlog_dir):
        per_file[name].append(event)
    return {(name, unit.events[-1].end_pos) for name, events in per_file.items() for unit in group_transactions(events)}


@pytest.fixture
def two_slaves(binlog_copy, master_factory, tmp_path):
    _, address = master_factory(binlog_copy)
    a = run_slave(address, tmp_path / "a", 2, rules=RuleSet(do_db=("db1",)), hostname="replica-a")
    b = run_slave(address, tmp_path / "b", 3, rules=RuleSet(wild_ignore_table=("db2.%",)), skip_policy="placeholder")
    return address, a, b


def test_filters_lists_each_slaves_rules_with_counters(two_slaves, capsys):
    address, a, b = two_slaves
    code, out, _ = _cli(capsys, "master", "filters", "--master", address, "--json")
    assert code == 0
    tables = json.loads(out)
    rows = {(r["SERVER_ID"], r["FILTER_NAME"]): r for r in tables["replication_applier_filters"]}
    assert set(rows) == {(2, "REPLICATE_DO_DB"), (3, "REPLICATE_WILD_IGNORE_TABLE")}
    assert rows[(2, "REPLICATE_DO_DB")]["FILTER_RULE"] == "db1"
    assert rows[(3, "REPLICATE_WILD_IGNORE_TABLE")]["FILTER_RULE"] == "db2.%"
    for row in rows.values():
        assert row["CHANNEL_NAME"] == "" and row["CONFIGURED_BY"].startswith("STARTUP_OPTIONS")
        assert row["COUNTER"] > 0  # the rule decided while the slave streamed
        assert row["ACTIVE_SINCE"].endswith("+00:00")
    # The table form carries the same rows, with the P_S column names.
    code, out, _ = _cli(capsys, "master", "filters", "--master", address, "--server-id", "3")
    assert code == 0
    assert "| SERVER_ID | CHANNEL_NAME | FILTER_NAME" in out and "COUNTER" in out
    assert "db2.%" in out and "db1" not in out


def test_status_matches_what_each_slave_received(two_slaves, capsys):
    address, a, b = two_slaves
    deadline = time.monotonic() + 10
    while True:  # the master sees a cancelled stream end a moment after the slave returns
        code, out, _ = _cli(capsys, "master", "status", "--master", address, "--json")
        assert code == 0
        rows = {r["Server_id"]: r for r in json.loads(out)}
        if all(r["Streaming"] == "No" for r in rows.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert set(rows) == {2, 3}
    assert rows[2]["Host"] == "replica-a" and rows[3]["Host"] == ""
    assert rows[2]["Skip_policy"] == "heartbeat" and rows[3]["Skip_policy"] == "placeholder"
    for slave, row in ((a, rows[2]), (b, rows[3])):
        assert row["Streaming"] == "No"  # --until-caught-up ended the stream
        assert row["Position"] == f"{slave.info.master_file}:{slave.info.master_pos}"
        assert row["Position"] == row["Binlog_end"] and row["Bytes_behind"] == 0
        assert row["Bytes_sent"] == slave.counters.bytes_received
        assert row["Bytes_sent"] == row["Kept_bytes"] + row["Overhead_bytes"]
        assert row["Bytes_sent"] < row["Bytes_read"]
    assert rows[3]["Placeholders"] > 0 and rows[2]["Heartbeats"] > 0
    code, out, _ = _cli(capsys, "master", "status", "--master", address)
    assert code == 0
    assert "| Server_id | Host" in out and "replica-a" in out and "2 rows in set" in out


def test_change_filter_without_stream_takes_effect_at_last_position(two_slaves, capsys, tmp_path):
    address, a, _ = two_slaves
    code, out, _ = _cli(capsys, "master", "change-filter", "--master", address, "--server-id", "2",
                        "CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db3)")
    assert code == 0
    assert f"{a.info.master_file}:{a.info.master_pos}" in out and "no running stream" in out
    assert "REPLICATE_DO_DB = (`db3`)" in out
    code, out, _ = _cli(capsys, "master", "filters", "--master", address, "--server-id", "2", "--json")
    (row,) = json.loads(out)["replication_applier_filters"]
    assert (row["FILTER_RULE"], row["CONFIGURED_BY"]) == ("db3", "CHANGE_REPLICATION_FILTER")


def test_change_filter_on_running_stream_prints_the_transaction_boundary(binlog_copy, master_factory, tmp_path,
                                                                        capsys):
    _, address = master_factory(binlog_copy)
    slave = Slave(SlaveConfig(master=address, server_id=5, relay_dir=tmp_path / "r", rules=RuleSet(do_db=("db1",))))
    changed_at = []
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        slave.register(stub)
        stream = stub.Dump(dump_pb2.DumpRequest(server_id=5, position=dump_pb2.Position(file="", pos=4),
                                                heartbeat_period=0.1))
        next(stream)  # the stream is running

        def consume():
            for batch in stream:
                if batch.HasField("filter_changed_at") and batch.filter_changed_at.file:
                    changed_at.append((batch.filter_changed_at.file, batch.filter_changed_at.pos))
                    return

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        code, out, _ = _cli(capsys, "master", "change-filter", "--master", address, "--server-id", "5", "--json",
                            "CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db2)")
        reader.join(10)
        stream.cancel()
    assert code == 0
    result = json.loads(out)
    assert result["applied_to_running_stream"] is True
    at = (result["effective_at"]["file"], result["effective_at"]["pos"])
    assert changed_at == [at]  # the stream itself says where the new rules started
    assert at in _unit_ends(binlog_copy)  # never inside a transaction


def test_operator_commands_fail_in_one_line(binlog_copy, master_factory, capsys):
    _, address = master_factory(binlog_copy)
    code, out, err = _cli(capsys, "master", "change-filter", "--master", address, "--server-id", "9",
                          "CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db2)")
    assert code == 2 and "server_id 9 is not registered" in err and err.count("\n") == 1
    code, out, err = _cli(capsys, "master", "status", "--master", "127.0.0.1:1", "--rpc-timeout", "2")
    assert code == 2 and "UNAVAILABLE" in err and err.count("\n") == 1
    with pytest.raises(SystemExit) as exc:
        main(["master", "filters", "--master", address, "--server-id", "99999999999"])
    assert exc.value.code == 2
    assert "server_id is 1 to 4294967295" in capsys.readouterr().err


def test_status_over_tls(binlog_copy, master_factory, tmp_path, capsys):
    if shutil.which("openssl") is None:
        skip_or_fail("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    _, address = master_factory(binlog_copy, tls_cert=cert, tls_key=key)
    address = address.replace("127.0.0.1", "localhost")
    relay = tmp_path / "r"
    run_slave(address, relay, 7, tls_ca=cert)
    assert relay_units(relay)
    code, out, _ = _cli(capsys, "master", "status", "--master", address, "--ssl-ca", str(cert), "--json")
    assert code == 0 and [r["Server_id"] for r in json.loads(out)] == [7]
    code, _, err = _cli(capsys, "master", "status", "--master", address, "--rpc-timeout", "2")  # plaintext: refused
    assert code == 2 and err.startswith("dumpfilter: error: master: UNAVAILABLE")
