"""One name for each outcome (issue #60, goal 5): a transaction the rules keep nothing of is
"skipped" wherever it is counted. `explain_binlog` called it "emptied" where the master's
`Received` counted it "skipped" (380 of each). On one binlog a real MariaDB writes, the harness's
explanation, the master's stats and `dumpfilter filter`'s summary (text and --json) give the same
count under the same word; `SimulatedSlave.transactions_emptied` stays as a deprecated alias."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpfilter.harness import Master, SimulatedSlave, Slave, explain_binlog

pytestmark = [pytest.mark.mariadb, pytest.mark.grpc]

ROOT = Path(__file__).resolve().parents[2]
# The shapes: writes to the kept database under its own and another default database,
# row-logged under MIXED (UUID()), and writes to databases the rules do not keep.
WORKLOAD = [
    "CREATE DATABASE shop", "CREATE DATABASE logs", "CREATE DATABASE crm",
    "CREATE TABLE shop.items (id INT PRIMARY KEY, n INT) ENGINE=InnoDB",
    "CREATE TABLE logs.ev (id INT AUTO_INCREMENT PRIMARY KEY, u VARCHAR(40)) ENGINE=InnoDB",
    "CREATE TABLE crm.c (id INT PRIMARY KEY, n INT) ENGINE=InnoDB",
    *[f"INSERT INTO shop.items VALUES ({i}, {i})" for i in range(12)],
    *[f"INSERT INTO crm.c VALUES ({i}, {i})" for i in range(9)],
    *["INSERT INTO logs.ev (u) VALUES (UUID())"] * 7,
    "USE logs", "UPDATE shop.items SET n = n + 1 WHERE id < 4", "UPDATE crm.c SET n = n + 1",
    "USE shop", "UPDATE items SET n = n * 2", "UPDATE crm.c SET n = 0 WHERE id = 1",
]


@pytest.fixture(scope="module", params=["MIXED", "ROW"])
def binlog(request, mariadb_factory, tmp_path_factory):
    server = mariadb_factory(f"words-{request.param.lower()}", binlog_format=request.param)
    server.execute(WORKLOAD)
    server.flush_logs()
    directory = tmp_path_factory.mktemp(f"words-{request.param.lower()}")
    for path in server.binlog_files():
        shutil.copy(path, directory / path.name)
    return directory


def _filter(binlog: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "dumpfilter", "filter", str(binlog), "-o", str(out),
                           "--replicate-do-db=shop", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def test_explain_the_master_and_filter_count_skipped_alike(binlog, tmp_path):
    outcomes = [t.outcome for t in explain_binlog(binlog, ["replicate-do-db=shop"])]
    assert "emptied" not in outcomes
    skipped = outcomes.count("skipped")
    assert skipped > 0 and outcomes.count("kept") > 0
    with Master(binlog) as master, Slave(master, ["replicate-do-db=shop"]) as slave:
        received = slave.catch_up(timeout=120)
    assert received.transactions_skipped == skipped
    summary = json.loads(_filter(binlog, tmp_path / "a.bin", "--json").stdout)
    assert summary["transactions_skipped"] == skipped
    assert summary["transactions_skipped"] == summary["emptied"] + summary["skipped"]  # written empty + left out
    text = _filter(binlog, tmp_path / "b.bin", "--summary", "plain").stderr
    assert f"; {skipped} skipped (" in text and "emptied" not in text, text
    left_out = _filter(binlog, tmp_path / "c.bin", "--summary", "plain", "--empty-transactions", "drop").stderr
    assert f"; {skipped} skipped ({skipped} left out)" in left_out, left_out


def test_the_simulated_row_names_empty_transactions_as_received_does():
    row = SimulatedSlave(name="a", server_id=2, skip_policy="empty-transaction", events_all=10, bytes_all=100,
                         events_sent=4, bytes_sent=40, saved_bytes=60, transactions_kept=1, transactions_partial=0,
                         transactions_skipped=3, empty_transactions=3, verified=None, lint_breaks=0)
    with pytest.warns(DeprecationWarning, match="empty_transactions"):
        assert row.transactions_emptied == row.empty_transactions
