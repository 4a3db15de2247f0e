"""A real MariaDB replica behind the master's MySQL endpoint, through the plugin's
`dumpfilter_replica` fixture (docs/api.md's last example): it ends holding only what its rules
keep, and the API's `lint` agrees that it does not stop."""

from __future__ import annotations

import pytest

from dumpfilter.harness import lint

pytestmark = pytest.mark.mariadb


def test_a_real_replica_gets_only_db1(dumpfilter_binlog, dumpfilter_master, dumpfilter_replica):
    binlog = dumpfilter_binlog(transactions=200)
    master = dumpfilter_master(binlog, mysql_listen="127.0.0.1:0")
    replica = dumpfilter_replica(master, ["replicate-do-db=db1"])
    replica.wait_caught_up()
    tables = replica.tables()
    assert tables and {name.split(".")[0] for name in tables} == {"db1"}
    assert sum(tables.values()) > 0
    assert lint(binlog, ["replicate-do-db=db1"]).ok

