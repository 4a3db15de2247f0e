"""Issue #82: `experiment` over a series whose middle file is cut inside an event counts every whole
event up to the cut and no file after it, on Spark as in-process (the cut travels back from a
task with its file and offset), and the driver is told the cut; with candidates too."""

from __future__ import annotations

import shutil

import pytest

from dumpfilter.binlogs import BinlogFile
from dumpfilter.spark_jobs.bandwidth_experiment import run_experiment
from dumpfilter.topology import parse_topology
from dumpfilter.workload import WorkloadSpec, generate

TOPOLOGY = '[[slaves]]\nname = "db1"\nserver_id = 2\nrules = ["replicate-do-db=db1"]\n'
CANDIDATES = '[[slaves]]\nname = "c-db2"\nrules = ["replicate-do-db=db2"]\n'


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_a_cut_series_is_counted_up_to_the_cut(engine, tmp_path, request):
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    series = tmp_path / "series"
    paths = generate(WorkloadSpec(seed=5, schemas=3, transactions=600, max_binlog_size=20_000), series, "master-bin")
    middle = paths[len(paths) // 2]
    starts = [e.pos for e in BinlogFile(middle)]
    boundary = starts[len(starts) // 2]
    reference = tmp_path / "reference"
    reference.mkdir()
    for path in paths[:paths.index(middle)]:
        shutil.copy(path, reference / path.name)
    (reference / middle.name).write_bytes(middle.read_bytes()[:boundary])  # the whole events alone
    with open(middle, "r+b") as f:
        f.truncate(boundary + 11)  # inside the event's header
    series_files = list(paths)
    cuts: list = []
    ranking: list = []
    rows, _ = run_experiment(series_files, parse_topology(TOPOLOGY), tmp_path / "out", spark=spark, charts=False,
                             candidates=parse_topology(CANDIDATES, server_id_needed=False), ranking=ranking, cuts=cuts)
    want_ranking: list = []
    want, _ = run_experiment(sorted(reference.iterdir()), parse_topology(TOPOLOGY), tmp_path / "ref", spark=spark,
                             charts=False, candidates=parse_topology(CANDIDATES, server_id_needed=False),
                             ranking=want_ranking)
    assert [(c.path, c.offset) for c in cuts] == [(str(middle), boundary)]
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in rows] == \
        [{k: v for k, v in r.items() if k != "seconds"} for r in want]
    assert [(r["candidate"], r["bytes_sent"], r["lint"]) for r in ranking] == \
        [(r["candidate"], r["bytes_sent"], r["lint"]) for r in want_ranking]
    with pytest.raises(Exception, match=f"{middle} at byte {boundary}: file ends inside an event header"):
        run_experiment(series_files, parse_topology(TOPOLOGY), tmp_path / "raised", spark=spark, charts=False)
