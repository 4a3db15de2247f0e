"""A hostile file in the binlog directory met by a real MariaDB replica over the MySQL protocol
(issue #27): the replica applies every transaction of the healthy files, then its IO thread
stops with error 1236 and the master's one line, as with a server's unreadable binlog."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
from tests.support.mysql_replicas import point_at, wait_applied

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(180)]


def test_a_fifo_past_the_healthy_files_is_error_1236_to_a_real_replica(mariadb_factory, tmp_path):
    primary = mariadb_factory("primary-fifo")
    replica = mariadb_factory("real-fifo", server_id=45, log_bin=False)
    primary.execute(["CREATE DATABASE s1", "CREATE TABLE s1.t (id INT PRIMARY KEY)"])
    primary.execute([f"INSERT INTO s1.t VALUES ({i})" for i in range(1, 21)])
    primary.flush_logs()
    primary.execute([f"INSERT INTO s1.t VALUES ({i})" for i in range(21, 31)])
    directory = tmp_path / "binlog"
    directory.mkdir()
    files = primary.binlog_files()
    for path in files:
        shutil.copy(path, directory / path.name)
    index = directory / "mariadb-bin.index"
    next_name = f"mariadb-bin.{int(files[-1].name.rsplit('.', 1)[1]) + 1:06d}"
    os.mkfifo(directory / next_name)
    index.write_text("".join(f"./{p.name}\n" for p in files) + f"./{next_name}\n")
    topology = tmp_path / "replicas.toml"
    topology.write_text('[[slaves]]\nname = "r"\nserver_id = 45\nflavor = "mariadb"\nrules = []\n')
    master, _port = create_server(directory, "127.0.0.1:0")
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0", replicas=ReplicaMap.load(topology))
    try:
        point_at(replica, endpoint.port, gtid=False, log_file=files[0].name)
        status = wait_applied(replica, timeout=90, errors_ok=True)
        assert status["Last_IO_Errno"] == 1236, status
        assert f"{next_name}: is a FIFO (named pipe), not a binlog file" in status["Last_IO_Error"]
        count = 0
        for _ in range(200):  # the SQL thread applies what the IO thread received before it stopped
            if replica.query("SHOW TABLES FROM s1 LIKE 't'") if replica.query("SHOW DATABASES LIKE 's1'") else []:
                count = replica.query("SELECT COUNT(*) AS n FROM s1.t")[0]["n"]
            if count == 30:
                break
            time.sleep(0.1)
        assert count == 30
    finally:
        endpoint.stop()
        master.stop(grace=1.0)
