"""`dumpfilter verify`: prove master-side filtering against real MariaDB replicas.

For one binlog format, this starts (on 127.0.0.1 ephemeral ports, each with its own temporary
datadir, never port 3306; the master's gRPC and MySQL-protocol addresses as given, `--listen` and
`--mysql-listen`, else ephemeral ones on loopback too):

* a **primary** with `--log-bin` and the chosen `--binlog-format`;
* per slave of the topology that has a real-replica equivalent, a **reference replica**: a real
  MariaDB replica started with the slave's rules as `--replicate-*` options (slave-side filtering,
  what the server itself does);
* per slave, a **dumpfilter target**: a fresh server fed by dumpfilter's master-side stream, i.e. an
  in-process dumpfilter master tailing the primary's live binlog directory and a `slave.node.Slave`
  registering the slave's rules and executing its relay log with `--apply` (mariadb-binlog | mariadb).

The seed is loaded everywhere without being replicated (`SET sql_log_bin=0` on the primary, directly
on the others); the workload runs on the primary in ONE session so `USE` persists as it does for an
application. Then every reference replica is waited for (bounded) until it caught up or its SQL
thread stopped on an error, every dumpfilter slave streams until caught up and applies, and each
pair is compared table by table (definition, row count, content hash, differing rows).

A pair is identical when both sides caught up with the same tables, or when both stopped on an
error with the same error code in the same primary transaction (GTID) and with the same tables up
to there. A slave whose rules cannot be expressed as `--replicate-*` options (WL#2516 effective
semantics, binlog-*-db master rules, WL#40 derived-table tracking) gets no reference: its dumpfilter
side still runs, and is reported "no reference", never "identical".
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import os
import re
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dumpfilter import _core
from dumpfilter.errors import DumpFilterError
from dumpfilter.topology import SlaveSpec, Topology
from dumpfilter.rules.ruleset import Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.lab.sandbox import (
    MariaDBServer,
    ReplicationTimeout,
    Snapshot,
    diff_snapshots,
    follow,
    make_replica,
    snapshot,
    wait_caught_up,
)
from dumpfilter.lab.verify.failure_gtids import apply_failure_gtid, gtid_at

if TYPE_CHECKING:
    from dumpfilter.master.endpoint import MysqlEndpoint
    from dumpfilter.master.serve.grpc_server import MasterServer
    from dumpfilter.slave.node import Slave

FORMATS = ("ROW", "STATEMENT", "MIXED")

IDENTICAL = "identical"
DIFFERENT = "DIFFERENT"
NO_REFERENCE = "no reference"

# "ERROR 1146 (42S02) at line 57: Table 'a.t9' doesn't exist" from the mariadb client (no --force).
_CLIENT_ERROR = re.compile(r"ERROR (\d+) \(([0-9A-Z]{5})\)(?: at line (\d+))?: ?(.*)")


class VerifyError(DumpFilterError):
    """The verification itself could not run: a bad workload, a server that would not start."""


def split_statements(text: str) -> list[_core.ScriptStatement]:
    """A workload's statements as the mariadb client sends them (`_core.split_script`): it runs on
    one server session, so that `USE` persists as for an application, which piping it through the
    client would not give. A quote or comment left open is a VerifyError."""
    script = _core.split_script(text)
    if script.error is not None:
        raise VerifyError(script.error)
    return script.statements


@dataclass
class Outcome:
    """How one side ended: caught up, or stopped on an error inside one primary transaction."""

    caught_up: bool
    errno: int = 0
    error: str = ""
    gtid: str | None = None  # the primary transaction it stopped in (MariaDB GTID domain-server-seq)

    def describe(self) -> str:
        if self.caught_up:
            return "caught up"
        where = f" in GTID {self.gtid}" if self.gtid else ""
        return f"stopped: error {self.errno}{where}" if self.errno else f"stopped: {self.error}"

    def said(self) -> str:
        """`describe()`, then the error's message where there is one."""
        return self.describe() + (f": {self.error}" if self.error else "")

    def same_stop(self, other: Outcome) -> bool:
        if self.caught_up or other.caught_up:
            return self.caught_up and other.caught_up
        return self.errno == other.errno and self.errno != 0 and self.gtid == other.gtid is not None


