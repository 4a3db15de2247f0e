"""The hostile-input probe's leftovers: a --schema URL's password is never in a message, whatever is
wrong with the URL; every file option of `master serve` and `slave run` given a FIFO, /dev/zero, a
directory, a missing, unreadable, 100 MB or non-UTF-8 file is one line naming the option and the
path, exit 2, before anything listens (never a block, a traceback or a later error in other words);
the spark-submit entry reads --chunk-bytes and --lint-max-mb in `dumpfilter experiment`'s ranges,
and `binlog generate` every number in the ranges a topology's [master.workload] has."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.cli.app import build_parser
from dumpfilter.spark_jobs import bandwidth_experiment
from dumpfilter.topology import WORKLOAD_RANGES

SECRET = "s3cret-Pw"
# Root reads every file whatever its mode: the unreadable case runs without the capabilities that
# let it (util-linux's setpriv), as tests/master/test_hostile_files.py does.
WITHOUT_DAC = ("setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search")


def dumpfilter(*args: str | os.PathLike[str], cwd: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """The command in a process of its own; one that blocks on a FIFO, or reads /dev/zero for ever,
    ends the test with an error at the timeout instead of hanging the suite."""
    return subprocess.run([*prefix, sys.executable, "-m", "dumpfilter", *map(str, args)], cwd=cwd,
                          capture_output=True, timeout=60, stdin=subprocess.DEVNULL)


def one_line(run: subprocess.CompletedProcess) -> str:
    err = run.stderr.decode(errors="replace")
    assert run.returncode == 2, (run.returncode, err)
    assert "Traceback" not in err and "Errno" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# -- a --schema URL: its password never shown ----------------------------------------------------
@pytest.mark.parametrize("url", [
    f"mysql://u:{SECRET}@h:99999/", f"mysql://u:{SECRET}@h:abc", f"mysql://u:{SECRET}@h:-1",
    f"mysql://u:{SECRET}@[::1", f"mysql://u:{SECRET}@/db", f"mysql://u:x@{SECRET}@h:abc",
    f"mysql://u:{SECRET}@127.0.0.1:1/", f"mysql://u:{SECRET}@{'a' * 70}.invalid:1",
], ids=["port-range", "port-text", "port-negative", "ipv6-unclosed", "no-host", "at-in-password", "refused",
        "label-too-long"])
def test_a_schema_url_never_shows_its_password(tmp_path, url):
    line = one_line(dumpfilter("explain", "--sql", "select 1", "--schema", url, cwd=tmp_path))
    assert line.startswith("dumpfilter: error: --schema") and "mysql://u:***@" in line, line
    assert "s3cret" not in line, line


@pytest.mark.parametrize("url", [f"mysql://u:{SECRET}@h:99999/", f"mysql://u:{SECRET}@[::1",
                                 f"http://u:{SECRET}@h/", f"mysql://u:x@{SECRET}@h:abc"],
                         ids=["port-range", "ipv6-unclosed", "scheme", "at-in-password"])
def test_an_apply_url_is_read_at_start_and_never_shows_its_password(tmp_path, url):
    """`slave run --apply URL`: a bad URL was read only when the first batch was to be applied (a
    traceback for a bad port), after the master's data was relayed; its password is never shown."""
    line = one_line(dumpfilter("slave", "run", "--master", "127.0.0.1:1", "--server-id", "3", "--relay-log-dir",
                               tmp_path / "relay", "--apply", url, "--until-caught-up", cwd=tmp_path))
    assert line.startswith("dumpfilter: error: --apply: ") and "://u:***@" in line, line
    assert "s3cret" not in line and not (tmp_path / "relay").exists(), line


# -- master serve's and slave run's side files ---------------------------------------------------
CASES = ["fifo", "dev-zero", "directory", "missing", "unreadable", "100MB", "not-utf8"]


def _hostile(tmp_path: Path, case: str) -> Path:
    path = tmp_path / case
    if case == "fifo":
        os.mkfifo(path)
    elif case == "dev-zero":
        return Path("/dev/zero")
    elif case == "directory":
        path.mkdir()
    elif case == "unreadable":
        path.write_text("a-token-of-twenty-chars\n")
        path.chmod(0)
    elif case == "100MB":
        with open(path, "wb") as f:
            f.truncate(100 << 20)
    elif case == "not-utf8":
        path.write_bytes(b"\xff\xfe\x80 not text\n")
    return path


@pytest.mark.parametrize("case", CASES)
def test_every_side_file_of_master_serve_is_one_line_before_it_listens(tmp_path, case):
    hostile = _hostile(tmp_path, case)
    other = tmp_path / "fine.pem"  # the option another needs: a small text file, read as well
    other.write_text("-----BEGIN NOTHING-----\n")
    (tmp_path / "series").mkdir()
    needs = {"--policy": [], "--tls-cert": ["--tls-key", other], "--tls-key": ["--tls-cert", other],
             "--tls-client-ca": ["--tls-cert", other, "--tls-key", other],
             "--metrics-token-file": ["--metrics-port", "0"],
             "--source-password-file": ["--source", "mysql://repl@127.0.0.1:1"],
             "--replicas": ["--mysql-listen", "127.0.0.1:0"], "--mysql-rsa-key": ["--mysql-listen", "127.0.0.1:0"]}
    prefix = WITHOUT_DAC if case == "unreadable" and os.geteuid() == 0 else ()
    for option, more in needs.items():
        line = one_line(dumpfilter("master", "serve", "--binlog-dir", tmp_path / "series", "--listen", "127.0.0.1:0",
                                   option, hostile, *more, cwd=tmp_path, prefix=prefix))
        assert line.startswith(f"dumpfilter: error: {option} {hostile}: "), line


