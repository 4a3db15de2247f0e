"""`mariadb-binlog --read-from-remote-server --raw` (MariaDB's own binlog client, as a MariaDB
10.11 replica's IO thread speaks the dump protocol) reads --mysql-listen: the files it writes are
the served ones, byte for byte (but for the in-use flag a dump thread clears)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import skip_or_fail
from tests.support.master_command import free_port, serve_master, stop_master, wait_mysql_endpoint
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)
# MariaDB 10.5 binlogs: mariadb-binlog 10.11 refuses a server that reports 11.x ("unrecognized
# MariaDB version"), as it would refuse a real 11.8 server.
CHAIN = ["blackbeam-rust_mysql_common/mariadb-bin.000001"]


def test_mariadb_binlog_raw_reads_the_endpoint(shared_fixtures, tmp_path):
    client = shutil.which("mariadb-binlog")
    if client is None:
        skip_or_fail("mariadb-binlog is not installed (make system-deps)")
    served = tmp_path / "binlogs"
    served.mkdir()
    names = [path.rsplit("/", 1)[1] for path in CHAIN]
    for path, name in zip(CHAIN, names):
        shutil.copyfile(shared_fixtures / path, served / name)
    (served / "mariadb-bin.index").write_text("".join(f"./{n}\n" for n in names))
    port = free_port()
    proc, _address = serve_master(served, "--mysql-listen", f"127.0.0.1:{port}")
    wait_mysql_endpoint(proc)  # mariadb-binlog connects once
    out = tmp_path / "out"
    out.mkdir()
    # --stop-never with a server_id of its own: the endpoint registers every dump's server_id, and
    # refuses 0 (what mariadb-binlog sends for a dump that ends at the last event).
    reader = subprocess.Popen([client, "--read-from-remote-server", "--raw", "--host=127.0.0.1", f"--port={port}",
                               "--user=reader", "--password=x", f"--result-file={out}/", "--stop-never",
                               "--stop-never-slave-server-id=4400", names[0]],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: all((out / n).is_file() and (out / n).stat().st_size == (served / n).stat().st_size
                                    for n in names) or reader.poll() is not None, every=0.1)
        assert reader.poll() is None, reader.communicate()
    finally:
        reader.kill()
        reader.wait(10)
        stderr = stop_master(proc)
    assert "Traceback" not in stderr, stderr
    assert sorted(p.name for p in out.iterdir()) == names
    for name in names:
        ours, theirs = bytearray((out / name).read_bytes()), bytearray((served / name).read_bytes())
        ours[21] &= ~1
        theirs[21] &= ~1
        assert ours == theirs, name
