"""A LintResult's repr is bounded (issue #82): its count of breaks and its first stop, clipped,
whatever the binlog (every break's fields made about 2 million characters for a 281 MB binlog)."""

from __future__ import annotations

from dumpfilter.harness import LintBreak, LintResult, generate_binlog, lint
BOUND = 400  # characters: the count, the first stop clipped (200), the frame


def test_the_repr_of_many_long_breaks_is_bounded():
    statement = "INSERT INTO db1.t1 VALUES " + ",".join(f"({k})" for k in range(20_000))
    breaks = tuple(LintBreak(file="master-bin.000001", pos=4 + k, gtid=f"0-1-{k}", errno=1146,
                             message="Table 'db1.t1' doesn't exist", statement=statement)
                   for k in range(50_000))
    text = repr(LintResult(breaks))
    assert len(text) < BOUND, len(text)
    assert text.startswith('LintResult(ok=False, breaks=50000, first="master-bin.000001:4: error 1146')
    assert repr(LintResult()) == "LintResult(ok=True, breaks=0, first=None)"


def test_a_real_lint_result_shows_its_count_and_first_stop(tmp_path):
    binlog = generate_binlog(tmp_path / "b", transactions=300, schemas=3)
    result = lint(binlog, ["replicate-wild-do-table=%.t1"])  # the CREATE DATABASEs are filtered: it stops
    assert not result.ok and result.first is not None
    text = repr(result)
    assert f"breaks={len(result.breaks)}," in text and str(result.first)[:40] in text
    assert len(text) < BOUND