@dataclass
class TableRow:
    table: str
    reference_rows: int | None
    dumpfilter_rows: int | None
    definition_equal: bool
    content_equal: bool


@dataclass
class PairResult:
    slave: str
    server_id: int
    rules: list[str]
    master_rules: list[str]  # what the dumpfilter slave registered: the rules as option lines
    verdict: str
    reason: str = ""
    reference: Outcome | None = None
    dumpfilter: Outcome | None = None
    tables: list[TableRow] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    master_stats: dict[str, int | float] = field(default_factory=dict)
    # `dumpfilter lint`'s prediction for this slave, from the primary's binlog alone (first break first).
    lint: Outcome | None = None
    lint_breaks: list[dict[str, object]] = field(default_factory=list)
    # kind = "mariadb": a real MariaDB replica of the master's MySQL endpoint, the third side.
    real_replica: Outcome | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == IDENTICAL


@dataclass
class RunResult:
    binlog_format: str
    statements: int
    primary_position: tuple[str, int]
    pairs: list[PairResult]
    seconds: float
    kept: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every pair with a reference is identical, and at least one pair was compared."""
        compared = [p for p in self.pairs if p.verdict != NO_REFERENCE]
        return bool(compared) and all(p.passed for p in compared)

    def as_dict(self) -> dict[str, Any]:
        return {"binlog_format": self.binlog_format, "statements": self.statements,
                "primary_position": list(self.primary_position), "passed": self.passed,
                "seconds": round(self.seconds, 2), "kept": self.kept,
                "pairs": [dataclasses.asdict(p) | {"passed": p.passed} for p in self.pairs]}


def no_reference_reason(spec: SlaveSpec) -> str | None:
    """Why a slave's rules have no `--replicate-*` equivalent on a real MariaDB replica, or None."""
    rules, settings = spec.rules, spec.settings
    if settings.semantics == "effective" or rules.effective_do or rules.effective_ignore or rules.effective_rewrite:
        return "WL#2516 effective-db semantics: no --replicate-* equivalent"
    if rules.binlog_do_db or rules.binlog_ignore_db:
        return "binlog-*-db rules filter the master's binlog write: no replica-side equivalent"
    if settings.track_derived_tables:
        return "WL#40 derived-table tracking: no server equivalent"
    if settings.lower_case_table_names == 2:
        return "lower_case_table_names=2 needs a case-insensitive file system"
    return None


def fast_tmp_root(min_free: int = 4 << 30) -> str | None:
    """/dev/shm when it is a writable tmpfs with room: twenty throwaway datadirs install, start and,
    above all, get deleted several times faster there than on an overlay disk. None: the default."""
    shm = Path("/dev/shm")
    try:
        stat = os.statvfs(shm)
    except OSError:
        return None
    if not os.access(shm, os.W_OK) or stat.f_bavail * stat.f_frsize < min_free:
        return None
    return str(shm)


def _server_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text)[:40] or "slave"


def _run_script(server: MariaDBServer, statements: Sequence[_core.ScriptStatement], *, log_bin: bool, what: str) -> None:
    """Statements in order on ONE session (USE persists); stops at the first error."""
    with server.connect() as conn, conn.cursor() as cur:
        if not log_bin:
            cur.execute("SET sql_log_bin=0")
        for st in statements:
            try:
                cur.execute(st.sql)
                while True:  # drain every result set (SELECTs, CALLs)
                    cur.fetchall()
                    if not cur.nextset():
                        break
            except Exception as exc:
                raise VerifyError(f"{what}, line {st.line}, failed on {server.name}: {exc}\n  {st.sql[:300]}") from None


