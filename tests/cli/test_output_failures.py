"""A file output that fails (issue #82 item 1): a full device (/dev/full) is one line naming the
option and the file, exit 2, never an OSError's traceback, in every command that writes --json FILE
or -o FILE; and no option naming one FILE makes the directory it is in (`lint --json
/missing/x.json` made /missing/, where `filter -o` refused it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dumpfilter.cli.app import main
from tests.cli.test_output_convention import CRC32, _commands_with_json, _minimal_argv, _offline_cases

FULL = "/dev/full"  # every write fails with ENOSPC


def _one_error_line(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    code = main(argv)
    _out, err = capsys.readouterr()
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


def _runs(fixtures: Path, tmp_path: Path) -> dict[str, list[str]]:
    """Each offline command, run for real (its work done, then the output written)."""
    runs = {name: argv for name, (argv, *_rest) in _offline_cases(fixtures, tmp_path).items()}
    runs["binlog inspect"] = ["binlog", "inspect", str(fixtures / CRC32)]
    return runs


@pytest.mark.skipif(not Path(FULL).exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("command", ["filter", "explain", "lint", "split", "experiment", "binlog inspect"])
def test_json_to_a_full_device_is_one_line_exit_2(command, shared_fixtures, tmp_path, capsys):
    line = _one_error_line(capsys, [*_runs(shared_fixtures, tmp_path)[command], "--json", FULL])
    assert line == f"dumpfilter: error: --json {FULL}: cannot write: No space left on device", line


@pytest.mark.skipif(not Path(FULL).exists(), reason="no /dev/full on this system")
def test_filter_o_to_a_full_device_is_one_line_exit_2(shared_fixtures, capsys):
    line = _one_error_line(capsys, ["filter", str(shared_fixtures / CRC32), "-o", FULL])
    assert line == f"dumpfilter: error: -o {FULL}: cannot write: No space left on device", line


@pytest.mark.parametrize("command", _commands_with_json())
def test_json_file_makes_no_directory(command, shared_fixtures, tmp_path, capsys):
    missing = tmp_path / "missing" / "deeper"
    target = missing / "result.json"
    line = _one_error_line(capsys, [*_minimal_argv(command, shared_fixtures / CRC32, tmp_path), "--json", str(target)])
    assert line == f"dumpfilter: error: --json {target}: {missing}: no such directory (--json creates none)", line
    assert not (tmp_path / "missing").exists()  # as `filter -o` makes none


def test_json_and_o_refuse_a_missing_directory_alike(shared_fixtures, tmp_path, capsys):
    missing = tmp_path / "missing"
    lines = [_one_error_line(capsys, ["filter", str(shared_fixtures / CRC32), *option, str(missing / "x")])
             for option in (["-o"], ["-o", str(tmp_path / "ok.bin"), "--json"])]
    assert lines == [f"dumpfilter: error: -o {missing / 'x'}: {missing}: no such directory (-o creates none)",
                     f"dumpfilter: error: --json {missing / 'x'}: {missing}: no such directory (--json creates none)"]
    assert not missing.exists()


def test_json_into_the_out_directory_the_command_makes(shared_fixtures, tmp_path, capsys):
    """`experiment --out DIR --json DIR/x.json`: DIR is the command's own output, made (with its
    parents) before the JSON is written into it; the missing-directory refusal is for a directory
    nothing makes (bench/experimenter_question.py writes its JSON so)."""
    out = tmp_path / "new" / "report"
    argv = _runs(shared_fixtures, tmp_path)["experiment"]
    argv = [*argv[:argv.index("--out")], "--out", str(out), *argv[argv.index("--out") + 2:]]
    capsys.readouterr()
    assert main([*argv, "--json", str(out / "experiment.json")]) == 0, capsys.readouterr().err
    assert (out / "experiment.json").read_text().startswith("{")
    line = _one_error_line(capsys, [*argv, "--json", str(tmp_path / "elsewhere" / "x.json")])
    assert "no such directory (--json creates none)" in line
