"""Slaves of kind = "mariadb" in a simulation: beside its gRPC streams, each such slave also gets a
real MariaDB replica (a sandbox server) on the master's MySQL-protocol endpoint, CHANGE MASTER TO
with GTID, fed the stream the master filters with the slave's rules. The simulation reports how it
ended (caught up, or the error its SQL thread stopped on, in which event and at which position),
what it holds and what the master sent it, and `replica_verdict` holds that against lint's
prediction and against the bytes the slave's own gRPC stream was sent: a disagreement fails the run.
The real replicas have server_ids of their own (REAL_SERVER_ID_BASE + n): the slave's is taken by
its gRPC stream; the report names each beside its slave."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dumpfilter.lab.sandbox import MariaDBServer, follow, relay_group_at, snapshot, stopped_on_error, wait_fed
from dumpfilter.topology import SlaveSpec

if TYPE_CHECKING:
    from dumpfilter.master.serve.grpc_server import MasterServer
    from dumpfilter.master.service import DumpService

REAL_SERVER_ID_BASE = 3_000_000  # the real replicas' server_ids: apart from the topology's


def run_real_replicas(master: MasterServer, specs: list[SlaveSpec], *, timeout: float = 60.0,
                      log: Callable[[str], None] = lambda message: None) -> dict[str, dict[str, Any]]:
    """{slave name: outcome} for every spec of kind "mariadb" (none: {} and nothing started)."""
    real = [spec for spec in specs if spec.kind == "mariadb"]
    if not real:
        return {}
    from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap

    ids = {spec.name: REAL_SERVER_ID_BASE + i for i, spec in enumerate(real)}
    mapped = {ids[spec.name]: dataclasses.replace(spec, server_id=ids[spec.name]) for spec in real}
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap(mapped, {}))
    servers: dict[str, MariaDBServer] = {}
    try:
        log(f"{len(real)} real MariaDB replica(s) on the master's MySQL endpoint (port {endpoint.port})")
        for spec in real:
            server = servers[spec.name] = MariaDBServer(f"simulate-{spec.name}"[:40].replace("/", "_"),
                                                        server_id=ids[spec.name], log_bin=False).start()
            follow(server, "127.0.0.1", endpoint.port, user=spec.user or "repl", password=spec.password)
        return {spec.name: real_outcome(master.service, servers[spec.name], ids[spec.name], timeout) for spec in real}
    finally:
        endpoint.stop()
        for server in servers.values():
            server.stop()


def real_outcome(service: DumpService, server: MariaDBServer, server_id: int, timeout: float) -> dict[str, Any]:
    """How the real replica `server` of the master's MySQL endpoint ended, what it holds and what
    it was sent (simulate's report; verify's third side takes its ending)."""
    status = wait_fed(server, lambda: service.streamed_to_end(server_id), timeout)
    result: dict[str, Any] = {"server_id": server_id, "caught_up": status["caught_up"], "errno": 0, "error": ""}
    if stopped_on_error(status):
        sql = bool(status.get("Last_SQL_Errno"))
        result.update(errno=int(status["Last_SQL_Errno" if sql else "Last_IO_Errno"]),
                      error=str(status.get("Last_SQL_Error" if sql else "Last_IO_Error") or ""),
                      thread="SQL" if sql else "IO")
        if sql:  # where the SQL thread stopped: the start of the failing transaction, in master coordinates
            result.update(file=str(status.get("Relay_Master_Log_File") or ""),
                          pos=int(status.get("Exec_Master_Log_Pos") or 0),
                          gtid_executed=str(status.get("Gtid_Slave_Pos") or ""))
            # Exec_Master_Log_Pos is the end of the last transaction executed, which master-side
            # filtering may have left well before the failing one: that one is the next
            # transaction of the replica's relay log, whose GTID event names it.
            gtid = relay_group_at(server, str(status.get("Relay_Log_File") or ""), int(status.get("Relay_Log_Pos") or 4))
            if gtid is not None:
                result.update(gtid=gtid.gtid or "", event_pos=gtid.log_pos - gtid.size)
    elif not status["caught_up"]:
        result["error"] = (f"timeout: not caught up within {timeout:.0f}s (master streamed to the end: "
                           f"{service.streamed_to_end(server_id)}; read {status.get('Master_Log_File')}:"
                           f"{status.get('Read_Master_Log_Pos')}, executed {status.get('Relay_Master_Log_File')}:"
                           f"{status.get('Exec_Master_Log_Pos')}, SQL thread: {status.get('Slave_SQL_Running_State')!r})")
    snap = snapshot(server)
    result["tables"] = len(snap.tables)
    result["rows"] = sum(t.row_count for t in snap.tables.values())
    slave = service.slaves.get(server_id)
    if slave is not None:
        result.update(bytes_sent=slave.stats.bytes_sent, bytes_read=slave.stats.bytes_read)
    return result


def replica_verdict(row: dict[str, Any]) -> dict[str, Any] | None:
    """How a slave's real replica ended beside lint's prediction and its own stream: {"ok", "text"}.
    It agrees when it caught up where lint predicts no break, having been sent the bytes the slave's
    gRPC stream was sent (the same filtered stream), or stopped where lint predicts the first break:
    the same error, at the same transaction."""
    outcome, lint = row.get("real_replica"), row.get("lint")
    if outcome is None:
        return None
    first = (lint or {}).get("first")
    problems = []
    if outcome.get("caught_up"):
        text = f"caught up ({outcome.get('tables', 0)} tables, {outcome.get('rows', 0)} rows)"
        if first:
            problems.append(f"lint predicted error {first['errno']} at {first['file']}:{first['pos']}")
        if outcome.get("bytes_sent") is not None and outcome["bytes_sent"] != row.get("master_bytes_sent"):
            problems.append(f"it was sent {outcome['bytes_sent']} bytes, the slave's own stream "
                            f"{row.get('master_bytes_sent')}")
    else:
        what = f"error {outcome['errno']}" if outcome.get("errno") else "not caught up"
        event = f" in GTID {outcome['gtid']}" if outcome.get("gtid") else ""
        where = f" (executed up to {outcome['file']}:{outcome['pos']})" if outcome.get("file") else ""
        text = f"stopped: {what}{event}{where}: {outcome.get('error') or ''}".rstrip(": ")
        # the same transaction: by its GTID when both know it, else by its position
        same_place = (outcome.get("gtid") == first.get("gtid") if first and outcome.get("gtid") and first.get("gtid")
                      else first is not None and (outcome.get("file"), outcome.get("pos")) == (first["file"],
                                                                                               first["pos"]))
        if lint is not None and not first:
            problems.append("lint predicted no break")
        elif first and (first["errno"] != outcome.get("errno") or not same_place):
            problems.append(f"lint predicted error {first['errno']} at {first['file']}:{first['pos']}"
                            + (f" (GTID {first['gtid']})" if first.get("gtid") else ""))
    ok = not problems
    return {"ok": ok, "text": text if ok else f"{text}; DISAGREES: {'; '.join(problems)}",
            "server_id": outcome.get("server_id")}
