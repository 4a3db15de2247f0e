"""The files the rules read by name (a my.cnf, a --schema dump): regular files only, of bounded size,
and a schema file that creates nothing or holds an unreadable table statement is an error; a
script read by the lab (SchemaModel.from_sql, not strict) is still taken as it is."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest

from dumpfilter.errors import RuleError
from dumpfilter.regular_file import RegularFileError, read_regular
from dumpfilter.rules.mycnf import startup_filters_from_file
from dumpfilter.rules.schema import SchemaModel


def test_a_file_over_the_bound_is_refused(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * (2 << 20))
    assert read_regular(big, 2 << 20) == b"x" * (2 << 20)
    with pytest.raises(ValueError, match="is larger than 1 MiB"):
        read_regular(big, 1 << 20)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="is a FIFO"):
        read_regular(fifo, 100)
    with pytest.raises(RuleError, match="fifo: is a FIFO"):
        SchemaModel.load(fifo)


def test_an_included_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo.cnf")
    (tmp_path / "my.cnf").write_text("[mysqld]\nreplicate-do-db = a\n!includedir .\n")
    with pytest.raises(RuleError, match=r"cannot read .*fifo.cnf: is a FIFO"):
        startup_filters_from_file(tmp_path / "my.cnf")


def test_a_good_dump_still_loads(tmp_path):
    dump = tmp_path / "dump.sql"
    dump.write_text("/*!40101 SET NAMES utf8 */;\nDROP PREPARE stmt;\nCREATE DATABASE `a`;\nUSE `a`;\n"
                    "CREATE TABLE `t` (\n  `x` int NOT NULL,\n  PRIMARY KEY (`x`)\n) ENGINE=InnoDB;\n")
    model = SchemaModel.load(dump)
    assert model.databases == {"a"} and model.columns("a", "t") == ("x",)


def test_the_lab_reads_a_script_as_before():
    assert SchemaModel.from_sql("hello ;;; ))(").tables == {}
    cut_short = SchemaModel.from_sql("CREATE TABLE a.t (x int")  # (a server refuses it: no column is read)
    assert cut_short.knows("a", "t") and cut_short.columns("a", "t") is None


def test_one_module_says_what_a_path_is(tmp_path):
    """dumpfilter.regular_file, under the binlog files and the rules' side files alike."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "big").write_bytes(b"x" * (1 << 20) + b"x")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        for path, kind in ((tmp_path / "fifo", "a FIFO (named pipe)"), (tmp_path / "dir", "a directory"),
                           (tmp_path / "sock", "a socket"), ("/dev/null", "a character device")):
            with pytest.raises(RegularFileError, match=f"^is {re.escape(kind)}$") as info:
                read_regular(path, 100)
            assert info.value.kind == kind
    with pytest.raises(RegularFileError, match="^is larger than 1 MiB$") as info:
        read_regular(tmp_path / "big", 1 << 20)
    assert info.value.kind is None


@pytest.mark.skipif(not os.path.exists("/dev/tty"), reason="no /dev/tty")
def test_a_device_is_told_by_its_type_never_opened():
    """/dev/tty, in a session with no terminal: an open fails (ENXIO, "No such device or address");
    the type is checked before any open, so the line says what the path is."""
    code = ("from dumpfilter.regular_file import read_regular\n"
            "try:\n    read_regular('/dev/tty', 10)\nexcept (OSError, ValueError) as exc:\n    print(exc)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    assert run.stdout.strip() == "is a character device", run
