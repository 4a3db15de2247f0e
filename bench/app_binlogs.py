"""Binlogs of the workloads a real application writes besides sysbench's 1.5 KB transactions
(issue #80's matrix), each written by a real MariaDB (lab.sandbox) and cached under bench/data/:

  small_txn_binlog(mb)        ROW; counters, sessions and queues over 8 schemas: one or two rows a
                              transaction (about 280 bytes of binlog), from a stored procedure each
                              client thread CALLs in its own schema;
  realistic_mixed_binlog(mb)  MIXED; sysbench's write-only transaction, plus what makes MariaDB log
                              rows in a MIXED binlog (`UUID()` inserts, `RAND()` updates), plus
                              cross-database statements (the default database is not the table's);
                              with ddl_share=0.02, the DDL-heavy workload (2% DDL).

    .venv/bin/python -m bench.app_binlogs small|realistic|ddl [MB]
"""

from __future__ import annotations

import random
import sys
import threading
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING

from bench.common import DATA_DIR
from bench.mixed_binlog import _c, cached_binlog

if TYPE_CHECKING:
    from dumpfilter.lab.sandbox.server import MariaDBServer

SCHEMAS = 8

# One or two rows a transaction, the statements of a web application's session and job tables.
_SMALL_TABLES = (
    "CREATE TABLE counters (id INT NOT NULL PRIMARY KEY, n BIGINT NOT NULL DEFAULT 0)",
    "CREATE TABLE sessions (id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, seen INT NOT NULL DEFAULT 0)",
    "CREATE TABLE queue (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, job VARCHAR(24) NOT NULL, "
    "state TINYINT NOT NULL DEFAULT 0)",
)
_SMALL_PROCEDURE = """
CREATE PROCEDURE tick(cnt INT, seed INT)
BEGIN
  DECLARE i INT DEFAULT 0;
  WHILE i < cnt DO
    START TRANSACTION;
    CASE (seed + i) % 5
      WHEN 0 THEN UPDATE counters SET n = n + 1 WHERE id = 1 + (seed + i) % 100;
      WHEN 1 THEN UPDATE sessions SET seen = seen + 1 WHERE id = 1 + (seed * 7 + i) % 500;
      WHEN 2 THEN INSERT INTO queue (job) VALUES (CONCAT('job-', seed + i));
      WHEN 3 THEN UPDATE queue SET state = (state + 1) % 100 WHERE id = 1 + (seed * 3 + i) % 1000;
      ELSE
        INSERT INTO queue (job) VALUES (CONCAT('mail-', i));
        UPDATE counters SET n = n + 1 WHERE id = 1 + i % 100;
    END CASE;
    COMMIT;
    SET i = i + 1;
  END WHILE;
END"""
# About 250 bytes of binlog a transaction (GTID, Annotate_rows, Table_map, rows, XID): measured.
_SMALL_BYTES = 250


def small_txn_binlog(mb: int = 420, threads: int = SCHEMAS) -> Path:
    """One ROW binlog file of about `mb` MB of one- and two-row transactions over db1..db8."""
    per_thread = int(mb * 1e6 / _SMALL_BYTES / threads) + 1

    def write(server: MariaDBServer) -> None:
        for d in range(1, SCHEMAS + 1):
            server.execute(f"CREATE DATABASE db{d}")
            server.execute([*_SMALL_TABLES,
                            "INSERT INTO counters (id) SELECT seq FROM seq_1_to_100",
                            "INSERT INTO sessions (id, user_id) SELECT seq, seq * 3 FROM seq_1_to_500",
                            "INSERT INTO queue (job) SELECT CONCAT('seed-', seq) FROM seq_1_to_1000",
                            _SMALL_PROCEDURE], db=f"db{d}")

        def client(k: int) -> None:
            with server.connect(f"db{1 + k % SCHEMAS}") as conn, conn.cursor() as cur:
                for seed in range(0, per_thread, 5000):
                    cur.execute("CALL tick(%s, %s)", (min(5000, per_thread - seed), seed + k))
        _run(client, threads)
    return cached_binlog(DATA_DIR / f"row-smalltxn-{SCHEMAS}s-{mb}mb", "ROW", write)


