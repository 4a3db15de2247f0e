"""bench/experimenter_question.py (issue #60's closing note) on a small workload: a real MariaDB
primary in MIXED format runs sysbench's oltp_write_only on shop, crm, analytics and logs and the
application's statements (`USE logs; UPDATE crm.sbtestN`, UUID() inserts, RAND() updates); the real
CLI `dumpfilter experiment --candidates` ranks every candidate that silently diverges after every
one that does not, each showing "diverges: N writes" with N the cross-database updates its
database rule skips (or the ones it keeps: none), and the bytes by table add up to the binlog's.
Nothing here asserts a time."""

from __future__ import annotations

import pytest

from bench.experimenter_question import CANDIDATES, ask, ranked_lines, table_lines, top_tables, write_binlogs
from dumpfilter.spark_jobs.bandwidth_experiment import REST

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]


def test_the_question_is_answered_with_divergence_ranked_last_and_bytes_by_table(tmp_path):
    made = write_binlogs(tmp_path / "binlogs", 1, rows=100)
    lost = made["cross_database_updates"]  # `USE logs; UPDATE crm.sbtestN`: skipped by a database rule
    assert lost > 0 and made["uuid_inserts"] > 0 and made["rand_updates"] > 0
    answer = ask(tmp_path / "binlogs", tmp_path / "work")
    ranking = answer["candidates"]
    assert sorted(r["candidate"] for r in ranking) == sorted(name for name, _ in CANDIDATES)
    row = {r["candidate"]: r for r in ranking}

    # Database rules test the default database: each one loses the cross-database updates; the
    # wild-table forms keep them and do not diverge.
    database_rules = {"crm-db", "shop+crm-db", "no-logs-db"}
    for name, r in row.items():
        assert r["diverges"] == (lost if name in database_rules else 0), name
        assert ("diverges: " in r["lint"]) == (name in database_rules)
        assert r["lint"].startswith("no break")
    assert row["crm-db"]["lint"] == f"no break; diverges: {lost} writes"
    # by bytes alone crm-db comes first; it ranks after every candidate that does not diverge
    assert row["crm-db"]["bytes_saved"] > row["crm-wild"]["bytes_saved"]
    ranks = [r["candidate"] for r in ranking]
    assert ranks[0] == "crm-wild"
    assert max(row[n]["rank"] for n in row if n not in database_rules) < min(row[n]["rank"] for n in database_rules)
    assert [r["rank"] for r in ranking] == list(range(1, len(CANDIDATES) + 1))
    printed = ranked_lines(ranking)
    assert any("crm-db" in line and f"diverges: {lost} writes" in line for line in printed)
    assert f"diverges: {lost} writes" in answer["stdout"]  # the CLI's own table says it too

    # Bytes by table: the binlog's events' bytes (each file's 4-byte magic is never sent), every one
    # attributed once; statements under the tables they write.
    mine = [r for r in answer["by_table"] if r["slave"] == "all"]
    assert sum(r["bytes_all"] for r in mine) == made["bytes"] - 4 * len(made["files"]) == ranking[0]["bytes_all"]
    top, rest = top_tables(answer["by_table"])
    assert rest["table"] == REST and rest["share_pct"] < 10
    assert len(top) == 10 and all(r["table"] != REST for r in top)
    assert [r["bytes_all"] for r in top] == sorted((r["bytes_all"] for r in top), reverse=True)
    assert {"crm.sbtest1", "crm.sbtest2"} <= {r["table"] for r in mine}
    lines = table_lines(top, rest)
    assert len(lines) == 12 and lines[-1].startswith("(framing, control)")
