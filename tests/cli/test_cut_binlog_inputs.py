"""Issue #82: a binlog cut inside an event (a truncated copy, a file cut by a crash) could not be
read up to the cut by `filter`, `lint` or `experiment`: one line, exit 2, and nothing else. Now each processes
every whole event before the cut, writes or prints its result, then tells the cut in one line
naming the file and the cut event's offset, exit 2. The oracle: the same command over the file
cut at the last event boundary before the cut (which is a whole binlog, read with exit 0/1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from dumpfilter.binlogs import BinlogFile
from dumpfilter.cli.app import main
from tests.conftest import SHARED_FIXTURES

CRC32 = SHARED_FIXTURES / "osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32"  # MySQL 5.7, 60 txns
RULES = ["--replicate-do-db=auth"]
pytestmark = pytest.mark.skipif(not CRC32.is_file(), reason="shared fixtures absent")


def _event_starts(path: Path) -> list[int]:
    return [e.pos for e in BinlogFile(path)]


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_filter_and_lint_read_up_to_the_cut(data, tmp_path_factory, capsys):
    whole = CRC32.read_bytes()
    starts = _event_starts(CRC32)
    first = starts[1]  # past the FDE: a file cut inside it holds no event to read
    cut = data.draw(st.integers(min_value=first + 1, max_value=len(whole) - 1), label="cut")
    boundary = max(s for s in starts if s <= cut)  # where the cut event starts
    work = tmp_path_factory.mktemp("cut")
    cut_file, whole_events = work / "mysql-bin.000001", work / "boundary" / "mysql-bin.000001"
    whole_events.parent.mkdir()
    cut_file.write_bytes(whole[:cut])
    whole_events.write_bytes(whole[:boundary])

    code, _out, err = _run(capsys, ["filter", str(whole_events), "-o", str(work / "ref.bin"), *RULES,
                                    "--summary", "none"])
    assert code == 0, err
    code, _out, err = _run(capsys, ["filter", str(cut_file), "-o", str(work / "out.bin"), *RULES,
                                    "--summary", "plain"])  # a cut: its line alone, no summary
    if cut == boundary:  # a cut at an event boundary is a whole binlog
        assert code == 0, err
    else:
        assert code == 2 and "Traceback" not in err, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"dumpfilter: error: {cut_file} at byte {boundary}: "), err
        assert f"the file is cut there; every whole event before it was filtered and written (-o {work / 'out.bin'})" in err
    assert (work / "out.bin").read_bytes() == (work / "ref.bin").read_bytes()

    code_ref, out_ref, err = _run(capsys, ["lint", str(whole_events), *RULES, "--json"])
    assert code_ref in (0, 1), err
    code, out, err = _run(capsys, ["lint", str(cut_file), *RULES, "--json"])
    assert code == (code_ref if cut == boundary else 2), err
    reference, document = json.loads(out_ref), json.loads(out)
    assert [b["pos"] for b in document["breaks"]] == [b["pos"] for b in reference["breaks"]]
    if cut != boundary:
        assert document["cut"].startswith(f"{cut_file} at byte {boundary}: "), document["cut"]
        assert err.strip().splitlines() == [f"dumpfilter: error: {document['cut']}: the file is cut there; every "
                                            "whole event before it was linted (the breaks above), no later file read"]

    topology = work / "t.toml"
    topology.write_text('[[slaves]]\nname = "auth"\nserver_id = 2\nrules = ["replicate-do-db=auth"]\n')
    rows = []
    for name, binlog in (("ref", whole_events), ("cut", cut_file)):
        code, out, err = _run(capsys, ["experiment", "--no-spark", "--no-charts", "--binlogs", str(binlog),
                                       "--topology", str(topology), "--out", str(work / f"exp-{name}"), "--json"])
        assert code == (2 if name == "cut" and cut != boundary else 0), err
        rows.append([{k: v for k, v in row.items() if k != "seconds"} for row in json.loads(out)["slaves"]])
    assert rows[0] == rows[1]  # counted up to the cut: what the whole events alone give
    if cut != boundary:
        assert err.strip().endswith(f"the file is cut there; every whole event before it was counted (--out "
                                    f"{work / 'exp-cut'}), no later file read"), err


def test_a_cut_in_an_earlier_file_stops_the_run_there(tmp_path, capsys):
    starts = _event_starts(CRC32)
    cut = starts[len(starts) // 2] + 7
    first, second = tmp_path / "mysql-bin.000001", tmp_path / "mysql-bin.000002"
    first.write_bytes(CRC32.read_bytes()[:cut])
    second.write_bytes(CRC32.read_bytes())
    code, _out, err = _run(capsys, ["filter", str(first), str(second), "--out", str(tmp_path / "out"), *RULES,
                                    "--json", str(tmp_path / "summary.json")])
    assert code == 2 and f"{first} at byte {starts[len(starts) // 2]}: " in err and "no later file read" in err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["files_in"] == 1 and summary["cut"].startswith(f"{first} at byte ")