def _realistic_client(port: int, k: int, transactions: int, tables: int, rows: int, ddl_share: float = 0.0) -> None:
    """A client of schema sbtest{1 + k % 8}: 6 in 10 transactions are sysbench's write-only one, 2
    insert `UUID()` keys (row-logged in MIXED), 1 updates with `RAND()` (row-logged too), 1 writes
    another schema's table by its qualified name (statement-logged, cross-database). With
    `ddl_share`, that share of them is DDL instead: a scratch table of the client's schema made,
    altered, indexed and dropped in turn (a migrating application)."""
    import pymysql
    from pymysql.constants import CLIENT

    rng = random.Random(k)
    schema = f"sbtest{1 + k % SCHEMAS}"
    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", database=schema, autocommit=True,
                           client_flag=CLIENT.MULTI_STATEMENTS)
    ddl = 0
    with conn, conn.cursor() as cur:
        for done in range(0, transactions, 8):
            batch = []
            for _ in range(min(8, transactions - done)):
                t = f"sbtest{rng.randint(1, tables)}"
                kind = rng.randrange(10)
                if ddl_share and rng.random() < ddl_share:
                    scratch = f"scratch_{k}_{(ddl // 4) % 16}"  # made, altered, indexed, dropped
                    batch.append((f"CREATE TABLE IF NOT EXISTS {scratch} (id INT PRIMARY KEY, v INT)",
                                  f"ALTER TABLE {scratch} ADD COLUMN c{ddl} INT",
                                  f"CREATE INDEX i{ddl} ON {scratch} (v)",
                                  f"DROP TABLE IF EXISTS {scratch}")[ddl % 4])
                    ddl += 1
                elif kind < 6:
                    a, b, d = (rng.randint(1, rows) for _ in range(3))
                    batch.append(f"BEGIN; UPDATE {t} SET k=k+1 WHERE id={a}; UPDATE {t} SET c='{_c(rng, 10)}' "
                                 f"WHERE id={b}; DELETE FROM {t} WHERE id={d}; INSERT INTO {t} (id, k, c, pad) "
                                 f"VALUES ({d}, {rng.randint(1, rows)}, '{_c(rng, 10)}', '{_c(rng, 5)}'); COMMIT")
                elif kind < 8:
                    batch.append(f"INSERT INTO events (id, kind, body) VALUES (UUID(), {rng.randrange(20)}, "
                                 f"'{_c(rng, 4)}')")
                elif kind < 9:
                    batch.append(f"UPDATE {t} SET k = FLOOR(RAND() * 1000) WHERE id = {rng.randint(1, rows)}")
                else:
                    other = f"sbtest{1 + (k + 1 + rng.randrange(SCHEMAS - 1)) % SCHEMAS}"
                    batch.append(f"UPDATE {other}.{t} SET k=k+1 WHERE id={rng.randint(1, rows)}")
            cur.execute("; ".join(batch))
            while cur.nextset():
                pass


def realistic_mixed_binlog(mb: int = 420, tables: int = 4, rows: int = 2000, threads: int = SCHEMAS,
                           ddl_share: float = 0.0) -> Path:
    """One MIXED binlog file of about `mb` MB of the realistic application mix over sbtest1..8;
    `ddl_share` of its transactions DDL (a DDL-heavy binlog: 0.02 and up)."""
    per_thread = int(mb * 1e6 / 620 / threads) + 1  # about 645 bytes a transaction: measured

    def write(server: MariaDBServer) -> None:
        setup = []
        for s in range(1, SCHEMAS + 1):
            setup += [f"CREATE DATABASE sbtest{s}",
                      f"CREATE TABLE sbtest{s}.events (id CHAR(36) NOT NULL PRIMARY KEY, kind INT NOT NULL, "
                      "body VARCHAR(64) NOT NULL)"]
            for t in range(1, tables + 1):
                setup.append(f"CREATE TABLE sbtest{s}.sbtest{t} (id INT NOT NULL PRIMARY KEY, k INT NOT NULL "
                             "DEFAULT 0, c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))")
                setup.append(f"INSERT INTO sbtest{s}.sbtest{t} (id, k) SELECT seq, seq FROM sbtest{s}.seq_1_to_{rows}")
        server.execute(setup)
        _run(lambda k: _realistic_client(server.port, k, per_thread, tables, rows, ddl_share), threads)
    name = f"mixed-realistic-{SCHEMAS}s-{mb}mb" + (f"-ddl{round(ddl_share * 100)}" if ddl_share else "")
    return cached_binlog(DATA_DIR / name, "MIXED", write)


def _run(client: Callable[[int], None], threads: int) -> None:
    """`client(k)` on `threads` threads; the first failure raised, so that no partial binlog is cached."""
    failed: list[BaseException] = []

    def guarded(k: int) -> None:
        try:
            client(k)
        except BaseException as exc:  # re-raised below, on the caller's thread
            failed.append(exc)
    workers = [threading.Thread(target=guarded, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if failed:
        raise failed[0]

if __name__ == "__main__":
    kind = sys.argv[1] if len(sys.argv) > 1 else "small"
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 420
    if kind == "ddl":
        print(realistic_mixed_binlog(size, ddl_share=0.02))
    else:
        print((small_txn_binlog if kind == "small" else realistic_mixed_binlog)(size))