@dataclass
class _Slot:
    spec: SlaveSpec
    settings: Settings
    reason: str | None
    replica: MariaDBServer | None = None
    target: MariaDBServer | None = None
    real: MariaDBServer | None = None  # kind = "mariadb": the replica of the master's MySQL endpoint
    notes: list[str] = field(default_factory=list)
    # The slave's replica_schema (topology): loaded on its servers instead of the seed, and lint's
    # replica side starts from it (the master's side from the seed).
    replica_seed: list[_core.ScriptStatement] | None = None
    replica_model: SchemaModel | None = None


class Verification:
    """One verification run for one binlog format; `run()` returns a RunResult. Servers are always
    stopped (by their own pid, see dumpfilter.lab.sandbox) when run() returns or raises, Ctrl-C included."""

    def __init__(self, topology: Topology, workload: str, *, seed: str = "", binlog_format: str = "ROW",
                 keep: bool = False, timeout: float = 60.0, workdir: Path | None = None,
                 progress: Callable[[str], None] | None = None,
                 listen: str = "127.0.0.1:0", mysql_listen: str = "127.0.0.1:0") -> None:
        if binlog_format.upper() not in FORMATS:
            raise VerifyError(f"--binlog-format: {binlog_format!r} is not one of {', '.join(FORMATS)}")
        self.topology = topology
        self.workload = split_statements(workload)
        self.seed = split_statements(seed) if seed else []
        # The seed is on every server but not in the binlog: dumpfilter's master and slaves start from it
        # as their schema model (what `--schema` gives them), so multi-table UPDATEs over seed tables are
        # decided with their columns and triggers.
        self.schema = SchemaModel.from_sql(seed, "the verify seed") if seed else None
        if not self.workload:
            raise VerifyError("the workload has no statements")
        self.binlog_format = binlog_format.upper()
        self.keep = keep
        self.timeout = timeout
        self.workdir = workdir
        self.progress = progress or (lambda message: None)
        self.servers: list[MariaDBServer] = []
        # The in-process master's gRPC address and its MySQL-protocol endpoint's (real replicas'):
        # port 0 picks a free one; a harness on a shared host pins them (`verify --listen`).
        self.listen = listen
        self.mysql_listen = mysql_listen

    # -- servers ------------------------------------------------------------------------------
    def _slots(self) -> list[_Slot]:
        slots = []
        for spec in self.topology.slaves:
            settings = spec.settings
            notes = []
            if settings.flavor != "mariadb":
                # The oracle is a MariaDB replica, so the master-side filter must decide as one:
                # DATABASE statements and name case differ between the flavors (filter-semantics §8).
                notes.append(f"flavor {settings.flavor} in the topology; verified as mariadb (the reference "
                             f"is a MariaDB replica)")
                settings = dataclasses.replace(settings, flavor="mariadb")
            slot = _Slot(spec, settings, no_reference_reason(spec), notes=notes)
            if spec.replica_schema is not None:
                if spec.replica_schema.startswith("mysql://"):
                    raise VerifyError(f"slave {spec.name!r}: verify loads replica_schema on the slave's servers: "
                                      "give a DDL file, not a server URL")
                text = Path(spec.replica_schema).read_text(encoding="utf-8")
                slot.replica_seed = split_statements(text)
                slot.replica_model = SchemaModel.from_sql(text, f"replica_schema {spec.replica_schema}")
            slots.append(slot)
        return slots

    def _start_all(self, slots: list[_Slot]) -> MariaDBServer:
        used = {s.spec.server_id for s in slots}
        primary_id = next(i for i in range(1, 1 << 32) if i not in used)
        root = None if self.keep else fast_tmp_root()  # --keep: datadirs where the user expects them
        primary = MariaDBServer("verify-primary", server_id=primary_id, binlog_format=self.binlog_format,
                                tmp_root=root)
        pending = [primary]
        extra_ids = (i for i in itertools.count(1_000_000) if i not in used)  # the targets' and real replicas'
        for slot in slots:
            lctn = [f"--lower-case-table-names={slot.settings.lower_case_table_names}"] \
                if slot.settings.lower_case_table_names else []
            base = _server_name(slot.spec.name)
            if slot.reason is None:
                options = ["--" + line for line in slot.spec.rules.option_lines()]
                slot.replica = MariaDBServer(f"verify-{base}-replica", server_id=slot.spec.server_id,
                                             log_bin=False, options=options + lctn, tmp_root=root)
                pending.append(slot.replica)
            slot.target = MariaDBServer(f"verify-{base}-dumpfilter", server_id=next(extra_ids), log_bin=False,
                                        options=lctn, tmp_root=root)
            pending.append(slot.target)
            if slot.spec.kind == "mariadb":
                slot.real = MariaDBServer(f"verify-{base}-real", server_id=next(extra_ids), log_bin=False,
                                          options=lctn, tmp_root=root)
                pending.append(slot.real)
        self.servers = pending
        self.progress(f"starting {len(pending)} MariaDB servers ({self.binlog_format})")
        # mariadb-install-db dominates start-up time and is mostly I/O: a few in parallel help.
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(6, len(pending))) as pool:
            futures = [pool.submit(server.start) for server in pending]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise VerifyError(f"a MariaDB server did not start: {errors[0]}")
        return primary

    def _stop_all(self) -> list[str]:
        # Signal all first so they shut down in parallel. Without --keep the datadirs are thrown
        # away, so SIGKILL is enough (a clean InnoDB shutdown of 20 servers takes many seconds);
        # with --keep they get SIGTERM and shut down cleanly, so the datadirs can be started again.
        for server in self.servers:
            if server._proc is not None:  # (Popen signals nothing once it has exited)
                server._proc.send_signal(signal.SIGTERM if self.keep else signal.SIGKILL)
        kept = [f"{server.name}: {server.root}" for server in self.servers if self.keep and server.root is not None]
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:  # deleting datadirs is slow too
            futures = [pool.submit(server.stop, keep=self.keep) for server in self.servers]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise VerifyError(f"could not stop a MariaDB server: {errors[0]}")
        return kept

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> RunResult:
        from dumpfilter.master.serve.grpc_server import create_server

        started = time.monotonic()
        slots = self._slots()
        master = endpoint = None
        tmp = tempfile.TemporaryDirectory(prefix="dumpfilter-verify-", dir=self.workdir)
        relay_root = Path(tmp.name)
        kept: list[str] = []
        try:
            primary = self._start_all(slots)
            own = {id(server): slot.replica_seed for slot in slots if slot.replica_seed is not None
                   for server in (slot.replica, slot.target, slot.real) if server is not None}
            scripts = [(server, own.get(id(server), self.seed)) for server in self.servers]
            if any(script for _, script in scripts):
                self.progress(f"loading the seed ({len(self.seed)} statements) everywhere, not replicated"
                              + (" (a slave's replica_schema on its servers)" if own else ""))
                with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
                    for future in [pool.submit(_run_script, server, script, log_bin=False, what="seed")
                                   for server, script in scripts if script]:
                        future.result()
            for slot in slots:
                if slot.replica is not None:
                    make_replica(primary, slot.replica)
            master, port = create_server(primary.binlog_dir, self.listen, schema=self.schema)
            endpoint = self._real_replicas(slots, master)
            self.progress(f"running the workload ({len(self.workload)} statements) on the primary")
            _run_script(primary, self.workload, log_bin=True, what="workload")
            position = primary.master_position()
            address = f"{_reachable(self.listen)}:{port}"
            self.progress(f"dumpfilter master on {self.listen.rpartition(':')[0]}:{port} (gRPC)")
            pairs = [self._pair(slot, primary, address, relay_root, master) for slot in slots]
        finally:
            if endpoint is not None:
                endpoint.stop()
            if master is not None:
                master.stop(grace=1.0)
            kept = self._stop_all()
            if self.keep:
                kept.append(f"relay logs: {relay_root}")
                tmp._finalizer.detach()  # type: ignore[attr-defined]  # (private) the directory stays in place
            else:
                tmp.cleanup()
        return RunResult(self.binlog_format, len(self.workload), position, pairs, time.monotonic() - started, kept)

    def _reference_outcome(self, primary: MariaDBServer, replica: MariaDBServer) -> Outcome:
        try:
            status = wait_caught_up(primary, replica, timeout=self.timeout)
        except ReplicationTimeout as exc:
            return Outcome(False, error=f"timeout: {exc}")
        if status.caught_up:
            return Outcome(True)
        if status.last_sql_errno:
            return Outcome(False, status.last_sql_errno, status.last_sql_error,
                           gtid_at(primary, status.relay_master_log_file, status.exec_master_log_pos))
        return Outcome(False, status.last_io_errno, status.describe())

    def _lint_outcome(self, slot: _Slot, primary: MariaDBServer) -> tuple[Outcome, list[dict[str, object]]]:
        """`dumpfilter lint` on the primary's binlog files with the slave's rules: its first predicted
        break as an Outcome (to set beside the reference replica's), and every break as JSON."""
        from dumpfilter.binlogs.lint import lint_files

        breaks = lint_files(primary.binlog_files(), slot.spec.rules, slot.settings, self.schema,
                            replica_schema=slot.replica_model)
        if not breaks:
            return Outcome(True), []
        first = breaks[0]
        return Outcome(False, first.errno, first.message, first.gtid), [b.to_json() for b in breaks]

    def _dumpfilter_outcome(self, slot: _Slot, address: str, relay_dir: Path) -> tuple[Slave, Outcome]:
        from dumpfilter.slave.apply import ApplyError
        from dumpfilter.slave.node import Slave
        from dumpfilter.slave.config import SlaveConfig

        spec = slot.spec
        assert slot.target is not None  # every slave's target server is started (_start_all)
        config = SlaveConfig(master=address, server_id=spec.server_id, relay_dir=relay_dir, rules=spec.rules,
                             settings=slot.settings, channel=spec.channel, skip_policy=spec.skip_policy,
                             until_caught_up=True, apply_url=f"mysql://root@127.0.0.1:{slot.target.port}",
                             connect_retry=0, schema=self.schema, on_disagreement="warn",
                             replica_schema=slot.replica_model)
        slave = Slave(config)
        try:
            slave.run()
        except ApplyError as exc:
            message = str(exc)
            match = _CLIENT_ERROR.search(message)
            if not match:
                return slave, Outcome(False, error=message)
            line = int(match.group(3) or 0)
            gtid = apply_failure_gtid(relay_dir, slave.relay.names, slave.info.relay_pos, line) if line else None
            return slave, Outcome(False, int(match.group(1)), match.group(4).strip(), gtid)
        return slave, Outcome(True)

    def _real_replicas(self, slots: list[_Slot], master: MasterServer) -> MysqlEndpoint | None:
        """kind = "mariadb": the master's MySQL endpoint, and each such slave's target server a real
        replica of it (CHANGE MASTER TO, MASTER_USE_GTID=slave_pos), its rules mapped to the
        target's server_id. None when the topology has no such slave."""
        real = [(slot, slot.real) for slot in slots if slot.spec.kind == "mariadb" and slot.real is not None]
        if not real:
            return None
        from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap

        specs = {server.server_id: dataclasses.replace(slot.spec, server_id=server.server_id,
                                                       settings=slot.settings)
                 for slot, server in real}
        endpoint = MysqlEndpoint(master.service, self.mysql_listen, replicas=ReplicaMap(specs, {}))
        for _, server in real:
            follow(server, _reachable(self.mysql_listen), endpoint.port)
        self.progress(f"{len(real)} real MariaDB replica(s) on the master's MySQL endpoint (port {endpoint.port})")
        return endpoint

    def _real_replica_outcome(self, slot: _Slot, master: MasterServer) -> Outcome:
        """A real replica of the MySQL endpoint (simulate's `real_outcome`): caught up once the
        master streamed it the whole binlog and its SQL thread executed everything it read; or
        where its SQL thread (else its IO thread) stopped, in which primary transaction."""
        from dumpfilter.lab.simulate.real_replicas import real_outcome

        real = slot.real
        assert real is not None  # (a kind = "mariadb" slave's, see _real_replicas)
        got = real_outcome(master.service, real, real.server_id, self.timeout)
        if got["caught_up"] or got["errno"]:
            return Outcome(got["caught_up"], got["errno"], got["error"], got.get("gtid") or None)
        return Outcome(False, error=f"timeout: the real replica did not apply the stream within {self.timeout:.0f}s")

    def _pair(self, slot: _Slot, primary: MariaDBServer, address: str, relay_root: Path, master: MasterServer) -> PairResult:
        spec = slot.spec
        self.progress(f"slave {spec.name}: comparing")
        result = PairResult(spec.name, spec.server_id, list(spec.rule_text) or spec.rules.option_lines(),
                            spec.rules.option_lines(), NO_REFERENCE, notes=list(slot.notes))
        if slot.reason is None:
            assert slot.replica is not None  # a slave with a reference has its reference replica (_start_all)
            result.reference = self._reference_outcome(primary, slot.replica)
        if spec.kind == "mariadb":
            result.real_replica = self._real_replica_outcome(slot, master)
            result.notes.append("also verified: a real MariaDB replica on the master's MySQL endpoint")
        slave, result.dumpfilter = self._dumpfilter_outcome(slot, address, relay_root / _server_name(spec.name))
        master_slave = master.service.slaves.get(spec.server_id)
        if master_slave is not None:
            result.master_stats = {k: v for k, v in dataclasses.asdict(master_slave.stats).items()
                                   if isinstance(v, int | float)}
        dropped = slave.counters.check_disagreements
        if dropped:
            # The slave's own copy of the rules drops events the master sent (relayed all the same:
            # --on-disagreement warn): master-side filtering kept something the same rules reject.
            result.differences.append(f"the master sent {dropped} event(s) that the slave's own rules drop")
        if slot.reason is not None:
            result.reason = slot.reason
            return result
        reference = result.reference
        assert reference is not None and slot.replica is not None and slot.target is not None  # (see above)
        result.lint, result.lint_breaks = self._lint_outcome(slot, primary)
        if not reference.same_stop(result.lint) and not (reference.caught_up is False and not reference.errno):
            result.differences.append(f"lint predicted {result.lint.said()}; "
                                      f"the reference replica {reference.describe()}")
        ref_snap = snapshot(slot.replica)
        df_snap = snapshot(slot.target)
        result.tables = _table_rows(ref_snap, df_snap)
        result.differences += diff_snapshots(ref_snap, df_snap)
        if not reference.same_stop(result.dumpfilter):
            result.differences.insert(0, f"reference replica {reference.said()}; dumpfilter {result.dumpfilter.said()}")
        if slot.real is not None and result.real_replica is not None:
            real_snap = snapshot(slot.real)
            result.differences += [f"real replica on the MySQL endpoint: {d}" for d in diff_snapshots(ref_snap, real_snap)]
            if not reference.same_stop(result.real_replica):
                result.differences.insert(0, f"reference replica {reference.describe()}; real replica on the "
                                             f"MySQL endpoint {result.real_replica.said()}")
        result.verdict = DIFFERENT if result.differences else IDENTICAL
        return result


def _table_rows(ref: Snapshot, df: Snapshot) -> list[TableRow]:
    return [TableRow(f"{key[0]}.{key[1]}", a.row_count if a else None, b.row_count if b else None,
                     bool(a and b and a.definition == b.definition), bool(a and b and a.content_hash == b.content_hash))
            for key in sorted(ref.tables.keys() | df.tables.keys())
            for a, b in [(ref.tables.get(key), df.tables.get(key))]]


def _reachable(listen: str) -> str:
    """The host a client on this machine connects to for a server listening on `listen` (HOST:PORT):
    HOST, or loopback for a wildcard address."""
    host = listen.rpartition(":")[0]
    return {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}.get(host, host)


def verify(topology: Topology, workload: str, *, seed: str = "", formats: Sequence[str] = ("ROW",),
           **kwargs: Any) -> list[RunResult]:
    """Run the verification once per binlog format (fresh servers each time)."""
    return [Verification(topology, workload, seed=seed, binlog_format=fmt, **kwargs).run() for fmt in formats]
