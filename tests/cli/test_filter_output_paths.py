"""Where `filter` writes (leftovers of a hostile-input probe): -o makes no directory, as cp makes none;
-o naming an existing directory is --out's deprecated spelling, and --help says so; an output that
refuses to be written is one line naming the output, never the input."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SMALL = Path("/work/shared/fixtures/real_binlogs/blackbeam-rust_mysql_common/mariadb-bin.000001")

pytestmark = pytest.mark.skipif(not SMALL.exists(), reason="the shared real binlogs are not here")


def dumpfilter(*args: str | os.PathLike[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def one_line(run: subprocess.CompletedProcess[str]) -> str:
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and "Traceback" not in run.stderr and len(lines) == 1, run.stderr
    return lines[0]


@pytest.mark.parametrize(("name", "says"), [("missing/dir/x", "missing/dir: no such directory (-o creates none)"),
                                            ("file/x", "file: not a directory")], ids=["missing", "file"])
def test_o_makes_no_directory(tmp_path, name, says):
    (tmp_path / "file").write_bytes(b"")
    line = one_line(dumpfilter("filter", "-o", tmp_path / name, SMALL, cwd=tmp_path))
    assert line == f"dumpfilter: error: -o {tmp_path / name}: {tmp_path}/{says}", line
    assert not (tmp_path / "missing").exists()


def test_o_naming_a_directory_writes_a_series_as_help_says(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    run = dumpfilter("filter", "-o", out, SMALL, "--summary", "none", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip() == f"dumpfilter: warning: -o {out} for a series directory is deprecated: use --out {out}"
    assert sorted(p.name for p in out.iterdir()) == ["mariadb-bin.000001", "mariadb-bin.index"]
    said = " ".join(dumpfilter("filter", "--help", cwd=tmp_path).stdout.split())
    said = said[said.index("-o FILE, --output FILE"):said.index("--out DIR a directory")]
    assert said.endswith("in a directory that exists (-o creates none); an existing directory, a name ending in '/' "
                         "or several inputs make it the deprecated spelling of --out DIR (a series, with a warning) "), said


def test_an_output_that_cannot_be_written_is_named_not_the_input(tmp_path):
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        line = one_line(dumpfilter("filter", "-o", path, SMALL, cwd=tmp_path))
    assert line == f"dumpfilter: error: -o {path}: cannot write: No such device or address", line
