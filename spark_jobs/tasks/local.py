"""The single-process split (`dumpfilter split --no-spark`): every chunk in input order, each unit
routed and written at once. The Spark job computes the same thing in parallel."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from dumpfilter.errors import MalformedEventError
from dumpfilter.spark_jobs.tasks.chunks import (DEFAULT_CHUNK_BYTES, input_files, plan_chunks, query_statements,
                                               read_units, source_header)
from dumpfilter.binlogs.series import DEFAULT_MAX_BINLOG_SIZE
from dumpfilter.spark_jobs.tasks.output import OutputSet, OutputSummary
from dumpfilter.spark_jobs.tasks.routing import Router, RouteStats, SplitConfig, chunk_starts


@dataclass
class SplitResult:
    outputs: list[OutputSummary]
    stats: RouteStats = field(default_factory=RouteStats)
    input_files: int = 0
    chunks: int = 0


def check_output_dir(out: str | os.PathLike, create: bool = True) -> Path:
    """The output directory must be new or empty: a split never mixes with older files."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        from dumpfilter.errors import DumpFilterError
        raise DumpFilterError(f"--out {out}: exists and is not an empty directory")
    if create:
        out.mkdir(parents=True, exist_ok=True)
    return out


def split_local(targets: list[str | os.PathLike], out: str | os.PathLike, config: SplitConfig, *,
                max_size: int = DEFAULT_MAX_BINLOG_SIZE, chunk_bytes: int | None = DEFAULT_CHUNK_BYTES,
                verify_checksums: bool = True) -> SplitResult:
    out = check_output_dir(out)
    paths = input_files(targets)
    header = source_header(paths)
    chunks = plan_chunks(paths, chunk_bytes)
    starts = chunk_starts(config, (query_statements(c, verify_checksums=verify_checksums) for c in chunks))
    router = Router(config)
    outputs = OutputSet(out, header, max_size)
    for chunk, start in zip(chunks, starts):
        router.start_chunk(start)  # the state a reader of the whole stream has here (as Spark's tasks)
        try:
            for txn in read_units(chunk, verify_checksums=verify_checksums):
                for name, events in router.route(txn):
                    outputs.add(name, events)
        except MalformedEventError as exc:  # found by a TransactionFilter, which knows no file
            raise exc.in_file(chunk.path) from None
    return SplitResult(outputs.close(), router.stats, len(paths), len(chunks))
