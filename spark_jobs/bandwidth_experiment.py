"""Spark job: for each slave of a topology, the events and bytes master-side filtering (its rules
and the topology's master policy) would send compared with everything, over many binlog files in parallel (chunks cut on transaction
boundaries; spark_jobs.tasks.bandwidth does the counting and joins heartbeat stretches).

    spark-submit spark_jobs/bandwidth_experiment.py --binlogs DIR --topology FILE [--out DIR]
        [--format csv|parquet]

Writes `bandwidth.csv` (or `.parquet`) with one row per slave, and `bandwidth.png`.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

# spark-submit runs this file as a script; no path is added here (split_by_schema.py says why).
from dumpfilter.spark_jobs.tasks.bandwidth import count_chunk  # noqa: E402
from dumpfilter.spark_jobs.tasks.counts import (  # noqa: E402
    ChunkCounts, SlaveCounts, merge_counts, merge_hours, merge_statements, merge_tables,
)
from dumpfilter.spark_jobs.tasks.chunks import DEFAULT_CHUNK_BYTES, Chunk, input_files, plan_chunks  # noqa: E402
from dumpfilter.spark_jobs.tasks.statement_tables import (  # noqa: E402
    FRAMING, OTHER, UNATTRIBUTED, StatementGroup, Statements, TableName, Tables,
)

if TYPE_CHECKING:
    from dumpfilter.errors import CutEventError
    from pyspark.sql import SparkSession

    from dumpfilter.rules.gate import Gate
    from dumpfilter.topology import SlaveSpec, Topology

COLUMNS = ["slave", "server_id", "filter_semantics", "skip_policy", "rules", "events_all", "bytes_all",
           "events_sent", "bytes_sent", "saving_bytes", "saving_pct", "kept_events", "kept_bytes", "heartbeats",
           "heartbeat_bytes", "placeholders", "placeholder_bytes", "empty_transactions",
           "empty_transaction_bytes", "transactions_kept", "transactions_partial", "transactions_skipped",
           "events_skipped", "bytes_skipped"]


# Told the bytes of binlog counted so far, as the counting goes (a command's progress bar).
Counted = Callable[[int], None]


def count_parts_local(chunks: Iterable[Chunk], slaves: Sequence[SlaveSpec], gates: Sequence[Gate | None] | None = None,
                      *, counted: Counted | None = None) -> list[ChunkCounts]:
    """Every slave's counts per chunk, in this process (`gates`: each slave's master-policy gate,
    `dumpfilter.topology.slave_gates`; None: none); `counted` told after each chunk."""
    parts: list[ChunkCounts] = []
    done = 0
    for chunk in chunks:
        parts += count_chunk(chunk, slaves, gates)
        if counted is not None:
            done += chunk.size
            counted(done)
    return parts


def count_parts_spark(spark: SparkSession, chunks: Sequence[Chunk], slaves: Sequence[SlaveSpec],
                      gates: Sequence[Gate | None] | None = None, *, counted: Counted | None = None) -> list[ChunkCounts]:
    """The same, the chunks dealt onto a Spark task per core (`balanced_groups`); only the counts
    travel to the driver. `counted` is told the bytes of the tasks done (`SparkCounted`)."""
    from dumpfilter.spark_jobs.split_by_schema import balanced_groups

    if not chunks:
        return []
    sc = spark.sparkContext
    groups = balanced_groups(list(chunks), [c.size for c in chunks], sc.defaultParallelism)

    def count(parts: Iterable[list[Chunk]]) -> Iterator[ChunkCounts]:
        for part in parts:
            for chunk in part:
                yield from count_chunk(chunk, slaves, gates)

    job = sc.parallelize(groups, len(groups)).mapPartitions(count)
    if counted is None:
        return job.collect()
    sizes = [sum(c.size for c in group) for group in groups]
    with SparkCounted(sc, sizes, counted):
        return job.collect()


class SparkCounted:
    """While a job of `len(sizes)` tasks runs (a job group of its own), a thread looks at its tasks
    every POLL seconds and tells `counted` the bytes of those done, as if each were of the mean
    size (Spark says how many are done, not which)."""

    POLL = 0.5

    def __init__(self, sc: Any, sizes: list[int], counted: Counted) -> None:
        import threading
        import uuid

        self.sc, self.total, self.tasks, self.counted = sc, sum(sizes), len(sizes), counted
        self.group = f"dumpfilter-count-{uuid.uuid4().hex}"
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="experiment-progress", daemon=True)

    def __enter__(self) -> SparkCounted:
        self.sc.setJobGroup(self.group, "dumpfilter experiment: counting")
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        if exc[0] is None:
            self.counted(self.total)

    def _watch(self) -> None:
        tracker = self.sc.statusTracker()
        while not self.done.wait(self.POLL):
            try:
                finished = 0
                for job in tracker.getJobIdsForGroup(self.group):
                    info = tracker.getJobInfo(job)
                    for stage in info.stageIds if info else ():
                        stage_info = tracker.getStageInfo(stage)
                        finished += stage_info.numCompletedTasks if stage_info else 0
            except Exception:  # noqa: BLE001 - the JVM going (an interrupt): nothing more to show
                return
            self.counted(self.total * min(finished, self.tasks) // max(self.tasks, 1))


HOUR_COLUMNS = ["slave", "hour_utc", "hour_epoch", "bytes_all", "bytes_sent", "from_epoch", "to_epoch"]
MINUTE_COLUMNS = ["slave", "minute_utc", "minute_epoch", "bytes_all", "bytes_sent", "from_epoch", "to_epoch"]
# A binlog whose time spans less than this (seconds) is charted by minutes (bandwidth_by_minute
# beside bandwidth_by_hour): by hours, a run within one hour was one flat step per slave.
MINUTES_BELOW = 2 * 3600
TABLE_COLUMNS = ["slave", "table", "bytes_all", "bytes_payload", "bytes_envelope", "bytes_sent"]
REST = "(framing of transactions that write no table, control events, skip-policy events)"


def hour_rows(names: list[str], hours: dict[str, dict[int, list[int]]],
              span: tuple[int, int] | None = None, width: int = 3600) -> list[dict[str, Any]]:
    """One row per slave and hour (`width` 60: minute) of binlog time: what it reads and is sent
    in that hour, and the first and last second of the hour the binlog holds (`span`: its first
    and last event time, binlogs.time_span; the whole hour without it): the chart's x axis."""
    import datetime as dt

    unit, shown = ("hour", "%Y-%m-%d %H:00") if width == 3600 else ("minute", "%Y-%m-%d %H:%M")
    first, last = span or (None, None)
    return [{"slave": name, f"{unit}_utc": dt.datetime.fromtimestamp(hour, dt.UTC).strftime(shown),
             f"{unit}_epoch": hour, "bytes_all": read, "bytes_sent": sent,
             "from_epoch": hour if first is None or first < hour else min(first, hour + width - 1),
             "to_epoch": hour + width - 1 if last is None or last > hour + width - 1 else max(last, hour)}
            for name in names for hour, (read, sent) in hours[name].items()]


