"""`dumpfilter experiment`: per slave of a topology, the events and bytes master-side filtering
would send compared with everything, over many binlog files in parallel with Spark
(`spark_jobs.bandwidth_experiment`), or in this process with `--no-spark`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from dumpfilter.cli.options import (add_json_option, add_spark_options, emit_json, number_in, raise_cut, retype,
                                    size_in, spark_conf)
from dumpfilter.cli.output_paths import made_for_the_run, readable_file
from dumpfilter.progress import byte_progress, consoles, shown
from dumpfilter.spark_jobs.tasks.chunks import input_files
from dumpfilter.topology import load_candidates, load_topology
from dumpfilter.spark_jobs.bandwidth_experiment import (CHUNK_BYTES_RANGE, LINT_MAX_MB_RANGE, add_experiment_arguments,
                                                        chunk_bytes_for, print_ranking, print_table, run_experiment)

if TYPE_CHECKING:
    from dumpfilter.errors import CutEventError
    from dumpfilter.cli.options import Subparsers


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "experiment", help="bytes master-side filtering would send each slave of a topology (Spark)",
        description="Writes bandwidth.csv (or .parquet) and bandwidth.png under --out. The topology "
                    "format is described in dumpfilter/topology.py.")
    add_experiment_arguments(parser)
    # The Spark job's own parser reads these as plain numbers in their ranges; here a size may take a
    # K/M/G suffix too: a negative chunk (which looped forever) or a NaN bound is the option's one line.
    retype(parser, "chunk_bytes", size_in(*CHUNK_BYTES_RANGE))
    retype(parser, "lint_max_mb", number_in(*LINT_MAX_MB_RANGE, what="a number of MiB"))
    add_spark_options(parser, "count in this process")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (one is drawn only on a terminal)")
    add_json_option(parser, "the table (one row per slave) and the files written")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for option, path in (("--topology", args.topology), ("--candidates", args.candidates)):
        if path:  # a regular file: a FIFO or a device would block or never end
            readable_file(path, option)
    topology = load_topology(args.topology)
    candidates = load_candidates(args.candidates) if args.candidates else None
    input_files([args.binlogs])  # every input a binlog (one line if not) before any output is made
    ranking: list[dict[str, Any]] = []
    cuts: list[CutEventError] = []  # a file cut inside an event: counted up to it, then told (raise_cut)
    # --out made before Spark starts, not after the job; the report directory this run made goes
    # with it if interrupted or failed: no empty or partial report left
    with made_for_the_run(args.out) as out:
        spark = None
        if not args.no_spark:
            from dumpfilter.spark_jobs.session import get_session

            spark = get_session("dumpfilter-experiment", args.spark_master, spark_conf(args))
        _, err = consoles()
        with byte_progress(err, show=shown(err, args.no_progress)) as bars:
            task = bars.add_task("counting (every slave)", total=None)

            def progress(done: int, total: int) -> None:
                bars.update(task, completed=done, total=total)

            rows, paths = run_experiment(args.binlogs, topology, out, spark=spark, fmt=args.fmt,
                                         chunk_bytes=chunk_bytes_for(args.chunk_bytes, spark=spark is not None),
                                         candidates=candidates,
                                         lint_max_mb=args.lint_max_mb, ranking=ranking,
                                         charts=args.charts, progress=progress, cuts=cuts)
    if not emit_json(args, {"slaves": rows, "files": [str(p) for p in paths],
                            **({"candidates": ranking} if candidates is not None else {})}):
        print_table(rows)
        if ranking:
            print("candidates, the most bytes saved first (those a replica runs clean before those it stops for,"
                  " then those that silently diverge, then those that do both):")
            print_ranking(ranking)
        print("wrote " + ", ".join(str(p) for p in paths))
    raise_cut(cuts[0] if cuts else None, f"every whole event before it was counted (--out {out}), no later file read")
    return 0
