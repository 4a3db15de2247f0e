"""Spark job: split binlogs into one binlog per schema, or per named rule set (`--map`).

    spark-submit spark_jobs/split_by_schema.py FILE-or-DIR... --out DIR [--map NAME=RULES ...]
        [--max-binlog-size BYTES] [--filter-semantics mysql|effective] [--chunk-bytes N]

Two stages, no shuffle (spark_jobs.tasks.segments says how): `route_chunks`, one task per chunk
(spark_jobs.tasks.chunks: whole files, and large files cut on transaction boundaries) writing a
segment file per (chunk, output); `join_outputs`, one task per output joining its segments.

The output is byte-identical to `dumpfilter split --no-spark`. Segments (under `--out`, removed at
the end) and output files are written by the tasks straight into `--out`, which must therefore be
a directory every executor sees (local mode, or a shared file system on a cluster).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

if TYPE_CHECKING:  # pyspark: on the driver and in its workers only
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

# `spark-submit spark_jobs/split_by_schema.py` runs this file as a script, with a Python where dumpfilter is
# installed (the venv, or on a cluster the shipped archive's: docs/split.md). No path is added here:
# the checkout's `dumpfilter/` would shadow the installed package, which maps spark_jobs/ into it.
from dumpfilter.binlogs.series import DEFAULT_MAX_BINLOG_SIZE  # noqa: E402
from dumpfilter.rules.options import add_schema_option, schema_from_args  # noqa: E402
from dumpfilter.rules.ruleset import Settings  # noqa: E402
from dumpfilter.spark_jobs.tasks.chunks import (  # noqa: E402
    DEFAULT_CHUNK_BYTES, Chunk, SourceHeader, input_files, plan_chunks, schema_statements, source_header,
)
from dumpfilter.spark_jobs.tasks.local import check_output_dir  # noqa: E402
from dumpfilter.spark_jobs.tasks.output import OutputSummary  # noqa: E402
from dumpfilter.spark_jobs.tasks.routing import (  # noqa: E402
    DEFAULT_UNASSIGNED, ChunkStart, Router, SplitConfig, chunk_starts, config_from_maps,
)
from dumpfilter.spark_jobs.tasks.segments import ChunkSegments, JoinTask, join_output, join_tasks, write_chunk_segments  # noqa: E402


_Item = TypeVar("_Item")


def balanced_groups(items: list[_Item], sizes: list[int], groups: int) -> list[list[_Item]]:
    """`items` dealt onto `groups` lists, largest first onto the least loaded (LPT), each list in
    the items' order: with one task per core no task waits for a free core, and no core idles
    while one task finishes a long tail of small items. Few tasks: a PySpark task costs about
    30 ms of the JVM's and the Python worker's time (on 2 cores, 24 one-file tasks cost more than
    the imbalance of whole files dealt onto 2 tasks)."""
    groups = max(1, min(groups, len(items)))
    loads = [0] * groups
    dealt: list[list[int]] = [[] for _ in range(groups)]
    for index in sorted(range(len(items)), key=lambda i: -sizes[i]):
        g = loads.index(min(loads))
        loads[g] += sizes[index]
        dealt[g].append(index)
    return [[items[i] for i in sorted(part)] for part in dealt if part]


def route_chunks(sc: SparkContext, chunks: list[Chunk], config: SplitConfig, seg_dir: Path, *,
                 verify_checksums: bool = True) -> list[ChunkSegments]:
    """Stage 1: chunks (and files) in parallel; each task routes its chunks' units into segment
    files under `seg_dir` and returns what each chunk wrote (small: counts and incidents). The
    driver's first pass over the DDL gives each chunk the schema model it starts from (map mode)."""
    segments = str(seg_dir)
    starts = chunk_starts(config, (schema_statements(c, verify_checksums=verify_checksums) for c in chunks))

    def route(parts: Iterable[list[tuple[int, Chunk, ChunkStart | None]]]) -> Iterator[ChunkSegments]:
        router = Router(config)
        for part in parts:
            for chunk_no, chunk, start in part:
                yield write_chunk_segments(chunk, chunk_no, segments, router, verify_checksums=verify_checksums,
                                           start=start)

    items = [(i, chunk, start) for i, (chunk, start) in enumerate(zip(chunks, starts))]
    groups = balanced_groups(items, [c.size for c in chunks], sc.defaultParallelism)
    return sc.parallelize(groups, len(groups)).mapPartitions(route).collect()


def join_outputs(sc: SparkContext, plans: list[JoinTask], seg_dir: Path, out: Path, header: SourceHeader,
                 max_size: int) -> list[OutputSummary]:
    """Stage 2: outputs in parallel; each task joins its outputs' segments into their final series
    under `out`."""
    if not plans:
        return []
    segments, out_dir = str(seg_dir), str(out)

    def join(parts: Iterable[list[JoinTask]]) -> Iterator[OutputSummary]:
        for part in parts:
            for plan in part:
                yield join_output(plan, segments, out_dir, header, max_size)

    groups = balanced_groups(plans, [p.bytes for p in plans], sc.defaultParallelism)
    summaries = sc.parallelize(groups, len(groups)).mapPartitions(join).collect()
    return sorted(summaries, key=lambda s: s.name)


