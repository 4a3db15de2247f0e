"""Argument groups several sub-commands share (binlog inputs, the Spark switch); the rule options
are the rules' own (dumpfilter.rules.options), the connection options the master client's."""

from __future__ import annotations

import argparse


def add_binlog_inputs(parser: argparse.ArgumentParser, metavar: str = "FILE") -> None:
    parser.add_argument("files", nargs="+", metavar=metavar,
                        help="binlog files or directories (a directory stands for its index or numbered files)")


def add_spark_options(parser: argparse.ArgumentParser, without: str) -> None:
    """--spark-master and --no-spark; `without` says what --no-spark does instead."""
    parser.add_argument("--spark-master", default=None, metavar="URL",
                        help="Spark master URL (default $SPARK_MASTER, else local[*])")
    parser.add_argument("--no-spark", action="store_true", help=without)
