"""Shadow candidates on a live master (issue #80 goal 4), against a real `master serve` process over
real gRPC: `--shadow FILE` and `master shadow add|remove|list|report` count each candidate, never
streamed, from where it was added to the live end; its counts equal `experiment --candidates` over
the same files while the binlog grows file by file (a file written in two halves, its end cut inside
a transaction). Only an admin identity may add one (PERMISSION_DENIED); a rule that does not parse is
INVALID_ARGUMENT naming it."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from dumpfilter.cli.app import main as dumpfilter_main
from dumpfilter.master.shadow.board import PASS_NICE
from dumpfilter.spark_jobs.bandwidth_experiment import run_experiment
from dumpfilter.topology import parse_topology
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.workload import WorkloadSpec, generate
from tests.support.master_command import serve_master, stop_master
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = [("c-db2", ["replicate-do-db=db2"], "heartbeat"), ("c-ign3", ["replicate-ignore-db=db3"], "placeholder"),
              ("c-t1", ["replicate-wild-do-table=%.t1"], "empty-transaction"), ("c-all", [], "heartbeat")]
POLICY = """
[slave.ops]
password = "pw-ops"
admin = true
allow = ["%.%"]

[slave.ana]
password = "pw-ana"
allow = ["db1.%", "db2.%"]
"""


def candidates_text(cands, policy: Path | None = None, user: str = "") -> str:
    head = f'[master]\npolicy = "{policy}"\n' if policy else ""
    return head + "".join(
        f'[[slaves]]\nname = "{n}"\nserver_id = {10 + k}\nskip_policy = "{p}"\n'
        + (f'user = "{user}"\n' if user else "")
        + f'rules = [{", ".join(json.dumps(r) for r in rules)}]\n' for k, (n, rules, p) in enumerate(cands))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("shadow-src")
    generate(WorkloadSpec(seed=21, schemas=3, tables_per_schema=2, transactions=600, binlog_format="row",
                          flavor="mariadb", max_binlog_size=40_000), root, "master-bin")
    return sorted(p for p in root.iterdir() if p.name[-1].isdigit())


@contextmanager
def serving(binlog_dir: Path, *options: str):
    """A `master serve` process on a free port: yields its gRPC address; it must drain at SIGTERM."""
    proc, address = serve_master(binlog_dir, *options)
    try:
        yield address
    finally:
        assert "Traceback" not in stop_master(proc)


def listed(address: str, *auth: str) -> dict[str, dict]:
    out = Path(f"/tmp/shadow-list-{address.replace(':', '-')}.json")
    assert dumpfilter_main(["master", "shadow", "list", "--master", address, *auth, "--json", str(out)]) == 0
    return {row["name"]: row for row in json.loads(out.read_text())}


def counted_to_end(address: str, names: list[str], end: str, *auth: str) -> bool:
    rows = listed(address, *auth)
    return all(rows[n]["counted_to"] == end for n in names)


def grow(live: Path, files: list[Path]) -> None:
    """The next files of the series into `live`, each written in two halves (its end cut inside a
    transaction first)."""
    for path in files:
        data = path.read_bytes()
        half = len(data) // 2 + 7
        (live / path.name).write_bytes(data[:half])
        with open(live / path.name, "ab") as f:
            f.write(data[half:])


def experiment_counts(files: list[Path], cands_text: str, out: Path) -> dict[str, dict]:
    ranking: list[dict] = []
    run_experiment([str(p) for p in files], parse_topology('[[slaves]]\nname = "x"\nserver_id = 1\n'), out,
                   candidates=parse_topology(cands_text), ranking=ranking, charts=False)
    return {row["candidate"]: row for row in ranking}


def test_shadow_counts_equal_experiment_as_the_binlog_grows(tmp_path, source):
    live = tmp_path / "live"
    live.mkdir()
    grow(live, source[:2])
    shadow_file = tmp_path / "shadow.toml"
    shadow_file.write_text(candidates_text(CANDIDATES))
    with serving(live, "--shadow", str(shadow_file)) as address:
        # the live file cut inside a transaction: counted up to its last whole unit only
        data = source[2].read_bytes()
        (live / source[2].name).write_bytes(data[:len(data) // 2])
        # (the pass enters the file at 0 as it ends the one before: its whole units are counted after)
        def in_live_file() -> bool:
            name, _, pos = listed(address)["c-db2"]["counted_to"].rpartition(":")
            return name == source[2].name and int(pos) > 0

        assert wait_for(in_live_file)
        cut = int(listed(address)["c-db2"]["counted_to"].rpartition(":")[2])
        assert 4 < cut < len(data) // 2
        with open(live / source[2].name, "ab") as f:
            f.write(data[len(data) // 2:])
        # a candidate added at run time counts from the live end: a new file that holds no transaction yet
        later = tmp_path / "later.toml"
        later.write_text(candidates_text([("r-db1", ["replicate-do-db=db1"], "heartbeat")]))
        grow(live, source[3:4])
        assert wait_for(lambda: counted_to_end(address, ["c-db2"], f"{source[3].name}:"
                                               f"{source[3].stat().st_size}"))
        (live / source[4].name).write_bytes(source[4].read_bytes()[:300])  # its header events only
        assert wait_for(lambda: listed(address)["c-db2"]["counted_to"].startswith(source[4].name))
        assert dumpfilter_main(["master", "shadow", "add", "--master", address, str(later)]) == 0
        start = listed(address)["r-db1"]["start"]
        assert start.startswith(source[4].name + ":")
        (live / source[4].name).write_bytes(source[4].read_bytes())
        grow(live, source[5:])
        end = f"{source[-1].name}:{source[-1].stat().st_size}"
        names = [c[0] for c in CANDIDATES] + ["r-db1"]
        assert wait_for(lambda: counted_to_end(address, names, end))
        rows = listed(address)
        report = tmp_path / "report"
        assert dumpfilter_main(["master", "shadow", "report", "--master", address, "--out", str(report),
                                "--no-charts"]) == 0
    whole = experiment_counts(source, candidates_text(CANDIDATES), tmp_path / "exp")
    for name, _, _ in CANDIDATES:
        got, want = rows[name]["counts"], whole[name]
        assert (got["bytes_sent"], got["events_sent"], got["bytes_all"]) == \
               (want["bytes_sent"], want["events_sent"], want["bytes_all"]), name
        assert got["bytes_all"] - got["bytes_sent"] == want["bytes_saved"]
    assert rows["c-all"]["counts"]["saving_bytes"] == 0 < rows["c-db2"]["counts"]["saving_bytes"]
    # the run-time one: experiment over the files from the one it was added in (at its start)
    assert int(start.rpartition(":")[2]) == 0
    later_exp = experiment_counts(source[4:], candidates_text([("r-db1", ["replicate-do-db=db1"], "heartbeat")]),
                                  tmp_path / "exp2")
    assert rows["r-db1"]["counts"]["bytes_sent"] == later_exp["r-db1"]["bytes_sent"]
    assert rows["r-db1"]["counts"]["bytes_all"] == sum(p.stat().st_size - 4 for p in source[4:])
    # the report: experiment's tables, the same figures
    with open(report / "candidates.csv") as f:
        ranked = {r["candidate"]: r for r in csv.DictReader(f)}
    assert {n: int(r["bytes_sent"]) for n, r in ranked.items()} == \
           {n: r["counts"]["bytes_sent"] for n, r in rows.items()}
    with open(report / "bandwidth_by_hour.csv") as f:
        hours = list(csv.DictReader(f))
    assert sum(int(h["bytes_sent"]) for h in hours if h["slave"] == "c-db2") == rows["c-db2"]["counts"]["bytes_sent"]
    with open(report / "bandwidth_by_table.csv") as f:
        tables = list(csv.DictReader(f))
    assert sum(int(t["bytes_sent"]) for t in tables if t["slave"] == "c-ign3") == \
           rows["c-ign3"]["counts"]["bytes_sent"]
    assert (report / "bandwidth.csv").exists()


def _stub(address: str):
    return dump_pb2_grpc.DumpFilterStub(grpc.insecure_channel(address))


def _as(user: str, password: str):
    return [("dumpfilter-user", user), ("dumpfilter-password", password)]


def test_only_an_admin_adds_and_a_bad_rule_is_named(tmp_path, source):
    live = tmp_path / "live"
    live.mkdir()
    grow(live, source[:2])
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    text = candidates_text([("c-db2", ["replicate-do-db=db2"], "heartbeat")])
    with serving(live, "--policy", str(policy)) as address:
        stub = _stub(address)
        with pytest.raises(grpc.RpcError) as refused:
            stub.AddShadow(dump_pb2.AddShadowRequest(candidates=text), metadata=_as("ana", "pw-ana"), timeout=20)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "admin" in refused.value.details()
        with pytest.raises(grpc.RpcError) as hidden:
            stub.ListShadows(dump_pb2.ListShadowsRequest(), metadata=_as("ana", "pw-ana"), timeout=20)
        assert hidden.value.code() == grpc.StatusCode.PERMISSION_DENIED
        bad = candidates_text([("c-bad", ["replicate-do-tabel=db1.t1"], "heartbeat")])
        with pytest.raises(grpc.RpcError) as invalid:
            stub.AddShadow(dump_pb2.AddShadowRequest(candidates=bad), metadata=_as("ops", "pw-ops"), timeout=20)
        assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "replicate-do-tabel" in invalid.value.details() and "\n" not in invalid.value.details()
        reply = stub.AddShadow(dump_pb2.AddShadowRequest(candidates=text), metadata=_as("ops", "pw-ops"), timeout=20)
        assert list(reply.names) == ["c-db2"]
        with pytest.raises(grpc.RpcError) as again:
            stub.AddShadow(dump_pb2.AddShadowRequest(candidates=text), metadata=_as("ops", "pw-ops"), timeout=20)
        assert again.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        stats = stub.Stats(dump_pb2.StatsRequest(), metadata=_as("ops", "pw-ops"), timeout=20)
        assert [c.name for c in stats.shadows] == ["c-db2"]
        assert not stub.Stats(dump_pb2.StatsRequest(), metadata=_as("ana", "pw-ana"), timeout=20).shadows
        with pytest.raises(grpc.RpcError) as removed:
            stub.RemoveShadow(dump_pb2.RemoveShadowRequest(name="c-db2"), metadata=_as("ana", "pw-ana"), timeout=20)
        assert removed.value.code() == grpc.StatusCode.PERMISSION_DENIED
        stub.RemoveShadow(dump_pb2.RemoveShadowRequest(name="c-db2"), metadata=_as("ops", "pw-ops"), timeout=20)
        with pytest.raises(grpc.RpcError) as gone:
            stub.RemoveShadow(dump_pb2.RemoveShadowRequest(name="c-db2"), metadata=_as("ops", "pw-ops"), timeout=20)
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_bad_shadow_file_is_one_line_before_the_master_listens(tmp_path, source):
    live = tmp_path / "live"
    live.mkdir()
    grow(live, source[:1])
    bad = tmp_path / "bad.toml"
    bad.write_text(candidates_text([("c-bad", ["replicate-do-tabel=db1.t1"], "heartbeat")]))
    done = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(live),
                           "--listen", "127.0.0.1:0", "--shadow", str(bad)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "replicate-do-tabel" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_purged_start_a_corrupt_file_and_a_restart_are_each_one_line(tmp_path, source):
    live = tmp_path / "live"
    live.mkdir()
    grow(live, source[:3])
    shadow_file = tmp_path / "shadow.toml"
    shadow_file.write_text(candidates_text(CANDIDATES[:2]))
    later = tmp_path / "later.toml"
    later.write_text(candidates_text([("r-db1", ["replicate-do-db=db1"], "heartbeat")]))
    proc, address = serve_master(live, "--shadow", str(shadow_file), "--metrics-port", "0")
    try:
        head = proc.head.splitlines()
        assert any("shadow: 2 candidate(s)" in line and "not kept across a restart" in line for line in head)
        metrics_url = proc.stderr.readline().split("metrics on ")[1].strip()
        end = f"{source[2].name}:{source[2].stat().st_size}"
        assert wait_for(lambda: counted_to_end(address, ["c-db2", "c-ign3"], end))
        # (lint runs beside the pass, which may be done first: its state settled before /metrics is read)
        assert wait_for(lambda: all(row["lint_state"] == "done" for row in listed(address).values()))
        # /metrics: per candidate what it would be sent and saves, how far it counted, its lint
        with urllib.request.urlopen(metrics_url, timeout=20) as reply:
            text = reply.read().decode()
        rows = listed(address)
        for name in ("c-db2", "c-ign3"):
            counts = rows[name]["counts"]
            assert f'dumpfilter_shadow_bytes_sent{{candidate="{name}"}} {float(counts["bytes_sent"])}' in text
            assert f'dumpfilter_shadow_bytes_saved{{candidate="{name}"}} {float(counts["saving_bytes"])}' in text
            assert f'dumpfilter_shadow_events_sent{{candidate="{name}"}} {float(counts["events_sent"])}' in text
            assert f'dumpfilter_shadow_counting{{candidate="{name}"}} 1.0' in text
            assert f'dumpfilter_shadow_lint_state{{candidate="{name}",state="{rows[name]["lint_state"]}"}} 1.0' in text
        assert dumpfilter_main(["master", "shadow", "add", "--master", address, str(later)]) == 0
        # a purge past the candidates' start: their counts stand, and they say so
        (live / source[0].name).unlink()
        note = listed(address)["c-db2"]["note"]
        assert note == f"its start {source[0].name} was purged: its counts cover binlog no longer on disk"
        # a file corrupt in the middle: every candidate says where the pass stopped, and it counts
        # on once the file is whole again (never a dead counter)
        data = bytearray(source[3].read_bytes())
        data[len(data) // 2] ^= 0xFF
        (live / source[3].name).write_bytes(bytes(data))
        grow(live, source[4:5])
        assert wait_for(lambda: listed(address)["c-db2"]["note"].startswith("the pass stopped at"))
        rows = listed(address)
        assert rows["r-db1"]["note"] == rows["c-ign3"]["note"]
        assert "\n" not in rows["c-db2"]["note"] and source[3].name in rows["c-db2"]["note"]
        assert rows["c-db2"]["state"] == "counting"
        (live / source[3].name).write_bytes(source[3].read_bytes())
        grow(live, source[5:6])
        end = f"{source[5].name}:{source[5].stat().st_size}"
        assert wait_for(lambda: counted_to_end(address, ["c-db2", "c-ign3", "r-db1"], end))
        assert not listed(address)["r-db1"]["note"]
        tail = stop_master(proc)
        assert "shadow: 1 candidate(s) added at run time are not kept across a restart" in tail
        assert "Traceback" not in tail
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the restart: --shadow's candidates come back, counted again from the first file there is
    with serving(live, "--shadow", str(shadow_file)) as address:
        end = f"{source[5].name}:{source[5].stat().st_size}"
        assert wait_for(lambda: counted_to_end(address, ["c-db2", "c-ign3"], end))
        rows = listed(address)
        assert set(rows) == {"c-db2", "c-ign3"} and rows["c-db2"]["start"] == f"{source[1].name}:0"
    want = experiment_counts(source[1:6], candidates_text(CANDIDATES[:2]), tmp_path / "exp")
    assert rows["c-db2"]["counts"]["bytes_sent"] == want["c-db2"]["bytes_sent"]


def test_a_candidate_counts_what_its_identitys_gate_allows(tmp_path, source):
    live = tmp_path / "live"
    live.mkdir()
    grow(live, source[:3])
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    cands = [("g-all", [], "heartbeat"), ("g-ign2", ["replicate-ignore-db=db2"], "placeholder")]
    shadow_file = tmp_path / "shadow.toml"
    shadow_file.write_text(candidates_text(cands, user="ana"))  # ana may receive db1 and db2 only
    end = f"{source[2].name}:{source[2].stat().st_size}"
    auth = ("--user", "ops", "--password", "pw-ops")
    with serving(live, "--policy", str(policy), "--shadow", str(shadow_file)) as address:
        assert wait_for(lambda: counted_to_end(address, ["g-all", "g-ign2"], end, *auth))
        rows = listed(address, *auth)
    bounded = candidates_text(cands, policy=policy, user="ana").replace('user = "ana"\n',
                                                                         'user = "ana"\npassword = "pw-ana"\n')
    want = experiment_counts(source[:3], bounded, tmp_path / "exp")
    unbounded = experiment_counts(source[:3], candidates_text(cands), tmp_path / "exp-open")
    for name, _, _ in cands:
        assert rows[name]["counts"]["bytes_sent"] == want[name]["bytes_sent"], name
    assert want["g-all"]["bytes_sent"] < unbounded["g-all"]["bytes_sent"]  # the gate cut db3


def test_a_candidate_needs_no_server_id(tmp_path, source):
    """The `--candidates` format as `experiment --candidates` reads it: a candidate's server_id is
    optional, in a --shadow file and in `master shadow add` alike (both asked for one)."""
    live = tmp_path / "live"
    live.mkdir()
    grow(live, source[:2])
    shadow_file, later = tmp_path / "shadow.toml", tmp_path / "later.toml"
    shadow_file.write_text('[[slaves]]\nname = "s-db2"\nrules = ["replicate-do-db=db2"]\n')
    later.write_text('[[slaves]]\nname = "r-db1"\nrules = ["replicate-do-db=db1"]\n')
    with serving(live, "--shadow", str(shadow_file)) as address:
        assert dumpfilter_main(["master", "shadow", "add", "--master", address, str(later)]) == 0
        assert sorted(listed(address)) == ["r-db1", "s-db2"]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="a thread's nice is read from Linux's /proc")
def test_the_pass_runs_behind_the_streams(tmp_path, source):
    """The pass thread's nice is the master's plus PASS_NICE (the replicas come first); every other
    thread of the master keeps the master's."""
    live = tmp_path / "live"
    live.mkdir()
    grow(live, source[:2])
    shadow_file = tmp_path / "shadow.toml"
    shadow_file.write_text(candidates_text(CANDIDATES[:1]))
    proc, address = serve_master(live, "--shadow", str(shadow_file))
    try:
        def nices() -> list[int]:  # (field 19 of a task's stat: its nice)
            return [int((t / "stat").read_text().rsplit(")", 1)[1].split()[16])
                    for t in Path(f"/proc/{proc.pid}/task").iterdir()]
        master = int(Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
        assert wait_for(lambda: listed(address)["c-db2"]["counted_to"] is not None)
        got = nices()
        assert got.count(min(19, master + PASS_NICE)) == 1 and got.count(master) == len(got) - 1
    finally:
        assert "Traceback" not in stop_master(proc)
