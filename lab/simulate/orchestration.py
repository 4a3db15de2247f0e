"""Orchestration of `dumpfilter simulate`: prepare the binlog, start the master on a loopback
port, run every stream (each topology slave with its own skip policy, the same slave with the
other skip policies the experiment asks for, and one rule-less slave that receives everything),
then build the report and, with verify, check the differential property per slave."""

from __future__ import annotations

import itertools
import logging
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from dumpfilter.binlogs.clock import BinlogClock, timed
from dumpfilter.charts import saved_percent
from dumpfilter.errors import DumpFilterError
from dumpfilter.progress import byte_progress
from dumpfilter.topology import MasterSource, Topology, TopologyError, parse_topology, slave_gates
from dumpfilter.lab.simulate.lint_process import LintProcess
from dumpfilter.lab.simulate.real_replicas import replica_verdict
from dumpfilter.lab.simulate.report import write_report
from dumpfilter.lab.simulate.streams import EVERYTHING, MAIN, POLICY, WORKERS, StreamJob, StreamResult, run_streams
from dumpfilter.lab.simulate.source import PreparedSource, prepare_source
from dumpfilter.lab.simulate.equivalence import SlaveVerification, verify_slaves
from dumpfilter.skip_policy import DEFAULT as DEFAULT_SKIP_POLICY

if TYPE_CHECKING:
    from dumpfilter.lab.simulate.lint_process import LintKey

DEFAULT_TOPOLOGY = "default_topology.toml"
DEFAULT_LISTEN = "127.0.0.1:0"  # the master's gRPC address: loopback, a free port
log = logging.getLogger("dumpfilter.lab.simulate")
SIMULATE_TRAIL_BYTES = 32 << 20  # the in-process master's pages kept behind its streams (`run_streams`)


def default_topology_text() -> str:
    return resources.files("dumpfilter.data").joinpath(DEFAULT_TOPOLOGY).read_text(encoding="utf-8")


def load_default_topology() -> Topology:
    return parse_topology(default_topology_text(), f"<built-in {DEFAULT_TOPOLOGY}>")


