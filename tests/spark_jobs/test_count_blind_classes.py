"""Issue #80 goal 4: a lone DDL's class that names nothing a rule group's rules name (a tenant's
scratch tables, to every group of another tenant) is decided once for every group of the same
kinds of rule (RuleGroup._by_reads, rules.reach.Reach): 42 of a DDL-heavy shadow pass's 48 groups
took each new table's DDL through their own decision. Each slave is still counted as it is alone."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.reach import Reach
from dumpfilter.spark_jobs.tasks.bandwidth import count_chunk
from dumpfilter.spark_jobs.tasks.chunks import Chunk
from dumpfilter.topology import parse_topology
from tests.rules.test_lint_cases import Build

TENANTS = 4
KINDS = ("replicate-do-db=d{n}", "replicate-ignore-db=d{n}", "replicate-wild-do-table=d{n}.s%",
         "replicate-do-table=d{n}.scratch_1", "replicate-wild-ignore-table=d{n}.%2")


def _binlog(path):
    """Tenant-per-schema DDL: each tenant's scratch tables created, altered, indexed and dropped."""
    build = Build("mariadb")
    for n in range(1, TENANTS + 1):
        build.q(f"CREATE DATABASE d{n}")
    for round_ in range(3):
        for n in range(1, TENANTS + 1):
            for t in range(1, 3):
                table = f"scratch_{t}_{round_}" if t > 1 else "scratch_1"
                build.q(f"CREATE TABLE IF NOT EXISTS {table} (a int)", db=f"d{n}")
                build.q(f"ALTER TABLE {table} ADD COLUMN c{round_} int", db=f"d{n}")
                build.q(f"CREATE INDEX i{round_} ON {table} (a)", db=f"d{n}").q(f"DROP TABLE {table}", db=f"d{n}")
    return build.write(path)


def _count(path, slaves):
    text = "\n".join(f'[[slaves]]\nname = "s{k}"\nserver_id = {10 + k}\nskip_policy = "heartbeat"\nrules = ["{rule}"]\n'
                     for k, rule in enumerate(slaves))
    with ThreadPoolExecutor(1) as pool:  # (a thread's rule groups are its own: bandwidth._rule_group)
        got = pool.submit(count_chunk, Chunk(0, str(path), 0), parse_topology(text).slaves).result()
    return [(c.counts.bytes_sent, c.counts.events_sent, c.counts.kept_bytes) for c in got]


def test_a_class_no_rule_names_is_decided_once_for_the_groups_of_its_kinds(tmp_path, monkeypatch):
    path = _binlog(tmp_path / "m-bin.000001")
    slaves = [kind.format(n=n) for kind in KINDS for n in range(1, TENANTS + 1)]
    read: list[tuple[int, tuple]] = []  # (group, tables): each group's reads of its tables' verdicts
    real = RuleEngine.table_reads
    monkeypatch.setattr(RuleEngine, "table_reads", lambda self, updated: read.append((id(self), updated)) or real(self, updated))
    together = _count(path, slaves)
    shared = Counter(tables for _, tables in read if tables)
    read.clear()
    monkeypatch.setattr(Reach, "blind_to", lambda self, dbs: False)
    assert _count(path, slaves) == together
    apart = Counter(tables for _, tables in read if tables)
    # Each group of table rules read each scratch table's verdicts; now only the groups that name
    # its tenant and one group of each kind for the others, whose groups take its answer.
    assert set(shared) == set(apart) and all(2 * shared[t] <= apart[t] for t in apart), (shared, apart)
    monkeypatch.undo()
    assert together == [_count(path, [slave])[0] for slave in slaves]