def table_rows(topology: Topology, gates: Sequence[Gate | None], totals: list[SlaveCounts], tables: Tables,
               statements: Statements) -> list[dict[str, Any]]:
    """One row per slave and table, the largest first: the bytes in the binlog that write the
    table, and those sent to the slave; then UNATTRIBUTED (the statements that update no table
    the parser names: SET, database statements, what it cannot parse) and one row for the rest
    (REST: the transactions' framing, control events, what the slave's skip policy adds), so
    that a slave's rows add up to its bytes sent.

    A table's bytes (`bytes_all` = `bytes_payload` + `bytes_envelope`): its payload, its Table_map
    and Rows events (sent if the slave's rules, under its gate, keep the table) and each statement
    that updates it, with its context events (INTVAR, RAND, USER_VAR): sent if the rules apply the
    statement (as rpl_filter.cc decides it: by the default database under database rules, so
    `USE logs; UPDATE crm.t` is not sent to a slave with replicate-do-db=crm); and its envelope,
    its share of the GTID, BEGIN, annotations and XID/COMMIT of the transactions that write it
    (sent only because of those writes: `statement_tables.share_envelope`), sent where the write
    that brought it is. A statement that updates several tables (a multi-table UPDATE or DELETE,
    RENAME TABLE, DROP TABLE t1, t2), and a transaction's envelope, are split evenly between them,
    the bytes a division leaves going to the first. Statements are decided per group (default
    database, kind, updated tables: `counts.merge_statements`) by one statement of the group,
    as the master decides a statement key once. The REST row's bytes: the control events (as
    `bytes_payload`) and the envelopes of the transactions that write no table (`bytes_envelope`);
    its `bytes_sent` is the rest of what the slave is sent (with what its skip policy adds)."""
    from dumpfilter.rules.decider import gated
    from dumpfilter.rules.evaluate import RuleEngine
    from dumpfilter.rules.statement_info import StatementInfo

    all_bytes: dict[TableName, int] = {t: b for t, b in tables.items() if t not in (FRAMING, OTHER) and len(t) == 2}
    # (ENVELOPE, table, group)
    envelopes: dict[tuple[str, TableName, StatementGroup | None], int] = {t: b for t, b in tables.items() if len(t) == 3}
    envelope_of: dict[TableName, int] = {}
    for (_, t, _), b in envelopes.items():
        envelope_of[t] = envelope_of.get(t, 0) + b
    payload_of = dict(all_bytes)
    shares: list[tuple[StatementGroup, str, int, list[tuple[TableName, int]]]] = []  # group, text, bytes, split
    unattributed = 0
    for group, (size, sql) in statements.items():
        updated = group[2]
        if not updated:
            shares.append((group, sql, size, []))
            unattributed += size
            continue
        each, left = divmod(size, len(updated))
        split = [(t, each + (left if k == 0 else 0)) for k, t in enumerate(updated)]
        shares.append((group, sql, size, split))
        for t, b in split:
            payload_of[t] = payload_of.get(t, 0) + b
    for t in envelope_of.keys() | payload_of.keys():
        all_bytes[t] = payload_of.get(t, 0) + envelope_of.get(t, 0)
    named = sorted(all_bytes.items(), key=lambda tb: (-tb[1], tb[0]))
    rest_all = tables.get(FRAMING, 0) + tables.get(OTHER, 0)
    rows = []
    # The groups each rule set and gate applies, decided once for the slaves that share them.
    applies: dict[tuple[str, str, Gate | None], list[bool]] = {}
    parses: dict[tuple[str, str], StatementInfo] = {}  # each statement parsed once for every rule set
    for slave, gate, counts in zip(topology.slaves, gates, totals):
        engine = RuleEngine(slave.rules, slave.settings)
        decider = gated(engine, gate)
        sent_by: dict[TableName, int] = {t: b for t, b in tables.items()
                                         if t not in (FRAMING, OTHER) and len(t) == 2 and decider.table_kept(*t)}
        sent_unattributed = 0
        applied: set[StatementGroup] = set()
        same = (repr(slave.rules), repr(slave.settings), gate)
        if same not in applies:
            applies[same] = [decider.decide_statement_key(sql, group[0] or None, parses).apply
                             for group, sql, _, _ in shares]
        for (group, _, size, split), apply in zip(shares, applies[same]):
            if not apply:
                continue
            applied.add(group)
            if not split:
                sent_unattributed += size
            for t, b in split:
                sent_by[t] = sent_by.get(t, 0) + b
        for (_, t, brought_by), b in envelopes.items():  # sent where the write that brought it is
            if (brought_by in applied) if brought_by is not None else decider.table_kept(*t):
                sent_by[t] = sent_by.get(t, 0) + b
        sent_tables = sum(sent_by.values()) + sent_unattributed
        for (db, table), size in named:
            rows.append({"slave": slave.name, "table": f"{db}.{table}", "bytes_all": size,
                         "bytes_payload": payload_of.get((db, table), 0),
                         "bytes_envelope": envelope_of.get((db, table), 0),
                         "bytes_sent": sent_by.get((db, table), 0)})
        if statements:
            rows.append({"slave": slave.name, "table": UNATTRIBUTED[1], "bytes_all": unattributed,
                         "bytes_payload": unattributed, "bytes_envelope": 0, "bytes_sent": sent_unattributed})
        rows.append({"slave": slave.name, "table": REST, "bytes_all": rest_all,
                     "bytes_payload": tables.get(OTHER, 0), "bytes_envelope": tables.get(FRAMING, 0),
                     "bytes_sent": counts.bytes_sent - sent_tables})
    return rows


