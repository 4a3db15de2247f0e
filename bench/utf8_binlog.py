"""A MIXED binlog of an application that writes UTF-8 text, written by a real MariaDB (lab.sandbox),
and how much of it the core's statement key reads (issue #57 goal 5: string literals are values).

Each client thread (default database app1..N, pymysql, utf8mb4, the values escaped by the client
library as applications send them: `\\'`, `\\n`, `\\"`) runs transactions of single-table DML over
users and comments: INSERT a user (a name like 'José Müller', a bio in French, German, Japanese,
with emoji), UPDATE a comment's body (text that holds 'select', '-- ', '#', '/*' as prose does),
UPDATE a user's name, DELETE a comment by its author, INSERT a comment. One name in 16 has an
apostrophe (O'Brien: the client writes `\\'`, whose end NO_BACKSLASH_ESCAPES would move: the core
declines it). Cached under bench/data/ as mixed-utf8-MBmb (`utf8_binlog(mb)`).

    .venv/bin/python -m bench.utf8_binlog [MB]

prints the share of DML statements the core keys by their text alone (`_core.statement_key`) and
as `filter`'s walk keys them (each Query's status variables read too), the time of
`dumpfilter filter --replicate-do-db=app1` over the file (best of 3), and the first 200,000 DML
statements read by the core's key and by the Python reader alone; writes
bench/results/utf8_binlog.json."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.common import DATA_DIR, RESULTS_DIR, write_result
from bench.mixed_binlog import cached_binlog

ROOT = Path(__file__).resolve().parents[1]
BATCH = 8  # transactions per round trip
BYTES_PER_TRANSACTION = 890  # MIXED, measured: GTID, BEGIN, five Queries, XID
NAMES = ("José Müller", "Zoë Ångström", "François Lefèvre", "Søren Kierkegård", "Łukasz Żółć", "山田 太郎",
         "Ana María Núñez", "Björn Ærø", "Dvořák Antonín", "Chloé Dubois", "李小龙", "Ğökhan Şahin",
         "Renée Zellweger", "Jürgen Groß", "Nguyễn Văn An", "Seán O'Brien")
PHRASES = ("ça va très bien", "schön, danke!", "日本語のテキスト", "great product 👍", "please select the size",
           "price -- 20% off", "#sale today", "see /* notes */", "returning customer", "größer als 5 cm",
           "naïve café, déjà vu", "line one\nline two", 'he said "wow"', "a – b — c", "¿qué tal?")


def _client(port: int, schema: str, transactions: int, seed: int) -> None:
    import pymysql
    from pymysql.constants import CLIENT

    rng = random.Random(seed)
    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", database=schema, autocommit=True,
                           charset="utf8mb4", client_flag=CLIENT.MULTI_STATEMENTS)
    base = seed * 10_000_000
    with conn, conn.cursor() as cur:
        lit = conn.escape
        done = made = 0
        while made < transactions:  # `transactions` committed whole batches: ids are never reused
            batch = []
            for n in range(done, done + BATCH):
                uid, cid = base + n, base + n
                name, bio = rng.choice(NAMES), " ".join(rng.sample(PHRASES, 3))
                batch.append(
                    f"BEGIN; INSERT INTO users (id, name, bio) VALUES ({uid}, {lit(name)}, {lit(bio)}); "
                    f"UPDATE comments SET body={lit(' '.join(rng.sample(PHRASES, 4)))} "
                    f"WHERE id={base + rng.randint(0, max(n - 1, 0))}; "
                    f"UPDATE users SET name={lit(rng.choice(NAMES))} WHERE id={base + rng.randint(0, n)}; "
                    f"DELETE FROM comments WHERE id={cid - 50} AND author={lit(rng.choice(NAMES))}; "
                    f"INSERT INTO comments (id, author, body) VALUES ({cid}, {lit(name)}, "
                    f"{lit(' '.join(rng.sample(PHRASES, 2)))}); COMMIT")
            done += BATCH
            try:
                cur.execute("; ".join(batch))
                while cur.nextset():
                    pass
                made += BATCH
            except pymysql.err.OperationalError as e:
                # Two clients share each schema, and a write by a key that is not there takes a
                # gap lock: InnoDB may pick this transaction as a deadlock's victim (1213) and roll
                # it back, and the batch's rest is not run. It counts for nothing: the binlog
                # keeps its size.
                if e.args[0] != 1213:
                    raise
                cur.execute("ROLLBACK")


def utf8_binlog(mb: int = 520, schemas: int = 4, threads: int = 8) -> Path:
    """One MIXED binlog file of about `mb` MB (generated once, under bench/data/)."""
    per_thread = int(mb * 1e6 / BYTES_PER_TRANSACTION / threads) + 1

    def write(server) -> None:
        setup = []
        for s in range(1, schemas + 1):
            setup += [f"CREATE DATABASE app{s} CHARACTER SET utf8mb4",
                      f"CREATE TABLE app{s}.users (id BIGINT PRIMARY KEY, name VARCHAR(80), bio TEXT)",
                      f"CREATE TABLE app{s}.comments (id BIGINT PRIMARY KEY, author VARCHAR(80), body TEXT)"]
        server.execute(setup)
        workers = [threading.Thread(target=_client, args=(server.port, f"app{1 + k % schemas}", per_thread, k + 1))
                   for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    return cached_binlog(DATA_DIR / f"mixed-utf8-{mb}mb", "MIXED", write)


def keyed_share(path: Path) -> tuple[int, int]:
    """(DML Queries the core keys, DML Queries) of the binlog."""
    from dumpfilter import _core
    from dumpfilter.codec import BinlogReader

    dml = keyed = 0
    with open(path, "rb") as f:
        for event in BinlogReader(f):
            if event.is_query and event.sql and event.sql.split(None, 1)[0].upper() in (
                    "INSERT", "REPLACE", "UPDATE", "DELETE"):
                dml += 1
                keyed += _core.statement_key(event.sql.encode("utf-8", "surrogateescape")) is not None
    return keyed, dml


def walk_keyed(path: Path, out: Path) -> int:
    """DML statements `filter --replicate-do-db=app1`'s walk answered by key: it reads each
    Query's literals as its status variables say (sql_mode, client character set), where
    `keyed_share`'s text-only key reads only the literals every reading ends alike."""
    from dumpfilter.binlogs.filtering import filter_files
    from dumpfilter.binlogs.sinks import FileSink
    from dumpfilter.rules.evaluate import RuleEngine
    from dumpfilter.rules.ruleset import RuleSet, Settings
    from dumpfilter.rules.transaction_filter import TransactionFilter

    engine = RuleEngine(RuleSet(do_db=["app1"]), Settings(flavor="mariadb"))
    return filter_files([path], TransactionFilter(engine), FileSink(out)).statements_by_key


