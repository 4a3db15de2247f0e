"""Slaves of kind = "mariadb" in a simulation: beside its gRPC streams, each such slave also gets a
real MariaDB replica (a sandbox server) on the master's MySQL-protocol endpoint, CHANGE MASTER TO
with GTID, fed the stream the master filters with the slave's rules. The simulation reports how it
ended (caught up, or the error its SQL thread stopped on), what it holds and what the master sent it."""

from __future__ import annotations

import dataclasses
import time

from dumpfilter.lab.sandbox import MariaDBServer, replica_status, snapshot
from dumpfilter.topology import SlaveSpec

REAL_SERVER_ID_BASE = 3_000_000  # the real replicas' server_ids: apart from the topology's


def run_real_replicas(master, specs: list[SlaveSpec], *, timeout: float = 60.0,
                      log=lambda message: None) -> dict[str, dict]:
    """{slave name: outcome} for every spec of kind "mariadb" (none: {} and nothing started)."""
    real = [spec for spec in specs if spec.kind == "mariadb"]
    if not real:
        return {}
    from dumpfilter.master.mysql_protocol import MysqlEndpoint, ReplicaMap

    ids = {spec.name: REAL_SERVER_ID_BASE + i for i, spec in enumerate(real)}
    mapped = {ids[spec.name]: dataclasses.replace(spec, server_id=ids[spec.name]) for spec in real}
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap(mapped, {}))
    servers: dict[str, MariaDBServer] = {}
    out: dict[str, dict] = {}
    try:
        log(f"{len(real)} real MariaDB replica(s) on the master's MySQL endpoint (port {endpoint.port})")
        for spec in real:
            server = servers[spec.name] = MariaDBServer(f"simulate-{spec.name}"[:40].replace("/", "_"),
                                                        server_id=ids[spec.name], log_bin=False).start()
            server.execute(["STOP SLAVE", "RESET SLAVE ALL",
                            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={endpoint.port}, "
                            f"MASTER_USER='{spec.user or 'repl'}', MASTER_PASSWORD='{spec.password}', "
                            "MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", "START SLAVE"])
        for spec in real:
            out[spec.name] = _outcome(master.service, servers[spec.name], ids[spec.name], timeout)
    finally:
        endpoint.stop()
        for server in servers.values():
            server.stop()
    return out


def _outcome(service, server: MariaDBServer, server_id: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    stable = 0
    result = {"server_id": server_id, "caught_up": False, "errno": 0, "error": ""}
    while True:
        status = replica_status(server)
        if status.get("Last_SQL_Errno") or (status.get("Slave_IO_Running") == "No" and status.get("Last_IO_Errno")):
            sql = bool(status.get("Last_SQL_Errno"))
            result.update(errno=int(status["Last_SQL_Errno" if sql else "Last_IO_Errno"]),
                          error=str(status.get("Last_SQL_Error" if sql else "Last_IO_Error") or ""))
            break
        rows = service.stats(server_id) if server_id in service.slaves else []
        # streamed to the end: its position is the binlog's end, or nothing is left between them (a
        # last Rotate names a file the server never created: the stream waits at its offset 4)
        streamed = bool(rows) and rows[0][0].position is not None and (rows[0][0].position == rows[0][1]
                                                                       or rows[0][2] == 0)
        idle = (streamed and status.get("Slave_SQL_Running") == "Yes"
                and status.get("Exec_Master_Log_Pos") == status.get("Read_Master_Log_Pos")
                and "read all relay log" in str(status.get("Slave_SQL_Running_State") or ""))
        stable = stable + 1 if idle else 0
        if stable >= 2:
            result["caught_up"] = True
            break
        if time.monotonic() > deadline:
            result["error"] = (f"timeout: not caught up within {timeout:.0f}s (master streamed to the end: "
                               f"{streamed}; read {status.get('Master_Log_File')}:{status.get('Read_Master_Log_Pos')}, "
                               f"executed {status.get('Relay_Master_Log_File')}:{status.get('Exec_Master_Log_Pos')}, "
                               f"SQL thread: {status.get('Slave_SQL_Running_State')!r})")
            break
        time.sleep(0.3)
    snap = snapshot(server)
    result["tables"] = len(snap.tables)
    result["rows"] = sum(t.row_count for t in snap.tables.values())
    slave = service.slaves.get(server_id)
    if slave is not None:
        result["bytes_sent"] = slave.stats.bytes_sent
        result["bytes_read"] = slave.stats.bytes_read
    return result
