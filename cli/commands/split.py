"""`dumpfilter split`: divide binlogs into one binlog per schema, or per named rule set (`--map`),
with Spark (`spark_jobs.split_by_schema`) or in this process (`--no-spark`); same bytes either way.
The rules for which binlog an event goes to are in docs/split.md."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.cli.options import add_json_option, add_spark_options, emit_json, spark_conf
from dumpfilter.cli.output_paths import writable_dir
from dumpfilter.spark_jobs.tasks.chunks import input_files
from dumpfilter.spark_jobs.tasks.local import check_output_dir, split_local
from dumpfilter.spark_jobs.split_by_schema import add_split_arguments, config_from_args, print_summary, warn_unmatched_maps

if TYPE_CHECKING:
    from dumpfilter.cli.options import Subparsers


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "split", help="split binlogs into one binlog per schema or per --map rule set (Spark or --no-spark)",
        description="Writes <name>-bin.index and <name>-bin.000001, ... per output under --out. Every "
                    "output file is a valid binlog (FDE, Gtid_list/Previous_GTIDs, renumbered positions, "
                    "fresh CRC32, Rotate between files). See docs/split.md.")
    add_split_arguments(parser)
    add_spark_options(parser, "split in this process (byte-identical output)")
    add_json_option(parser, "the summary (each output binlog's files, units and bytes)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    input_files(args.inputs)  # every input a binlog (one line if not) before any output is made
    out = Path(args.out)
    check_output_dir(out, create=False)  # an existing one must be an empty directory
    # The split is written beside its place (a temporary directory next to --out, which executors
    # see as they would --out) and renamed into place once complete: an interrupted or failed
    # split leaves nothing that `binlog inspect` would take for a whole output.
    made = not out.exists()
    writable_dir(out)  # made (with its parents) and proved writable: an error names --out
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    started = time.perf_counter()
    try:
        if args.no_spark:
            result = split_local(args.inputs, staging, config, max_size=args.max_binlog_size,
                                 verify_checksums=args.verify_checksums)  # (--chunk-bytes is Spark's tasks')
            outputs, stats = result.outputs, result.stats
            extra = (f"; {stats.incomplete} incomplete unit(s) not written" if stats.incomplete else "") + \
                    (f"; {stats.dropped_units} unit(s) of no binlog dropped" if stats.dropped_units else "")
        else:
            from dumpfilter.spark_jobs.session import get_session
            from dumpfilter.spark_jobs.split_by_schema import split_spark

            spark = get_session("dumpfilter-split", args.spark_master, spark_conf(args))
            outputs = split_spark(spark, args.inputs, staging, config, max_size=args.max_binlog_size,
                                  chunk_bytes=args.chunk_bytes or None, verify_checksums=args.verify_checksums)
            extra = ""
        out.rmdir()  # empty (checked above); a file written into it since makes this fail: nothing is lost
        os.replace(staging, out)
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    unmatched = warn_unmatched_maps(config, outputs)
    seconds = time.perf_counter() - started
    if not emit_json(args, {"out": str(args.out), "outputs": [dataclasses.asdict(s) for s in outputs],
                            "unmatched_maps": unmatched, "seconds": round(seconds, 3)}):
        print_summary(outputs)
        print(f"{len(outputs)} binlog(s) written to {args.out} in {seconds:.1f}s{extra}")
    return 0
