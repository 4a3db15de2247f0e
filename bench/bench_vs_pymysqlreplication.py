"""dumpfilter's dump path against python-mysql-replication's `only_schemas`, in the same run, over
the same binlog held by a live MariaDB: a ROW workload over 8 schemas is applied to a throwaway
server (which logs it), then (a) python-mysql-replication streams that server's binlog keeping one
schema, and (b) `dumpfilter master serve` on the server's binlog directory streams it to one
`dumpfilter slave run --replicate-do-db` writing a relay log. Needs `pip install mysql-replication`
(the `bench` extra).

    DUMPFILTER_PMR_TRANSACTIONS=40000 .venv/bin/python -m bench.bench_vs_pymysqlreplication
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.bench_dump import Master, run_slaves
from bench.common import env_int, write_result
from dumpfilter.workload import WorkloadSpec, generate
from dumpfilter.lab.sandbox import MariaDBServer
from tests.support.binlog_apply import apply_binlog


def python_mysql_replication(server: MariaDBServer, schema: str) -> tuple[float, int]:
    """Seconds to stream the whole binlog with only_schemas=[schema]; rows events received.

    With blocking=False, python-mysql-replication 1.0.17 does not stop at the end of a MariaDB
    binlog: the server closes the dump connection, the library reconnects and starts over from
    the first position. So the walk stops once the stream's own position reaches the binlog's end.
    """
    from pymysqlreplication import BinLogStreamReader

    files = server.binlog_files()
    end_file, end_pos = files[-1].name, files[-1].stat().st_size
    settings = {"host": "127.0.0.1", "port": server.port, "user": "root", "password": ""}
    started = time.perf_counter()
    stream = BinLogStreamReader(connection_settings=settings, server_id=4242, blocking=True, resume_stream=True,
                                log_file=files[0].name, log_pos=4, only_schemas=[schema], is_mariadb=True)
    rows = 0
    try:
        for event in stream:
            if hasattr(event, "rows"):
                rows += 1
            if stream.log_file == end_file and stream.log_pos >= end_pos:
                break
    finally:
        stream.close()
    return time.perf_counter() - started, rows


def dumpfilter_in_process(master: Master, schema: str, relay_dir: Path) -> float:
    """Seconds for one in-process slave (the way python-mysql-replication runs: interpreter up and
    libraries imported before the clock starts) to register, stream and write its relay log up
    to the end of the master's binlog."""
    from dumpfilter.rules.channels import StartupFilters
    from dumpfilter.slave.node import Slave
    from dumpfilter.slave.config import SlaveConfig

    rules = StartupFilters.from_options([("replicate-do-db", schema)]).for_channel("")
    config = SlaveConfig(master=master.address, server_id=4343, relay_dir=relay_dir, rules=rules,
                         until_caught_up=True)
    started = time.perf_counter()
    status = Slave(config).run()
    elapsed = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"in-process slave exited {status}")
    return elapsed


def available() -> bool:
    try:
        import pymysqlreplication  # noqa: F401
    except ImportError:
        return False
    return True


def measure() -> dict:
    """Both on the same live server's binlog (figures only; `bench core` shows them in its table)."""
    transactions = env_int("DUMPFILTER_PMR_TRANSACTIONS", 40000)
    work = Path(tempfile.mkdtemp(prefix="bench-pmr-"))
    spec = WorkloadSpec(seed=2387, schemas=8, transactions=transactions, binlog_format="row", flavor="mariadb",
                        max_binlog_size=1 << 40)
    paths = generate(spec, work / "source", "src-bin")
    with MariaDBServer("bench-pmr", server_id=77, binlog_format="ROW",
                       options=["--max-binlog-size=1073741824"]) as server:
        ok, error = apply_binlog(server, paths)
        if not ok:
            raise SystemExit(f"could not load the workload into MariaDB: {error}")
        server.flush_logs()
        files = server.binlog_files()
        size = sum(p.stat().st_size for p in files)
        mb = size / 1e6
        pmr_s, pmr_rows = python_mysql_replication(server, "db1")
        master = Master(server.binlog_dir)
        try:
            ours_s, _ = run_slaves(master, ["db1"], work)
            inproc_s = dumpfilter_in_process(master, "db1", work / "relay-inproc")
        finally:
            master.stop()
    result = {
        "server_binlog_mb": round(mb, 1), "transactions": transactions,
        "python_mysql_replication_s": round(pmr_s, 2), "python_mysql_replication_mb_per_s": round(mb / pmr_s, 1),
        "python_mysql_replication_rows_events": pmr_rows,
        "dumpfilter_s": round(ours_s, 2), "dumpfilter_mb_per_s": round(mb / ours_s, 1),
        "dumpfilter_in_process_s": round(inproc_s, 2), "dumpfilter_in_process_mb_per_s": round(mb / inproc_s, 1),
        "speedup": round(pmr_s / ours_s, 1), "speedup_in_process": round(pmr_s / inproc_s, 1), "target": ">= 12x",
    }
    write_result("vs_pymysqlreplication", result)
    return result


def main() -> dict:
    if not available():
        print("python-mysql-replication is not installed (pip install mysql-replication): skipped")
        return {}
    result = measure()
    mb, pmr_s, ours_s, inproc_s = (result["server_binlog_mb"], result["python_mysql_replication_s"],
                                   result["dumpfilter_s"], result["dumpfilter_in_process_s"])
    print(f"vs python-mysql-replication: {mb:.1f} MB binlog of a live MariaDB, one schema of 8 kept")
    print(f"  python-mysql-replication only_schemas  {pmr_s:7.2f} s  {mb / pmr_s:6.1f} MB/s")
    print(f"  dumpfilter master -> gRPC -> relay log {ours_s:7.2f} s  {mb / ours_s:6.1f} MB/s   x{result['speedup']}"
          "  (slave process started inside the timing)")
    print(f"  the same, slave in this process        {inproc_s:7.2f} s  {mb / inproc_s:6.1f} MB/s   "
          f"x{result['speedup_in_process']}  (like python-mysql-replication)")
    return result


if __name__ == "__main__":
    main()
