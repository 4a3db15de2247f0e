"""`simulate` with slaves of kind = "mariadb": besides its gRPC streams, each such slave gets a real
MariaDB replica on the master's MySQL endpoint; the report says how it ended. A replica that lint
says no break for catches up, having been sent exactly the bytes the slave's own gRPC stream got
(same rules, same policy, same binlog); one lint says breaks stops with the error lint predicted."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from dumpfilter.lab.simulate.real_replicas import replica_verdict
from dumpfilter.lab.simulate.report import print_report, summary_line
from dumpfilter.lab.simulate.orchestration import SimulationResult, load_default_topology, run_simulation
from dumpfilter.topology import MasterSource, SlaveSpec

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(600)]


def test_real_replicas_in_a_simulation(tmp_path):
    topology = load_default_topology()
    # the default slaves (whose rules break a real replica on this workload, as lint says) and one
    # with no rules, which must catch up
    slaves = tuple(dataclasses.replace(s, kind="mariadb") for s in topology.slaves) + (
        SlaveSpec("everything-real", 99, kind="mariadb"),)
    topology = dataclasses.replace(topology, slaves=slaves, source=MasterSource("mariadb", options={"transactions": 200}))
    result = run_simulation(topology, tmp_path / "out", verify=True, mariadb=True, progress=False)
    assert all(v.ok for v in result.verifications), [v.differences for v in result.verifications]
    rows = result.report["slaves"]
    assert result.ok, [(r["slave"], r["real_replica_verdict"]["text"]) for r in rows if not r["real_replica_verdict"]["ok"]]
    assert len(rows) == len(slaves)
    caught_up = 0
    for row in rows:
        outcome = row["real_replica"]
        assert outcome is not None, row["slave"]
        if row["lint"]["breaks"] == 0:
            assert outcome["caught_up"], (row["slave"], outcome)
            assert outcome["tables"] > 0 and outcome["rows"] > 0
            assert outcome["bytes_sent"] == row["master_bytes_sent"]  # the same filtered stream as over gRPC
            caught_up += 1
        else:
            assert not outcome["caught_up"] and outcome["errno"] == row["lint"]["first"]["errno"], (row, outcome)
            # the transaction it stopped in is the one lint names
            assert outcome["gtid"] == row["lint"]["first"]["gtid"] and outcome["file"], (row, outcome)
            assert outcome["event_pos"] == row["lint"]["first"]["pos"], (row, outcome)
        assert row["real_replica_verdict"]["ok"], row["real_replica_verdict"]
    assert caught_up >= 1
    stopped = [row for row in rows if not row["real_replica"]["caught_up"]]
    assert stopped, "no real replica stopped: the test shows nothing about a broken one"

    # Issue #28: a broken real replica is shown, not hidden: the table, report.html and the summary
    buffer = io.StringIO()
    print_report(result.report, Console(file=buffer, width=250, no_color=True))
    table = buffer.getvalue()
    html = (tmp_path / "out" / "report.html").read_text()
    summary = summary_line(result.report)
    for row in stopped:
        outcome = row["real_replica"]
        where = f"error {outcome['errno']} in GTID {outcome['gtid']} (executed up to {outcome['file']}:{outcome['pos']})"
        assert f"stopped: {where}" in table and f"stopped: {where}" in html, row["slave"]
        assert f"{row['slave']} stopped with {outcome['errno']} in GTID {outcome['gtid']}" in summary
    assert "caught up" in table and "real replica" in html and "real replicas:" in summary

    # A real replica that ends otherwise than lint predicts fails the run: the same real outcomes,
    # held against another slave's prediction
    broken, fine = stopped[0], next(row for row in rows if row["real_replica"]["caught_up"])
    assert not replica_verdict({**fine, "lint": broken["lint"]})["ok"]
    assert not replica_verdict({**broken, "lint": fine["lint"]})["ok"]
    other_txn = {**broken["lint"], "first": {**broken["lint"]["first"], "gtid": "0-1-999999"}}
    assert not replica_verdict({**broken, "lint": other_txn})["ok"]
    wrong_errno = {**broken["lint"], "first": {**broken["lint"]["first"], "errno": 1049}}
    verdict = replica_verdict({**broken, "lint": wrong_errno})
    assert not verdict["ok"] and "DISAGREES" in verdict["text"]
    rows[0] = {**rows[0], "real_replica_verdict": verdict}
    assert not SimulationResult(result.report, verifications=result.verifications).ok
