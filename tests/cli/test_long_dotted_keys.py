"""Issue #82: a long dotted TOML key in a policy or topology file took minutes (tomllib checks every
prefix of a dotted key: 20,000 parts 88 s, 100,000 parts still reading at 60 s), and the error named
the [[slaves]] header's line. A linear scan (rules.toml_text.dotted_key_refusal) refuses such a file
before tomllib reads it, naming the key's line; a short dotted key's error names its own line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.errors import RuleError
from dumpfilter.rules import toml_text
from dumpfilter.rules.policy_gates import read_policy
from dumpfilter.topology import TopologyError, parse_topology
from tests.cli.test_hostile_toml import COMMANDS, SLAVE, binlogs  # noqa: F401 (a fixture)

PARTS = 100_000


def dumpfilter(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # No wait on the clock: a generous bound for a run that must not hang, never a figure asserted.
    return subprocess.run([sys.executable, "-m", "dumpfilter", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)


def _hostile(command: str, key: str) -> str:
    """The key on its own line in the section the command reads, after a comment and a blank line."""
    head = '[slave.a]\nallow = ["%.%"]\n' if command == "master-policy" else SLAVE
    return "# a comment\n" + head + "\n" + key + " = 1\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_100000_part_key_is_refused_at_its_line(tmp_path, binlogs, command):  # noqa: F811
    body = _hostile(command, ".".join(["a"] * PARTS))
    line = body.count("\n", 0, body.index("a.a")) + 1
    hostile = tmp_path / "hostile.toml"
    hostile.write_text(body)
    hostile.chmod(0o600)
    (tmp_path / "good.toml").write_text(SLAVE)
    run = dumpfilter(*(a.format(binlogs=binlogs, file=hostile, good=tmp_path / "good.toml")
                       for a in COMMANDS[command]), cwd=tmp_path)
    assert run.returncode == 2, (run.stdout, run.stderr[-2000:])
    lines = [x for x in run.stderr.strip().splitlines() if "WARNING" not in x]
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert f"{hostile}:{line}: refused before it is parsed: a dotted key of more than {toml_text.MAX_KEY_PARTS} parts" \
        in lines[0], lines[0]


def test_the_scan_refuses_before_tomllib_reads(monkeypatch):
    """The pre-scan is what refuses: tomllib is never handed the text (it would take minutes)."""
    handed = []
    monkeypatch.setattr(toml_text.tomllib, "loads", lambda text: handed.append(text) or {})
    with pytest.raises(TopologyError, match=r"^t\.toml:7: refused before it is parsed: a dotted key"):
        parse_topology(_hostile("experiment-topology", ".".join(["a"] * PARTS)), "t.toml")
    with pytest.raises(RuleError, match=r"^p:2: refused before it is parsed: a table header of more than"):
        toml_text.loads("x = 1\n[" + ".".join(["t"] * PARTS) + "]\n", "p", RuleError)
    assert handed == []


def test_many_keys_just_under_the_bound_are_weighed_together():
    """Keys of MAX_KEY_PARTS parts each pass one by one, but their sum of work is bounded: the file
    is refused at the line of the key that passes MAX_KEY_WORK."""
    parts, refusal = toml_text.MAX_KEY_PARTS, toml_text.dotted_key_refusal
    keys = toml_text.MAX_KEY_WORK // (parts * parts) + 1  # a header-less key of K parts weighs K * K
    text = "".join(".".join([f"k{i}"] * parts) + " = 1\n" for i in range(keys + 5))
    found = refusal(text)
    assert found is not None and found[0] == keys, found  # the line of the key past the bound
    assert refusal("".join(".".join([f"k{i}"] * parts) + " = 1\n" for i in range(keys - 1))) is None


def test_dots_in_strings_comments_and_values_are_no_key_parts():
    dots = "." * 1000
    text = (f'# {dots}\n[[slaves]]\nname = "{dots}"\nserver_id = 2\nrules = ["replicate-do-db={dots}"]\n'
            f"x = '{dots}'\ny = \"\"\"\n{dots}\n\"\"\"\nz = '''{dots}\n{dots}'''\n"
            "f = [1.5, 2.5, {a.b.c = 3.25}]\n[a.b.c]\nd.e = 1979-05-27T07:32:00.999\n")
    assert toml_text.dotted_key_refusal(text) is None
    assert toml_text.loads(text, "t")["a"]["b"]["c"]["d"]["e"].microsecond == 999000


def test_a_short_dotted_key_is_named_at_its_own_line(tmp_path):
    text = "# c\n" + SLAVE + "\ncolour.red.dark = 1\n"
    line = text.count("\n", 0, text.index("colour")) + 1  # the [[slaves]] header's (2) was named
    with pytest.raises(TopologyError, match=rf"^t\.toml:{line}: slaves\.colour: unknown key"):
        parse_topology(text, "t.toml")
    policy = tmp_path / "p.toml"
    policy.write_text('# c\n[slave.a]\nallow = ["%.%"]\n\ncolour.red = 1\n')
    policy.chmod(0o600)
    with pytest.raises(RuleError, match=rf"^policy file {policy}:5: \[slave\.a\] unknown key 'colour'"):
        read_policy(policy)
