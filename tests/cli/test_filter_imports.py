"""The offline `filter` command loads what it uses (issue #30, goal 4: its start was half its time
on a large binlog): run as a user runs it, in a process of its own, it imports none of the
modules only other paths need (tempfile and its shutil-random-bz2-lzma, json, zstandard, uuid,
logging, sqlglot), and fewer modules in all than before they were made lazy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Imported by `filter -o FILE` before: tempfile (atomic output), json (--json), zstandard (MySQL's
# compressed payloads), uuid (MySQL GTIDs' text), logging (sqlglot's logger, set at import).
NOT_NEEDED = ("tempfile", "random", "json", "zstandard", "uuid", "platform", "logging", "traceback", "sqlglot")
MODULES_BEFORE = 177  # `filter -o FILE --replicate-do-db=db3` on this file, before (python -X importtime)


def _imported(*args: str) -> list[str]:
    """The modules a `dumpfilter filter` process imports (python -X importtime)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "dumpfilter", "filter", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line.split("|")[2].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2][1:]


def _binlog(shared_fixtures: Path) -> Path:
    return sorted(shared_fixtures.glob("*/*.000001"))[0]


@pytest.mark.parametrize("rules", [(), ("--replicate-do-db=db3",), ("--replicate-wild-ignore-table=db1.%",)])
def test_filter_imports_only_what_it_uses(tmp_path, shared_fixtures, rules):
    out = tmp_path / "out.bin"
    modules = _imported(str(_binlog(shared_fixtures)), "-o", str(out), *rules)
    assert out.exists()
    assert {"dumpfilter.binlogs.filtering", "dumpfilter.rules.evaluate"} <= set(modules)  # the parse above works
    loaded = [name for name in NOT_NEEDED if name in modules or any(m.startswith(name + ".") for m in modules)]
    assert loaded == [], f"`filter` imported {loaded}"
    assert len(modules) < MODULES_BEFORE - 15, len(modules)


def test_json_and_a_series_still_work(tmp_path, shared_fixtures):
    """What moved into functions still loads where it is used: --json FILE and --out DIR."""
    summary = tmp_path / "summary.json"
    modules = _imported(str(_binlog(shared_fixtures)), "--out", str(tmp_path / "series"), "--json", str(summary))
    assert "json" in modules and "tempfile" in modules
    assert summary.read_text().startswith("{") and list((tmp_path / "series").iterdir())
