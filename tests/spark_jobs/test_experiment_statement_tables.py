"""Bytes by table on a statement-logged binlog (issue #60, goal 2): on a real MariaDB's MIXED
binlog of sysbench's oltp_write_only shapes, `experiment`'s bandwidth_by_table puts each
statement's bytes (with its context events) under the table it updates, sent to a slave as its
rules decide the statement (by the default database under replicate-do-db), and leaves the
transactions' envelopes (GTID, BEGIN, XID/COMMIT) to the tables they write, the control events
under 10% of the bytes, on ROW binlogs too."""

from __future__ import annotations

import csv
import random
import shutil
from collections import defaultdict

import pytest

from dumpfilter.codec import EventType, group_transactions, read_events
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.rules.statements import statement_tables
from dumpfilter.spark_jobs.bandwidth_experiment import REST, run_experiment
from dumpfilter.spark_jobs.tasks.chunks import input_files
from dumpfilter.topology import parse_topology

DBS = ("shop", "crm", "analytics", "logs")
TOPOLOGY = """
[[slaves]]
name = "all"
server_id = 2

[[slaves]]
name = "crm-db"
server_id = 3
rules = ["replicate-do-db=crm"]

[[slaves]]
name = "crm-wild"
server_id = 4
rules = ["replicate-wild-do-table=crm.%"]
"""


def _workload(transactions: int, rows: int = 100) -> list[str]:
    """sysbench's oltp_write_only on four databases (two UPDATEs, a DELETE, an INSERT per
    transaction), with `USE logs; INSERT ... UUID()` (row-logged under MIXED), `USE logs; UPDATE
    crm.sbtestN` (another database's table) and `USE analytics; UPDATE ... RAND()`."""
    rnd = random.Random(60)
    out = []
    for db in DBS:
        out.append(f"CREATE DATABASE {db}")
        for t in (1, 2):
            out.append(f"CREATE TABLE {db}.sbtest{t} (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, "
                       f"pad CHAR(60) NOT NULL, KEY k_{t} (k)) ENGINE=InnoDB")
            out.append(f"INSERT INTO {db}.sbtest{t} VALUES "
                       + ",".join(f"({i},{i},'c{i}','p{i}')" for i in range(1, rows + 1)))
    out.append("CREATE TABLE logs.ev (id BIGINT AUTO_INCREMENT PRIMARY KEY, u CHAR(36)) ENGINE=InnoDB")
    for n in range(transactions):
        db, t, i = DBS[n % 4], rnd.randint(1, 2), rnd.randint(1, rows)
        c = "-".join("".join(rnd.choice("0123456789") for _ in range(11)) for _ in range(10))
        out += [f"USE {db}", "BEGIN", f"UPDATE sbtest{t} SET k=k+1 WHERE id={i}",
                f"UPDATE sbtest{t} SET c='{c}' WHERE id={i}", f"DELETE FROM sbtest{t} WHERE id={rows + n}",
                f"INSERT INTO sbtest{t} (id, k, c, pad) VALUES ({rows + n + 1}, {i}, '{c}', '{'q' * 59}')",
                "COMMIT"]
        if n % 10 == 0:
            out += ["USE logs", "INSERT INTO ev (u) VALUES (UUID())"]
        if n % 10 == 1:
            out += ["USE logs", f"UPDATE crm.sbtest{t} SET k=k+1 WHERE id={i}"]
        if n % 10 == 2:
            out += ["USE analytics", f"UPDATE sbtest{t} SET k=k+FLOOR(RAND()*3) WHERE id={i}"]
    return out


@pytest.fixture(scope="module")
def mixed_binlogs(mariadb_factory, tmp_path_factory):
    server = mariadb_factory("bytes-by-table-mixed", binlog_format="MIXED")
    server.execute(_workload(1200))
    server.flush_logs()
    root = tmp_path_factory.mktemp("mixed")
    for path in server.binlog_files()[:-1]:
        shutil.copy(path, root / path.name)
    return root


FRAMING_VERBS = ("BEGIN", "COMMIT", "ROLLBACK")


