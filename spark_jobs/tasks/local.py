"""The single-process split (`dumpfilter split --no-spark`): every chunk in input order, on the
compiled scan (tasks.compiled), each run of units written at once. The Spark job computes the same thing in parallel."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from dumpfilter.spark_jobs.tasks.chunks import input_files, schema_statements, source_header
from dumpfilter.spark_jobs.tasks.chunks import plan_chunks
from dumpfilter.spark_jobs.tasks.compiled import OutputKeeps, route_chunk
from dumpfilter.binlogs.series import DEFAULT_MAX_BINLOG_SIZE
from dumpfilter.spark_jobs.tasks.output import OutputSet, OutputSummary
from dumpfilter.spark_jobs.tasks.routing import Router, RouteStats, SplitConfig, chunk_starts


@dataclass
class SplitResult:
    outputs: list[OutputSummary]
    stats: RouteStats = field(default_factory=RouteStats)
    input_files: int = 0
    chunks: int = 0


def check_output_dir(out: str | os.PathLike[str], create: bool = True) -> Path:
    """The output directory must be new or empty: a split never mixes with older files."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        from dumpfilter.errors import DumpFilterError
        raise DumpFilterError(f"--out {out}: exists and is not an empty directory")
    if create:
        out.mkdir(parents=True, exist_ok=True)
    return out


def split_local(targets: list[str | os.PathLike[str]], out: str | os.PathLike[str], config: SplitConfig, *,
                max_size: int = DEFAULT_MAX_BINLOG_SIZE, chunk_bytes: int | None = None,
                verify_checksums: bool = True) -> SplitResult:
    out = check_output_dir(out)
    paths = input_files(targets)
    header = source_header(paths)
    # One process reads every file in order, in bounded buffers: cuts change nothing written (as on
    # Spark), so `split --no-spark` reads the files whole, without a walk to find them; `chunk_bytes`
    # cuts them as Spark's tasks would (each chunk started from the state before it: chunk_starts).
    chunks = plan_chunks(paths, chunk_bytes)
    starts = chunk_starts(config, (schema_statements(c, verify_checksums=verify_checksums) for c in chunks))
    router = Router(config)
    outputs = OutputSet(out, header, max_size)
    keeps = OutputKeeps(router)
    for chunk, start in zip(chunks, starts):
        router.start_chunk(start)  # the state a reader of the whole stream has here (as Spark's tasks)
        route_chunk(chunk, router, keeps, outputs, verify_checksums=verify_checksums)
    return SplitResult(outputs.close(), router.stats, len(paths), len(chunks))