def rows_for(topology: Topology, totals: list[SlaveCounts]) -> list[dict[str, Any]]:
    rows = (counts.as_row() | {"server_id": slave.server_id, "filter_semantics": slave.settings.semantics,
                               "skip_policy": slave.skip_policy, "rules": "; ".join(slave.rule_text)}
            for slave, counts in zip(topology.slaves, totals))
    return [{key: row[key] for key in COLUMNS} for row in rows]


def write_report(rows: list[dict[str, Any]], out: Path, fmt: str = "csv", source: str = "", charts: bool = True) -> list[Path]:
    from dumpfilter.charts import policy_chart

    out.mkdir(parents=True, exist_ok=True)
    table_path = _write_table(rows, COLUMNS, out / "bandwidth", fmt)
    if not charts:
        return [table_path]
    chart = out / "bandwidth.png"
    binlog_bytes = max((row["bytes_all"] for row in rows), default=0)
    # One bar per slave: the bytes it is sent (the table's `bytes_sent`), the skip policy's own
    # events stacked over the rest; its label is the table's saving.
    slaves = [{"slave": row["slave"], "bytes_all": row["bytes_all"],
               "bars": [{"policy": row["skip_policy"], "sent": row["bytes_sent"], "own": True,
                         "overhead": row["heartbeat_bytes"] + row["placeholder_bytes"]
                         + row["empty_transaction_bytes"]}]} for row in rows]
    policy_chart(slaves, chart, title=f"Bytes sent per slave with master-side filtering: {source or 'binlogs'} "
                                      f"({binlog_bytes / 1e6:.2f} MB of binlog events)")
    return [table_path, chart]