@dataclass
class SimulationResult:
    report: dict[str, Any]
    paths: list[Path] = field(default_factory=list)
    verifications: list[SlaveVerification] = field(default_factory=list)
    streams: list[StreamResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every stream verified, and every real replica ended as lint and its own stream say."""
        return all(v.ok for v in self.verifications) and not self.disagreements

    @property
    def disagreements(self) -> list[str]:
        return [row["slave"] for row in self.report["slaves"]
                if row.get("real_replica_verdict") and not row["real_replica_verdict"]["ok"]]


def _free_ids(used: set[int]) -> Iterator[int]:
    """server_ids no slave of the topology has (a replica's are 1 to 2^32-1, MySQL's server_id
    range): past the highest, then from 1 (a slave at 4294967295 left nothing past it: the search
    never ended)."""
    top = max(used)
    return (k for k in itertools.chain(range(top + 1, 1 << 32), range(1, top)) if k not in used)


def plan_streams(topology: Topology, relay_root: Path, *, everything: bool) -> list[StreamJob]:
    used = {s.server_id for s in topology.slaves}
    ids = _free_ids(used)
    plans = []
    if everything:
        plans.append(StreamJob("(everything)", EVERYTHING, next(ids), DEFAULT_SKIP_POLICY, relay_root / "_everything"))
    for i, spec in enumerate(topology.slaves):
        plans.append(StreamJob(spec.name, MAIN, spec.server_id, spec.skip_policy, relay_root / f"{i}-main", spec))
        for policy in topology.experiment.skip_policies:
            if policy != spec.skip_policy:
                plans.append(StreamJob(spec.name, POLICY, next(ids), policy, relay_root / f"{i}-{policy}", spec))
    return plans


def run_simulation(topology: Topology | None, out: Path | None = None, *, verify: bool = False,
                   mariadb: bool = False, console: Console | None = None, progress: bool = True,
                   keep_work: Path | None = None, listen: str = DEFAULT_LISTEN) -> SimulationResult:
    """Run the whole simulation; writes report.json/csv/png, timeline.png and report.html under `out` when given. `keep_work`
    keeps the binlog and relay logs in that directory instead of a temporary one. `listen`: the
    master's gRPC address (HOST:PORT; port 0, the default, picks a free port)."""
    console = console or Console()
    topology = topology or load_default_topology()
    if topology.unknown_master_keys:
        key, where = topology.unknown_master_keys[0]
        raise TopologyError(f"{where}: master.{key}: unknown key (expected binlogs, files, workload, mariadb, policy)")
    source = topology.source
    if mariadb:
        options = source.options if source is not None and source.kind == "mariadb" else {}
        source = MasterSource("mariadb", options=options, policy=source.policy if source else None)
    if keep_work is not None:
        keep_work.mkdir(parents=True, exist_ok=True)
        work_dir, temporary = keep_work, False
    else:
        work_dir, temporary = Path(tempfile.mkdtemp(prefix="dumpfilter-simulate-")), True
    linting = None
    try:
        prepared = prepare_source(source, work_dir, log=log.info)
        # The bytes by table first: their count maps the binlog, and so does the master while it
        # serves (a mapping that lasts until it is collected): one after the other, never both at once.
        by_table = bytes_by_table(topology, prepared.files)
        # lint while the streams run, in a process of its own, once per distinct rule set
        linting = LintProcess(prepared.files, [(spec.rules, spec.settings, spec.replica_schema) for spec in topology.slaves])
        results, served = _run(topology, prepared, work_dir / "relay", verify, console, progress, listen)
        failed = [r for r in results if r.error]
        if failed:
            raise DumpFilterError("; ".join(f"slave {r.plan.label!r} ({r.plan.skip_policy}): {r.error}"
                                            for r in failed))
        started = time.perf_counter()
        verifications = _verify(topology, results) if verify else []
        verified = time.perf_counter() - started if verify else None
        lints = linting.results()
        report = build_report(topology, prepared, results, verifications, lints, served)
        report["master"]["verify_seconds"] = None if verified is None else round(verified, 3)
        report["by_table"] = by_table
        paths = write_report(report, out) if out is not None else []
        return SimulationResult(report, paths, verifications, results)
    finally:
        if linting is not None:
            linting.close()
        if temporary:
            _remove_work(work_dir)


def _remove_work(work_dir: Path) -> None:
    """The run's temporary directory removed, never raising over the run's own outcome. A removal
    that fails (a file created in a directory while it is emptied: ENOTEMPTY; or gone before it is
    unlinked) is tried again; what still stays is told in one line with its path. (CI once saw a
    Ctrl-C'd simulation leave its work directory whole, the failed removal's error hidden behind
    "interrupted".)"""
    error: OSError | None = None
    for attempt in range(5):
        try:
            shutil.rmtree(work_dir)
            return
        except FileNotFoundError:
            if not work_dir.exists():
                return
        except OSError as exc:
            error = exc
        time.sleep(0.05 * (attempt + 1))
    log.warning(f"the work directory {work_dir} could not be removed: {error}")


def _run(topology: Topology, prepared: PreparedSource, relay_root: Path, verify: bool, console: Console,
         show_progress: bool, listen: str = DEFAULT_LISTEN) -> tuple[list[StreamResult], float]:
    """Every stream's result, and the seconds the master took to serve them all."""
    from dumpfilter.master.serve.grpc_server import create_server

    if relay_root.exists():
        shutil.rmtree(relay_root)
    plans = plan_streams(topology, relay_root, everything=topology.experiment.master_vs_slave or verify)
    policy_path = topology.source.policy if topology.source is not None else None  # (checked: slave_gates)
    total = prepared.total_bytes
    offsets = prepared.offsets()
    # lint_bytes=0: the master's Register-time lint would lint every rule set a second time.
    # trail_bytes: a segment's pages kept for the streams still behind it (master.read.segments'
    # TRAIL_BYTES) are the binlog's page-cache pages, counted in this process's RSS while mapped;
    # its streams start together, in this one process, and one behind faults a handed-back page
    # in from the page cache (no read). 256 MB of them was half of simulate's peak RSS on a 342 MB
    # binlog (issue #60: under 500 MB).
    master, port = create_server(prepared.directory, listen, policy=policy_path, lint_bytes=0,
                                 trail_bytes=SIMULATE_TRAIL_BYTES)
    address = f"{listen.rpartition(':')[0]}:{port}"
    try:
        with byte_progress(console, show=show_progress) as progress:
            tasks = {plan: progress.add_task(plan.label if plan.role == MAIN else "everything (no filter)", total=total)
                     for plan in plans if plan.role != POLICY}
            variants = [p for p in plans if p.role == POLICY]
            variant_task = progress.add_task(f"{len(variants)} skip-policy variants", total=total * len(variants)) \
                if variants else None
            variant_done: dict[StreamJob, int] = {}

            def on_progress(plan: StreamJob, file: str, pos: int) -> None:
                covered = offsets.get(file, 0) + pos
                if plan.role == POLICY:
                    assert variant_task is not None  # (a POLICY plan is one of the variants)
                    variant_done[plan] = covered
                    progress.update(variant_task, completed=sum(variant_done.values()))
                else:
                    progress.update(tasks[plan], completed=covered)

            log.info(f"master on {address}; {len(plans)} slave streams over gRPC")
            started = time.perf_counter()
            results = run_streams(address, plans, on_progress=on_progress, first_file=next(iter(offsets), ""),
                                  binlog_bytes=total)
            served = time.perf_counter() - started
            for task in tasks.values():
                progress.update(task, completed=total)
            if variant_task is not None:
                progress.update(variant_task, completed=total * len(variants))
        if any(spec.kind == "mariadb" for spec in topology.slaves):
            from dumpfilter.lab.simulate.real_replicas import run_real_replicas

            real = run_real_replicas(master, list(topology.slaves), log=log.info)
            for result in results:
                if result.plan.role == MAIN and result.plan.spec is not None:
                    result.real_replica = real.get(result.plan.spec.name)
    finally:
        master.stop(grace=1.0)
    return results, served


def _verify(topology: Topology, results: list[StreamResult]) -> list[SlaveVerification]:
    full = next(r for r in results if r.plan.role == EVERYTHING)
    checks = []
    # each slave's gate as the master derives it, and experiment (topology.slave_gates)
    for spec, gate in zip(topology.slaves, slave_gates(topology)):
        mine = [r for r in results if r.plan.spec is spec]
        received = {r.plan.skip_policy: r.plan.relay_dir for r in mine}
        dropped = {r.plan.skip_policy: r.counters.get("check_disagreements", 0) for r in mine}
        checks.append((spec, received, dropped, gate))
    return verify_slaves(full.plan.relay_dir, checks)  # one pass over the full stream for every slave


def build_report(topology: Topology, prepared: PreparedSource, results: list[StreamResult],
                 verifications: list[SlaveVerification], lints: dict[LintKey, dict[str, Any]] | None = None,
                 served_seconds: float = 0.0) -> dict[str, Any]:
    """`lints`: `dumpfilter lint`'s prediction per (rules, settings, replica_schema) (lint_process)."""
    everything = next((r for r in results if r.plan.role == EVERYTHING), None)
    checks = {v.slave: v for v in verifications}
    offsets = prepared.offsets()
    clock = BinlogClock(prepared.files)  # the timeline's x axis: the binlog's event timestamps
    rows = []
    for spec in topology.slaves:
        # `dumpfilter lint`'s prediction for this slave: where a replica with its rules would stop.
        lint = (lints or {}).get((spec.rules, spec.settings, spec.replica_schema))
        main = next(r for r in results if r.plan.spec is spec and r.plan.role == MAIN)
        c, s = main.counters, main.stats
        if everything is not None:
            events_all, bytes_all = everything.counters["events_received"], everything.counters["bytes_received"]
        else:  # no baseline stream: what the master read is what a rule-less slave would get
            events_all, bytes_all = s.get("events_read", 0), s.get("bytes_read", 0)
        bytes_sent = c["bytes_received"]
        check = checks.get(spec.name)
        rows.append({
            "slave": spec.name, "server_id": spec.server_id, "channel": spec.channel,
            "semantics": spec.settings.semantics, "flavor": spec.settings.flavor,
            "skip_policy": spec.skip_policy, "rules": list(spec.rule_text),
            "events_all": events_all, "bytes_all": bytes_all,
            "events_sent": c["events_received"], "bytes_sent": bytes_sent,
            "kept_bytes": s.get("kept_bytes", 0), "heartbeats": c["heartbeats"],
            "heartbeat_bytes": s.get("heartbeat_bytes", 0), "placeholders": c["placeholders"],
            "placeholder_bytes": s.get("placeholder_bytes", 0),
            "empty_transactions": s.get("empty_transactions", 0),
            "empty_transaction_bytes": s.get("empty_transaction_bytes", 0),
            "master_bytes_sent": s.get("bytes_sent", 0),
            "saved_bytes": bytes_all - bytes_sent, "saved_percent": saved_percent(bytes_all, bytes_sent),
            "transactions_kept": s.get("transactions_kept", 0),
            "transactions_partial": s.get("transactions_partial", 0),
            "transactions_skipped": s.get("transactions_skipped", 0),
            "transactions_emptied": s.get("empty_transactions", 0),
            "wall_seconds": round(main.wall_seconds, 4),
            # the binlog MB this stream was served per second, while the master served others too
            "stream_mb_s": round(s.get("bytes_read", 0) / 1e6 / main.wall_seconds, 3) if main.wall_seconds else 0.0,
            "policies": {r.plan.skip_policy: r.counters["bytes_received"]
                         for r in results if r.plan.spec is spec},
            # per skip policy: the master's events kept for the slave, and what the policy adds
            "policy_bytes": {r.plan.skip_policy: _kept_and_overhead(r) for r in results if r.plan.spec is spec},
            # per skip policy: the seconds its stream took (the own policy's is wall_seconds)
            "policy_seconds": {r.plan.skip_policy: round(r.wall_seconds, 4) for r in results if r.plan.spec is spec},
            "timeline": _timeline(main, offsets, clock),
            "verified": None if check is None else check.ok,
            "lint": lint,
            # kind = "mariadb": how a real MariaDB replica on the master's MySQL endpoint ended, and
            # whether that is what lint predicted and what the slave's own stream was sent
            "real_replica": main.real_replica,
        })
        rows[-1]["real_replica_verdict"] = replica_verdict(rows[-1])
    streamed = sum(r.stats.get("bytes_read", 0) for r in results)
    everything_timeline = None if everything is None else _timeline(everything, offsets, clock)
    clock.close()
    return {
        # the master's total: binlog bytes read for every stream over the time it served them all
        "master": {"streams": len(results), "seconds": round(served_seconds, 3), "binlog_bytes_served": streamed,
                   "mb_s": round(streamed / 1e6 / served_seconds, 2) if served_seconds else None,
                   "streams_at_once": min(len(results), WORKERS)},
        "source": {"description": prepared.description, "directory": str(prepared.directory),
                   "files": [p.name for p in prepared.files], "bytes": prepared.total_bytes},
        "experiment": {"master_vs_slave": everything is not None, "streams": len(results),
                       "skip_policies": list(topology.experiment.skip_policies),
                       "everything_stream": None if everything is None else {
                           "events": everything.counters["events_received"],
                           "bytes": everything.counters["bytes_received"],
                           "wall_seconds": round(everything.wall_seconds, 4),
                           "timeline": everything_timeline}},
        "topology": {"path": topology.path,
                     "policy": str(topology.source.policy) if topology.source and topology.source.policy else None,
                     "slaves": [{"name": s.name, "server_id": s.server_id, "channel": s.channel,
                                 "filter_semantics": s.settings.semantics, "flavor": s.settings.flavor,
                                 "lower_case_table_names": s.settings.lower_case_table_names,
                                 "skip_policy": s.skip_policy, "user": s.user, "rules": list(s.rule_text),
                                 "effective_rules": s.rules.lines()} for s in topology.slaves]},
        "slaves": rows,
        "streams": stream_times(results),
        "verify": [v.to_json() for v in verifications] if verifications else None,
    }


def bytes_by_table(topology: Topology, files: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Per slave and table, the bytes in the binlog that write it and those sent to the slave:
    `experiment`'s bandwidth_by_table (spark_jobs.bandwidth_experiment.table_rows), counted in one
    pass in this process over every slave."""
    from dumpfilter.spark_jobs.bandwidth_experiment import count_parts_local, table_rows
    from dumpfilter.spark_jobs.tasks.counts import merge_counts, merge_statements, merge_tables
    from dumpfilter.spark_jobs.tasks.chunks import plan_chunks

    slaves, gates = list(topology.slaves), slave_gates(topology)
    parts = count_parts_local(plan_chunks([Path(f) for f in files], None), slaves, gates)
    cut = min((p for p in parts if p.cut is not None), key=lambda p: p.file_index, default=None)
    if cut is not None and cut.cut is not None:
        # A file cut inside an event: the master would serve it as a file still being written and
        # wait for the rest, so the simulation never ends. Said at once, as before anything serves.
        raise cut.cut
    totals = merge_counts(parts, [s.name for s in slaves])
    return table_rows(topology, gates, totals, merge_tables(parts), merge_statements(parts))


def stream_times(results: list[StreamResult]) -> list[dict[str, Any]]:
    """Every stream's time (each slave's own-policy stream, its other skip policies', the
    rule-less one): where the simulation's time went."""
    return [{"slave": r.plan.label if r.plan.role != EVERYTHING else "(everything)", "role": r.plan.role,
             "skip_policy": r.plan.skip_policy, "wall_seconds": round(r.wall_seconds, 4),
             "bytes_read": r.stats.get("bytes_read", 0), "bytes_sent": r.counters.get("bytes_received", 0)}
            for r in results]


def _kept_and_overhead(result: StreamResult) -> dict[str, int]:
    """Bytes the slave received, split into the master's events kept for it and the skip policy's
    own events: heartbeats as the slave received them (the master's count also holds idle
    heartbeats put on the stream after the slave's last read), placeholders and empty
    transactions from the master's counters (they only travel inside the batches read)."""
    s = result.stats
    overhead = result.heartbeat_bytes + s.get("placeholder_bytes", 0) + s.get("empty_transaction_bytes", 0)
    sent = result.counters.get("bytes_received", 0)
    return {"bytes_sent": sent, "kept_bytes": sent - overhead, "overhead_bytes": overhead}


MAX_TIMELINE_POINTS = 400


def _timeline(result: StreamResult, offsets: dict[str, int], clock: BinlogClock) -> list[list[int | None]]:
    """[binlog position over all files, bytes received so far, binlog time] after each batch (at
    most MAX_TIMELINE_POINTS, evenly thinned; the last point is always kept). The time is the
    timestamp of the event at that position (dumpfilter.binlogs.clock: the primary's clock when it
    ran the statement), the chart's x axis; None only for a binlog without timestamps."""
    kept = [(file, pos, sent) for file, pos, sent in result.timeline if file in offsets]
    if len(kept) > MAX_TIMELINE_POINTS:
        step = len(kept) / MAX_TIMELINE_POINTS
        kept = [kept[int(i * step)] for i in range(MAX_TIMELINE_POINTS - 1)] + [kept[-1]]
    return [[offsets[file] + pos, sent, time] for (file, pos, sent), time in zip(kept, timed(kept, clock))]


def print_verification(verifications: list[SlaveVerification], console: Console) -> None:
    for v in verifications:
        if v.ok:
            policies = ", ".join(f"{p} {n}" for p, n in v.compared.items())
            # Per policy the transactions received (the others were skipped, as slave-side filtering skips them).
            console.print(f"verify {v.slave}: ok ({v.transactions} transactions; received, each as slave-side "
                          f"filtering keeps it: {policies})")
            continue
        console.print(f"[red]verify {v.slave}: {v.total_differences} difference(s)[/]")
        for d in v.differences:
            console.print(f"  [{d.policy}] {d.transaction}: {d.problem}", markup=False, highlight=False)
        if v.total_differences > len(v.differences):
            console.print(f"  ... and {v.total_differences - len(v.differences)} more")
