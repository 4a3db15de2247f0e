"""The command line of the MySQL endpoint and of --source: misuse is one line and exit 2."""

from __future__ import annotations

import pytest

from dumpfilter.cli.app import main


@pytest.mark.parametrize("extra, message", [
    (["--replicas", "r.toml"], "--replicas names real replicas' rules: it needs --mysql-listen"),
    (["--mysql-listen", "127.0.0.1:99999"], "--mysql-listen '127.0.0.1:99999': port 99999 is out of range"),
    (["--mysql-listen", "127.0.0.1:0", "--replicas", "missing.toml"], "missing.toml"),
    (["--source-file", "x.000001"], "need --source"),
    (["--source", "mysql://u:p@127.0.0.1:1", "--source-pos", "120"], "starts at the beginning of a file"),
    (["--source", "http://127.0.0.1:1"], "expected mysql://USER:PASS@HOST:PORT"),
    (["--source", "mysql://u@127.0.0.1:1", "--source-file", "a.000001", "--source-gtid", "0-1-1"], "give one start"),
])
def test_misuse_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    code = main(["master", "serve", "--binlog-dir", str(tmp_path), "--listen", "127.0.0.1:0", *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
