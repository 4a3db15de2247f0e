"""A DDL-heavy tenant-per-schema binlog written by a real MariaDB (lab.sandbox): a SaaS primary that
gives each tenant a schema and migrates every tenant's schema in turn, so the binlog is mostly
DDL (CREATE DATABASE, CREATE TABLE with keys and foreign keys, ALTER TABLE, CREATE INDEX, RENAME,
CREATE TRIGGER and VIEW, DROP) beside the tenants' small DML (single- and multi-table UPDATE and
DELETE, INSERT ... SELECT across schemas). The input issue #57 goal 5 measures the statement
readers on. Cached under bench/data/ (`ddl_binlog(tenants)`); `python -m bench.ddl_binlog N`."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import DATA_DIR
from bench.mixed_binlog import cached_binlog

if TYPE_CHECKING:
    from dumpfilter.lab.sandbox.server import MariaDBServer


def _tenant(n: int, rng: random.Random) -> list[str]:
    """One tenant's life: its schema, a migration of every table, its triggers, views and a few writes."""
    db = f"tenant{n:05d}"
    out = [f"CREATE DATABASE {db}", f"USE {db}"]
    tables = [f"t{k}" for k in range(1, 9)]
    out.append("CREATE TABLE accounts (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(80) NOT NULL, "
               "email VARCHAR(120) DEFAULT NULL, created TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, "
               "UNIQUE KEY uk_email (email)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
    for t in tables:
        cols = ", ".join(f"c{i} {rng.choice(['INT', 'BIGINT', 'VARCHAR(64)', 'DECIMAL(12,2)', 'DATETIME'])} NULL"
                         for i in range(rng.randint(4, 12)))
        out.append(f"CREATE TABLE `{db}`.{t} (id BIGINT NOT NULL AUTO_INCREMENT, account_id INT NOT NULL, {cols}, "
                   f"PRIMARY KEY (id), KEY k_account (account_id), CONSTRAINT fk_{t}_account FOREIGN KEY "
                   f"(account_id) REFERENCES accounts (id) ON DELETE CASCADE) ENGINE=InnoDB")
    out.append("INSERT INTO accounts (name, email) VALUES ('a', 'a@x'), ('b', 'b@x'), ('c', 'c@x')")
    for t in tables:
        out.append(f"ALTER TABLE {t} ADD COLUMN note VARCHAR(200) NULL AFTER account_id, ADD KEY k_note (note(20))")
        out.append(f"INSERT INTO {t} (account_id, note) SELECT id, name FROM accounts")
        out.append(f"CREATE INDEX k_both ON {db}.{t} (account_id, id)")
    out.append(f"RENAME TABLE {tables[0]} TO {tables[0]}_old, {tables[1]} TO {tables[0]}")
    out.append(f"CREATE TRIGGER {db}.trg_accounts AFTER UPDATE ON accounts FOR EACH ROW "
               f"INSERT INTO {tables[2]} (account_id, note) VALUES (NEW.id, CONCAT('renamed ', NEW.name))")
    out.append(f"CREATE VIEW v_accounts AS SELECT a.id, a.name, COUNT(*) AS n FROM accounts a "
               f"JOIN {tables[3]} x ON x.account_id = a.id GROUP BY a.id, a.name")
    out.append(f"UPDATE accounts a JOIN {tables[4]} x ON x.account_id = a.id SET a.name = CONCAT(a.name, '!') "
               f"WHERE x.id > 0")
    out.append(f"DELETE x FROM {tables[5]} x JOIN accounts a ON a.id = x.account_id WHERE a.name = 'c'")
    out.append(f"UPDATE accounts SET email = CONCAT(name, '@y') WHERE id = {rng.randint(1, 3)}")
    out.append(f"DROP TABLE IF EXISTS {tables[0]}_old")
    out.append(f"ALTER TABLE {tables[6]} DROP COLUMN note, ENGINE=InnoDB")
    out.append("DROP VIEW IF EXISTS v_accounts")
    return out


def ddl_binlog(tenants: int = 2000) -> Path:
    """One binlog file of `tenants` tenants' schemas and migrations (MIXED, MariaDB's default)."""
    rng = random.Random(tenants)

    def write(server: MariaDBServer) -> None:
        for n in range(tenants):
            server.execute(_tenant(n, rng))
    return cached_binlog(DATA_DIR / f"ddl-tenants-{tenants}", "MIXED", write)


if __name__ == "__main__":
    print(ddl_binlog(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
