"""`simulate`'s report gives the bytes by table (issue #60, goal 2) and every stream's time
(goal 4): on a real MariaDB's MIXED binlog, report.json's by_table is experiment's
bandwidth_by_table (the same counting), each slave's rows add up to what its stream was sent over
gRPC, the framing and control row is a small part of the bytes, and report_by_table.csv and
report.html hold them; report_streams.csv and the HTML give each stream's time, every policy's."""

from __future__ import annotations

import csv
import shutil

import pytest
from rich.console import Console

from dumpfilter.lab.simulate import run_simulation
from dumpfilter.spark_jobs.bandwidth_experiment import REST, run_experiment
from dumpfilter.topology import parse_topology

from tests.spark_jobs.test_experiment_statement_tables import TOPOLOGY, _workload

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def mixed_binlogs(mariadb_factory, tmp_path_factory):
    server = mariadb_factory("simulate-by-table", binlog_format="MIXED")
    server.execute(_workload(400))
    server.flush_logs()
    root = tmp_path_factory.mktemp("mixed")
    for path in server.binlog_files()[:-1]:
        shutil.copy(path, root / path.name)
    return root


def _csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_simulate_reports_bytes_by_table_and_every_streams_time(tmp_path, mixed_binlogs):
    text = (f'[master]\nbinlogs = "{mixed_binlogs}"\n\n[experiment]\n'
            'skip_policies = ["heartbeat", "placeholder"]\n' + TOPOLOGY)
    out = tmp_path / "report"
    result = run_simulation(parse_topology(text), out, progress=False, console=Console(file=None, quiet=True))
    report = result.report
    by_table = report["by_table"]
    _, paths = run_experiment(mixed_binlogs, parse_topology(text), tmp_path / "experiment", charts=False)
    assert by_table == [{k: int(v) if k.startswith("bytes") else v for k, v in row.items()}
                        for row in _csv(tmp_path / "experiment" / "bandwidth_by_table.csv")]
    for row in report["slaves"]:
        mine = [t for t in by_table if t["slave"] == row["slave"]]
        assert sum(t["bytes_sent"] for t in mine) == row["bytes_sent"]  # what its own stream received
        assert sum(t["bytes_all"] for t in mine) == row["bytes_all"]
        rest = next(t for t in mine if t["table"] == REST)
        assert rest["bytes_all"] < 0.10 * row["bytes_all"]
    sent = {(t["slave"], t["table"]): t["bytes_sent"] for t in by_table}
    assert sent[("crm-wild", "crm.sbtest1")] > sent[("crm-db", "crm.sbtest1")] > 0  # USE logs; UPDATE crm.t
    assert [{k: int(v) if k.startswith("bytes") else v for k, v in r.items()}
            for r in _csv(out / "report_by_table.csv")] == by_table
    page = (out / "report.html").read_text()
    assert "Bytes by table" in page and "crm.sbtest1" in page and "(framing of transactions" in page and "of which envelope MB" in page

    # every stream's time: each slave under each policy, and the rule-less one when there is one
    streams = report["streams"]
    assert len(streams) == report["experiment"]["streams"] == len(result.streams)
    assert {(s["slave"], s["skip_policy"]) for s in streams if s["role"] != "everything"} == \
        {(name, p) for name in ("all", "crm-db", "crm-wild") for p in ("heartbeat", "placeholder")}
    assert all(s["wall_seconds"] > 0 for s in streams)
    for row in report["slaves"]:
        assert set(row["policy_seconds"]) == {"heartbeat", "placeholder"}
        assert row["policy_seconds"][row["skip_policy"]] == row["wall_seconds"]
    assert [r["slave"] for r in _csv(out / "report_streams.csv")] == [s["slave"] for s in streams]
    assert "Where the time went" in page


def test_simulate_shows_divergence_wherever_it_shows_lint_and_the_timeline_in_a_csv(tmp_path, mixed_binlogs):
    """Issue #60, goals 1 and 3: a slave with replicate-do-db=crm silently skips `USE logs; UPDATE
    crm.t` (it never stops): simulate's lint cell, its explanation (cause and fix), the summary,
    report.csv and report.html say so, with `dumpfilter lint`'s count; timeline.csv holds every
    line timeline.png draws, bin by bin, as matplotlib holds it."""
    from dumpfilter.binlogs import binlog_paths
    from dumpfilter.binlogs.lint import lint_files
    from dumpfilter.charts import LINT_TAG, timeline_chart
    from dumpfilter.lab.simulate.report import lint_cell, print_report, summary_line, timeline_series
    from dumpfilter.rules.ruleset import RuleSet, Settings

    text = f'[master]\nbinlogs = "{mixed_binlogs}"\n\n[experiment]\nskip_policies = ["heartbeat"]\n' + TOPOLOGY
    out = tmp_path / "report"
    result = run_simulation(parse_topology(text), out, progress=False, console=Console(file=None, quiet=True))
    report = result.report
    want = lint_files(binlog_paths(mixed_binlogs), RuleSet(do_db=("crm",)), Settings(flavor="mariadb"))
    assert want.divergence.writes > 0  # (its CREATE TABLE crm.t, run with no default database, breaks it too)
    rows = {row["slave"]: row for row in report["slaves"]}
    assert rows["crm-db"]["lint"]["diverges"] == want.divergence.writes
    assert rows["crm-wild"]["lint"]["diverges"] == rows["all"]["lint"]["diverges"] == 0
    assert lint_cell(rows["crm-db"]).endswith(f"; diverges: {want.divergence.writes} writes")
    assert "diverges" not in lint_cell(rows["crm-wild"])
    console = Console(record=True, width=4000)
    print_report(report, console)
    printed = console.export_text()
    said = [line for line in printed.splitlines() if line.startswith("lint crm-db:")]
    assert len(said) == 1 and f"{want.divergence.writes} write(s) silently diverge" in said[0]
    assert "--replicate-wild-do-table=crm.%" in said[0]  # the fix
    # every stream's seconds, the rule-less one's too, in its slave's row of the streams table
    assert {s["slave"] for s in report["streams"]} == {*rows, "(everything)"}
    table = printed[printed.index("Seconds per stream"):].splitlines()
    for stream in report["streams"]:
        line = next(t for t in table if t.strip().startswith(stream["slave"] + " "))
        assert f"{stream['wall_seconds']:.2f}" in line.split(), (stream, line)
    assert f"silent divergence for crm-db ({want.divergence.writes} writes)" in summary_line(report)
    assert {r["slave"]: r["lint_diverges"] for r in _csv(out / "report.csv")} == \
        {"all": "0", "crm-db": str(want.divergence.writes), "crm-wild": "0"}
    page = (out / "report.html").read_text()
    assert "would silently diverge" in page and "replicate-wild-do-table=crm.%" in page

    # timeline.csv: every line the chart draws, each bin's value
    drawn = timeline_chart(*timeline_series(report)[:1], tmp_path / "t.png", title="t",
                           reference=timeline_series(report)[1])
    scale = 1.0 if drawn["unit"] == "MB/s" else 1e3
    table = _csv(out / "timeline.csv")
    assert len(drawn["lines"]) == 4  # the rule-less stream and the three slaves
    for line in drawn["lines"]:
        name = line["label"].removesuffix(LINT_TAG)
        mine = [r for r in table if r["series"] == name]
        assert [float(r["mb_s"]) * scale for r in mine] == pytest.approx(line["y"], rel=1e-9, abs=1e-12), name
    assert {r["series"] for r in table} == {line["label"].removesuffix(LINT_TAG) for line in drawn["lines"]}
