"""`experiment` on a statement-logged binlog does its per-unit work in the core (issue #57, goal 3):
the bytes by table of the statement units the core decides by keys are tallied by the core
(`UnitList.statement_tables`, each key's group made once in Python), and the binlog's last second
is read off the counting's own buffers (`UnitList.max_timestamp`), not by a second header walk of
the last file. On a real MariaDB's MIXED binlog (sysbench's write shapes, row-logged `UUID()`
inserts, `USE logs; UPDATE crm.t`, `RAND()`) and MariaDB 11.8's own sysbench STATEMENT binlogs:
only the units the keys do not read (DDL, control events) go the per-unit Python way, for the
tables and for every slave's count under each skip policy; the bytes by table are those the
per-unit way gives; the counts are those `simulate`'s real gRPC streams carried."""

from __future__ import annotations

import shutil

import pytest

from dumpfilter import _core
from dumpfilter.codec import group_transactions, read_events
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.spark_jobs.tasks import bandwidth, statement_tables
from dumpfilter.spark_jobs.tasks.counts import merge_statements, merge_tables
from dumpfilter.spark_jobs.tasks.chunks import input_files, plan_chunks
from tests.spark_jobs.test_experiment_compiled import _streamed, _topology
from tests.spark_jobs.test_experiment_statement_tables import _workload
from tests.support.simulated import assert_same, experiment_rows
from tests.support.count_spy import CountSpy

POLICIES = ("heartbeat", "placeholder", "empty-transaction")
DML = ("INSERT", "UPDATE", "DELETE", "REPLACE")


@pytest.fixture(scope="module")
def mixed_binlogs(mariadb_factory, tmp_path_factory):
    server = mariadb_factory("keyed-tables-mixed", binlog_format="MIXED")
    server.execute(_workload(600))
    server.flush_logs()
    root = tmp_path_factory.mktemp("mixed")
    for path in server.binlog_files()[:-1]:
        shutil.copy(path, root / path.name)
    return root


@pytest.fixture(scope="module")
def statement_binlogs(shared_fixtures, tmp_path_factory):
    """MariaDB 11.8's sysbench STATEMENT binlogs (a copy of a public repository's test data)."""
    root = tmp_path_factory.mktemp("statement")
    for path in sorted((shared_fixtures / "mariadb-operator-mariadb-poc" / "domain_id_0").glob("mariadb-repl-bin.*")):
        shutil.copy(path, root / path.name)
    return root


def _shapes(src) -> tuple[int, int, int]:
    """(units, statement units, other units that are not row-logged: DDL, SET...), from the codec's
    events: a statement unit holds DML statements and BEGIN/COMMIT only; control units count apart."""
    units = keyed = others = 0
    for path in input_files([src]):
        for unit in group_transactions(read_events(path.read_bytes())):
            units += 1
            if unit.kind == CONTROL:
                continue
            texts = [(e.sql or "").strip().upper() for e in unit.events if e.is_query]
            texts = [t for t in texts if t not in ("BEGIN", "COMMIT")]
            if any(e.is_rows for e in unit.events):
                continue  # row-logged: fast
            if texts and all(t.startswith(DML) for t in texts):
                keyed += 1
            else:
                others += 1
    return units, keyed, others


def _by_table(src, slaves, chunk_bytes):
    parts = [p for chunk in plan_chunks(input_files([src]), chunk_bytes) for p in bandwidth.count_chunk(chunk, slaves)]
    return merge_tables(parts), merge_statements(parts)


def _one_unit_at_a_time(units, n, keys, tables, statements, sums):
    """`keyed_tables` leaving every unit that is not fast to the per-unit way (control units
    counted as `_count_units` counted them before the core did)."""
    left = []
    for k in range(n):
        u = units.unit(k)
        if u.flags & _core.F_FAST:
            continue
        if u.kind == 0:
            tables[statement_tables.OTHER] = tables.get(statement_tables.OTHER, 0) + (u.end - u.start)
        else:
            left.append(k)
    return left


@pytest.mark.parametrize("which", ["mixed", "statement"])
@pytest.mark.parametrize("chunk_bytes", [None, 150_000])
def test_statement_units_are_tallied_by_the_core(request, which, chunk_bytes, monkeypatch):
    src = request.getfixturevalue(f"{which}_binlogs")
    units, keyed, others = _shapes(src)
    assert keyed > units / 2, (units, keyed)  # the premise: a statement-logged binlog
    slaves = [(["replicate-do-db=crm" if which == "mixed" else "replicate-do-db=sbtest-repl"], p) for p in POLICIES]
    slaves += [(["replicate-wild-do-table=crm.%"], p) for p in POLICIES]
    topology = _topology(slaves)
    streamed = _streamed(src, slaves)  # before the spies: simulate counts by table with the same walk
    by_python, counted_by_python = [], []
    real_slow, real_unit = bandwidth._unit_tables, bandwidth._SlaveCounter.unit
    monkeypatch.setattr(bandwidth, "_unit_tables", lambda *a: by_python.append(1) or real_slow(*a))
    monkeypatch.setattr(bandwidth._SlaveCounter, "unit",
                        lambda self, txn, k: counted_by_python.append(self.policy_name) or real_unit(self, txn, k))
    rows = experiment_rows([src], topology.slaves, chunk_bytes)
    assert_same(streamed, rows)
    # The per-unit Python way: the units the keys do not read, never a statement unit (it took
    # every one of them).
    assert len(by_python) <= others, (len(by_python), others, keyed)
    control = units - keyed - others  # and the row-logged ones, which never went this way
    for policy in POLICIES:  # per slave, the units the core leaves: control events and DDL
        assert counted_by_python.count(policy) <= 2 * (control + others), (policy, counted_by_python.count(policy))
    mine = _by_table(src, topology.slaves, chunk_bytes)
    monkeypatch.setattr(bandwidth, "keyed_tables", _one_unit_at_a_time)
    by_python.clear()
    assert _by_table(src, topology.slaves, chunk_bytes) == mine
    assert len(by_python) >= keyed


