"""The report's byte and event counts equal what actually crossed the wire, counted apart from the
report code: raw DumpBatch bytes captured on the slave side, the master binlog files themselves,
and the relay logs."""

from __future__ import annotations

from dumpfilter.binlogs import TailingReader, binlog_paths

import pytest

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(240)]


def test_with_filtering_counts_are_the_raw_batches(default_run):
    result, capture, _ = default_run
    for row in result.report["slaves"]:
        key = (row["slave"], row["skip_policy"])
        assert row["bytes_sent"] == capture.bytes[key]
        assert row["events_sent"] == capture.events[key]
        assert row["heartbeats"] == capture.heartbeats[key]
        # The master's own counter (Stats RPC) agrees with what the slave received, except for
        # idle heartbeats the master queued after the caught-up batch, when the slave had hung up.
        undelivered = row["master_bytes_sent"] - capture.bytes[key]
        assert undelivered == row["heartbeat_bytes"] - capture.heartbeat_bytes[key] >= 0
        assert row["saved_bytes"] == row["bytes_all"] - capture.bytes[key]


def test_every_skip_policy_column_is_the_raw_batches(default_run):
    result, capture, _ = default_run
    policies = result.report["experiment"]["skip_policies"]
    assert len(policies) == 3
    for row in result.report["slaves"]:
        assert set(row["policies"]) == set(policies)
        for policy, sent in row["policies"].items():
            assert sent == capture.bytes[(row["slave"], policy)]


def test_without_filtering_is_every_event_of_the_master_binlog(default_run):
    result, capture, _ = default_run
    everything = capture.bytes[("(everything)", "heartbeat")]
    directory = result.report["source"]["directory"]
    files = binlog_paths(directory)
    # Every byte of every file except the 4-byte magic number, and every event, went out once.
    assert everything == sum(p.stat().st_size - 4 for p in files)
    events = sum(1 for _ in TailingReader(directory))
    assert capture.events[("(everything)", "heartbeat")] == events
    for row in result.report["slaves"]:
        assert row["bytes_all"] == everything
        assert row["events_all"] == events


def test_heartbeat_slave_relay_log_holds_the_kept_bytes(default_run):
    """For a heartbeat slave without rewrite rules, the transactions in its relay log are exactly
    the kept transaction bytes the master accounted (the relay log drops only file framing)."""
    result, _, _ = default_run
    stream = next(s for s in result.streams if s.plan.label == "reporting" and s.plan.skip_policy == "heartbeat")
    from dumpfilter.codec import group_transactions

    events = [e for _, e in TailingReader(stream.plan.relay_dir)]
    relay_txn_bytes = sum(t.size for t in group_transactions(events) if t.kind != "control")
    row = next(r for r in result.report["slaves"] if r["slave"] == "reporting")
    control_bytes = row["kept_bytes"] - relay_txn_bytes
    # what the relay lacks is the master's control events (FDE, Gtid_list, checkpoints, Rotate)
    master_control = sum(t.size for t in group_transactions(
        e for _, e in TailingReader(result.report["source"]["directory"])) if t.kind == "control")
    assert control_bytes == master_control
    assert relay_txn_bytes > 0
