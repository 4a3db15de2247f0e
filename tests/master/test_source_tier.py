"""A tier of binlog servers (issue #31 item 5): `master serve --source` from another dumpfilter's
--mysql-listen, as from a primary. Real fixture binlogs (MariaDB 11.8 and 10.5, MySQL 9.6 with a
tagged GTID) served as an upstream's --binlog-dir come out of a chain of three `master serve`
processes byte for byte; the endpoint answers SHOW BINARY LOGS to pymysql as a primary does."""

from __future__ import annotations

import re
import shutil

import pymysql
import pytest

from tests.support.master_command import free_port, master_status, serve_master, stop_master, wait_mysql_endpoint
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

# (fixture files, in order; the names they are served under). The MySQL 9.6 file is renamed to
# what its own Rotate says it was (binlog.000004: it rotates to binlog.000005); bytes unchanged.
SERIES = {
    "mariadb-11.8-chain": [(f"mariadb-operator-mariadb-poc/domain_id_0/mariadb-repl-bin.00000{i}",
                            f"mariadb-repl-bin.00000{i}") for i in (5, 6, 7)],
    "mariadb-10.5": [("blackbeam-rust_mysql_common/mariadb-bin.000001", "mariadb-bin.000001")],
    "mysql-9.6-tagged-gtid": [("blackbeam-rust_mysql_common/binlog_transaction_with_GTID_TAG.000001",
                               "binlog.000004")],
}
TIERS = 3  # the fixture's directory -> tier 1 -> tier 2 -> tier 3, each --source from the one before


def _upstream_dir(shared_fixtures, tmp_path, series):
    up = tmp_path / "upstream"
    up.mkdir()
    for source, name in series:
        shutil.copyfile(shared_fixtures / source, up / name)
    base = series[0][1].rsplit(".", 1)[0]
    (up / f"{base}.index").write_text("".join(f"./{name}\n" for _source, name in series))
    return up


@pytest.mark.parametrize("name", sorted(SERIES))
def test_each_tier_keeps_the_series_byte_for_byte(shared_fixtures, tmp_path, name):
    series = SERIES[name]
    up = _upstream_dir(shared_fixtures, tmp_path, series)
    expected = {file: (up / file).read_bytes() for _source, file in series}
    # Each tier's port is picked as it starts: a port picked ahead can be taken meanwhile as the
    # ephemeral port of an earlier tier's connection upstream (the same range, 32768-60999).
    ports = [free_port()]
    procs = []
    try:
        procs.append(serve_master(up, "--mysql-listen", f"127.0.0.1:{ports[0]}")[0])
        wait_mysql_endpoint(procs[-1])
        # The endpoint lists the served files as a primary's SHOW BINARY LOGS does (a --source
        # downstream starts from the first).
        conn = pymysql.connect(host="127.0.0.1", port=ports[0], user="tier", password="x")
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            assert [tuple(row) for row in cur.fetchall()] == [(f, len(data)) for f, data in expected.items()]
        conn.close()
        dirs = [tmp_path / f"tier{i}" for i in range(1, TIERS + 1)]
        for i, local in enumerate(dirs):
            ports.append(free_port())
            procs.append(serve_master(local, "--source", f"mysql://tier:x@127.0.0.1:{ports[i]}",
                                      "--mysql-listen", f"127.0.0.1:{ports[i + 1]}")[0])
            wait_mysql_endpoint(procs[-1])

        def complete(local) -> bool:
            return all((local / f).is_file() and (local / f).stat().st_size >= len(data) for f, data in expected.items())
        for local in dirs:
            assert wait_for(lambda: complete(local), every=0.1), sorted(p.name for p in local.iterdir())
            for file, data in expected.items():
                assert (local / file).read_bytes() == data, f"{local.name}/{file}"
            index = sorted(local.glob("*.index"))
            assert len(index) == 1 and index[0].read_text().split() == [f"./{f}" for f in expected]
    finally:
        errors = [stop_master(proc) for proc in reversed(procs)]
    for stderr in errors:
        assert "Traceback" not in stderr and "error" not in stderr.lower(), stderr


