"""The verify verdict: each failing pair's error message is printed, and pairs without a reference
are counted apart from the compared ones (a PASS never hides them)."""

from __future__ import annotations

import io

from rich.console import Console

from dumpfilter.lab.verify.report import as_json, print_report, verdict_counts
from dumpfilter.lab.verify.against_replicas import DIFFERENT, IDENTICAL, NO_REFERENCE, Outcome, PairResult, RunResult


def _pair(name: str, verdict: str, reference: Outcome | None = None, dumpfilter: Outcome | None = None,
          **kw) -> PairResult:
    return PairResult(name, 2, ["replicate-do-db=a"], ["replicate-do-db=a"], verdict, reference=reference,
                      dumpfilter=dumpfilter or Outcome(True), **kw)


def _printed(runs) -> str:
    buffer = io.StringIO()
    print_report(runs, Console(file=buffer, width=200, no_color=True))
    return buffer.getvalue()


def test_failing_pair_prints_both_error_messages():
    stopped = Outcome(False, 1146, "Table 'a.t9' doesn't exist", "0-1-17")
    other = Outcome(False, 1062, "Duplicate entry '1' for key 'PRIMARY'", "0-1-20")
    run = RunResult("ROW", 10, ("bin.000001", 400), [
        _pair("x", DIFFERENT, reference=stopped, dumpfilter=other, differences=["stops differ"]),
        _pair("y", IDENTICAL, reference=Outcome(True)),
        _pair("z", NO_REFERENCE, reason="effective semantics"),
    ], 1.0)
    out = _printed([run])
    assert "x (ROW): reference replica stopped: error 1146 in GTID 0-1-17: Table 'a.t9' doesn't exist" in out
    assert "x (ROW): dumpfilter stopped: error 1062 in GTID 0-1-20: Duplicate entry '1' for key 'PRIMARY'" in out
    assert "FAIL: 1 of 2 compared pair(s) differ, 1 identical; 1 pair(s) without reference" in out


def test_pass_names_the_pairs_without_reference():
    run = RunResult("ROW", 10, ("bin.000001", 400), [
        _pair("y", IDENTICAL, reference=Outcome(True)),
        _pair("z", NO_REFERENCE, reason="effective semantics"),
        _pair("w", NO_REFERENCE, reason="binlog-do-db"),
    ], 1.0)
    out = _printed([run])
    assert "PASS: 1 of 1 compared pair(s) identical; 2 pair(s) without reference, not compared" in out
    assert verdict_counts([run]) == {"compared": 1, "identical": 1, "different": 0, "without_reference": 2}
    assert as_json([run])["pairs"]["without_reference"] == 2


def test_nothing_compared_is_a_fail():
    run = RunResult("ROW", 10, ("bin.000001", 400), [_pair("z", NO_REFERENCE, reason="effective")], 1.0)
    assert "FAIL: no pair could be compared; 1 pair(s) without reference" in _printed([run])
