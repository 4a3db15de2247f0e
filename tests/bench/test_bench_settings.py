"""`python -m bench`'s settings, hostile ones included: a DUMPFILTER_* number read by
`bench.common.env_int` / `env_float`, a benchmark's name, a matrix workload's name. Each one that
cannot be used is one line and exit 2 before anything runs on it (no binlog written, no server
started), never a traceback. Nothing here asserts a time."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.common import BenchSettingError, env_float, env_int

ROOT = Path(__file__).resolve().parents[2]
NAME = "DUMPFILTER_TEST_SETTING"


def _bench(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, env={**os.environ, **env})


def _expected(text: str, kind: type[int] | type[float]) -> float | None:
    """What `text` should read as (the helpers' contract): a `kind` above 0, else None."""
    try:
        value = kind(text.strip())
    except ValueError:
        return None
    return value if 0 < value < math.inf else None


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=12), st.integers(-10**6, 10**6).map(str),
                 st.floats(allow_nan=True, allow_infinity=True).map(str)))
def test_a_setting_is_a_number_above_0_or_one_error_naming_it(text: str):
    if "\x00" in text:
        return  # (no environment holds a NUL)
    os.environ[NAME] = text
    try:
        for read, kind in ((env_int, int), (env_float, float)):
            expected = _expected(text, kind)
            try:
                value = read(NAME, 7)
            except BenchSettingError as exc:
                assert expected is None, (text, kind)
                assert str(exc).startswith(f"{NAME}={text!r}: expected") and "\n" not in str(exc), exc
                continue
            assert isinstance(value, kind) and value == expected, (text, value)
    finally:
        del os.environ[NAME]


def test_an_unset_setting_is_its_default_and_zero_only_where_allowed():
    os.environ.pop(NAME, None)
    assert env_int(NAME, 5) == 5 and env_float(NAME, 0.5) == 0.5
    os.environ[NAME] = "0"
    try:
        assert env_float(NAME, 0.5, zero_ok=True) == 0.0
        with pytest.raises(BenchSettingError, match="above 0"):
            env_float(NAME, 0.5)
        with pytest.raises(BenchSettingError, match="whole number above 0"):
            env_int(NAME, 5)
    finally:
        del os.environ[NAME]


@pytest.mark.parametrize(("args", "env", "said"), [
    (("nosuch",), {}, "bench: no benchmark named nosuch (known: core,"),
    (("matrix",), {"DUMPFILTER_MATRIX_MB": "abc"}, "bench matrix: DUMPFILTER_MATRIX_MB='abc': expected a whole number"),
    (("matrix",), {"DUMPFILTER_BENCH_REPEAT": "-2"}, "bench matrix: DUMPFILTER_BENCH_REPEAT='-2': expected"),
    (("matrix",), {"DUMPFILTER_MATRIX_WORKLOADS": "small-txn-row,nosuch"},
     "bench matrix: DUMPFILTER_MATRIX_WORKLOADS: no workload named nosuch (known: sysbench-row,"),
    (("fanout_procs",), {"DUMPFILTER_FANOUT_STAGGER": "soon"}, "bench fanout_procs: DUMPFILTER_FANOUT_STAGGER='soon'"),
    (("fanout_procs",), {"DUMPFILTER_FANOUT_SLAVES": "9"}, "bench fanout_procs: DUMPFILTER_FANOUT_PAGE_CACHE / _SLAVES: unknown 9"),
    (("filter",), {"DUMPFILTER_MIXED_MB": "250,big"}, "bench filter: DUMPFILTER_MIXED_MB='250,big': expected sizes"),
])
def test_a_setting_that_cannot_be_used_is_one_line_and_exit_2(args: tuple[str, ...], env: dict[str, str], said: str):
    done = _bench(*args, **env)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(said), done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(("bench", "name"), [("shadow", "DUMPFILTER_SHADOW_DIR"), ("fanout_procs", "DUMPFILTER_FANOUT_PROCS_DIR")])
def test_a_binlog_directory_that_holds_none_is_one_line_and_exit_2(bench: str, name: str, tmp_path: Path):
    (tmp_path / "notes.000001x").write_text("not a binlog's name")
    for directory in (tmp_path, tmp_path / "missing"):
        done = _bench(bench, **{name: str(directory)})
        assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
        assert done.stderr.strip() == f"bench {bench}: {name}={str(directory)!r}: expected a directory of binlog files (name.NNNNNN)"
