"""A sysbench-like MIXED (or STATEMENT, or ROW) binlog written by a real MariaDB (lab.sandbox): `oltp_write_only`'s
transaction (two UPDATEs, a DELETE, an INSERT of the deleted id) over `schemas` schemas named
sbtest1..N, each with `tables` tables sbtest1..M, sent by client threads whose default database is
their schema, as `sysbench --mysql-db=sbtestN` sends them. MariaDB logs these deterministic
statements as Query events under binlog_format=MIXED: the shape the statement path is measured on
(issue #43); under binlog_format=STATEMENT every statement is a Query (MySQL 5.x's default), under
ROW the same transactions are Table_maps and rows (the baseline the statement path is compared
with). Cached under bench/data/ (`mixed_binlog(mb)`, `mixed_binlog(mb, fmt="STATEMENT")`);
`python -m bench.mixed_binlog MB [FORMAT]` writes one."""

from __future__ import annotations

import json
import random
import shutil
import string
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import DATA_DIR

if TYPE_CHECKING:
    from dumpfilter.lab.sandbox.server import MariaDBServer

_ALPHA = string.digits
_BATCH = 8  # transactions per round trip


def _c(rng: random.Random, groups: int) -> str:
    """sysbench's c/pad values: groups of 11 digits joined by '-'."""
    return "-".join("".join(rng.choice(_ALPHA) for _ in range(11)) for _ in range(groups))


def _client(port: int, schema: str, tables: int, rows: int, transactions: int, seed: int) -> None:
    import pymysql
    from pymysql.constants import CLIENT

    rng = random.Random(seed)
    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", database=schema, autocommit=True,
                           client_flag=CLIENT.MULTI_STATEMENTS)
    with conn, conn.cursor() as cur:
        for done in range(0, transactions, _BATCH):
            batch = []
            for _ in range(min(_BATCH, transactions - done)):
                t = f"sbtest{rng.randint(1, tables)}"
                a, b, d = (rng.randint(1, rows) for _ in range(3))
                batch.append(f"BEGIN; UPDATE {t} SET k=k+1 WHERE id={a}; "
                             f"UPDATE {t} SET c='{_c(rng, 10)}' WHERE id={b}; "
                             f"DELETE FROM {t} WHERE id={d}; "
                             f"INSERT INTO {t} (id, k, c, pad) VALUES ({d}, {rng.randint(1, rows)}, "
                             f"'{_c(rng, 10)}', '{_c(rng, 5)}'); COMMIT")
            cur.execute("; ".join(batch))  # one round trip for a few transactions
            while cur.nextset():
                pass


def mixed_binlog(mb: int = 220, schemas: int = 8, tables: int = 4, rows: int = 2000, threads: int = 8,
                 fmt: str = "MIXED") -> Path:
    """One binlog file of about `mb` MB in binlog_format `fmt` (MIXED, STATEMENT or ROW; generated
    once, under bench/data/ as FORMAT-sysbench-...)."""

    fmt = fmt.upper()
    if fmt not in ("MIXED", "STATEMENT", "ROW"):
        raise ValueError(f"binlog_format must be MIXED, STATEMENT or ROW, not {fmt!r}")
    # About 820 bytes of binlog per transaction (GTID, four Queries, XID): measured (MIXED).
    per_thread = int(mb * 1e6 / 820 / threads) + 1

    def write(server: MariaDBServer) -> None:
        setup = []
        for s in range(1, schemas + 1):
            setup.append(f"CREATE DATABASE sbtest{s}")
            for t in range(1, tables + 1):
                setup.append(f"CREATE TABLE sbtest{s}.sbtest{t} (id INT NOT NULL PRIMARY KEY, k INT NOT NULL "
                             "DEFAULT 0, c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))")
                values = ",".join(f"({i},{i},'','')" for i in range(1, rows + 1))
                setup.append(f"INSERT INTO sbtest{s}.sbtest{t} VALUES {values}")
        server.execute(setup)
        workers = [threading.Thread(target=_client, args=(server.port, f"sbtest{1 + k % schemas}", tables, rows,
                                                          per_thread, k)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    return cached_binlog(DATA_DIR / f"{fmt.lower()}-sysbench-{schemas}s-{mb}mb", fmt, write)


def cached_binlog(directory: Path, fmt: str, write: Callable[[MariaDBServer], None]) -> Path:
    """The binlog file a sandbox MariaDB (binlog_format `fmt`, one file of up to 1 GB, no syncs)
    writes while `write` runs its statements, kept under `directory` once it is whole (a DONE
    file names it): written once, then read from there."""
    from dumpfilter.lab.sandbox.server import MariaDBServer

    done = directory / "DONE"
    if done.exists():
        return directory / json.loads(done.read_text())["file"]
    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with MariaDBServer(directory.name, server_id=1, binlog_format=fmt,
                       options=["--max-binlog-size=1073741824", "--sync-binlog=0",
                                "--innodb-flush-log-at-trx-commit=0"]) as server:
        write(server)
        server.flush_logs()
        source = server.binlog_files()[0]
        shutil.copy(source, directory / source.name)
    done.write_text(json.dumps({"file": source.name, "seconds": round(time.perf_counter() - started, 1)}))
    return directory / source.name


if __name__ == "__main__":
    print(mixed_binlog(int(sys.argv[1]) if len(sys.argv) > 1 else 220, fmt=sys.argv[2] if len(sys.argv) > 2 else "MIXED"))
