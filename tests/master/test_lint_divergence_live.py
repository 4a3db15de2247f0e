"""The master's live lint shows silent divergence (issue #60, goal 1) where it shows its breaks: on a
real MariaDB MIXED binlog with `USE logs; UPDATE crm.t ...` statements, a slave registered with
replicate-do-db=crm (which skips them, though it keeps crm's tables) is told so in Stats'
lint_warnings (what `master status` prints), in the Register reply of a slave with the same rules
and in one WARNING line of the
master's log, with the count `dumpfilter lint` gives; a slave with replicate-wild-do-table=crm.%
(which keeps them) is told nothing of the kind."""

from __future__ import annotations

import logging
import shutil

import grpc
import pytest

from dumpfilter.binlogs import binlog_paths
from dumpfilter.binlogs.lint import lint_files
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

STATEMENTS = ["CREATE DATABASE crm", "CREATE DATABASE logs",
              "USE crm", "CREATE TABLE t (id INT PRIMARY KEY, k INT) ENGINE=InnoDB",
              "USE logs", "CREATE TABLE ev (id INT PRIMARY KEY, k INT) ENGINE=InnoDB",
              "USE crm", "INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)"]
for _n in range(12):
    STATEMENTS += ["USE crm", f"UPDATE t SET k=k+1 WHERE id={_n % 3 + 1}",
                   "USE logs", f"INSERT INTO ev VALUES ({_n}, {_n})"]
    if _n % 3 == 0:
        STATEMENTS += ["USE logs", f"UPDATE crm.t SET k=k+2 WHERE id={_n % 3 + 1}"]  # judged by 'logs'


@pytest.fixture(scope="module")
def binlog_dir(mariadb_factory, tmp_path_factory):
    server = mariadb_factory("lint-divergence-live", binlog_format="MIXED")
    server.execute(STATEMENTS)
    server.flush_logs()
    root = tmp_path_factory.mktemp("divergence-live")
    files = server.binlog_files()[:-1]
    for path in files:
        shutil.copy(path, root / path.name)
    (root / "master-bin.index").write_text("".join(f"./{p.name}\n" for p in files))
    return root


def _register(stub, server_id: int, kind, value: str) -> list[str]:
    rule = dump_pb2.FilterRule(type=kind, value=value)
    filters = [dump_pb2.ChannelFilters(rules=dump_pb2.RuleList(rules=[rule]))]
    reply = stub.Register(dump_pb2.RegisterRequest(server_id=server_id, filters=filters, flavor="mariadb"), timeout=30)
    return list(reply.warnings)


def _stats(stub, server_id: int):
    return stub.Stats(dump_pb2.StatsRequest(server_id=server_id), timeout=30).slaves[0]


def test_live_lint_tells_the_writes_a_replica_silently_gets_wrong(binlog_dir, master_factory, caplog):
    caplog.set_level(logging.WARNING, logger="dumpfilter.master.lint")
    paths = binlog_paths(binlog_dir)
    want = lint_files(paths, RuleSet(do_db=("crm",)), Settings(flavor="mariadb")).divergence.writes
    assert want == 4  # the four `USE logs; UPDATE crm.t`
    assert lint_files(paths, RuleSet(wild_do_table=("crm.%",)), Settings(flavor="mariadb")).divergence.writes == 0
    _, address = master_factory(binlog_dir)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        _register(stub, 5, dump_pb2.REPLICATE_DO_DB, "crm")
        _register(stub, 6, dump_pb2.REPLICATE_WILD_DO_TABLE, "crm.%")
        assert wait_for(lambda: _stats(stub, 5).lint_state == "done" and _stats(stub, 6).lint_state == "done",
                        give_up=120)
        lines = [w for w in _stats(stub, 5).lint_warnings if "silently diverge" in w]
        assert len(lines) == 1 and lines[0].startswith(f"lint: {want} write(s) up to "), lines
        assert _stats(stub, 5).lint_breaks == 0  # it never stops: the divergence is all there is to tell
        assert not [w for w in _stats(stub, 6).lint_warnings if "diverge" in w]
        # a slave registering later with the same rules has it in its Register reply
        again = _register(stub, 7, dump_pb2.REPLICATE_DO_DB, "crm")
        assert [w for w in again if "silently diverge" in w] == lines
    logged = [r.getMessage() for r in caplog.records
              if r.name == "dumpfilter.master.lint" and "silently diverge" in r.getMessage()]
    assert len(logged) == 1 and f"{want} write(s)" in logged[0] and "server_id 5" in logged[0], logged