MAX_CANDIDATES = 64
LINT_MAX_MB = 1024  # one compiled scan for every candidate (binlogs.lint_scan)
# The ranges of --chunk-bytes (0: whole files) and --lint-max-mb, the one home of both: this job's
# parser checks them, and `dumpfilter experiment` reads the same options in them (cli.options types).
CHUNK_BYTES_RANGE = (0, 1 << 40)
LINT_MAX_MB_RANGE = (0, 1 << 20)
CANDIDATE_COLUMNS = ["rank", "candidate", "skip_policy", "rules", "bytes_all", "bytes_sent", "bytes_saved",
                     "saving_pct", "events_sent", "lint", "diverges"]


def run_experiment(binlogs: str | Path | list[str | os.PathLike[str]], topology: Topology, out: Path, *,
                   spark: SparkSession | None = None, fmt: str = "csv",
                   chunk_bytes: int | None = DEFAULT_CHUNK_BYTES, candidates: Topology | None = None,
                   lint_max_mb: float = LINT_MAX_MB,
                   ranking: list[dict[str, Any]] | None = None,
                   charts: bool = True, progress: Callable[[int, int], None] | None = None,
                   cuts: list[CutEventError] | None = None) -> tuple[list[dict[str, Any]], list[Path]]:
    """Count (with Spark when a session is given) and write the report; returns (rows, paths). Each
    slave is bounded by the topology's master policy (`master.policy`), as the master bounds it.
    `candidates` (a Topology whose slaves are candidate rule sets, at most MAX_CANDIDATES) are
    counted in the same pass and ranked by bytes saved (candidates.csv), each with lint's verdict
    when the binlog is at most `lint_max_mb` MB; `ranking`, a list, receives the ranked rows.
    `charts` False: the tables only (matplotlib takes longer to draw than the counting takes).
    `progress` is told (bytes counted, bytes in all) as the counting goes. `cuts`, a list: a file
    cut inside an event (codec.reader.truncated) is counted up to the cut, no later file is, the
    report is written and the cut put in the list (the caller tells it); without it, the cut is
    raised before any report is written."""
    from dumpfilter.binlogs.time_span import time_span
    from dumpfilter.errors import InvalidArgumentError
    from dumpfilter.topology import slave_gates

    gates = slave_gates(topology)
    files = input_files([binlogs] if isinstance(binlogs, (str, Path)) else binlogs)
    # Spark with the default chunk size: raised to a fair share of the input per core (a series
    # of many files is read whole, no cut looked for); an explicit size is used as given.
    workers = spark.sparkContext.defaultParallelism if spark is not None and chunk_bytes == DEFAULT_CHUNK_BYTES else None
    chunks = plan_chunks(files, chunk_bytes, workers=workers)
    slaves, names = list(topology.slaves), [s.name for s in topology.slaves]
    extra = list(candidates.slaves) if candidates is not None else []
    if len(extra) > MAX_CANDIDATES:
        raise InvalidArgumentError(f"--candidates: {len(extra)} rule sets; at most {MAX_CANDIDATES} are counted in one pass")
    clash = sorted(set(names) & {c.name for c in extra})
    if clash:
        raise InvalidArgumentError(f"--candidates: {clash[0]!r} names a slave of the topology too; name it apart")
    every, every_gates = slaves + extra, gates + (slave_gates(candidates) if candidates is not None and extra else [])
    counted: Counted | None = None
    if progress is not None:
        total = sum(c.size for c in chunks)
        progress(0, total)

        def counted(done: int) -> None:
            progress(done, total)

    if spark is None:
        parts = count_parts_local(chunks, every, every_gates, counted=counted)
    else:
        parts = count_parts_spark(spark, chunks, every, every_gates, counted=counted)
    cut = min((p for p in parts if p.cut is not None), key=lambda p: p.file_index, default=None)
    if cut is not None:
        assert cut.cut is not None
        if cuts is None:
            raise cut.cut
        cuts.append(cut.cut)
        parts = [p for p in parts if p.file_index <= cut.file_index]  # nothing after the cut is read
        files = files[:cut.file_index + 1]
    totals = merge_counts(parts, [s.name for s in every])
    rows = rows_for(topology, totals[:len(slaves)])
    source = str(binlogs) if isinstance(binlogs, (str, Path)) else f"{len(files)} binlog file(s)"
    out = Path(out)
    paths = write_report(rows, out, fmt, source=f"{source}, {len(files)} file(s)", charts=charts)
    mine = [p for p in parts if p.counts.slave in set(names)]
    # The binlog's last second, as the counting read it (the last file's latest event time): no
    # second read of that file for it.
    last = max((p.last_time for p in parts if p.file_index == len(files) - 1), default=0)
    span = time_span(files, last or None)
    minutes = merge_hours(mine, names, minutes=True) if span and span[1] - span[0] < MINUTES_BELOW else None
    paths += write_breakdowns(hour_rows(names, merge_hours(mine, names) or {}, span),
                              table_rows(topology, gates, totals[:len(slaves)], merge_tables(parts),
                                         merge_statements(parts)), out, fmt,
                              charts, minutes=hour_rows(names, minutes, span, 60) if minutes else None)
    if extra:
        ranked = candidate_rows(extra, totals[len(slaves):], files, lint_max_mb, stop_at_cut=cut is not None)
        paths.append(_write_table(ranked, CANDIDATE_COLUMNS, out / "candidates", fmt))
        if ranking is not None:
            ranking.extend(ranked)
    return rows, paths


