"""Hostile option values, output paths and side files (a probe of the `dumpfilter` command): each is
one line on stderr and exit 2, never a traceback, a hang or a silently wrong output; and the filter
summary counts what it wrote, also to stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.cli.app import build_parser
from dumpfilter.cli.output_paths import OutputError, atomic_output

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path("/work/shared/fixtures/real_binlogs")
SMALL = FIXTURES / "blackbeam-rust_mysql_common" / "mariadb-bin.000001"  # 1074 bytes, MariaDB
LARGER = FIXTURES / "rust-us-mysql-cdc-rs" / "binlog.000693"  # 2.2 MB, MySQL
LINTED = FIXTURES / "rust-us-mysql-cdc-rs" / "binlog.000733"

pytestmark = pytest.mark.skipif(not SMALL.exists(), reason="the shared real binlogs are not here")


def dumpfilter(*args: str | os.PathLike[str], cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """The command in a process of its own; a FIFO it opened for reading would hang it: the timeout ends
    the test with an error instead of hanging the suite."""
    return subprocess.run([sys.executable, "-m", "dumpfilter", *map(str, args)], cwd=cwd, capture_output=True,
                          timeout=120, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)


def one_line(run: subprocess.CompletedProcess) -> str:
    err = run.stderr.decode(errors="replace")
    assert run.returncode == 2, (run.returncode, err)
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# -- 1, 11: numbers, and argparse's own errors in one line --------------------------------------
@pytest.mark.parametrize("value", ["-5", "0", "1", "1023", "99999999999999999999999", "nan", "2G"])
def test_max_binlog_size_out_of_range_is_one_line(tmp_path, value):
    line = one_line(dumpfilter("filter", "--out", tmp_path / "out", "--max-binlog-size", value, SMALL, cwd=tmp_path))
    assert line.startswith("dumpfilter filter: error: argument --max-binlog-size: "), line
    assert not (tmp_path / "out").exists()


def test_max_binlog_size_takes_a_suffix(tmp_path):
    run = dumpfilter("filter", "--out", tmp_path / "out", "--max-binlog-size", "4K", SMALL, "--summary", "none",
                     cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / "mariadb-bin.000001").exists()


@pytest.mark.parametrize("option", [["--max-binlog-size", "1M"], ["--basename", "x"]])
def test_a_series_option_with_one_output_file_is_refused(tmp_path, option):
    line = one_line(dumpfilter("filter", "-o", tmp_path / "o.bin", *option, SMALL, cwd=tmp_path))
    assert line.startswith(f"dumpfilter: error: {option[0]}: names the files of a --out series"), line
    assert not (tmp_path / "o.bin").exists()


@pytest.mark.parametrize("argv", [
    ["experiment", "--no-spark", "--binlogs", "b", "--topology", "t", "--chunk-bytes", "-1"],
    ["experiment", "--no-spark", "--binlogs", "b", "--topology", "t", "--chunk-bytes", "-1000000"],
    ["experiment", "--no-spark", "--binlogs", "b", "--topology", "t", "--lint-max-mb", "-1"],
    ["experiment", "--no-spark", "--binlogs", "b", "--topology", "t", "--lint-max-mb", "nan"],
    ["experiment", "--no-spark", "--binlogs", "b", "--topology", "t", "--lint-max-mb", "abc"],
    ["master", "serve", "--binlog-dir", "d", "--max-streams", "-1"],
    ["master", "serve", "--binlog-dir", "d", "--max-calls", "0"],
    ["master", "serve", "--binlog-dir", "d", "--stall-timeout", "nan"],
    ["master", "serve", "--binlog-dir", "d", "--grace", "inf"],
    ["master", "serve", "--binlog-dir", "d", "--lint-max-mb", "nan"],
    ["master", "serve", "--binlog-dir", "d", "--expire-logs-seconds", "nan"],
    ["master", "serve", "--binlog-dir", "d", "--max-series-bytes", "-1"],
    ["master", "serve", "--binlog-dir", "d", "--source-server-id", "0"],
    ["master", "serve", "--binlog-dir", "d", "--mysql-wait-timeout", "nan"],
    ["master", "serve", "--binlog-dir", "d", "--mysql-max-packet", "1e400"],
    ["master", "change-filter", "--server-id", "2", "--wait", "-1", "CHANGE REPLICATION FILTER"],
    ["master", "status", "--rpc-timeout", "nan"],
    ["slave", "run", "--server-id", "2", "--relay-log-dir", "r", "--relay-log-size", "-1"],
    ["slave", "run", "--server-id", "2", "--relay-log-dir", "r", "--heartbeat-period", "nan"],
    ["slave", "run", "--server-id", "2", "--relay-log-dir", "r", "--connect-retry", "-1"],
    ["slave", "run", "--server-id", "2", "--relay-log-dir", "r", "--retry-count", "-1"],
    ["slave", "run", "--server-id", "2", "--relay-log-dir", "r", "--net-timeout", "inf"],
    ["slave", "run", "--server-id", "2", "--relay-log-dir", "r", "--lint-wait", "nan"],
    ["verify", "--builtin", "--timeout", "nan"],
], ids=lambda argv: " ".join(argv[:2]) + " " + next(a for a in argv[2:] if a.startswith("--") and a not in (
    "--no-spark", "--binlogs", "--topology", "--binlog-dir", "--server-id", "--relay-log-dir", "--builtin")))
def test_a_numeric_option_that_means_nothing_is_refused_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser(argv).parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ": error: argument --" in err[0], err


def test_a_negative_chunk_is_refused_not_looped_on(tmp_path):
    topology = tmp_path / "t.toml"
    topology.write_text('[[slaves]]\nname = "a"\nserver_id = 2\nrules = ["replicate-do-db=auth"]\n')
    line = one_line(dumpfilter("experiment", "--no-spark", "--no-charts", "--binlogs", SMALL.parent, "--topology",
                               topology, "--out", tmp_path / "out", "--chunk-bytes", "-1", cwd=tmp_path))
    assert line.startswith("dumpfilter experiment: error: argument --chunk-bytes: '-1' is not a size from"), line


def test_a_usage_error_is_one_line_naming_the_command(tmp_path):
    line = one_line(dumpfilter("filter", "-o", tmp_path / "o.bin", "--max-binlog-size", "abc", SMALL, cwd=tmp_path))
    assert line.startswith("dumpfilter filter: error: argument --max-binlog-size: 'abc' is not a size"), line
    assert "usage:" not in line
    help_run = dumpfilter("filter", "--help", cwd=tmp_path)
    assert help_run.returncode == 0 and help_run.stdout.startswith(b"usage: dumpfilter filter")


# -- 2: --basename ------------------------------------------------------------------------------
@pytest.mark.parametrize("basename", ["a/b", "../../evil", ".", "..", "x" * 300, os.fsdecode(b"\xff\xfe")],
                         ids=["slash", "dotdot-path", "dot", "dotdot", "long", "not-utf8"])
def test_a_basename_that_is_no_plain_name_is_refused(tmp_path, basename):
    line = one_line(dumpfilter("filter", "--out", tmp_path / "out", "--basename", basename, SMALL, cwd=tmp_path))
    assert line.startswith("dumpfilter filter: error: argument --basename: "), line
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "evil").exists()


# -- 3: a write that fails ----------------------------------------------------------------------
@pytest.mark.parametrize("source", [SMALL, LARGER], ids=["at-close", "while-filtering"])
def test_a_full_device_is_one_line_naming_the_output(tmp_path, source):
    line = one_line(dumpfilter("filter", "-o", "/dev/full", source, cwd=tmp_path))
    assert line == "dumpfilter: error: -o /dev/full: cannot write: No space left on device", line


# -- 4: a bad URL -------------------------------------------------------------------------------
def test_a_schema_url_with_a_bad_port_is_one_line(tmp_path):
    line = one_line(dumpfilter("filter", "-o", tmp_path / "o.bin", "--schema", "mysql://u@host:99999999", SMALL,
                               cwd=tmp_path))
    assert line.startswith("dumpfilter: error: --schema: 'mysql://u@host:99999999': Port out of range"), line


# -- 5: an output that is a directory -----------------------------------------------------------
def test_json_into_the_out_directory_is_refused_up_front(tmp_path):
    topology = tmp_path / "t.toml"
    topology.write_text('[[slaves]]\nname = "a"\nserver_id = 2\nrules = ["replicate-do-db=auth"]\n')
    out = tmp_path / "x" / "ex"
    line = one_line(dumpfilter("experiment", "--no-spark", "--no-charts", "--binlogs", LINTED, "--topology", topology,
                               "--out", out, "--json", out, cwd=tmp_path))
    assert line == f"dumpfilter: error: --json {out}: is the --out output too; write the JSON elsewhere", line
    assert not out.exists()


def test_atomic_output_refuses_a_directory_before_writing(tmp_path):
    with pytest.raises(OutputError, match="is a directory"), atomic_output(tmp_path, "w"):
        pytest.fail("the body ran")
    assert list(tmp_path.iterdir()) == []


# -- 6: explain --batch -------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "says"), [
    (b'{"sql":"select 1"}\n{"sql":"\\ud800"}\n', "-:2: key 'sql': not valid Unicode"),
    (b'{"sql":"x", "filters": {"replicate_do_db": ["\\udc80"]}}\n', "-:1: key 'filters': not valid Unicode"),
    (b'{"sql":' + b"[" * 100000 + b"]" * 100000 + b"}\n", "-:1: not JSON this command reads: nested too deep"),
    (b'{"sql":"select 1"}\n\xff\xfe\n', "-:2: not UTF-8 text"),
], ids=["surrogate", "surrogate-in-filters", "deep", "not-utf8"])
def test_a_hostile_batch_line_is_named_by_its_number(tmp_path, text, says):
    line = one_line(dumpfilter("explain", "--batch", "-", "--replicate-do-db", "a", cwd=tmp_path, stdin=text))
    assert line.startswith(f"dumpfilter: error: --batch {says}"), line


# -- 8: side files that are no regular files ----------------------------------------------------
@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _topology(tmp_path: Path, extra: str = "") -> Path:
    topology = tmp_path / "t.toml"
    topology.write_text(f'[[slaves]]\nname = "a"\nserver_id = 2\nrules = ["replicate-do-db=auth"]\n{extra}')
    return topology


@pytest.mark.parametrize("case", ["defaults-file", "schema", "batch", "include", "zero-defaults", "zero-schema",
                                  "topology", "candidates", "topology-defaults-file"])
def test_a_side_file_that_is_no_regular_file_never_blocks(tmp_path, fifo, case):
    explain = ["explain", "--sql", "select 1"]
    experiment = ["experiment", "--no-spark", "--no-charts", "--binlogs", LINTED, "--out", tmp_path / "out"]
    if case == "include":
        (tmp_path / "my.cnf").write_text(f"[mysqld]\n!include {fifo}\n")
    argv, says = {
        "defaults-file": (["explain", "--sql", "x", "--defaults-file", fifo], f"--defaults-file: cannot read {fifo}"),
        "schema": ([*explain, "--schema", fifo], f"--schema {fifo}"),
        "batch": (["explain", "--batch", fifo], f"--batch {fifo}: cannot read it"),
        "include": ([*explain, "--defaults-file", tmp_path / "my.cnf"], f"--defaults-file: cannot read {fifo}"),
        "zero-defaults": ([*explain, "--defaults-file", "/dev/zero"], "--defaults-file: cannot read /dev/zero"),
        "zero-schema": ([*explain, "--schema", "/dev/zero"], "--schema /dev/zero"),
        "topology": ([*experiment, "--topology", fifo], f"--topology {fifo}: cannot read it"),
        "candidates": ([*experiment, "--topology", _topology(tmp_path), "--candidates", fifo],
                       f"--candidates {fifo}: cannot read it"),
        "topology-defaults-file": ([*experiment, "--topology", _topology(tmp_path, 'defaults_file = "fifo"\n')],
                                   f"{fifo}"),  # (topology.py may tell it first)
    }[case]
    line = one_line(dumpfilter(*argv, cwd=tmp_path))
    assert says in line and any(kind in line for kind in ("is a FIFO", "is a character device", "is not a file")), line


# -- 9: the summary counts what it wrote ---------------------------------------------------------
def test_the_summary_of_stdout_counts_the_bytes_written(tmp_path):
    run = dumpfilter("filter", "-o", "-", SMALL, "--summary", "plain", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout == SMALL.read_bytes()
    assert "bytes: 1074 B in, kept 1074 B written; 0.0% smaller" in run.stderr.decode(), run.stderr
    run = dumpfilter("filter", "-o", "-", SMALL, "--json", tmp_path / "s.json", cwd=tmp_path)
    assert json.loads((tmp_path / "s.json").read_text())["output_file_bytes"] == 1074


def test_an_identical_output_is_zero_percent_smaller(tmp_path):
    run = dumpfilter("filter", "-o", tmp_path / "o.bin", SMALL, "--summary", "plain", cwd=tmp_path)
    assert run.returncode == 0 and (tmp_path / "o.bin").read_bytes() == SMALL.read_bytes()
    assert "bytes: 1074 B in, kept 1074 B written; 0.0% smaller" in run.stderr.decode(), run.stderr


# -- 10: garbage schema and my.cnf files ---------------------------------------------------------
@pytest.mark.parametrize(("content", "says"), [
    (bytes(range(256)) * 10, "line 1: a NUL byte"),
    (b"CREATE TABLE a.t (x int", "line 1: cannot parse 'CREATE TABLE a.t (x int'"),
    (b"-- a dump\nCREATE DATABASE a;\n\nCREATE TABLE a.t (\n  x int\n;\n", "line 4: cannot parse"),
    (b"hello ;;; ))(", "line 1: 'hello' is not a statement of a schema dump"),
    (b"", "creates no database, table or trigger"),
], ids=["binary", "unclosed", "unclosed-line-4", "garbage", "empty"])
def test_a_garbage_schema_is_refused_not_read_as_empty(tmp_path, content, says):
    schema = tmp_path / "garbage.sql"
    schema.write_bytes(content)
    line = one_line(dumpfilter("lint", "--schema", schema, "--replicate-do-db", "test", LINTED, cwd=tmp_path))
    assert line.startswith(f"dumpfilter: error: --schema {schema}: {says}"), line


@pytest.mark.parametrize(("content", "says"), [
    ("hello ;;; ))(\n", ":1: 'hello ;;; ))(' comes before any [group] header"),
    ("[mysqld]\nreplicate-do-db = a\nhello ;;; ))(\n", ":3: 'hello ;;; ))(' is not an option name"),
], ids=["before-group", "in-group"])
def test_a_garbage_defaults_file_is_named_by_its_line(tmp_path, content, says):
    cnf = tmp_path / "my.cnf"
    cnf.write_text(content)
    line = one_line(dumpfilter("explain", "--sql", "select 1", "--defaults-file", cnf, cwd=tmp_path))
    assert line.startswith(f"dumpfilter: error: {cnf}{says}"), line
