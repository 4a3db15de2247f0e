"""`experiment --candidates FILE` (issue #40, goal 6): up to 64 candidate rule sets counted in the
same single pass as the topology's slaves, ranked by bytes saved, each with lint's verdict. A
candidate's counts are those it gets as a slave of its own; the pass scans each chunk once."""

from __future__ import annotations

import csv
import json

import pytest

from dumpfilter.cli.app import main as dumpfilter_main
from dumpfilter.codec.scanner import Scanner
from dumpfilter.spark_jobs.bandwidth_experiment import run_experiment
from dumpfilter.topology import parse_topology
from dumpfilter.workload import WorkloadSpec, generate

TOPOLOGY = '[[slaves]]\nname = "db1"\nserver_id = 2\nrules = ["replicate-do-db=db1"]\n'
CANDIDATES = [("c-db2", ["replicate-do-db=db2"]), ("c-ign3", ["replicate-ignore-db=db3"]),
              ("c-t1", ["replicate-wild-do-table=%.t1"]), ("c-none", ["replicate-do-db=nothing_here"]),
              ("c-all", [])]


def _candidates_text(cands) -> str:
    return "".join(f'[[slaves]]\nname = "{n}"\nserver_id = {10 + k}\nrules = [{", ".join(repr(r) for r in rules)}]\n'
                   .replace("'", '"') for k, (n, rules) in enumerate(cands))


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cands")
    generate(WorkloadSpec(seed=21, schemas=3, tables_per_schema=2, transactions=500, binlog_format="row",
                          flavor="mariadb", max_binlog_size=40_000), root, "master-bin")
    return root


def test_candidates_rank_by_bytes_saved_and_equal_their_own_runs(tmp_path, binlogs, monkeypatch):
    scans = []
    real, real_finish = Scanner.scan_into, Scanner.scan_finish  # a scan is either (chunk_buffers: the latter)
    monkeypatch.setattr(Scanner, "scan_into", lambda self, *a, **k: scans.append(1) or real(self, *a, **k))
    monkeypatch.setattr(Scanner, "scan_finish", lambda self, *a, **k: scans.append(1) or real_finish(self, *a, **k))
    ranking: list[dict] = []
    run_experiment(binlogs, parse_topology(TOPOLOGY), tmp_path / "out",
                   candidates=parse_topology(_candidates_text(CANDIDATES)), ranking=ranking)
    with_candidates = len(scans)
    scans.clear()
    run_experiment(binlogs, parse_topology(TOPOLOGY), tmp_path / "one", candidates=parse_topology(
        _candidates_text(CANDIDATES[:1])))
    with_one = len(scans)
    scans.clear()
    run_experiment(binlogs, parse_topology(TOPOLOGY), tmp_path / "alone")
    files = [p for p in binlogs.iterdir() if p.name[-1].isdigit()]
    # One counting pass, whatever the number of candidates, and one lint scan of each file for all of them.
    assert with_candidates == with_one == len(scans) + len(files) > len(files)
    assert [r["rank"] for r in ranking] == list(range(1, len(CANDIDATES) + 1))
    # The candidates a replica runs with first, by bytes saved; then those it stops for (c-t1: its
    # CREATE DATABASE is filtered), whose saving lasts only to the stop, by bytes saved.
    stops = [r["lint"].startswith("a replica stops:") for r in ranking]
    assert stops == sorted(stops) and any(stops) and not all(stops)
    for group in (False, True):
        saved = [r["bytes_saved"] for r, stop in zip(ranking, stops) if stop == group]
        assert saved == sorted(saved, reverse=True)
    last_clean = ranking[stops.index(True) - 1]
    assert ranking[0]["candidate"] == "c-none" and last_clean["candidate"] == "c-all"
    assert last_clean["bytes_saved"] == 0 < max(r["bytes_saved"] for r, stop in zip(ranking, stops) if stop)
    for row in ranking:  # each candidate counted as a slave of its own would be
        rules = next(r for n, r in CANDIDATES if n == row["candidate"])
        own, _ = run_experiment(binlogs, parse_topology(_candidates_text([(row["candidate"], rules)])),
                                tmp_path / row["candidate"])
        assert (own[0]["bytes_sent"], own[0]["events_sent"]) == (row["bytes_sent"], row["events_sent"])
    lint = {r["candidate"]: r["lint"] for r in ranking}
    assert lint["c-all"] == "no break"
    assert lint["c-t1"].startswith("a replica stops:") and "error 1049" in lint["c-t1"]  # its CREATE DATABASE is filtered
    with open(tmp_path / "out" / "candidates.csv", newline="") as f:
        assert [r["candidate"] for r in csv.DictReader(f)] == [r["candidate"] for r in ranking]



