"""The files the rules read by name (a my.cnf, a --schema dump): regular files only, of bounded size,
and a schema file that creates nothing or holds an unreadable table statement is an error; a
script read by the lab (SchemaModel.from_sql, not strict) is still taken as it is."""

from __future__ import annotations

import os

import pytest

from dumpfilter.errors import RuleError
from dumpfilter.rules.mycnf import read_regular_file, startup_filters_from_file
from dumpfilter.rules.schema import SchemaModel


def test_a_file_over_the_bound_is_refused(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * (2 << 20))
    assert read_regular_file(big, 2 << 20) == b"x" * (2 << 20)
    with pytest.raises(ValueError, match="is larger than 1 MiB"):
        read_regular_file(big, 1 << 20)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"is not a file \(a FIFO\)"):
        read_regular_file(fifo, 100)
    with pytest.raises(RuleError, match=r"fifo: is not a file \(a FIFO\)"):
        SchemaModel.load(fifo)


def test_an_included_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo.cnf")
    (tmp_path / "my.cnf").write_text("[mysqld]\nreplicate-do-db = a\n!includedir .\n")
    with pytest.raises(RuleError, match=r"cannot read .*fifo.cnf: is not a file \(a FIFO\)"):
        startup_filters_from_file(tmp_path / "my.cnf")


def test_a_good_dump_still_loads(tmp_path):
    dump = tmp_path / "dump.sql"
    dump.write_text("/*!40101 SET NAMES utf8 */;\nDROP PREPARE stmt;\nCREATE DATABASE `a`;\nUSE `a`;\n"
                    "CREATE TABLE `t` (\n  `x` int NOT NULL,\n  PRIMARY KEY (`x`)\n) ENGINE=InnoDB;\n")
    model = SchemaModel.load(dump)
    assert model.databases == {"a"} and model.columns("a", "t") == ("x",)


def test_the_lab_reads_a_script_as_before():
    assert SchemaModel.from_sql("hello ;;; ))(").tables == {}
    assert SchemaModel.from_sql("CREATE TABLE a.t (x int").knows("a", "t")
