"""`bench fanout_procs` reads the 64-slave figure against the transport's floor measured in the same
run (issue #59 goal 1: CPU per MB within 0.15 of bare gRPC's ratio for 64 clients), not against the
8-vs-1 goal's fixed 1.3."""

from __future__ import annotations

from bench.bench_fanout_procs import GOAL_64_OVER_FLOOR, _goals


def _got(ratio_64: float) -> dict:
    one = {"master_cpu_s": 2.0, "master_with_lint_cpu_s": 2.0, "lint_worker_cpu_s": 0.0, "lint_done": True}
    return {"runs": {"1": one}, "cpu_per_mb_ratio_64_vs_1": ratio_64, "master_peak_rss_anon_mb": 100.0}


def _line(ratio_64: float, transport: dict[int, float]) -> str:
    lines = _goals("small", _got(ratio_64), 0.1, transport)
    return next(line for line in lines if "64 do-db slaves" in line)


def test_the_64_slave_goal_is_the_floor_plus_its_margin():
    transport = {1: 0.5, 8: 0.6, 64: 8 * 0.5 * 1.8}  # 64 clients: 1.8x one client's CPU per MB
    assert _line(1.58, transport).endswith(": met")  # under the floor (1.3 would have failed it)
    assert _line(1.8 + GOAL_64_OVER_FLOOR - 0.01, transport).endswith(": met")
    assert _line(1.8 + GOAL_64_OVER_FLOOR + 0.02, transport).endswith(": NOT met")
    assert "1.80" in _line(1.58, transport)  # the floor printed beside it


def test_without_the_floor_no_verdict():
    assert "no floor measured" in _line(1.58, {1: 0.5, 8: 0.6})