def candidate_rows(candidates: Sequence[SlaveSpec], totals: list[SlaveCounts], files: Sequence[Path],
                   lint_max_mb: float, stop_at_cut: bool = False) -> list[dict[str, Any]]:
    """The candidates, the one that saves the most bytes first, each with lint's verdict: would a
    replica with these rules stop (its first break), within `lint_max_mb` MB of binlog, and how many
    writes it would silently get wrong (`diverges`: rules.lint_divergence, over the whole binlog as
    `dumpfilter lint` counts them, a candidate that also stops included; None when lint did not run).
    A clean candidate (no stop, no divergence) ranks before every other, whatever they save; one a
    replica stops for ranks next (its saving lasts to the stop, and a stop is loud), then those that
    diverge (their bytes are saved by losing writes), those that do both last. Every candidate is
    linted over one compiled scan (binlogs.lint.lint_many); past the bound it says so rather than
    take minutes where most units need Python (a DDL-dense binlog)."""
    from dumpfilter.binlogs.lint import lint_many

    size_mb = sum(Path(f).stat().st_size for f in files) / 1e6
    diverges: list[int | None] = [None] * len(candidates)
    stops = [False] * len(candidates)
    if size_mb > lint_max_mb:
        verdicts = [f"not run: {size_mb:.0f} MB of binlog > --lint-max-mb {lint_max_mb:g}"] * len(candidates)
    else:
        found = lint_many(files, [(spec.rules, spec.settings) for spec in candidates], first_break=True,
                          stop_at_cut=stop_at_cut)
        diverges = [breaks.divergence.writes for breaks in found]
        stops = [bool(breaks) for breaks in found]
        # candidates.csv's lint column: no break, or the first break's line; and the writes it diverges by
        verdicts = [("no break" if not breaks else f"a replica stops: {str(breaks[0]).splitlines()[0]}")
                    + (f"; diverges: {n} writes" if n else "") for breaks, n in zip(found, diverges)]
    return rank_candidates(candidates, totals, list(zip(verdicts, diverges, stops)))


