"""Diagnostic (not in `make bench`, no test asserts it): the shadow pass's count in process, as
bench_shadow's 64 candidates cost it (issue #80 goal 4). One `ShadowBoard.count` from the first file
of DIR to its end, over the master's own segments (a SegmentCache, read by the pass as no stream
reads them here), with the thread CPU spent in the count of each segment (`bandwidth._count_units`:
the count walks, forms, tallies; not the scan, which the streams share in a master). `--out FILE`
writes every candidate's totals, by hour, minute, table and statement (JSON), to compare two builds' counts.
`--passes N` counts N times in one process, each with a new board, as a live master's later passes
count with what the first left (its rule sets' keep tables); `--out` then writes FILE.1 .. FILE.N.
`--schema S`: the candidates' schemas are S1..S8, as bench_shadow's DUMPFILTER_SHADOW_SCHEMA
(its default, else `db`): `sbtest` for the bench matrix's DDL-heavy and sysbench binlogs. Counted
over a binlog without them, every candidate keeps nothing: a workload the bench never measures
(session 82's instruction counts were taken so), which the count then says.
`--kinds 0,3`: only those of bench_shadow's KINDS (8 candidates each; all 8 kinds, 64 candidates, by
default): what the pass costs per rule group, against the part every group shares.
`--segment-mb N`: the master's segments of N MiB (its SEGMENT_BYTES, 8, by default; its cache 4 of
them, as the master's): what the count costs per segment, against what it costs per unit.
`--range-segments N`: each range of the pass counts N segments at most (the board's RANGE_SEGMENTS by
default; 1: as a live master that keeps pace with a primary counts a range per change), each range
folded into the candidates' totals: what the ranges' set-up and folds cost.
`--split N`: the same command run under py-spy (bench.sampled_split), and the N functions the
segments' counts spent their samples in most, inclusive and own: where a count's time goes without
a wrapper's cost on each call.

    python -m bench.diag_shadow_count DIR [--schema S] [--out FILE] [--passes N] [--kinds K,..] [--segment-mb N]
                                          [--range-segments N] [--split N]
    valgrind --tool=callgrind --toggle-collect=sys_call_tracing python -m bench.diag_shadow_count DIR --schema sbtest
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import bench_shadow, sampled_split
from dumpfilter.cli.app import GC_GEN0_THRESHOLD
from dumpfilter.master.read.segments import SEGMENT_BYTES, SegmentCache
from dumpfilter.master.serve.malloc_arenas import limit_arenas, steady_thresholds
from dumpfilter.master.shadow.board import RANGE_SEGMENTS, ShadowBoard
from dumpfilter.rules import lazy_sqlglot
from dumpfilter.spark_jobs.tasks import bandwidth
from dumpfilter.spark_jobs.tasks.shadow_counts import ShadowCounts
from dumpfilter.topology import parse_topology


class _NoLint:
    def request(self, *args: object, **kwargs: object) -> None:
        pass

    def forget(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--schema", default=bench_shadow.SCHEMA, help="the candidates' schemas are SCHEMA1..SCHEMA8")
    parser.add_argument("--kinds", type=_kinds, default=tuple(range(len(bench_shadow.KINDS))),
                        help="bench_shadow's candidate kinds counted, by index (default: all 8)")
    parser.add_argument("--segment-mb", type=_positive, default=SEGMENT_BYTES >> 20, help="the master's segment size, MiB")
    parser.add_argument("--range-segments", type=_positive, default=RANGE_SEGMENTS,
                        help="the segments one range of the pass counts at most")
    parser.add_argument("--split", type=_positive, metavar="N",
                        help="run again under py-spy and print the N functions the count's samples fall in most")
    args = parser.parse_args()
    if args.split:
        sys.exit(_split(args.split))
    bench_shadow.SCHEMA = args.schema
    segment = args.segment_mb << 20
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)  # as the master's command sets it
    # glibc's arenas and thresholds as `master serve` sets them (master.serve.malloc_arenas): with
    # glibc's own, a count's larger lists were fresh pages each time, faulted in (session 103).
    limit_arenas()
    steady_thresholds()
    spent = [0.0]
    count_units = bandwidth._count_units

    def timed(*a: Any) -> Any:
        started = time.thread_time()
        try:
            # (through sys.call_tracing, a C function called nowhere else: callgrind's
            # --toggle-collect=sys_call_tracing counts the segments' counts alone)
            return sys.call_tracing(count_units, a)
        finally:
            spent[0] += time.thread_time() - started

    bandwidth._count_units = timed  # type: ignore[assignment]
    # A master imports the statement parser's general path at its start (DumpService), not in a
    # count, and then freezes what it made out of the cyclic collector (`DumpService.warm_up`):
    # unfrozen, the collector's full passes over sqlglot's modules were 4% of a count here.
    lazy_sqlglot.sqlglot.Dialect.get_or_raise("mysql")
    gc.freeze()
    for k in range(args.passes):
        cache = SegmentCache(args.dir, segment_bytes=segment, cache_bytes=4 * segment)
        board = ShadowBoard(args.dir, ShadowCounts(), _NoLint(), None, cache)  # type: ignore[arg-type]
        board.range_segments = args.range_segments
        board.add(parse_topology(bench_shadow.candidates_toml(args.kinds)), None, from_start=True)
        spent[0] = 0.0
        started = time.process_time()
        ranges = board.count()
        print(f"pass {k + 1}: {len(args.kinds) * bench_shadow.SCHEMAS} candidates: process CPU {time.process_time() - started:.2f} s (scans included), "
              f"counting {spent[0]:.2f} s (thread CPU of the segments' counts), {ranges} ranges")
        schemas = {f"{args.schema}{n}" for n in range(1, bench_shadow.SCHEMAS + 1)}
        if not any(isinstance(name, tuple) and name[0] in schemas for c in board.candidates.values()
                   if c.total is not None for name in c.total.tables):
            print(f"  no table of {args.schema}1..{args.schema}8 counted: the binlog has no such schema (--schema)")
        if args.out:
            _write(board, args.out if args.passes == 1 else args.out.with_name(f"{args.out.name}.{k + 1}"))


def _split(top: int) -> int:
    """`--split N`: this command (without --split) run under py-spy, and where its segments' counts
    (`bandwidth._count_units`) spent their samples: the N functions below it by share."""
    argv, skip = [], False
    for arg in sys.argv[1:]:  # (the command again, without --split N or --split=N)
        if skip or arg.startswith("--split"):
            skip = arg == "--split"
            continue
        argv.append(arg)
    with tempfile.TemporaryDirectory(prefix="diag-split-") as tmp:
        raw = Path(tmp) / "stacks.txt"
        code = sampled_split.record(bench_shadow.PY_SPY, [sys.executable, "-m", "bench.diag_shadow_count", *argv], raw)
        if code != 0 or not raw.exists():
            print(f"--split: py-spy ({bench_shadow.PY_SPY}) did not run the count (exit {code}): pip install -e '.[bench]'",
                  file=sys.stderr)
            return 2
        print("\n".join(sampled_split.split(raw, "_count_units").lines(top)))
    return 0


def _kinds(text: str) -> tuple[int, ...]:
    """`--kinds`: indices of bench_shadow.KINDS, comma-separated."""
    try:
        kinds = tuple(int(k) for k in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected indices such as 0,3") from None
    if not kinds or any(not 0 <= k < len(bench_shadow.KINDS) for k in kinds):
        raise argparse.ArgumentTypeError(f"{text!r}: each index from 0 to {len(bench_shadow.KINDS) - 1}")
    return kinds


def _positive(text: str) -> int:
    """`--segment-mb` (MiB), `--range-segments`: a whole number, 1 or more."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number, 1 or more")
    return int(text)


def _write(board: ShadowBoard, out: Path) -> None:
    """Every candidate's totals, by hour, minute, table and statement, as JSON in `out`."""
    totals = {c.spec.name: {"totals": {k: str(v) for k, v in c.total.counts.as_row().items()},
                            "by_hour": sorted(c.total.by_hour.items()),
                            "by_minute": sorted((c.total.by_minute or {}).items()),
                            "tables": sorted((str(k), v) for k, v in c.total.tables.items()),
                            "statements": sorted((str(k), str(v)) for k, v in c.total.statements.items())}
              for c in board.candidates.values() if c.total is not None}
    out.write_text(json.dumps(totals, sort_keys=True))

if __name__ == "__main__":
    main()