def _reference(src) -> dict:
    """From the codec's events one by one, per transaction: its payload, each Table_map and Rows
    event under its table and each statement updating tables with the context events before it
    (split evenly between them, the remainder to the first); its envelope, every other byte of it
    (GTID, BEGIN, annotations, XID/COMMIT), split evenly between the tables it writes in the order
    first written, or "framing" when it writes none; and the control events. The same split of
    what replicate-do-db=crm is sent: a statement's share where its default database is crm, a row
    event's where its table's is, an envelope share where the write that first brought the table
    in the transaction is sent. Returns {"payload", "envelope", "crm_payload", "crm_envelope": per
    table; "framing", "control", "unattributed": bytes}."""
    out = {k: defaultdict(int) for k in ("payload", "envelope", "crm_payload", "crm_envelope")}
    framing = control = unattributed = 0

    def split(size: int, names: list) -> list:
        return [(name, size // len(names) + (size % len(names) if k == 0 else 0)) for k, name in enumerate(names)]

    for path in input_files([src]):
        for unit in group_transactions(read_events(path.read_bytes())):
            if unit.kind == CONTROL:
                control += unit.size
                continue
            maps, context, payload = {}, 0, 0
            written: dict[str, bool] = {}  # table -> whether replicate-do-db=crm is sent its first write
            for e in unit.events:
                if e.type_code in (EventType.INTVAR, EventType.RAND, EventType.USER_VAR):
                    context += e.size
                elif e.type_code == EventType.TABLE_MAP:
                    maps[e.table_id] = "{1}.{2}".format(*e.table_map)
                    name = maps[e.table_id]
                    out["payload"][name] += e.size
                    out["crm_payload"][name] += e.size if name.startswith("crm.") else 0
                    payload += e.size
                    written.setdefault(name, name.startswith("crm."))
                elif e.is_rows and e.table_id in maps:
                    name = maps[e.table_id]
                    out["payload"][name] += e.size
                    out["crm_payload"][name] += e.size if name.startswith("crm.") else 0
                    payload += e.size
                elif e.is_query and (e.sql or "").strip().upper() not in FRAMING_VERBS:
                    updated = list(dict.fromkeys(f"{d}.{t}" for d, t in statement_tables(e.sql, e.db).updated))
                    payload += e.size + context
                    if not updated:
                        unattributed += e.size + context
                    for name, share in split(e.size + context, updated):
                        out["payload"][name] += share
                        out["crm_payload"][name] += share if e.db == "crm" else 0
                        written.setdefault(name, e.db == "crm")
                    context = 0
            envelope = unit.size - payload
            if not written:
                framing += envelope
            for name, share in split(envelope, list(written)):
                out["envelope"][name] += share
                out["crm_envelope"][name] += share if written[name] else 0
    return {**{k: dict(v) for k, v in out.items()}, "framing": framing, "control": control,
            "unattributed": unattributed}


def _csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _check_by_table(rows: list[dict], by_table: list[dict], ref: dict) -> None:
    """bandwidth_by_table against `_reference`: every table's payload and envelope, the rows of
    each slave adding up to the binlog and to what it is sent, the framing and control row under
    10% of the bytes."""
    total = rows[0]["bytes_all"]
    for row in rows:
        mine = [t for t in by_table if t["slave"] == row["slave"]]
        assert sum(int(t["bytes_all"]) for t in mine) == total  # exactly: nothing counted twice or lost
        assert sum(int(t["bytes_sent"]) for t in mine) == row["bytes_sent"]
        assert all(int(t["bytes_sent"]) >= 0 for t in mine)
        assert all(int(t["bytes_all"]) == int(t["bytes_payload"]) + int(t["bytes_envelope"]) for t in mine)
    everything = {t["table"]: t for t in by_table if t["slave"] == "all"}
    named = {name: t for name, t in everything.items() if not name.startswith("(")}
    assert {name: int(t["bytes_payload"]) for name, t in named.items()} == ref["payload"]
    assert {name: int(t["bytes_envelope"]) for name, t in named.items() if int(t["bytes_envelope"])} == \
        {name: size for name, size in ref["envelope"].items() if size}
    rest = everything[REST]
    assert (int(rest["bytes_payload"]), int(rest["bytes_envelope"])) == (ref["control"], ref["framing"])
    # What is left: the control events and the envelopes of transactions that write no table (DDL
    # of databases, SET...). It was 11.6-13.1% with each transaction's GTID and XID in it.
    assert int(rest["bytes_all"]) < 0.10 * total, f"framing and control: {int(rest['bytes_all']) / total:.1%}"
    sent = {(t["slave"], t["table"]): int(t["bytes_sent"]) for t in by_table}
    for name, t in named.items():
        size = int(t["bytes_all"])
        assert sent[("all", name)] == size
        if ("crm-wild", name) in sent:
            assert sent[("crm-wild", name)] == (size if name.startswith("crm.") else 0)
        if ("crm-db", name) in sent:
            # replicate-do-db=crm: a statement is applied by its default database, `USE logs; UPDATE crm.t` is not
            assert sent[("crm-db", name)] == ref["crm_payload"].get(name, 0) + ref["crm_envelope"].get(name, 0)


@pytest.mark.parametrize("chunk_bytes", [None, 300_000])
def test_statement_bytes_go_to_their_tables(tmp_path, mixed_binlogs, chunk_bytes):
    rows, _ = run_experiment(mixed_binlogs, parse_topology(TOPOLOGY), tmp_path / "out", chunk_bytes=chunk_bytes,
                             charts=False)
    by_table = _csv(tmp_path / "out" / "bandwidth_by_table.csv")
    ref = _reference(mixed_binlogs)
    _check_by_table(rows, by_table, ref)
    sent = {(t["slave"], t["table"]): int(t["bytes_sent"]) for t in by_table}
    assert sent[("crm-db", "crm.sbtest1")] < sent[("crm-wild", "crm.sbtest1")]


@pytest.fixture(scope="module")
def row_binlogs(mariadb_factory, tmp_path_factory):
    server = mariadb_factory("bytes-by-table-row", binlog_format="ROW")
    server.execute(_workload(600))
    server.flush_logs()
    root = tmp_path_factory.mktemp("row")
    for path in server.binlog_files()[:-1]:
        shutil.copy(path, root / path.name)
    return root


@pytest.mark.parametrize("chunk_bytes", [None, 200_000])
def test_row_binlogs_give_each_table_its_envelope_as_mixed_ones_do(tmp_path, row_binlogs, chunk_bytes):
    """The same workload row-logged: every transaction's envelope (GTID, annotations, XID) shared
    between the tables its Table_maps name (the core's fast units, event by event where a unit
    writes several tables), as a statement-logged one's is."""
    rows, _ = run_experiment(row_binlogs, parse_topology(TOPOLOGY), tmp_path / "out", chunk_bytes=chunk_bytes,
                             charts=False)
    _check_by_table(rows, _csv(tmp_path / "out" / "bandwidth_by_table.csv"), _reference(row_binlogs))


def test_a_real_sysbench_statement_binlog_of_mariadb_11(tmp_path, shared_fixtures):
    """MariaDB 11.8's own STATEMENT binlogs of sysbench writes (GTID, four statements, XID per
    transaction; log_pos 0 inside groups), a copy of a public repository's test data."""
    src = shared_fixtures / "mariadb-operator-mariadb-poc" / "domain_id_0"
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    for path in sorted(src.glob("mariadb-repl-bin.*")):
        shutil.copy(path, binlogs / path.name)
    topology = '[[slaves]]\nname = "all"\nserver_id = 2\n\n[[slaves]]\nname = "other"\nserver_id = 3\n' \
               'rules = ["replicate-do-db=other"]\n'
    rows, _ = run_experiment(binlogs, parse_topology(topology), tmp_path / "out", charts=False)
    by_table = _csv(tmp_path / "out" / "bandwidth_by_table.csv")
    ref = _reference(binlogs)
    assert ref["envelope"] and not ref["framing"]
    _check_by_table(rows, by_table, ref)
