"""Spark job: split binlogs into one binlog per schema, or per named rule set (`--map`).

    spark-submit spark_jobs/split_by_schema.py FILE-or-DIR... --out DIR [--map NAME=RULES ...]
        [--max-binlog-size BYTES] [--filter-semantics mysql|effective] [--chunk-bytes N]

Extract / transform / load, on RDDs of plain Python values (no pandas/Arrow round trips):
- `read_chunks`: one partition per chunk (spark_jobs.core.chunks: whole files, and large files
  cut on transaction boundaries), so files and chunks are read in parallel;
- `assign_binlogs`: each unit read and routed to its output binlog(s) in the worker
  (spark_jobs.core.routing, pure);
- `write_split`: outputs hashed onto partitions, records sorted by input position, each output
  written by one task through spark_jobs.core.output (the single-process split's writer).

The output is byte-identical to `dumpfilter split --no-spark`. Output files are written by the
tasks straight into `--out`, which must therefore be a directory every executor sees (local mode,
or a shared file system on a cluster).
"""

from __future__ import annotations

import argparse
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # `spark-submit spark_jobs/split_by_schema.py`: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from binlog_codec import Event  # noqa: E402
from binlog_codec.format_description import FormatDescription  # noqa: E402
from filter_rules.ruleset import Settings  # noqa: E402
from spark_jobs.core.chunks import (  # noqa: E402
    DEFAULT_CHUNK_BYTES, Chunk, SourceHeader, input_files, plan_chunks, read_units, source_header,
)
from spark_jobs.core.local import check_output_dir  # noqa: E402
from spark_jobs.core.output import (  # noqa: E402
    DEFAULT_MAX_BINLOG_SIZE, OutputSet, OutputSummary, pack_events, unpack_events,
)
from spark_jobs.core.routing import ALL, DEFAULT_UNASSIGNED, Router, SplitConfig, config_from_maps  # noqa: E402



@dataclass(frozen=True)
class _Header:
    """SourceHeader as bytes, for shipping to workers."""

    fde: bytes
    start_state: bytes | None

    @classmethod
    def of(cls, header: SourceHeader) -> "_Header":
        return cls(header.fde.raw, header.start_state.raw if header.start_state is not None else None)

    def load(self) -> SourceHeader:
        fmt = FormatDescription.parse(self.fde)
        state = Event(self.start_state, 0, fmt) if self.start_state is not None else None
        return SourceHeader(Event(self.fde, 4, fmt), state)


def read_chunks(sc, chunks: list[Chunk]):
    """RDD of chunks, one partition each, so that chunks (and files) are read in parallel."""
    return sc.parallelize(chunks, max(1, len(chunks)))


def assign_binlogs(chunk_rdd, config: SplitConfig, *, verify_checksums: bool = True):
    """RDD of chunks -> RDD of (binlog, (file_index, pos), packed events): one record per output
    copy of each unit, read and routed in the worker (spark_jobs.core, pure)."""

    def assign(chunks):
        router = Router(config)
        for chunk in chunks:
            for txn in read_units(chunk, verify_checksums=verify_checksums):
                for name, events in router.route(txn):
                    yield name, (chunk.file_index, txn.start_pos), pack_events(events)

    return chunk_rdd.mapPartitions(assign)


def placement(name: str, buckets: int) -> int:
    """A stable bucket for an output name (Python's hash() is salted per process)."""
    return zlib.crc32(name.encode("utf-8", "surrogateescape")) % buckets


def write_split(assigned, out: Path, header: SourceHeader, max_size: int, buckets: int) -> list[OutputSummary]:
    """Write every output series under `out`, each by one task, in input order; returns the
    summaries sorted by name. Outputs are hashed onto `buckets` partitions (more buckets than
    cores lets the scheduler even out the load); incidents are copied to every bucket."""
    shipped = _Header.of(header)

    def place(record):
        name, seq, data = record
        targets = range(buckets) if name == ALL else (placement(name, buckets),)
        for bucket in targets:
            yield (bucket, seq, name), data

    def write(records):
        loaded = shipped.load()
        outputs = OutputSet(out, loaded, max_size)
        for (_, _, name), data in records:
            outputs.add(name, unpack_events(data, loaded.fmt))
        return iter(outputs.close())

    placed = assigned.flatMap(place)
    ordered = placed.repartitionAndSortWithinPartitions(buckets, partitionFunc=lambda key: key[0])
    return sorted(ordered.mapPartitions(write).collect(), key=lambda s: s.name)


def split_spark(spark, targets: list, out, config: SplitConfig, *, max_size: int = DEFAULT_MAX_BINLOG_SIZE,
                chunk_bytes: int | None = DEFAULT_CHUNK_BYTES, verify_checksums: bool = True,
                buckets: int | None = None) -> list[OutputSummary]:
    out = check_output_dir(out).resolve()
    paths = input_files(targets)
    header = source_header(paths)
    chunks = plan_chunks(paths, chunk_bytes)
    sc = spark.sparkContext
    assigned = assign_binlogs(read_chunks(sc, chunks), config, verify_checksums=verify_checksums)
    return write_split(assigned, out, header, max_size, buckets or 4 * sc.defaultParallelism)


# ------------------------------------------------------------------------------------- CLI
def add_split_arguments(parser: argparse.ArgumentParser) -> None:
    """The options `dumpfilter split` and this job share."""
    parser.add_argument("inputs", nargs="+", metavar="FILE-or-DIR", help="binlog files, or directories of them")
    parser.add_argument("--out", required=True, help="output directory (new or empty)")
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
                        help="read files larger than this in chunks cut at transaction boundaries "
                             "(default 64M; 0: whole files)")
    parser.add_argument("--no-verify-checksums", dest="verify_checksums", action="store_false",
                        help="do not check the input events' CRC32")


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
    return config_from_maps(args.map, settings, args.unassigned or None)


def print_summary(outputs: list[OutputSummary], out=sys.stdout) -> None:
    for s in outputs:
        print(f"{s.name}-bin: {len(s.files)} file(s), {s.units} unit(s), {s.bytes} bytes", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="split_by_schema", description=__doc__.split("\n\n")[0])
    add_split_arguments(parser)
    parser.add_argument("--master", dest="spark_master", default=None,
                        help="Spark master URL (default: spark-submit's, else $SPARK_MASTER, else local[*])")
    args = parser.parse_args(argv)
    from binlog_codec.errors import DumpFilterError
    from spark_jobs.session import get_session

    try:
        config = config_from_args(args)
        spark = get_session("dumpfilter-split", args.spark_master)
        outputs = split_spark(spark, args.inputs, args.out, config, max_size=args.max_binlog_size,
                              chunk_bytes=args.chunk_bytes or None, verify_checksums=args.verify_checksums)
    except DumpFilterError as exc:
        print(f"split_by_schema: error: {exc}", file=sys.stderr)
        return 2
    print_summary(outputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
