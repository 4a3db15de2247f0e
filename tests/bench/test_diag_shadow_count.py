"""bench.diag_shadow_count, the shadow pass's count in process, by its own command line: a
candidate's totals (by hour, minute, table and statement) do not depend on which other candidates
are counted beside it (`--kinds`: the rule groups of a pass answer each unit for all of them at
once) nor on the size of the master's segments the pass walks (`--segment-mb`); `--split` says
where the count's samples fell. Nothing here asserts a time."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import bench_shadow
from dumpfilter.workload.generator import WorkloadSpec, generate

ROOT = Path(__file__).resolve().parents[2]


def _count(binlogs: Path, out: Path, *options: str, ranges: list[int] | None = None) -> dict[str, dict]:
    done = subprocess.run([sys.executable, "-m", "bench.diag_shadow_count", str(binlogs), "--schema", "db",
                           "--out", str(out), *options], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    if ranges is not None:  # (the ranges the pass counted, as it says)
        ranges += [int(m) for m in re.findall(r", (\d+) ranges$", done.stdout, re.M)]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A MIXED binlog over db1..db8 with DDL and cross-database statements, in several files."""
    directory = tmp_path_factory.mktemp("diag-shadow")
    generate(WorkloadSpec(seed=97, schemas=8, transactions=8_000, binlog_format="mixed", ddl_share=0.05,
                          max_binlog_size=3_000_000), directory)
    return directory


def test_a_candidates_counts_do_not_depend_on_the_others_or_on_the_segments(binlogs: Path, tmp_path: Path):
    every = _count(binlogs, tmp_path / "all.json")
    assert len(every) == len(bench_shadow.KINDS) * bench_shadow.SCHEMAS
    assert any(c["totals"]["bytes_sent"] != "0" for c in every.values())  # (the rules meet the schemas)
    some = _count(binlogs, tmp_path / "some.json", "--kinds", "1,5", "--segment-mb", "1")
    assert sorted(some) == sorted(name for name in every if name.startswith(("k1-", "k5-")))
    for name, counts in some.items():
        assert counts == every[name], name


def test_a_candidates_counts_do_not_depend_on_where_the_pass_ends_its_ranges(binlogs: Path, tmp_path: Path):
    """A live master that keeps pace with its primary counts a range per change, each folded into the
    candidates' totals (`ShadowCounts.fold`: heartbeat stretches and Rotates joined across ranges,
    the bytes by table and statement group added): its totals are those of one range."""
    whole: list[int] = []
    cut: list[int] = []
    one = _count(binlogs, tmp_path / "one.json", "--kinds", "0,2,5,7", "--segment-mb", "1", ranges=whole)
    many = _count(binlogs, tmp_path / "many.json", "--kinds", "0,2,5,7", "--segment-mb", "1", "--range-segments", "1",
                  ranges=cut)
    assert cut and whole and cut[0] > whole[0] and cut[0] >= 3  # (one range a segment: more ranges)
    assert sorted(many) == sorted(one)
    for name, counts in many.items():
        assert counts == one[name], name


def test_split_says_where_the_counts_spent_their_samples(binlogs: Path):
    """`--split N`: the count run again under py-spy, and the N functions below the segments' counts
    the samples fell in most, by share (bench.sampled_split), no wrapper's cost on each call."""
    if shutil.which(bench_shadow.PY_SPY) is None:
        pytest.skip(f"py-spy ({bench_shadow.PY_SPY}) is not installed: the test extra installs it")
    done = subprocess.run([sys.executable, "-m", "bench.diag_shadow_count", str(binlogs), "--schema", "db",
                           "--passes", "3", "--split", "6"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    said = re.search(r"^(\d+) samples inside _count_units", done.stdout, re.M)
    assert said is not None and int(said.group(1)) > 0, done.stdout[-2000:]
    inclusive = done.stdout.split("inclusive (on the stack):\n", 1)[1].split("own (on top of the stack):", 1)[0]
    shares = [(float(share), name) for share, name in re.findall(r"^ +([0-9.]+)%  (\S+)$", inclusive, re.M)]
    assert 0 < len(shares) <= 6
    assert [s for s, _ in shares] == sorted((s for s, _ in shares), reverse=True) and all(0 < s <= 100 for s, _ in shares)
    assert {"answer_all", "_count_all"} & {name for _, name in shares}  # (the count's two halves)


@pytest.mark.parametrize(("option", "value"), [("--kinds", ""), ("--kinds", "x"), ("--kinds", "0,8"), ("--kinds", "-1"),
                                               ("--segment-mb", "0"), ("--segment-mb", "-3"), ("--segment-mb", "1.5"),
                                               ("--range-segments", "0"), ("--range-segments", "x"),
                                               ("--split", "0"), ("--split", "x")])
def test_a_malformed_option_is_one_line_and_exit_2(option: str, value: str, tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "bench.diag_shadow_count", str(tmp_path), f"{option}={value}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert f"argument {option}" in done.stderr and "Traceback" not in done.stderr