def reader_seconds(path: Path, n: int = 200_000) -> dict:
    """The first `n` DML statements of the binlog read by the core's key (a call each) and by
    `rules.statements` (the key's shapes, else the core's facts, through Python), as
    docs/architecture.md's reader table times sysbench's."""
    from dumpfilter import _core
    from dumpfilter.codec import BinlogReader
    from dumpfilter.rules.statements import _statement_tables

    texts = []
    with open(path, "rb") as f:
        for event in BinlogReader(f):
            if event.is_query and event.sql and event.sql.split(None, 1)[0].upper() in (
                    "INSERT", "REPLACE", "UPDATE", "DELETE"):
                texts.append((event.sql.encode("utf-8", "surrogateescape"), event.sql, event.db or ""))
                if len(texts) >= n:
                    break
    key = _core.statement_key
    started = time.perf_counter()
    keyed = sum(key(raw) is not None for raw, _, _ in texts)
    core = time.perf_counter() - started
    started = time.perf_counter()
    for _, sql, db in texts:
        _statement_tables(sql, db)
    python = time.perf_counter() - started
    return {"statements": len(texts), "mb": round(sum(len(r) for r, _, _ in texts) / 1e6, 1), "keyed": keyed,
            "core_s": round(core, 3), "python_s": round(python, 2)}


def filter_seconds(path: Path, out: Path, runs: int = 3) -> float:
    """Best wall time of `dumpfilter filter --replicate-do-db=app1` over `path`."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dumpfilter", "filter", "--replicate-do-db=app1", str(path),
                        "-o", str(out)], check=True, capture_output=True, cwd=ROOT)
        best = min(best, time.perf_counter() - started)
    return best


def main(mb: int = 520) -> None:
    path = utf8_binlog(mb)
    keyed, dml = keyed_share(path)
    out = RESULTS_DIR / "utf8_binlog.out"
    seconds = filter_seconds(path, out)
    by_walk = walk_keyed(path, out)
    out.unlink(missing_ok=True)
    size = path.stat().st_size
    result = {"binlog": str(path.relative_to(ROOT)), "bytes": size, "dml": dml, "keyed": keyed,
              "keyed_share": round(keyed / dml, 4) if dml else None, "walk_keyed": by_walk,
              "walk_keyed_share": round(by_walk / dml, 4) if dml else None, "filter_seconds": round(seconds, 3),
              "filter_mb_s": round(size / 1e6 / seconds, 1), "readers": reader_seconds(path)}
    print(json.dumps(result, indent=1))
    write_result("utf8_binlog", result)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 520)
