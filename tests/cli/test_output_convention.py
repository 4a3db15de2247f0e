"""One output convention for every command (issue #28 item 13): `--out DIR` for a directory of
results, `-o/--output FILE` for one file, `--json [FILE]` for the machine-readable result (on
stdout instead of the human output, or written to FILE beside it). The real parsers are walked
(every `dumpfilter` sub-command and the two spark-submit jobs), then the commands are run over
real binlogs and a real master and slave."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.cli.app import build_parser, main
from dumpfilter.spark_jobs import bandwidth_experiment, split_by_schema

CRC32 = "osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32"  # MySQL 5.7, 4 schemas, 60 transactions
NO_DIR_HERE = "/proc/dumpfilter-no-such-dir"  # mkdir fails there, even for root

# Options naming a path that a command reads, or a directory it keeps its state or scratch work
# in (not results): these are not output options. A new path option must be listed here or follow
# the convention.
READ_PATHS = {"--batch", "--binlogs", "--candidates", "--defaults-extra-file", "--defaults-file", "--metrics-token-file", "--mysql-rsa-key",
              "--policy", "--replica-schema", "--replicas", "--schema", "--seed", "--shadow", "--source-password-file",
              "--ssl-ca", "--ssl-cert", "--ssl-key", "--tls-cert", "--tls-client-ca", "--tls-key", "--topology",
              "--workload"}
STATE_DIRS = {"--binlog-dir": "the master's binlog directory (mysqld's log-bin directory, read, and written by --source)",
              "--relay-log-dir": "the slave's relay logs and positions (mysqld's relay_log)",
              "--keep-work": "simulate's scratch binlog and relay logs, kept instead of deleted; its results go to --out"}
NOT_OUTPUTS = {"--report-host": "mysqld's report_host: the name a slave gives the master"}
PATH_METAVAR = re.compile(r"DIR|FILE|PATH|OUT|SQLFILE|TOPOLOGY")
OUTPUT_WORDS = {"out", "output", "json", "report", "write", "save", "dest", "export", "dump"}


def _leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _leaves(sub, (*prefix, name))
            return
    yield " ".join(prefix), parser


def all_parsers() -> dict[str, argparse.ArgumentParser]:
    parsers = dict(_leaves(build_parser()))
    parsers["spark_jobs/split_by_schema.py"] = split_by_schema.build_parser()
    parsers["spark_jobs/bandwidth_experiment.py"] = bandwidth_experiment.build_parser()
    return parsers


PARSERS = all_parsers()


def test_every_command_is_walked():
    assert {"filter", "lint", "explain", "verify", "binlog inspect", "binlog generate", "master status",
            "master filters", "master change-filter", "slave status", "simulate", "experiment",
            "split"} <= set(PARSERS)


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_output_options_follow_the_convention(command):
    for action in PARSERS[command]._actions:
        names = set(action.option_strings)
        if not names or action.help == argparse.SUPPRESS:
            continue
        where = f"{command}: {'/'.join(action.option_strings)}"
        if "--json" in names:
            assert action.option_strings == ["--json"], where
            assert action.nargs == "?" and action.const == "-" and action.metavar == "FILE", where
            assert "stdout" in action.help and "FILE" in action.help, where
        elif "--out" in names:
            assert action.option_strings == ["--out"] and action.metavar == "DIR", where
        elif names & {"-o", "--output"}:
            assert action.option_strings == ["-o", "--output"] and action.metavar == "FILE", where
        else:
            words = {word for name in names for word in name.lstrip("-").split("-")}
            assert not words & OUTPUT_WORDS or names <= set(NOT_OUTPUTS), f"{where}: an output option spelled otherwise"
            if action.nargs != 0 and action.metavar and PATH_METAVAR.search(str(action.metavar)):
                assert names & (READ_PATHS | set(STATE_DIRS)), f"{where}: a path option outside the convention"


def _commands_with_json() -> list[str]:
    return sorted(name for name, parser in PARSERS.items()
                  if any("--json" in action.option_strings for action in parser._actions))


def test_every_machine_readable_result_has_json():
    assert {"filter", "explain", "lint", "verify", "binlog inspect", "master status", "master filters",
            "master change-filter", "slave status", "simulate", "experiment", "split"} <= set(_commands_with_json())


# -- --json FILE is checked before any work ----------------------------------------------------
def _minimal_argv(command: str, binlog: Path, tmp_path: Path) -> list[str]:
    """Arguments that parse for `command` (nothing may run: the --json check comes first)."""
    topology = tmp_path / "t.toml"
    topology.write_text('[[slaves]]\nname = "a"\nserver_id = 2\nrules = ["replicate-do-db=auth"]\n')
    master = ["--master", "127.0.0.1:1"]
    return {
        "filter": ["filter", str(binlog), "-o", str(tmp_path / "made.bin")],
        "explain": ["explain", "--replicate-do-db=a", "--sql", "DELETE FROM a.t"],
        "lint": ["lint", str(binlog)],
        "verify": ["verify", "--builtin"],
        "binlog inspect": ["binlog", "inspect", str(binlog)],
        "master status": ["master", "status", *master],
        "master filters": ["master", "filters", *master],
        "master shadow list": ["master", "shadow", "list", *master],
        "master change-filter": ["master", "change-filter", *master, "--server-id", "2",
                                 "CHANGE REPLICATION FILTER REPLICATE_DO_DB = (a)"],
        "slave status": ["slave", "status", "--relay-log-dir", str(tmp_path / "made")],
        "simulate": ["simulate", "--out", str(tmp_path / "made")],
        "experiment": ["experiment", "--no-spark", "--binlogs", str(binlog), "--topology", str(topology),
                       "--out", str(tmp_path / "made")],
        "split": ["split", "--no-spark", str(binlog), "--out", str(tmp_path / "made")],
    }[command]


def _one_error_line(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert "Traceback" not in err and out == ""
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize("command", _commands_with_json())
def test_unwritable_json_file_is_one_line_exit_2(command, shared_fixtures, tmp_path, capsys):
    target = "/proc/result.json"  # a directory that takes no new file, even for root
    line = _one_error_line(capsys, [*_minimal_argv(command, shared_fixtures / CRC32, tmp_path), "--json", target])
    assert line.startswith(f"dumpfilter: error: --json {target}: cannot write there"), line
    assert not (tmp_path / "made").exists() and not (tmp_path / "made.bin").exists()  # no work started


def test_a_binlog_taken_as_the_json_file_is_refused(shared_fixtures, tmp_path, capsys):
    first, second = tmp_path / "a.000001", tmp_path / "a.000002"
    shutil.copyfile(shared_fixtures / CRC32, first)
    shutil.copyfile(shared_fixtures / CRC32, second)
    before = second.read_bytes()
    line = _one_error_line(capsys, ["lint", str(first), "--json", str(second)])
    assert line == (f"dumpfilter: error: --json {second}: is a binlog, not a JSON output; put --json after the "
                    "input files, or write --json=FILE")
    assert second.read_bytes() == before


# -- --json, --json FILE: real runs ----------------------------------------------------------
def _run(capsys, argv: list[str], code: int | None = 0) -> tuple[str, str]:
    """Run in this process; `code` None: 0 or 1 (lint's 'a break is predicted')."""
    capsys.readouterr()
    status = main(argv)
    assert status in ((0, 1) if code is None else (code,)), capsys.readouterr()
    return capsys.readouterr()


def _same(document: dict) -> dict:
    """A result without its timing (two runs take different times)."""
    return {key: value for key, value in document.items() if key != "seconds"}


def _offline_cases(fixtures: Path, tmp_path: Path) -> dict:
    """argv, the exit status, the human output's marker (on stdout, or stderr for `filter`, whose
    stdout may carry the binlog) and a check of the JSON document."""
    crc = str(fixtures / CRC32)
    topology = tmp_path / "t.toml"
    topology.write_text('[[slaves]]\nname = "auth-only"\nserver_id = 2\nrules = ["replicate-do-db=auth"]\n')
    return {
        "filter": (["filter", crc, "-o", str(tmp_path / "auth.bin"), "--replicate-do-db=auth", "--summary=plain"], 0,
                   ("err", "transactions: 60 in"),
                   lambda d: d["transactions_in"] == 60 and d["output_files"] == [str(tmp_path / "auth.bin")]),
        "explain": (["explain", "--replicate-do-db=auth", "--current-db", "menkor_dev", "--sql",
                     "INSERT INTO auth.t VALUES (1)"], 0, ("out", "skip: "),
                    lambda d: d["decision"] == "skip" and d["rule"] == "replicate-do-db"),
        "lint": (["lint", crc, "--replicate-do-db=auth"], None, ("out", "predicted"),
                 lambda d: isinstance(d["breaks"], list)),
        "split": (["split", "--no-spark", crc, "--out", str(tmp_path / "split")], 0, ("out", "binlog(s) written to"),
                  lambda d: {o["name"] for o in d["outputs"]} >= {"auth", "menkor_dev", "simu_affair_dev",
                                                                   "simu_file_dev"}),
        "experiment": (["experiment", "--no-spark", "--binlogs", crc, "--topology", str(topology), "--out",
                        str(tmp_path / "experiment")], 0, ("out", "MB sent"),
                       lambda d: [row["slave"] for row in d["slaves"]] == ["auth-only"]
                       and 0 < d["slaves"][0]["bytes_sent"] < d["slaves"][0]["bytes_all"]),
    }


@pytest.mark.parametrize("command", ["filter", "explain", "lint", "split", "experiment"])
def test_json_on_stdout_and_json_file(command, shared_fixtures, tmp_path, capsys):
    argv, code, (stream, marker), check = _offline_cases(shared_fixtures, tmp_path)[command]
    out, err = _run(capsys, [*argv, "--json"], code)
    document = json.loads(out)  # stdout is the JSON document alone
    assert check(document), document
    assert marker not in out + err  # instead of the human output
    if command == "split":
        shutil.rmtree(tmp_path / "split")  # split writes into a new or empty directory
    target = tmp_path / "result.json"
    out, err = _run(capsys, [*argv, "--json", str(target)], code)
    assert marker in {"out": out, "err": err}[stream]  # the human output as without --json
    assert _same(json.loads(target.read_text())) == _same(document)
    if command == "lint":
        breaks = len(document["breaks"])
        assert (f"{breaks} break(s) predicted" if breaks else "no break predicted") in out


def test_json_dash_is_stdout(shared_fixtures, tmp_path, capsys):
    argv = ["explain", "--replicate-do-db=auth", "--table", "auth.users"]
    dash, _ = _run(capsys, [*argv, "--json", "-"])
    bare, _ = _run(capsys, [*argv, "--json"])
    assert json.loads(dash) == json.loads(bare) == {"decision": "apply", "reason": json.loads(bare)["reason"],
                                                    "rule": "replicate-do-db", "tables": ["auth.users"]}
    assert not any(tmp_path.iterdir()) and not Path("-").exists()


def test_explain_batch(tmp_path, capsys):
    """--batch is JSON lines on stdout (its own output); --json FILE writes them there and prints the
    decisions for people."""
    batch = tmp_path / "in.jsonl"
    batch.write_text('{"table": "auth.users"}\n{"sql": "DELETE FROM t", "current_db": "menkor_dev"}\n')
    argv = ["explain", "--replicate-do-db=auth", "--batch", str(batch)]
    plain, _ = _run(capsys, argv)
    dash, _ = _run(capsys, [*argv, "--json"])
    decisions = [json.loads(line) for line in plain.splitlines()]
    assert dash == plain and [d["decision"] for d in decisions] == ["apply", "skip"]
    text, _ = _run(capsys, [*argv, "--json", str(tmp_path / "out.jsonl")])
    assert [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()] == decisions
    assert [line.split(":")[0] for line in text.splitlines()] == ["apply", "skip"]


def test_json_before_an_argument_the_command_needs(shared_fixtures, tmp_path, capsys):
    """`--json X` where X as FILE would leave the command without its inputs: X is the input, as
    scripts written for the `--json` switch have it (`binlog inspect --json a.bin`)."""
    crc = str(shared_fixtures / CRC32)
    before, _ = _run(capsys, ["binlog", "inspect", "--json", crc])
    after, _ = _run(capsys, ["binlog", "inspect", crc, "--json"])
    assert before == after and json.loads(before.splitlines()[0])["type"] == "FORMAT_DESCRIPTION"
    out, _ = _run(capsys, ["lint", "--json", crc, "--replicate-do-db=auth"], None)
    assert "breaks" in json.loads(out)
    target = tmp_path / "decision.json"  # X is FILE when the command has what it needs without it
    out, _ = _run(capsys, ["explain", "--json", str(target), "--table", "auth.users", "--replicate-do-db=auth"])
    assert out.startswith("apply: ") and json.loads(target.read_text())["decision"] == "apply"


def test_binlog_inspect_keeps_json_lines(shared_fixtures, tmp_path, capsys):
    crc = str(shared_fixtures / CRC32)
    out, _ = _run(capsys, ["binlog", "inspect", crc, "--json"])
    rows = [json.loads(line) for line in out.splitlines()]  # one JSON object a line, nothing else
    assert len(rows) > 300 and rows[0]["type"] == "FORMAT_DESCRIPTION" and {r["file"] for r in rows} == {crc}
    assert [r["pos"] for r in rows] == sorted(r["pos"] for r in rows)
    target = tmp_path / "events.jsonl"
    text, _ = _run(capsys, ["binlog", "inspect", crc, "--json", str(target)])
    assert [json.loads(line) for line in target.read_text().splitlines()] == rows
    lines = text.splitlines()
    assert len(lines) == len(rows) and all(line.split()[0] == str(r["pos"]) for line, r in zip(lines, rows))


def test_master_and_slave_status(shared_fixtures, master_factory, tmp_path, capsys):
    """A real master over a real MariaDB binlog and a real slave that streamed it."""
    from tests.support.dump_helpers import run_slave
    from dumpfilter.rules.ruleset import RuleSet

    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    shutil.copyfile(shared_fixtures / "mariadb-operator-mariadb-poc/domain_id_0/mariadb-repl-bin.000005",
                    binlogs / "mariadb-repl-bin.000005")
    _, address = master_factory(binlogs)
    relay = tmp_path / "relay"
    run_slave(address, relay, 9, rules=RuleSet(ignore_table=("sbtest-repl.sbtest1",)))
    master = ["--master", address]
    for argv, marker, check in [
        (["master", "status", *master], "row in set", lambda d: [row["Server_id"] for row in d] == [9]),
        (["master", "filters", *master], "performance_schema.",
         lambda d: [r["FILTER_RULE"] for r in d["replication_applier_filters"]] == ["sbtest-repl.sbtest1"]),
        (["slave", "status", "--relay-log-dir", str(relay)], "1. row",
         lambda d: d["Server_Id"] == 9 and d["Replicate_Ignore_Table"] == "sbtest-repl.sbtest1"
         and d["Master_Log_File"] == "mariadb-repl-bin.000006"),  # read through the file's Rotate
    ]:
        out, _ = _run(capsys, [*argv, "--json"])
        document = json.loads(out)
        assert check(document) and marker not in out, (argv, document)
        target = tmp_path / "result.json"
        out, _ = _run(capsys, [*argv, "--json", str(target)])
        assert marker in out
        written = json.loads(target.read_text())  # the same document (a slave's counters may have moved on)
        assert check(written) and type(written) is type(document)
        assert written.keys() == document.keys() if isinstance(written, dict) else len(written) == len(document)
    change = ["master", "change-filter", *master, "--server-id", "9",
              "CHANGE REPLICATION FILTER REPLICATE_IGNORE_TABLE = (`sbtest-repl`.sbtest2)"]
    out, _ = _run(capsys, [*change, "--json", str(tmp_path / "change.json")])
    assert "server_id 9: change took effect" in out
    result = json.loads((tmp_path / "change.json").read_text())
    assert "REPLICATE_IGNORE_TABLE = (`sbtest-repl`.`sbtest2`)" in result["effective"][0]["change_replication_filter"]


@pytest.mark.grpc
def test_simulate_summary(shared_fixtures, tmp_path, capsys):
    """simulate's summary: report.json's document with the verdict, while report.json still goes under --out."""
    (tmp_path / "b").mkdir()
    shutil.copyfile(shared_fixtures / CRC32, tmp_path / "b" / "mysql-bin.000001")
    topology = tmp_path / "t.toml"
    topology.write_text('[master]\nbinlogs = "b"\n\n[[slaves]]\nname = "auth-only"\nserver_id = 2\n'
                        'rules = ["replicate-do-db=auth"]\n')
    argv = ["simulate", "--topology", str(topology), "--out", str(tmp_path / "out"), "--no-progress"]
    out, _ = _run(capsys, [*argv, "--json"])
    document = json.loads(out)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert document["ok"] is True and document["files"][0] == str(tmp_path / "out" / "report.json")
    assert document.keys() - {"ok", "files"} == report.keys() and "summary:" not in out

    def sent(doc):
        return [(row["slave"], row["events_sent"], row["bytes_sent"]) for row in doc["slaves"]]

    assert sent(document) == sent(report) and sent(document)[0][0] == "auth-only"
    out, _ = _run(capsys, [*argv, "--json", str(tmp_path / "summary.json")])
    assert "summary: 1 slave(s)" in out and "auth-only" in out
    assert sent(json.loads((tmp_path / "summary.json").read_text())) == sent(document)


def test_filter_o_dash_is_stdout(shared_fixtures, tmp_path):
    """`-o -` and a link to stdout (as /dev/stdout is) write the binlog to stdout, also when stdout is
    a file: written in place, the link never replaced (a rename over it would replace /dev/stdout)."""
    crc = shared_fixtures / CRC32
    link = tmp_path / "stdout-link"
    link.symlink_to("/proc/self/fd/1")
    for output in ("-", str(link)):
        redirected = tmp_path / "redirected.bin"
        with open(redirected, "wb") as stdout:
            proc = subprocess.run([sys.executable, "-m", "dumpfilter", "filter", str(crc), "-o", output],
                                  cwd=tmp_path, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert redirected.read_bytes() == crc.read_bytes()  # no rules, one input: byte for byte
        assert link.is_symlink() and not (tmp_path / "-").exists()
    proc = subprocess.run([sys.executable, "-m", "dumpfilter", "filter", str(crc), "-o", "-", "--json"],
                          cwd=tmp_path, capture_output=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode() == "dumpfilter: error: --json: stdout carries the filtered binlog (-o -); " \
                                   "write --json FILE\n"


def test_json_to_a_link_to_stdout_is_written_in_place(shared_fixtures, tmp_path):
    """`--json /dev/stdout` while stdout is a redirected file: the link is a regular file then, but
    is written in place, never replaced by a renamed one."""
    link = tmp_path / "stdout-link"
    link.symlink_to("/proc/self/fd/1")
    redirected = tmp_path / "redirected.txt"
    with open(redirected, "w") as stdout:
        proc = subprocess.run([sys.executable, "-m", "dumpfilter", "lint", str(shared_fixtures / CRC32),
                               "--replicate-do-db=auth", "--json", str(link)], cwd=tmp_path, stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode in (0, 1) and proc.stderr == ""
    assert link.is_symlink()
    lines = redirected.read_text().splitlines()
    assert any("predicted" in line for line in lines) and "breaks" in json.loads(next(
        line for line in lines if line.startswith("{")))


# -- the old spellings, kept for scripts -----------------------------------------------------
def test_filter_o_directory_is_the_old_out(shared_fixtures, tmp_path, capsys):
    chain = shared_fixtures / "mariadb-operator-mariadb-poc/domain_id_0"
    inputs = [str(chain / f"mariadb-repl-bin.00000{i}") for i in (5, 6)]
    _, err = _run(capsys, ["filter", *inputs, "-o", str(tmp_path / "old"), "--summary=none"])
    assert err == f"dumpfilter: warning: -o {tmp_path / 'old'} for a series directory is deprecated: use --out " \
                  f"{tmp_path / 'old'}\n"
    _, err = _run(capsys, ["filter", *inputs, "--out", str(tmp_path / "new"), "--summary=none"])
    assert err == ""
    names = sorted(p.name for p in (tmp_path / "new").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "old").iterdir()) and "mariadb-repl-bin.index" in names
    assert all((tmp_path / "new" / n).read_bytes() == (tmp_path / "old" / n).read_bytes() for n in names)


def test_filter_summary_json_is_the_old_json(shared_fixtures, tmp_path, capsys):
    argv = ["filter", str(shared_fixtures / CRC32), "-o", str(tmp_path / "o.bin"), "--replicate-do-db=auth"]
    out, err = _run(capsys, [*argv, "--summary", "json"])
    warning, old = err.splitlines()
    assert out == "" and warning == ("dumpfilter: warning: --summary json is deprecated: use --json (the summary on "
                                     "stdout) or --json FILE")
    new, _ = _run(capsys, [*argv, "--json"])
    assert _same(json.loads(old)) == _same(json.loads(new))
    summary = next(a for a in PARSERS["filter"]._actions if "--summary" in a.option_strings)
    assert "json" in summary.choices and "json" not in summary.metavar  # accepted, not listed
