"""Issue #58 goal 8: hostile TOML files. Arrays or inline tables nested a few thousand deep made
tomllib raise RecursionError, which every command that reads a TOML file (`master serve --policy`
and `--replicas`, `experiment --topology` and `--candidates`, `simulate --topology`) let out as a
traceback and exit 1. Each is now one line naming the file and exit 2, from the one reading of TOML
text (`rules.toml_text`). A policy's empty identity (`[slave.""]`, which no client can present) and
`max_streams = 0` (an identity refused every stream) are refused in one line too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.errors import RuleError
from dumpfilter.rules import toml_text
from dumpfilter.rules.policy_gates import read_policy
from dumpfilter.topology import TopologyError, parse_topology
from dumpfilter.workload import WorkloadSpec, generate

DEPTH = 5000
SLAVE = '[[slaves]]\nname = "a"\nserver_id = 2\nrules = ["replicate-do-db=db1"]\n'
DEEP = {
    "arrays": "x = " + "[" * DEPTH + "]" * DEPTH + "\n",
    "inline-tables": "x = " + "{y = " * DEPTH + "1" + "}" * DEPTH + "\n",
}


def dumpfilter(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("toml-binlogs")
    generate(WorkloadSpec(seed=3, schemas=2, transactions=20), root, "master-bin")
    return root


COMMANDS = {
    "master-policy": ("master", "serve", "--binlog-dir", "{binlogs}", "--listen", "127.0.0.1:0", "--policy", "{file}"),
    "master-replicas": ("master", "serve", "--binlog-dir", "{binlogs}", "--listen", "127.0.0.1:0",
                        "--mysql-listen", "127.0.0.1:0", "--replicas", "{file}"),
    "experiment-topology": ("experiment", "--binlogs", "{binlogs}", "--topology", "{file}", "--no-spark",
                            "--out", "out"),
    "experiment-candidates": ("experiment", "--binlogs", "{binlogs}", "--topology", "{good}", "--candidates",
                              "{file}", "--no-spark", "--out", "out"),
    "simulate-topology": ("simulate", "--topology", "{file}", "--out", "out"),
}


@pytest.mark.parametrize("shape", DEEP)
@pytest.mark.parametrize("command", COMMANDS)
def test_deep_nesting_is_one_line_and_exit_2(tmp_path, binlogs, command, shape):
    # In the section a policy or a topology reads: the nesting is what fails, not the key.
    body = ("[slave.a]\nallow = [\"%.%\"]\n" if command == "master-policy" else SLAVE) + DEEP[shape]
    hostile = tmp_path / "hostile.toml"
    hostile.write_text(body)
    (tmp_path / "good.toml").write_text(SLAVE)
    run = dumpfilter(*(a.format(binlogs=binlogs, file=hostile, good=tmp_path / "good.toml")
                       for a in COMMANDS[command]), cwd=tmp_path)
    assert run.returncode == 2, (run.stdout, run.stderr[-2000:])
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr[-2000:]
    line = body.count("\n", 0, body.index("x = ")) + 1
    assert str(hostile) in lines[0] and "nested too deep" in lines[0] and f"(line {line})" in lines[0], lines[0]
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("shape", DEEP)
def test_the_one_reading_names_the_file(shape):
    with pytest.raises(TopologyError, match=r"^t\.toml: not valid TOML: arrays or inline tables nested too deep"):
        parse_topology(SLAVE + DEEP[shape], "t.toml")
    with pytest.raises(RuleError, match=r"^p: not valid TOML: "):
        toml_text.loads(DEEP[shape], "p", RuleError)


def test_a_shallow_file_still_parses():
    assert toml_text.loads("x = " + "[" * 50 + "]" * 50, "p") == {"x": eval("[" * 50 + "]" * 50)}  # noqa: S307


@pytest.mark.parametrize(("text", "line", "words"), [
    ('[slave.""]\nallow = ["%.%"]\npassword = "x"\n', 1, 'an identity needs a name'),
    ('[slave.a]\nallow = ["%.%"]\npassword = "x"\nmax_streams = 0\n', 4, "max_streams = 0 would refuse every"),
    ('[default]\nallow = ["%.%"]\nmax_streams = 0\n', 3, "max_streams = 0 would refuse every"),
], ids=["empty-identity", "max-streams-0", "default-max-streams-0"])
def test_an_empty_identity_and_max_streams_0_are_refused(tmp_path, binlogs, text, line, words):
    policy = tmp_path / "policy.toml"
    policy.write_text(text)
    policy.chmod(0o600)
    with pytest.raises(RuleError, match=rf"^policy file {policy}:{line}: .*{words}"):
        read_policy(policy)
    run = dumpfilter("master", "serve", "--binlog-dir", str(binlogs), "--listen", "127.0.0.1:0", "--policy",
                     str(policy), cwd=tmp_path)
    assert run.returncode == 2, (run.stdout, run.stderr[-2000:])
    lines = [x for x in run.stderr.strip().splitlines() if "WARNING" not in x]
    assert len(lines) == 1 and words in lines[0], run.stderr