def rank_candidates(candidates: Sequence[SlaveSpec], totals: Sequence[SlaveCounts],
                    lint: Sequence[tuple[str, int | None, bool]]) -> list[dict[str, Any]]:
    """candidates.csv's rows, ranked (see `candidate_rows`); `lint`: per candidate (verdict, writes it
    diverges by or None, whether a replica stops)."""
    rows = []
    for spec, counts, (verdict, n, stop) in zip(candidates, totals, lint):
        row = counts.as_row()
        rows.append({"candidate": spec.name, "skip_policy": spec.skip_policy, "rules": "; ".join(spec.rule_text),
                     "bytes_all": row["bytes_all"], "bytes_sent": row["bytes_sent"],
                     "bytes_saved": row["saving_bytes"], "saving_pct": row["saving_pct"],
                     "events_sent": row["events_sent"], "lint": verdict, "diverges": n, "stops": stop})
    rows.sort(key=lambda r: (bool(r["diverges"]), r["stops"], -r["bytes_saved"], r["candidate"]))
    return [{key: rank if key == "rank" else row[key] for key in CANDIDATE_COLUMNS} for rank, row in enumerate(rows, 1)]


def _write_table(rows: Sequence[Mapping[str, Any]], columns: list[str], path: Path, fmt: str) -> Path:
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = path.with_suffix(".parquet")
        pq.write_table(pa.Table.from_pylist(rows), path)
        return path
    path = path.with_suffix(".csv")
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_breakdowns(hours: list[dict[str, Any]], tables: list[dict[str, Any]], out: Path, fmt: str = "csv",
                     charts: bool = True, minutes: list[dict[str, Any]] | None = None) -> list[Path]:
    """bandwidth_by_hour and bandwidth_by_table (CSV or Parquet), and bandwidth_by_hour.png: MB
    sent per hour of binlog time, per slave (the eight that are sent the most). With `minutes`
    (a short run: MINUTES_BELOW), bandwidth_by_minute too, and the chart drawn by minutes."""
    from dumpfilter.charts import hourly_chart

    paths = [_write_table(hours, HOUR_COLUMNS, out / "bandwidth_by_hour", fmt),
             _write_table(tables, TABLE_COLUMNS, out / "bandwidth_by_table", fmt)]
    if minutes is not None:
        paths.append(_write_table(minutes, MINUTE_COLUMNS, out / "bandwidth_by_minute", fmt))
    if not charts:
        return paths
    chart = out / "bandwidth_by_hour.png"
    if minutes is not None:
        hourly_chart(minutes, chart, title="MB sent per minute of binlog time, per slave", bucket=60)
    else:
        hourly_chart(hours, chart, title="MB sent per hour of binlog time, per slave")
    paths.append(chart)
    return paths


def print_table(rows: list[dict[str, Any]], out: TextIO | None = None) -> None:
    print(f"{'slave':<16} {'policy':<18} {'MB all':>9} {'MB sent':>9} {'saving':>8} {'events sent':>12}", file=out)
    for row in rows:
        print(f"{row['slave']:<16} {row['skip_policy']:<18} {row['bytes_all'] / 1e6:>9.2f} "
              f"{row['bytes_sent'] / 1e6:>9.2f} {row['saving_pct']:>7.1f}% {row['events_sent']:>12}", file=out)