def test_a_candidate_that_stops_shows_the_divergence_lint_shows_and_none_ranks_above_a_clean_one(tmp_path, capsys):
    """#81 goal 4: `shop.%` skips CREATE DATABASE analytics ('analytics.' matches no pattern) and
    keeps CREATE PROCEDURE under it (no table list): a replica stops there (1049). The multi-table
    UPDATEs after it are kept whole by their shop.t1 and write logs.t1, a table the rules do not keep
    (both seeded outside replication). `lint` counts those writes; the candidate's row counted them
    only up to the stop. do-db=shop diverges the same way without stopping; keeping everything is
    clean and ranks first, though it saves nothing."""
    from tests.rules.test_lint_cases import Build

    build = Build("mariadb").q("CREATE DATABASE analytics").q("CREATE PROCEDURE p() SELECT 1", db="analytics")
    for n in range(3):
        build.q(f"UPDATE logs.t1 a JOIN shop.t1 b ON a.id = b.id SET a.v = {n}, b.v = {n}", db="shop")
    binlogs = tmp_path / "in"
    binlogs.mkdir()
    (binlogs / "master-bin.000001").write_bytes(build.bytes())
    cands = [("stops", ["replicate-wild-do-table=shop.%"]), ("do-db", ["replicate-do-db=shop"]), ("all", [])]
    ranking: list[dict] = []
    run_experiment(binlogs, parse_topology(_candidates_text([("everything", [])])), tmp_path / "out",
                   candidates=parse_topology(_candidates_text(cands)), ranking=ranking)
    row = {r["candidate"]: r for r in ranking}
    for name, rules in cands:
        capsys.readouterr()
        dumpfilter_main(["lint", str(binlogs / "master-bin.000001"), *[f"--{r}" for r in rules], "--json"])
        report = json.loads(capsys.readouterr().out)
        assert row[name]["diverges"] == report["divergence"]["writes"], (name, row[name], report)
    assert row["stops"]["diverges"] == row["do-db"]["diverges"] == 3 and row["all"]["diverges"] == 0
    assert row["stops"]["lint"].startswith("a replica stops:") and "diverges: 3 writes" in row["stops"]["lint"]
    assert [r["candidate"] for r in ranking] == ["all", "do-db", "stops"]  # clean, diverges, stops and diverges
    with open(tmp_path / "out" / "candidates.csv", newline="") as f:
        assert {r["candidate"]: r["diverges"] for r in csv.DictReader(f)} == {"all": "0", "stops": "3", "do-db": "3"}

def test_lint_past_its_bound_says_so(tmp_path, binlogs):
    ranking: list[dict] = []
    run_experiment(binlogs, parse_topology(TOPOLOGY), tmp_path / "out", lint_max_mb=0.001,
                   candidates=parse_topology(_candidates_text(CANDIDATES[:1])), ranking=ranking)
    assert ranking[0]["lint"].startswith("not run:") and "--lint-max-mb" in ranking[0]["lint"]


def test_the_command_line(tmp_path, binlogs, capsys):
    (tmp_path / "t.toml").write_text(TOPOLOGY)
    (tmp_path / "c.toml").write_text(_candidates_text(CANDIDATES))
    code = dumpfilter_main(["experiment", "--no-spark", "--binlogs", str(binlogs), "--topology", str(tmp_path / "t.toml"),
                            "--candidates", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o"), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["candidate"] for c in out["candidates"]][0] == "c-none" and len(out["candidates"]) == 5


def test_too_many_candidates_or_a_clash_is_one_line(tmp_path, binlogs, capsys):
    (tmp_path / "t.toml").write_text(TOPOLOGY)
    (tmp_path / "many.toml").write_text(_candidates_text([(f"c{k}", []) for k in range(65)]))
    (tmp_path / "clash.toml").write_text(_candidates_text([("db1", [])]))
    for name, needle in (("many", "at most 64"), ("clash", "'db1' names a slave of the topology too")):
        code = dumpfilter_main(["experiment", "--no-spark", "--binlogs", str(binlogs), "--topology",
                                str(tmp_path / "t.toml"), "--candidates", str(tmp_path / f"{name}.toml"),
                                "--out", str(tmp_path / name)])
        err = capsys.readouterr().err
        assert code == 2 and needle in err and "Traceback" not in err


def test_candidates_need_no_server_id(tmp_path, binlogs, capsys):
    """A candidate is counted and linted, never connected (issue #82): its server_id may be left out,
    and the ranking is the one the same candidates with server_ids get."""
    (tmp_path / "t.toml").write_text(TOPOLOGY)
    with_ids = _candidates_text(CANDIDATES)
    (tmp_path / "ids.toml").write_text(with_ids)
    (tmp_path / "no-ids.toml").write_text("\n".join(line for line in with_ids.splitlines()
                                                    if not line.startswith("server_id")) + "\n")
    rankings = []
    for name in ("ids", "no-ids"):
        code = dumpfilter_main(["experiment", "--no-spark", "--no-charts", "--binlogs", str(binlogs), "--topology",
                                str(tmp_path / "t.toml"), "--candidates", str(tmp_path / f"{name}.toml"),
                                "--out", str(tmp_path / name), "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        rankings.append([(c["candidate"], c["bytes_sent"], c["lint"]) for c in json.loads(out)["candidates"]])
    assert rankings[0] == rankings[1] and len(rankings[1]) == len(CANDIDATES)
