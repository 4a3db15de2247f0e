"""Issue #58 goal 7: the harness's real replica takes a port, as docs/api.md says ports are
choosable everywhere: `Replica(..., port=...)` and the plugin's `dumpfilter_replica(..., port=...)`
start the replica's server on that loopback port (with the master's `mysql_listen` chosen too), and
a port that is not one is refused in one line."""

from __future__ import annotations


import pymysql
import pytest

from dumpfilter.errors import InvalidArgumentError
from dumpfilter.harness import Master, Replica
from dumpfilter.lab.ports import free_port

pytestmark = pytest.mark.mariadb


def _listens_as_mariadb(port: int) -> str:
    with pymysql.connect(host="127.0.0.1", port=port, user="root", connect_timeout=5) as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT @@port")
        return str(cur.fetchone()[0])


def test_the_fixture_takes_the_replica_port(dumpfilter_binlog, dumpfilter_master, dumpfilter_replica):
    replica_port, endpoint_port = free_port(), free_port()
    master = dumpfilter_master(dumpfilter_binlog(transactions=60), mysql_listen=f"127.0.0.1:{endpoint_port}")
    assert master.mysql_port == endpoint_port
    replica = dumpfilter_replica(master, ["replicate-do-db=db1"], port=replica_port)
    assert replica.port == replica_port and _listens_as_mariadb(replica_port) == str(replica_port)
    replica.wait_caught_up()
    assert {name.split(".")[0] for name in replica.tables()} == {"db1"}


def test_the_class_takes_the_replica_port(tmp_path):
    from dumpfilter.harness import generate_binlog

    replica_port = free_port()
    generate_binlog(tmp_path / "bin", transactions=40)
    with Master(tmp_path / "bin", mysql_listen="127.0.0.1:0") as master, \
            Replica(master, ["replicate-do-db=db2"], port=replica_port) as replica:
        assert replica.port == replica_port and _listens_as_mariadb(replica_port) == str(replica_port)
        replica.wait_caught_up()
        assert {name.split(".")[0] for name in replica.tables()} == {"db2"}


@pytest.mark.parametrize("port", [0, -1, 70000, True, "3306"])
def test_a_port_that_is_not_one_is_refused(tmp_path, port):
    with Master(tmp_path, mysql_listen="127.0.0.1:0") as master, \
            pytest.raises(InvalidArgumentError, match=r"^Replica port .*: must be a TCP port, 1\.\.65535$"):
        Replica(master, port=port)
