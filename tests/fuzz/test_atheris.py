"""The coverage-guided targets (atheris_targets.py) run by CI: each target for ATHERIS_RUNS inputs
(10 000 under CI), each input under FUZZ_CPU_BOUND seconds of CPU time (checked in the target). A
crash (any exception but the project's own errors, or too much CPU) or a hang (libFuzzer -timeout,
a give-up far above any input's time) makes libFuzzer exit non-zero with the input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.fuzz_support import CPU_BOUND, IN_CI

# 10 000 inputs per target under CI=true (63 CPU seconds for binlog, rules and rpc, measured; policy's
# 2 000 take 4 s), 2 000 elsewhere; ATHERIS_RUNS sets it.
RUNS = int(os.environ.get("ATHERIS_RUNS", "10000" if IN_CI else "2000"))
HERE = Path(__file__).resolve().parent
# Per target: a run cap (seconds) far above what RUNS inputs take, so a slow machine fails loudly
# rather than CI hanging.
pytestmark = pytest.mark.timeout(max(600, RUNS // 10))
# libFuzzer's -timeout is wall-clock time: only a hang's give-up here (an input's CPU time is
# bounded in the target, by CPU_BOUND).
HANG = 60


@pytest.mark.parametrize("target", ["binlog", "rules", "rpc", "policy"])
def test_atheris_target(target, tmp_path):
    try:
        import atheris  # noqa: F401
    except ImportError:
        from conftest import skip_or_fail

        skip_or_fail("atheris is not installed (pip install atheris: a Linux wheel for CPython 3.11/3.12)")
    env = {**os.environ, "ATHERIS_CORPUS": str(tmp_path / "corpus"), "FUZZ_CPU_BOUND": str(CPU_BOUND)}
    # -seed fixed under CI (the run is the same every time, as hypothesis is derandomized there).
    seed = ["-seed=2387"] if IN_CI else []
    run = subprocess.run([sys.executable, str(HERE / "atheris_targets.py"), target, f"-runs={RUNS}",
                          f"-timeout={HANG}", "-rss_limit_mb=2048", "-print_final_stats=1",
                          f"-artifact_prefix={tmp_path}/", *seed],
                         capture_output=True, text=True, env=env, cwd=HERE.parents[1])
    tail = "\n".join(run.stderr.splitlines()[-40:])
    assert run.returncode == 0, f"atheris {target}: exit {run.returncode}\n{tail}"
    assert f"Done {RUNS} runs" in run.stderr, tail