def test_source_gtid_from_a_dumpfilter_starts_at_the_file_the_state_needs(shared_fixtures, tmp_path):
    """--source-gtid asks the upstream BINLOG_GTID_POS(file, 4) per file, newest first: the
    endpoint answers each file's Gtid_list, so the series starts at the newest file whose starting
    position the state covers (mariadb-repl-bin.000006 starts at 0-10-262667, .000007 at 0-10-262733)."""
    series = SERIES["mariadb-11.8-chain"]
    up = _upstream_dir(shared_fixtures, tmp_path, series)
    up_port, local = free_port(), tmp_path / "tier1"
    procs = []
    try:
        procs.append(serve_master(up, "--mysql-listen", f"127.0.0.1:{up_port}")[0])
        wait_mysql_endpoint(procs[-1])
        conn = pymysql.connect(host="127.0.0.1", port=up_port, user="tier", password="x")
        with conn.cursor() as cur:
            answers = []
            for _source, name in series:
                cur.execute("SELECT BINLOG_GTID_POS(%s, 4)", (name,))
                answers.append(cur.fetchone()[0])
            cur.execute("SELECT BINLOG_GTID_POS(%s, 5)", (series[0][1],))
            assert cur.fetchone()[0] is None  # only a file's start is answered
        conn.close()
        assert answers == ["0-10-262580", "0-10-262667", "0-10-262733"]
        procs.append(serve_master(local, "--source", f"mysql://tier:x@127.0.0.1:{up_port}",
                                  "--source-gtid", "0-10-262700")[0])
        wanted = [name for _source, name in series[1:]]
        assert wait_for(lambda: all((local / n).is_file() and (local / n).stat().st_size == (up / n).stat().st_size
                                    for n in wanted), every=0.1)
        assert sorted(p.name for p in local.glob("mariadb-repl-bin.0*")) == wanted
        for name in wanted:
            assert (local / name).read_bytes() == (up / name).read_bytes(), name
    finally:
        errors = [stop_master(proc) for proc in reversed(procs)]
    for stderr in errors:
        assert "Traceback" not in stderr and "error" not in stderr.lower(), stderr


def test_a_downstream_reconnects_after_a_rotate_to_a_file_its_upstream_does_not_hold_yet(shared_fixtures, tmp_path):
    """The chain's last file ends with a Rotate to mariadb-repl-bin.000008, which the upstream does
    not hold (a binlog server creates it with its first event). The upstream restarts: the
    downstream resumes at the end of .000007, not at .000008:4, which the upstream would refuse
    with 1236 (not in its index) and which ended the series."""
    series = SERIES["mariadb-11.8-chain"]
    up = _upstream_dir(shared_fixtures, tmp_path, series)
    up_port, local = free_port(), tmp_path / "tier1"
    upstream = serve_master(up, "--mysql-listen", f"127.0.0.1:{up_port}")[0]
    downstream = address = None
    errors = []
    try:
        downstream, address = serve_master(local, "--source", f"mysql://tier:x@127.0.0.1:{up_port}")
        last = series[-1][1]
        assert wait_for(lambda: (local / last).is_file() and (local / last).stat().st_size == (up / last).stat().st_size,
                        every=0.1)
        errors.append(stop_master(upstream))
        assert wait_for(lambda: re.search(r"reconnects [1-9]", master_status(address)), every=0.2)
        upstream = serve_master(up, "--mysql-listen", f"127.0.0.1:{up_port}")[0]
        assert wait_for(lambda: ": streaming since" in master_status(address), every=0.2), master_status(address)
        for _source, name in series:
            assert (local / name).read_bytes() == (up / name).read_bytes(), name
    finally:
        errors += [stop_master(proc) for proc in (downstream, upstream) if proc is not None and proc.poll() is None]
    for stderr in errors:
        # "error 1236", not "1236": the ports of the lab (lab/ports.py) may hold those digits
        assert "Traceback" not in stderr and "error 1236" not in stderr and "not retrying" not in stderr, stderr
