"""Every mistake is one line and exit 2, outputs never replace inputs or half-write over a file,
and the conventions users bring from mysqld (underscores, my.cnf, --version) work."""

from __future__ import annotations

import argparse
import hashlib
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.workload.generator import WorkloadSpec, generate
from dumpfilter.cli.app import build_parser, main
from dumpfilter.topology import TopologyError, load_topology

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.fixture(scope="module")
def binlog_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("binlog")
    generate(WorkloadSpec(seed=5, transactions=400), directory)
    return directory


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- one line, exit 2 ------------------------------------------------------------------------
def test_metrics_port_in_use(binlog_dir):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = _run("master", "serve", "--binlog-dir", str(binlog_dir), "--listen", "127.0.0.1:0",
                    "--metrics-port", str(port), timeout=30)
    line = _one_error_line(proc)
    assert f"--metrics-port {port}" in line and "in use" in line


@pytest.mark.parametrize("value", ["99999999999", "0", "-3", "x"])
def test_server_id_out_of_range(value, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["slave", "run", "--master", "127.0.0.1:1", "--server-id", value, "--relay-log-dir", "/tmp/never"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --server-id:" in err and "Traceback" not in err


def test_simulate_out_unwritable(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    line = _one_error_line(_run("simulate", "--out", str(blocker / "report"), "--no-progress"))
    assert line.startswith(f"dumpfilter: error: --out {blocker / 'report'}: cannot write there")


def test_experiment_out_unwritable(tmp_path, binlog_dir):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    topology = tmp_path / "t.toml"
    topology.write_text('[[slaves]]\nname = "a"\nserver_id = 2\nrules = ["replicate-do-db=db1"]\n')
    line = _one_error_line(_run("experiment", "--binlogs", str(binlog_dir), "--topology", str(topology),
                                "--out", str(blocker / "x"), "--no-spark"))
    assert "cannot write there" in line


def test_verify_workload_with_an_unterminated_quote(tmp_path):
    workload = tmp_path / "w.sql"
    workload.write_text("CREATE TABLE t (a INT);\nINSERT INTO t VALUES ('oops);\n")
    line = _one_error_line(_run("verify", "--builtin", "--workload", str(workload), "--quiet"))
    assert str(workload) in line and "unterminated ' quote" in line and "line 2" in line


def test_generate_rejects_impossible_options(tmp_path):
    line = _one_error_line(_run("binlog", "generate", "--out", str(tmp_path / "g"), "--schemas", "0"))
    assert "argument --schemas: '0'" in line


# -- outputs ---------------------------------------------------------------------------------
def test_filter_refuses_its_input_as_output(binlog_dir, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    src = work / "master-bin.000001"
    src.write_bytes((binlog_dir / "master-bin.000001").read_bytes())
    before = _digest(src)
    for output in (src, work / "master-bin.000002", work / "link"):
        if output.name == "link":
            output.symlink_to(src)
        line = _one_error_line(_run("filter", str(src), "-o", str(output), "--replicate-do-db", "db1"))
        assert f"-o {output}" in line
    # a series written into the input's directory under the input's base name
    line = _one_error_line(_run("filter", str(work), "--out", str(work), "--replicate-do-db", "db1"))
    assert "base name (master-bin)" in line
    assert _digest(src) == before
    # another base name in the same directory is fine
    assert main(["filter", str(src), "-o", str(work / "filtered.bin"), "--replicate-do-db", "db1",
                 "--summary", "none"]) == 0
    assert _digest(src) == before and (work / "filtered.bin").stat().st_size < src.stat().st_size


def test_filter_never_leaves_a_partial_output(binlog_dir, tmp_path):
    data = (binlog_dir / "master-bin.000001").read_bytes()
    broken = tmp_path / "broken.000001"
    broken.write_bytes(data[: len(data) // 2] + b"\xff" * 40 + data[len(data) // 2 + 40:])  # corrupt mid-file
    out = tmp_path / "out" / "result.bin"
    out.parent.mkdir()
    out.write_bytes(b"the previous result")
    line = _one_error_line(_run("filter", str(broken), "-o", str(out)))
    assert str(broken) in line
    assert out.read_bytes() == b"the previous result"
    assert sorted(p.name for p in out.parent.iterdir()) == ["result.bin"]  # no temporary file left
    series = tmp_path / "series"
    # a good file's series written, then the broken one: nothing of either left
    _one_error_line(_run("filter", str(binlog_dir / "master-bin.000001"), str(broken), "--out", str(series)))
    assert [p.name for p in series.iterdir()] == []


def test_filter_output_is_readable_like_a_plain_file(binlog_dir, tmp_path):
    out = tmp_path / "f.bin"
    assert main(["filter", str(binlog_dir), "-o", str(out), "--replicate-do-db", "db2", "--summary", "none"]) == 0
    assert out.stat().st_mode & 0o644 == 0o644


def test_split_says_when_a_map_matches_nothing(binlog_dir, tmp_path):
    proc = _run("split", str(binlog_dir), "--out", str(tmp_path / "s"), "--map", "shop=db9", "--map", "one=db1",
                "--no-spark")
    assert proc.returncode == 0, proc.stderr
    assert "--map shop: its rules matched no event; no shop-bin binlog was written" in proc.stderr
    assert "--map one" not in proc.stderr
    assert (tmp_path / "s" / "one-bin.index").exists() and not (tmp_path / "s" / "shop-bin.index").exists()


# -- conventions -----------------------------------------------------------------------------
def test_underscores_are_dashes_as_in_mysqld(capsys):
    parser = build_parser()
    from dumpfilter.cli.app import mysqld_spelling

    argv = ["explain", "--replicate_do_db=db_1", "--replicate_wild_ignore_table", "db_2.%", "--lower_case_table_names",
            "1", "--sql", "INSERT INTO db_1.t VALUES (1)"]
    args = parser.parse_args(mysqld_spelling(argv))
    assert args.do_db == ["db_1"] and args.wild_ignore_table == ["db_2.%"] and args.lower_case_table_names == 1
    assert mysqld_spelling(["explain", "--", "--x_y"]) == ["explain", "--", "--x_y"]


def test_topology_slave_reads_a_defaults_file(tmp_path):
    (tmp_path / "my.cnf").write_text("[mysqld]\nreplicate-do-db = db1\nreplicate_wild_ignore_table = db1.tmp%\n"
                                     "[client]\nreplicate-do-db = ignored\n")
    topology = tmp_path / "t.toml"
    topology.write_text('[[slaves]]\nname = "a"\nserver_id = 2\ndefaults_file = "my.cnf"\n'
                        'rules = ["replicate-do-db=db2"]\n'
                        'change_replication_filter = "CHANGE REPLICATION FILTER REPLICATE_IGNORE_TABLE = (db2.t9)"\n')
    (slave,) = load_topology(topology).slaves
    assert slave.rules.do_db == ("db1", "db2")  # the file first, then `rules`
    assert slave.rules.wild_ignore_table == ("db1.tmp%",)
    assert slave.rules.ignore_table == ("db2.t9",)
    assert slave.rule_text[0] == "defaults-file=my.cnf"
    topology.write_text('[[slaves]]\nname = "a"\nserver_id = 2\n\ndefaults_file = "missing.cnf"\n')
    with pytest.raises(TopologyError, match=r"t\.toml:5: slaves\.defaults_file: .*missing\.cnf"):
        load_topology(topology)


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert re.fullmatch(r"dumpfilter \d+\.\d+\.\d+.*\n", capsys.readouterr().out)


def test_every_generate_option_says_its_default():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["binlog"]
    generate_parser = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices["generate"]
    options = [a for a in generate_parser._actions if a.option_strings and a.dest != "help"]
    assert len(options) >= 10
    for action in options:
        assert action.help, action.dest
        if not action.required:
            assert "default" in action.help, action.dest
            assert "%(default)s" in action.help or str(action.default) in action.help, action.dest


def test_readme_and_default_topology_agree_on_the_workload_size(tmp_path):
    from dumpfilter.lab.simulate import load_default_topology

    topology = load_default_topology()
    paths = generate(WorkloadSpec(**topology.source.options), tmp_path / "w")
    megabytes = sum(p.stat().st_size for p in paths) / 1e6
    toml_text = (ROOT / "dumpfilter" / "data" / "default_topology.toml").read_text()
    readme = (ROOT / "README.md").read_text()
    said_toml = float(re.search(r"# ~([\d.]+) MB of MariaDB binlog", toml_text).group(1))
    said_readme = float(re.search(r"default_topology\.toml`\): ~([\d.]+) MB", readme).group(1))
    assert said_toml == said_readme
    assert abs(megabytes - said_toml) / megabytes < 0.1, (megabytes, said_toml)


def test_filter_to_a_pipe_is_written_as_it_comes(binlog_dir):
    proc = subprocess.run([sys.executable, "-m", "dumpfilter", "filter", str(binlog_dir), "-o", "/dev/stdout",
                           "--replicate-do-db", "db1", "--summary", "none"], cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout[:4] == b"\xfebin" and len(proc.stdout) > 1000
    assert Path("/dev/stdout").is_symlink() or not Path("/dev/stdout").is_file()  # never replaced by a file