@pytest.mark.parametrize("case", ["100MB", "not-utf8"])
def test_a_slave_tls_file_that_is_no_pem_text_is_one_line_before_it_connects(tmp_path, case):
    hostile = _hostile(tmp_path, case)
    for option in ("--ssl-ca", "--ssl-cert", "--ssl-key"):
        pair = {"--ssl-cert": ["--ssl-key", hostile], "--ssl-key": ["--ssl-cert", hostile]}.get(option, [])
        line = one_line(dumpfilter("slave", "run", "--master", "127.0.0.1:1", "--server-id", "3", "--relay-log-dir",
                                   tmp_path / "relay", "--connect-timeout", "1", option, hostile, *pair, cwd=tmp_path))
        assert line.startswith("dumpfilter: error: --ssl-") and f" {hostile}: " in line, line
        assert not (tmp_path / "relay").exists()  # nothing started


# -- the spark-submit entry: experiment's ranges -------------------------------------------------
def _parses(parser, argv: list[str], capsys) -> bool:
    """True when `argv` parses; a refusal must be argparse's one line naming the option, exit 2."""
    try:
        parser.parse_args(argv)
    except SystemExit as exited:
        err = capsys.readouterr().err.strip().splitlines()
        assert exited.code == 2 and len(err) == 1 and "error: argument --" in err[0], err
        return False
    return True


@pytest.mark.parametrize(("option", "low", "high"), [
    ("--chunk-bytes", *bandwidth_experiment.CHUNK_BYTES_RANGE), ("--lint-max-mb", *bandwidth_experiment.LINT_MAX_MB_RANGE),
])
def test_the_spark_entry_reads_experiments_numbers_in_experiments_ranges(option, low, high, capsys):
    base = ["--binlogs", "b", "--topology", "t"]
    spark = bandwidth_experiment.build_parser()
    cli = ["experiment", "--no-spark", *base]
    for value, fits in ((high + 1, False), (low - 1, False), (math.nan, False), (math.inf, False), ("abc", False),
                        (low, True), (high, True)):
        text = str(value)
        assert _parses(spark, [*base, option, text], capsys) is fits, (option, text)
        assert _parses(build_parser(cli), [*cli, option, text], capsys) is fits, (option, text)


# -- binlog generate: the workload's ranges --------------------------------------------------------
@pytest.mark.parametrize(("option", "key"), [
    ("--seed", "seed"), ("--schemas", "schemas"), ("--tables-per-schema", "tables_per_schema"),
    ("--transactions", "transactions"), ("--max-binlog-size", "max_binlog_size")])
def test_binlog_generate_reads_each_count_in_the_workload_range(tmp_path, option, key, capsys):
    argv = ["binlog", "generate", "--out", str(tmp_path / "g")]
    low, high = WORKLOAD_RANGES[key]
    for value, fits in ((high + 1, False), (low - 1, False), ("abc", False), (low, True), (high, True)):
        assert _parses(build_parser(argv), [*argv, option, str(value)], capsys) is fits, (option, value)


@pytest.mark.parametrize("option", ["--ddl-share", "--cross-db-share"])
def test_binlog_generate_reads_a_share_from_0_to_1(tmp_path, option, capsys):
    argv = ["binlog", "generate", "--out", str(tmp_path / "g")]
    for value, fits in (("1.5", False), ("-0.1", False), ("nan", False), ("0", True), ("1", True)):
        assert _parses(build_parser(argv), [*argv, option, value], capsys) is fits, (option, value)


def test_binlog_generate_with_100000_schemas_is_one_line_and_writes_nothing(tmp_path):
    line = one_line(dumpfilter("binlog", "generate", "--out", tmp_path / "g", "--schemas", "100000", cwd=tmp_path))
    assert line.startswith("dumpfilter binlog generate: error: argument --schemas: '100000' is not"), line
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("case", ["fifo", "dev-zero", "directory", "missing", "100MB"])
def test_the_tls_files_a_source_url_names_are_one_line_before_it_connects(tmp_path, case):
    """`--source mysql://...?ssl-ca=PATH` (and ssl-cert, ssl-key, public-key) are side files too: a
    100 MB one was taken (the check was is_file alone, which the other cases already failed); the
    URL in the line has no password."""
    hostile = _hostile(tmp_path, case)
    (tmp_path / "series").mkdir()
    for name in ("ssl-ca", "ssl-cert", "ssl-key", "public-key"):
        mode = "DISABLED" if name == "public-key" else "REQUIRED"
        url = f"mysql://repl:{SECRET}@127.0.0.1:1/?ssl-mode={mode}&{name}={hostile}"
        line = one_line(dumpfilter("master", "serve", "--binlog-dir", tmp_path / "series", "--listen", "127.0.0.1:0",
                                   "--source", url, cwd=tmp_path))
        assert f"{name} '{hostile}' is not a readable file" in line and "s3cret" not in line, line


@pytest.mark.parametrize("name", ["../x", "a/b", ".", ""])
def test_binlog_generate_takes_a_plain_basename(tmp_path, name):
    line = one_line(dumpfilter("binlog", "generate", "--out", tmp_path / "g", "--basename", name, cwd=tmp_path))
    assert "argument --basename" in line and "is not a plain file name" in line, line
    assert not (tmp_path / "g").exists() and not (tmp_path / "x.000001").exists()