def split_spark(spark: SparkSession, targets: list[str | os.PathLike[str]], out: str | os.PathLike[str],
                config: SplitConfig, *, max_size: int = DEFAULT_MAX_BINLOG_SIZE,
                chunk_bytes: int | None = DEFAULT_CHUNK_BYTES, verify_checksums: bool = True) -> list[OutputSummary]:
    out_dir = check_output_dir(out).resolve()
    paths = input_files(targets)
    header = source_header(paths)
    sc = spark.sparkContext
    # Cut by the core's walk (no event reaches Python); with the default size, at a fair share of
    # the input per core at least (a series of many files is read a file per task, uncut).
    chunks = plan_chunks(paths, chunk_bytes, workers=sc.defaultParallelism if chunk_bytes == DEFAULT_CHUNK_BYTES else None)
    seg_dir = Path(tempfile.mkdtemp(prefix=".segments-", dir=out_dir))
    try:
        results = route_chunks(sc, chunks, config, seg_dir, verify_checksums=verify_checksums)
        return join_outputs(sc, join_tasks(results), seg_dir, out_dir, header, max_size)
    finally:
        shutil.rmtree(seg_dir, ignore_errors=True)


# ------------------------------------------------------------------------------------- CLI
def add_split_arguments(parser: argparse.ArgumentParser) -> None:
    """The options `dumpfilter split` and this job share."""
    parser.add_argument("inputs", nargs="+", metavar="FILE-or-DIR", help="binlog files, or directories of them")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (new or empty)")
    parser.add_argument("--map", action="append", default=[], metavar="NAME=RULES",
                        help="an output binlog NAME-bin.* with the events these rules keep; RULES is a "
                             "replicate-*/binlog-* option (replicate-wild-do-table=shop%%.%%), a CHANGE "
                             "REPLICATION FILTER / WL#2516 CHANGE MASTER statement or a db[.table] pattern; "
                             "repeat NAME to add rules. Without --map: one binlog per schema")
    parser.add_argument("--unassigned", default=DEFAULT_UNASSIGNED, metavar="NAME",
                        help="the binlog for events of no schema / no --map (default %(default)s; '' drops them)")
    parser.add_argument("--max-binlog-size", type=_size, default=DEFAULT_MAX_BINLOG_SIZE, metavar="BYTES",
                        help="rotate output files at this size (default 1G; suffixes K, M, G)")
    parser.add_argument("--filter-semantics", choices=("mysql", "effective"), default="mysql",
                        help="statements follow their default database (mysql) or the databases of the "
                             "tables they update (effective, WL#2516)")
    parser.add_argument("--flavor", choices=("mysql", "mariadb"), default="mysql",
                        help="--map rules are evaluated as this server's replica would")
    parser.add_argument("--lower-case-table-names", type=int, choices=(0, 1, 2), default=0)
    parser.add_argument("--chunk-bytes", type=_size, default=DEFAULT_CHUNK_BYTES, metavar="BYTES",
                        help="Spark's tasks read files larger than this in chunks cut at transaction "
                             "boundaries (default 64M, raised to the input's size over 4 tasks per Spark "
                             "core; 0: whole files; --no-spark reads each file whole)")
    parser.add_argument("--no-verify-checksums", dest="verify_checksums", action="store_false",
                        help="do not check the input events' CRC32")
    add_schema_option(parser)


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    try:
        value = int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (BYTES, or a number with K, M or G)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def config_from_args(args: argparse.Namespace) -> SplitConfig:
    settings = Settings(flavor=args.flavor, lower_case_table_names=args.lower_case_table_names,
                        semantics=args.filter_semantics)
    return config_from_maps(args.map, settings, args.unassigned or None,
                            schema_from_args(args) if args.schema else None)


def print_summary(outputs: list[OutputSummary], out: TextIO | None = None) -> None:
    for s in outputs:
        print(f"{s.name}-bin: {len(s.files)} file(s), {s.units} unit(s), {s.bytes} bytes", file=out)


def warn_unmatched_maps(config: SplitConfig, outputs: list[OutputSummary], out: TextIO = sys.stderr) -> list[str]:
    """A --map whose rules kept nothing writes no binlog; say so rather than leave it missing."""
    written = {s.name for s in outputs}
    missing = [m.name for m in config.maps if m.name not in written]
    for name in missing:
        print(f"warning: --map {name}: its rules matched no event; no {name}-bin binlog was written", file=out)
    return missing


def build_parser() -> argparse.ArgumentParser:
    """The spark-submit job's own options: `dumpfilter split`'s, and --master."""
    parser = argparse.ArgumentParser(prog="split_by_schema", description=__doc__.split("\n\n")[0])
    add_split_arguments(parser)
    parser.add_argument("--master", dest="spark_master", default=None,
                        help="Spark master URL (default: spark-submit's, else $SPARK_MASTER, else local[*])")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from dumpfilter.errors import DumpFilterError
    from dumpfilter.spark_jobs.session import get_session

    try:
        config = config_from_args(args)
        spark = get_session("dumpfilter-split", args.spark_master)
        outputs = split_spark(spark, args.inputs, args.out, config, max_size=args.max_binlog_size,
                              chunk_bytes=args.chunk_bytes or None, verify_checksums=args.verify_checksums)
    except DumpFilterError as exc:
        print(f"split_by_schema: error: {exc}", file=sys.stderr)
        return 2
    print_summary(outputs)
    warn_unmatched_maps(config, outputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