def test_the_last_second_comes_from_the_counting(mixed_binlogs, tmp_path, monkeypatch):
    """The by-hour table's last second is the latest event time of the last file, read while it
    is counted: the last file's headers are not walked again (`time_span` reads the first file's
    first events only)."""
    import csv

    from dumpfilter.binlogs import time_span
    from dumpfilter.spark_jobs.bandwidth_experiment import run_experiment

    walks = []
    real = time_span._stamps
    monkeypatch.setattr(time_span, "_stamps", lambda path, limit=None: walks.append(limit) or real(path, limit))
    run_experiment(mixed_binlogs, _topology([([], "placeholder")]), tmp_path / "out", charts=False)
    assert None not in walks and walks
    stamps = [e.timestamp for path in input_files([mixed_binlogs]) for e in read_events(path.read_bytes())
              if e.timestamp]
    with open(tmp_path / "out" / "bandwidth_by_hour.csv", newline="") as f:
        hours = list(csv.DictReader(f))
    assert max(int(h["to_epoch"]) for h in hours) == max(stamps)


def test_every_slave_is_counted_in_one_walk_per_buffer(mixed_binlogs, monkeypatch):
    """Every slave whose answers leave no unit of a buffer to Python is counted over it in one call
    of the core's count walk for all of them (`UnitList.count_many`: slaves alike in all it reads
    one job; the skipped units' forms under the placeholder and empty-transaction policies made
    once per buffer): the counts stay the streams'. Only a buffer holding a unit Python decides (a Format_description, a Rotate) is
    walked slave by slave."""
    slaves = [([f"replicate-do-db={db}"], p) for db in ("shop", "crm", "analytics", "logs")
              for p in ("heartbeat", "placeholder", "empty-transaction")]
    streamed = _streamed(mixed_binlogs, slaves)
    calls, buffers = [], []
    real = bandwidth.chunk_buffers

    def spied(*args, **kwargs):
        for fmt, buf, base, units, n, crc_len in real(*args, **kwargs):
            buffers.append(n)
            yield fmt, buf, base, CountSpy(units, calls), n, crc_len

    monkeypatch.setattr(bandwidth, "chunk_buffers", spied)
    assert_same(streamed, experiment_rows([mixed_binlogs], _topology(slaves).slaves, 150_000))
    many = [jobs for call, jobs in calls if call == "count_many"]
    alone = [1 for call, _ in calls if call == "count"]
    assert all(0 < jobs <= len(slaves) for jobs in many) and len(many) >= len(buffers) // 2 >= 1, (many, buffers)
    assert len(alone) <= 2 * len(slaves) * (len(buffers) - len(many)), (len(alone), buffers)


def test_a_rule_sets_keys_are_decided_once_across_counts(mixed_binlogs, monkeypatch):
    """A rule set's keep table is kept from one count to the next on a thread (`bandwidth._rule_group`:
    a live master's passes): counted again, the binlog's statement keys are not decided again, and
    the counts are the same."""
    from dumpfilter.rules.keep_table import KeepTable

    decided = []
    real = KeepTable._decide_key
    monkeypatch.setattr(KeepTable, "_decide_key", lambda self, shape, key: decided.append(shape) or real(self, shape, key))
    slaves = _topology([(["replicate-wild-ignore-table=crm.once%"], "placeholder"),
                        (["replicate-do-db=shop", "replicate-ignore-table=shop.once"], "heartbeat")]).slaves
    chunks = plan_chunks(input_files([mixed_binlogs]), 150_000)
    first = [p.counts for chunk in chunks for p in bandwidth.count_chunk(chunk, slaves)]
    assert decided
    decided.clear()
    assert [p.counts for chunk in chunks for p in bandwidth.count_chunk(chunk, slaves)] == first
    assert not decided


def test_the_sums_by_group_id_hold_when_the_groups_are_numbered_again(mixed_binlogs, monkeypatch):
    """A chunk's statements summed by group id (`statement_tables.KeyedSums`) keep to their own
    groups when `_Groups` forgets its keys and numbers them again inside the chunk: buffers of
    4 KB, each numbering from 0 again, count the bytes by table and statement that one numbering
    for the whole binlog counts."""
    slaves = [(["replicate-do-db=crm"], "heartbeat")]
    topology = _topology(slaves)
    kept = _by_table(mixed_binlogs, topology.slaves, None)
    monkeypatch.setattr("dumpfilter.spark_jobs.tasks.chunks.READ_BYTES", 4096)
    monkeypatch.setattr(statement_tables._Groups, "KEPT", 1)  # (every buffer's keys numbered from 0)
    monkeypatch.setattr(statement_tables, "_GROUPS", statement_tables._Groups())
    numbered = []
    real_number = statement_tables._Groups.number
    monkeypatch.setattr(statement_tables._Groups, "number",
                        lambda self, keys: numbered.append(1) or real_number(self, keys))
    assert _by_table(mixed_binlogs, topology.slaves, None) == kept
    assert len(numbered) > 2  # the premise: many buffers in a chunk, each numbered again
