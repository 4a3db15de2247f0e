"""The simulate command end to end: report files, the packaged default topology, a topology with
a list of files and a master policy, and (marked mariadb) a real MariaDB as the source."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest

from dumpfilter.workload.generator import WorkloadSpec, generate
from dumpfilter.cli.app import main as dumpfilter_main
from dumpfilter.topology import MasterSource, parse_topology
from dumpfilter.lab.simulate import default_topology_text, load_default_topology, run_simulation
from dumpfilter.lab.simulate.equivalence import verify_slaves

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

SMALL = """
[master.workload]
seed = 3
schemas = 3
transactions = 200
binlog_format = "row"

[[slaves]]
name = "one"
server_id = 2
rules = ["replicate-do-db=db1"]

[[slaves]]
name = "two"
server_id = 3
rules = ["replicate-wild-ignore-table=db%.t1"]
skip_policy = "placeholder"

[experiment]
skip_policies = ["heartbeat", "empty-transaction"]
"""


def test_cli_writes_report_json_csv_and_png(tmp_path, capsys):
    topology = tmp_path / "small.toml"
    topology.write_text(SMALL)
    out = tmp_path / "report"
    assert dumpfilter_main(["simulate", "--topology", str(topology), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "one" in printed and "two" in printed and "saved" in printed
    report = json.loads((out / "report.json").read_text())
    assert [r["slave"] for r in report["slaves"]] == ["one", "two"]
    assert report["experiment"]["skip_policies"] == ["heartbeat", "empty-transaction"]
    # the slave's own policy is always measured; the experiment adds the others it lists
    assert set(report["slaves"][1]["policies"]) == {"placeholder", "heartbeat", "empty-transaction"}
    assert report["verify"] is None and report["slaves"][0]["verified"] is None
    with open(out / "report.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["slave"] for r in rows] == ["one", "two"]
    for row, js in zip(rows, report["slaves"]):
        assert int(row["bytes_sent"]) == js["bytes_sent"] and int(row["bytes_all"]) == js["bytes_all"]
    assert (out / "report.png").read_bytes()[:8] == PNG_MAGIC


def test_print_default_topology_is_the_packaged_file(capsys):
    assert dumpfilter_main(["simulate", "--print-default-topology"]) == 0
    text = capsys.readouterr().out
    assert text == default_topology_text()
    topology = parse_topology(text)
    assert topology.slaves == load_default_topology().slaves
    names = [s.name for s in topology.slaves]
    assert len(names) == 4
    assert topology.source.kind == "workload" and topology.source.options["schemas"] == 6
    assert {s.settings.semantics for s in topology.slaves} == {"mysql", "effective"}
    assert len({s.skip_policy for s in topology.slaves}) == 3
    assert any(s.channel for s in topology.slaves)


def test_files_source_and_master_policy(tmp_path):
    """[master] files = [...] (served from a directory of links) and a master policy that allows
    the identity 'restricted' only db2: the master ANDs the policy with that slave's rules, so it
    receives less than a slave with the same rules under the permissive [default], and --verify
    holds it to its rules AND the policy."""
    src = tmp_path / "src"
    files = generate(WorkloadSpec(seed=9, schemas=3, transactions=300, max_binlog_size=30_000), src)
    policy = tmp_path / "policy.toml"
    policy.write_text('[slave.restricted]\nallow = ["db2.%"]\n\n[default]\nallow = ["db1.%", "db2.%", "db3.%"]\n')
    listed = ", ".join(f'"{p}"' for p in files)
    topology = parse_topology(f"""
[master]
files = [{listed}]
policy = "{policy}"

[[slaves]]
name = "free"
server_id = 2
rules = ["replicate-do-db=db1", "replicate-do-db=db2"]

[[slaves]]
name = "restricted"
server_id = 3
user = "restricted"
rules = ["replicate-do-db=db1", "replicate-do-db=db2"]

[experiment]
skip_policies = []
""")
    result = run_simulation(topology, None, progress=False, verify=True, keep_work=tmp_path / "work")
    rows = {r["slave"]: r for r in result.report["slaves"]}
    # verify ANDs the same policy into slave-side filtering: both slaves pass...
    assert result.ok, [v.differences for v in result.verifications]
    # ...and without the policy, the restricted slave misses (parts of) its db1 transactions
    spec = topology.slaves[1]
    full = next(s for s in result.streams if s.plan.role == "everything").plan.relay_dir
    mine = {s.plan.skip_policy: s.plan.relay_dir for s in result.streams if s.plan.spec is spec}
    check = verify_slaves(full, [(spec, mine, None, None)])[0]
    assert not check.ok and any("not received" in d.problem for d in check.differences)
    assert result.report["source"]["files"] == [p.name for p in files]
    assert rows["free"]["bytes_all"] == sum(p.stat().st_size - 4 for p in files)
    # the policy removes db1 for "restricted": strictly fewer bytes than the same rules unrestricted
    assert 0 < rows["restricted"]["bytes_sent"] < rows["free"]["bytes_sent"]


@pytest.mark.mariadb
@pytest.mark.timeout(600)
def test_mariadb_source_verifies(tmp_path):
    """--mariadb: a real MariaDB on a loopback port runs the built-in SQL workload; its binlog is
    what the master serves, and every slave of the default topology verifies."""
    topology = dataclasses.replace(load_default_topology(),
                                   source=MasterSource("mariadb", options={"transactions": 300}))
    result = run_simulation(topology, tmp_path / "out", verify=True, mariadb=True, progress=False)
    assert result.report["source"]["description"].startswith("real MariaDB")
    assert result.ok, [v.differences for v in result.verifications]
    assert all(v.transactions > 300 for v in result.verifications)
    assert any(r["saved_bytes"] > 0 for r in result.report["slaves"])