def chunk_bytes_for(given: int | None, *, spark: bool) -> int | None:
    """--chunk-bytes as given (0: whole files), else the default for where the counting runs."""
    if given is not None:
        return given or None
    return DEFAULT_CHUNK_BYTES if spark else None


def print_ranking(ranked: list[dict[str, Any]], out: TextIO | None = None) -> None:
    print(f"{'rank':>4} {'candidate':<16} {'MB sent':>9} {'saving':>8}  lint", file=out)
    for row in ranked:
        print(f"{row['rank']:>4} {row['candidate']:<16} {row['bytes_sent'] / 1e6:>9.2f} {row['saving_pct']:>7.1f}%  "
              f"{row['lint']}", file=out)


def add_experiment_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--binlogs", required=True, metavar="DIR", help="binlog directory (or one file)")
    parser.add_argument("--topology", required=True, metavar="FILE", help="topology TOML (dumpfilter/topology.py)")
    parser.add_argument("--out", default="experiment-out", metavar="DIR", help="report directory (default %(default)s)")
    parser.add_argument("--format", dest="fmt", choices=("csv", "parquet"), default="csv")
    parser.add_argument("--chunk-bytes", type=_within(int, CHUNK_BYTES_RANGE, "a whole number of bytes"), default=None,
                        metavar="BYTES",
                        help=f"read files larger than this in chunks (0: whole files; default {DEFAULT_CHUNK_BYTES >> 20} MB "
                             "on Spark, raised to the input's size over 4 tasks per core; whole files with "
                             "--no-spark: one process gains nothing from cuts)")
    parser.add_argument("--candidates", metavar="FILE",
                        help=f"candidate rule sets (a topology file: each [[slaves]] entry one candidate, its server_id optional, at most "
                             f"{MAX_CANDIDATES}) counted in the same pass and ranked by bytes saved in "
                             "candidates.csv, each with lint's verdict")
    parser.add_argument("--no-charts", dest="charts", action="store_false",
                        help="write the tables only, no PNG (a scripted run: drawing takes longer than counting)")
    parser.add_argument("--lint-max-mb", type=_within(float, LINT_MAX_MB_RANGE, "a number of MiB"), default=LINT_MAX_MB,
                        metavar="MB",
                        help="lint the candidates (all in one compiled scan) only over a binlog of at most this "
                             "size (default %(default)s)")


def _within(kind: Callable[[str], float], bounds: tuple[int, int], what: str) -> Callable[[str], Any]:
    """An argparse type for the spark-submit entry: `kind(text)` within `bounds` (NaN never is): a
    negative --chunk-bytes looped forever."""
    def parse(text: str) -> Any:
        try:
            value: float | None = kind(text)
        except (ValueError, OverflowError):
            value = None
        if value is None or not bounds[0] <= value <= bounds[1]:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} from {bounds[0]} to {bounds[1]}")
        return value

    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, as `dumpfilter experiment`'s (no usage block before it); --help prints the usage."""
        self.exit(2, f"{self.prog}: error: {message.replace(chr(10), ' ')}\n")


def build_parser() -> argparse.ArgumentParser:
    """The spark-submit job's own options: `dumpfilter experiment`'s, and --master."""
    parser = _Parser(prog="bandwidth_experiment", description=__doc__.split("\n\n")[0])
    add_experiment_arguments(parser)
    parser.add_argument("--master", dest="spark_master", default=None, help="Spark master URL")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from dumpfilter.errors import DumpFilterError
    from dumpfilter.topology import load_candidates, load_topology
    from dumpfilter.spark_jobs.session import get_session

    try:
        topology = load_topology(args.topology)
        candidates = load_candidates(args.candidates) if args.candidates else None
        spark = get_session("dumpfilter-experiment", args.spark_master)
        rows, paths = run_experiment(args.binlogs, topology, Path(args.out), spark=spark, fmt=args.fmt,
                                     chunk_bytes=chunk_bytes_for(args.chunk_bytes, spark=True), candidates=candidates,
                                     lint_max_mb=args.lint_max_mb, charts=args.charts)
    except DumpFilterError as exc:
        print(f"bandwidth_experiment: error: {exc}", file=sys.stderr)
        return 2
    print_table(rows)
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
