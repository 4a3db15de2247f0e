"""bench.sampled_split, where a function's samples go: py-spy's raw stacks summed by each function
below the root, inclusive and own; any text read without an error."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.sampled_split import split

RAW = """\
<module> (x.py:1);main (x.py:2);_count_units (b.py:3);answer_all (c.py:4);mark (r.py:5) 7
<module> (x.py:1);main (x.py:2);_count_units (b.py:3);answer_all (c.py:4) 2
<module> (x.py:1);main (x.py:2);_count_units (b.py:3);_count_all (b.py:9);_core::count_walk::count_many::h0bdb8ed1e636e84f (_core.so) 5
<module> (x.py:1);main (x.py:2);_count_units (b.py:3) 1
<module> (x.py:1);main (x.py:2);_count_units (b.py:3);answer_all (c.py:4);classify (r.py:9) 3
<module> (x.py:1);scan (s.py:1) 40
<module> (x.py:1);_count_units (b.py:3);outer (o.py:1);_count_units (b.py:3);mark (r.py:5) 4
not a sample line
"""


def test_samples_are_summed_below_the_innermost_root(tmp_path: Path):
    raw = tmp_path / "raw.txt"
    raw.write_text(RAW)
    got = split(raw, "_count_units")
    assert got.samples == 7 + 2 + 5 + 1 + 3 + 4  # (not the scan's 40, nor the line without a count)
    assert got.inclusive == {"answer_all": 12, "mark": 11, "classify": 3, "_count_all": 5,
                             "_core::count_walk::count_many": 5}
    assert got.own == {"mark": 11, "answer_all": 2, "classify": 3, "_core::count_walk::count_many": 5, "_count_units": 1}
    lines = got.lines(2)
    assert lines[0] == "22 samples inside _count_units"
    assert lines[2:4] == ["   54.5%  answer_all", "   50.0%  mark"]


def test_no_sample_inside_the_root_is_said(tmp_path: Path):
    raw = tmp_path / "raw.txt"
    raw.write_text("<module> (x.py:1);scan (s.py:1) 40\n")
    assert split(raw, "_count_units").lines(5) == ["no sample inside _count_units: the run was too short for the sampling rate"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(["_count_units", "a (x.py:1)", "b", "c::h0123456789abcdef",
                                                    " ", ";", "(", "é"]), max_size=6), st.integers(0, 10**6)),
                max_size=20),
       st.text(max_size=200))
def test_any_text_is_read_and_every_sample_inside_the_root_counted_once(tmp_path_factory, stacks, noise):
    raw = tmp_path_factory.mktemp("fuzz") / "raw.txt"
    raw.write_text("\n".join(";".join(frames) + f" {n}" for frames, n in stacks) + "\n" + noise, errors="surrogateescape")
    got = split(raw, "_count_units")
    assert got.samples >= 0
    assert all(0 <= n <= got.samples for n in got.inclusive.values())
    assert sum(got.own.values()) == got.samples
