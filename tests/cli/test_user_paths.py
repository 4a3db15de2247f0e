"""Every path a user passes is checked before any work starts: a directory to write that cannot be
made or written (a path under a file, a file, a place no directory can be made such as /proc), a
file to read that is missing or a directory. One line naming the option, exit 2, no traceback."""

from __future__ import annotations

import pytest

from dumpfilter.cli.app import main

NO_DIR_HERE = "/proc/dumpfilter-no-such-dir"  # mkdir fails there, even for root


def _one_line(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("dumpfilter: error:")]
    assert len(errors) == 1, err
    return errors[0]


def _blocker(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    return blocker


@pytest.mark.parametrize("where", ["file", "under-file", "no-dir"])
def test_slave_run_relay_log_dir(where, tmp_path, capsys):
    blocker = _blocker(tmp_path)
    relay = {"file": blocker, "under-file": blocker / "relay", "no-dir": NO_DIR_HERE}[where]
    line = _one_line(capsys, ["slave", "run", "--master", "127.0.0.1:1", "--server-id", "7", "--relay-log-dir",
                              str(relay), "--until-caught-up", "--connect-retry", "0"])
    assert line.startswith(f"dumpfilter: error: --relay-log-dir {relay}: cannot write there"), line


def test_slave_run_tls_file_missing_is_told_before_the_run(tmp_path, capsys):
    line = _one_line(capsys, ["slave", "run", "--master", "127.0.0.1:1", "--server-id", "7", "--relay-log-dir",
                              str(tmp_path / "relay"), "--ssl-ca", str(tmp_path / "nope.pem"), "--until-caught-up"])
    assert line.startswith(f"dumpfilter: error: --ssl-ca {tmp_path / 'nope.pem'}: cannot read"), line
    assert not (tmp_path / "relay").exists()  # nothing started


def test_slave_status_relay_log_dir_is_a_file(tmp_path, capsys):
    blocker = _blocker(tmp_path)
    line = _one_line(capsys, ["slave", "status", "--relay-log-dir", str(blocker)])
    assert line.startswith(f"dumpfilter: error: --relay-log-dir {blocker}: not a directory"), line


@pytest.mark.parametrize("where", ["under-file", "no-dir"])
def test_split_out_unwritable(where, tmp_path, capsys):
    from dumpfilter.workload.generator import WorkloadSpec, generate

    source = tmp_path / "src"
    generate(WorkloadSpec(seed=1, transactions=20), source)
    out = {"under-file": _blocker(tmp_path) / "out", "no-dir": NO_DIR_HERE}[where]
    line = _one_line(capsys, ["split", "--no-spark", str(source), "--out", str(out)])
    assert line.startswith(f"dumpfilter: error: --out {out}: cannot write there"), line


@pytest.mark.parametrize("where", ["missing", "directory"])
def test_explain_batch_unreadable(where, tmp_path, capsys):
    batch = tmp_path / "nope.jsonl" if where == "missing" else tmp_path
    line = _one_line(capsys, ["explain", "--batch", str(batch), "--replicate-do-db", "a"])
    assert line.startswith(f"dumpfilter: error: --batch {batch}: cannot read"), line
