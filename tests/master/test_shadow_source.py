"""Shadow candidates on a real MariaDB primary (issue #80 goal 4): `master serve --source` keeps the
series from a live primary while `--shadow`'s candidates are counted, the primary writing two schemas
and rotating its binlog (FLUSH BINARY LOGS) between batches, so that the pass counts files being
written and files closed under it. Once the series has caught up, each candidate's counts equal
`experiment --candidates` over the same files; `master status` shows them."""

from __future__ import annotations

import json
import sys
import subprocess

import pytest

from dumpfilter.spark_jobs.bandwidth_experiment import run_experiment
from dumpfilter.topology import parse_topology
from tests.support.master_command import master_status, serve_master, stop_master
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]
CANDIDATES = """
[[slaves]]
name = "do-s1"
server_id = 11
rules = ["replicate-do-db=s1"]

[[slaves]]
name = "ignore-s1"
server_id = 12
skip_policy = "placeholder"
rules = ["replicate-ignore-db=s1"]

[[slaves]]
name = "s2-t"
server_id = 13
skip_policy = "empty-transaction"
rules = ["replicate-wild-do-table=s2.t%"]

[[slaves]]
name = "all"
server_id = 14
rules = []
"""


def _write(primary, batch: int) -> None:
    """A batch of small transactions over both schemas, one multi-statement transaction among them."""
    conn = primary.connect()
    with conn.cursor() as cur:
        for i in range(30):
            n = batch * 100 + i
            cur.execute("INSERT INTO s1.t VALUES (%s, %s)", (n, "a" * (50 + i)))
            cur.execute("INSERT INTO s2.t VALUES (%s, %s)", (n, "b" * (20 + i)))
        cur.execute("BEGIN")
        cur.execute("UPDATE s1.t SET v = 'c' WHERE id = %s", (batch * 100,))
        cur.execute("UPDATE s2.t SET v = 'd' WHERE id = %s", (batch * 100,))
        cur.execute("COMMIT")
    conn.close()


def _shadows(address: str) -> dict[str, dict]:
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "shadow", "list", "--master", address,
                          "--json", "-"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return {row["name"]: row for row in json.loads(run.stdout)}


def test_shadow_counts_on_a_live_primary_equal_experiment(mariadb_factory, tmp_path):
    primary = mariadb_factory("primary-shadow")
    primary.flush_logs()
    start = primary.master_position()[0]
    primary.execute(["CREATE DATABASE s1", "CREATE DATABASE s2",
                     "CREATE TABLE s1.t (id INT PRIMARY KEY, v VARCHAR(200))",
                     "CREATE TABLE s2.t (id INT PRIMARY KEY, v VARCHAR(200))"])
    shadow = tmp_path / "candidates.toml"
    shadow.write_text(CANDIDATES)
    local = tmp_path / "series"
    url = f"mysql://{primary.repl_user}:{primary.repl_password}@127.0.0.1:{primary.port}"
    proc, address = serve_master(local, "--source", url, "--source-file", start, "--shadow", str(shadow))
    try:
        for batch in range(1, 7):  # files rotate while the pass counts
            _write(primary, batch)
            if batch % 2 == 0:
                primary.flush_logs()
            if batch == 3:  # the pass has counted into the series before the next rotations
                assert wait_for(lambda: all(r["counted_to"] for r in _shadows(address).values()), every=0.1)
        _write(primary, 7)
        end_file, end_pos = primary.master_position()

        def counted_to_end() -> bool:  # (the primary may have appended a Binlog_checkpoint since)
            ends = {r["counted_to"].rpartition(":")[::2] for r in _shadows(address).values()}
            return len(ends) == 1 and all(f == end_file and int(pos) >= end_pos for f, pos in ends)

        assert wait_for(counted_to_end, every=0.1)
        rows = _shadows(address)
        ends = {r["counted_to"] for r in rows.values()}
        assert len(ends) == 1
        end_pos = int(ends.pop().rpartition(":")[2])
        status = master_status(address)
    finally:
        stop_master(proc)
    files = sorted(p for p in local.iterdir() if p.name.startswith(start.rpartition(".")[0]) and p.suffix[1:].isdigit())
    assert len(files) >= 4 and files[0].name == start and files[-1].name == end_file
    # The same range: the primary may append to its last file after the candidates were read (a
    # Binlog_checkpoint written once InnoDB has synced), so the last file is taken up to where they
    # counted.
    same = tmp_path / "same-range"
    same.mkdir()
    for path in files:
        (same / path.name).write_bytes(path.read_bytes()[:end_pos] if path.name == end_file else path.read_bytes())
    files = sorted(same.iterdir())
    ranking: list[dict] = []
    run_experiment([str(p) for p in files], parse_topology('[[slaves]]\nname = "x"\nserver_id = 1\n'),
                   tmp_path / "experiment", candidates=parse_topology(CANDIDATES), ranking=ranking, charts=False)
    want = {row["candidate"]: row for row in ranking}
    assert set(rows) == set(want)
    for name, row in rows.items():
        got = row["counts"]
        assert (got["bytes_all"], got["bytes_sent"], got["events_sent"]) == \
               (want[name]["bytes_all"], want[name]["bytes_sent"], want[name]["events_sent"]), name
        assert row["state"] == "counting" and not row["note"]
    assert rows["all"]["counts"]["saving_bytes"] == 0
    assert 0 < rows["do-s1"]["counts"]["bytes_sent"] < rows["all"]["counts"]["bytes_sent"]
    assert rows["ignore-s1"]["counts"]["saving_bytes"] > 0 and rows["s2-t"]["counts"]["saving_bytes"] > 0
    assert "do-s1" in status and "ignore-s1" in status
