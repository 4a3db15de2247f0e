"""Issue #57 goal 3: a slave under a master policy is streamed by the compiled walk, as one without
a policy is. Through a real gRPC master and a real slave, on binlogs real servers wrote (the shared
fixtures): a gate that allows everything sends byte for byte what no gate sends, with every
statement unit answered by key in the core and no Annotate_rows text read in Python; a narrower
gate still sends nothing outside its `allow`, and the same bytes as the reference path
(TransactionFilter per unit). The core's test of a statement text (`_core.reaches_key_alone`),
which lets a key's gated answer stand for its statements, is the policy's reader of the form
(rules.policy_bound): it clears texts that reach their table alone, and no other."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from dumpfilter._core import reaches_key_alone
from dumpfilter.binlogs import TailingReader
from dumpfilter.codec import EventType
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.policy import MasterPolicy, PolicyEntry
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.service import DumpService
from dumpfilter.rules.policy_bound import statement_reach
from dumpfilter.rules.policy_gates import PLAIN, Secret
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.rules.sql_functions import NOT_STORED
from dumpfilter.rules.statements import statement_tables
from dumpfilter.rules.transaction_filter import framing_statement
from tests.oracles.master import reference_service
from tests.support.dump_helpers import relay_units, run_slave

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "app", "pw"
SYSBENCH = ("mariadb-repl-bin.000005", "mariadb-repl-bin.000006", "mariadb-repl-bin.000007")


def _policy(*allow: str) -> MasterPolicy:
    return MasterPolicy({USER: PolicyEntry(USER, allow, Secret(PLAIN, PASSWORD))}, None)


def _binlog_dir(fixtures: Path, tmp: Path, names: tuple[str, ...]) -> Path:
    """The fixtures `names` in one directory, each under a binlog file name (name.NNNNNN)."""
    directory = tmp / "binlog"
    directory.mkdir()
    for name in names:
        target = name if re.search(r"\.\d{6}$", name) else f"{name.split('.')[0]}.000001"
        shutil.copy(next(fixtures.rglob(name)), directory / target)
    return directory


def _stream(directory: Path, relay: Path, policy: MasterPolicy | None, server_id: int = 13):
    """What a real slave receives from a real master (relay units), with the stream's statement
    path counts and rule hits."""
    master, port = create_server(directory, "127.0.0.1:0", policy=policy, lint_bytes=0)
    try:
        creds = {"user": USER, "password": PASSWORD} if policy is not None else {}
        run_slave(f"127.0.0.1:{port}", relay, server_id, **creds)
        slave = master.service.slaves[server_id]
        counts, hits = slave.statement_path, dict(slave.stats.rule_hits)
    finally:
        master.stop(grace=1.0)
    return relay_units(relay), counts, hits


def _statements(relay: Path) -> list[tuple[str, str]]:
    """(default database, text) of every Query a slave received but the framing ones."""
    return [(e.query.db, e.sql) for _, e in TailingReader(relay)
            if e.type_code == EventType.QUERY and not framing_statement(e.sql)]


@pytest.mark.fixtures
def test_a_gate_that_allows_all_sends_what_no_gate_sends_by_key(shared_fixtures, tmp_path):
    """MariaDB 11.8's STATEMENT binlogs of sysbench: every statement unit goes by key in the core
    under the gate (none decided in Python: before, the gate sent them all to TransactionFilter),
    and the slave receives the same bytes as without a policy."""
    directory = _binlog_dir(shared_fixtures, tmp_path, SYSBENCH)
    plain, _, _ = _stream(directory, tmp_path / "plain", None)
    gated, counts, _ = _stream(directory, tmp_path / "gated", _policy("%.%"))
    assert gated == plain and len(plain) > 200
    assert counts.key_units > 0 and counts.python_units == 0, counts
    assert counts.keys_decided < counts.key_units


@pytest.mark.fixtures
def test_a_narrower_gate_drops_refused_tables_by_key(shared_fixtures, tmp_path):
    """allow = one table: the keys of the other tables are dropped by key (their units never reach
    Python) and only that table's statements arrive."""
    directory = _binlog_dir(shared_fixtures, tmp_path, SYSBENCH)
    _, counts, hits = _stream(directory, tmp_path / "gated", _policy("sbtest-repl.sbtest1"))
    received = _statements(tmp_path / "gated")
    assert received and {tuple(statement_tables(sql, db).updated) for db, sql in received} == {
        (("sbtest-repl", "sbtest1"),)}
    assert counts.key_units > 0 and counts.python_units == 0, counts
    assert hits.get("MASTER_POLICY", 0) > 0


@pytest.mark.fixtures
@pytest.mark.parametrize("allow", [("%.%",), ("sbtest-repl.sbtest1",)])
@pytest.mark.parametrize("rules", [RuleSet(), RuleSet(do_db=("sbtest-repl",)),
                                   RuleSet(wild_ignore_table=("sbtest-repl.sbtest2%",))])
def test_gated_keys_send_and_count_as_the_reference_path(shared_fixtures, tmp_path, allow, rules):
    """The batches, stats and P_S counters of a gated stream by key are the reference path's
    (TransactionFilter per unit, the gate read from each statement's text)."""
    directory = _binlog_dir(shared_fixtures, tmp_path, SYSBENCH)
    policy = _policy(*allow)
    reg = Registration(server_id=5, user=USER, password=PASSWORD, filters=(ChannelSpec(None, rules),))
    svc = DumpService(directory, policy=policy)
    assert _batches(svc, reg) == _batches(reference_service(directory, policy=policy), reg)
    counts = svc.slaves[reg.server_id].statement_path
    assert counts.key_units > 0 and counts.python_units == 0, counts


def _batches(svc: DumpService, reg: Registration) -> tuple:
    svc.register(reg)
    out = []
    for b in svc.stream(reg.server_id):
        out.append((b.events, b.position, b.transactions, b.skipped_bytes, b.gtid_state))
        if b.caught_up:
            break
    rows, _ = svc.list_filters(reg.server_id)
    return out, svc.slaves[reg.server_id].stats, [(r["FILTER_NAME"], r["COUNTER"]) for r in rows]


@pytest.mark.fixtures
@pytest.mark.parametrize("name", ["mariadb-bin.000001", "mysql-bin.checksum-crc32"])
def test_row_binlogs_under_a_gate_that_allows_all_read_no_annotation_in_python(shared_fixtures, tmp_path, name):
    """ROW binlogs (MariaDB 10.5's with Annotate_rows texts, MySQL 5.7's): the same bytes as without
    a policy; the core clears the annotations (they name the tables of their Table_maps), so the
    policy check reads none in Python (before, it read every kept unit's)."""
    directory = _binlog_dir(shared_fixtures, tmp_path, (name,))
    plain, _, _ = _stream(directory, tmp_path / "plain", None)
    gated, counts, _ = _stream(directory, tmp_path / "gated", _policy("%.%"))
    assert gated == plain and plain
    assert counts.policy_text_units == 0, counts


@pytest.mark.fixtures
def test_a_row_gate_sends_no_table_it_forbids(shared_fixtures, tmp_path):
    """MySQL 5.7's ROW binlog of four schemas under allow = auth.%: only `auth` Table_maps arrive."""
    directory = _binlog_dir(shared_fixtures, tmp_path, ("mysql-bin.checksum-crc32",))
    _stream(directory, tmp_path / "gated", _policy("auth.%"))
    maps = {e.table_map[1] for _, e in TailingReader(tmp_path / "gated")
            if e.type_code == EventType.TABLE_MAP}
    assert maps == {"auth"}


@pytest.mark.parametrize("sql", [
    "UPDATE t SET a = secret.f(1)", "UPDATE t SET a = f(1)", "UPDATE t SET a = NEXTVAL(s)",
    "INSERT INTO t VALUES ((SELECT pw FROM secret.s))", "UPDATE t SET a = 1; DROP TABLE x",
    "INSERT INTO t VALUES (t(1))", "UPDATE t SET a = 'x\\' WHERE b = secret.f()", "INSERT INTO t TABLE s",
])
def test_texts_that_reach_further_are_left_to_python(sql):
    assert not reaches_key_alone(sql.encode())


def test_the_cores_built_in_calls_cannot_be_stored_functions():
    """The calls the core lets a cleared text make are all names no stored function can take."""
    source = (ROOT / "core" / "src" / "gate_reach.rs").read_text()
    block = source.split("const BUILTIN_CALLS", 1)[1].split("];", 1)[0]
    names = re.findall(r'b"([A-Z_0-9]+)"', block)
    assert names and set(names) <= NOT_STORED
    for name in names:
        assert reaches_key_alone(f"UPDATE t SET a = {name}(1)".encode())
    assert not reaches_key_alone(b"UPDATE t SET a = MY_FUNC(1)")


@pytest.mark.mariadb
def test_a_stored_procedures_row_texts_reach_their_table_alone(mariadb_factory):
    """Issue #80: a real MariaDB logs each write of a stored procedure with its local variables and
    parameters as NAME_CONST('name', value) in the Annotate_rows text; the compiled walk did not
    clear such a text, so a gated stream read every one in Python (a master policy allowing
    everything made a small-transaction stream 0.17x as fast). Each text such a procedure writes,
    as the server writes it, reaches its own table alone."""
    server = mariadb_factory("sp-texts", binlog_format="ROW")
    server.execute(["CREATE DATABASE app", "CREATE TABLE app.counters (id INT PRIMARY KEY, n BIGINT NOT NULL DEFAULT 0)",
                    "CREATE TABLE app.queue (id INT AUTO_INCREMENT PRIMARY KEY, job VARCHAR(24))",
                    "INSERT INTO app.counters (id) VALUES (1), (2), (3)",
                    """CREATE PROCEDURE app.tick(cnt INT, seed INT)
                       BEGIN
                         DECLARE i INT DEFAULT 0;
                         WHILE i < cnt DO
                           UPDATE counters SET n = n + seed WHERE id = 1 + (seed + i) % 3;
                           INSERT INTO queue (job) VALUES (CONCAT('job-', seed * 10 + i));
                           SET i = i + 1;
                         END WHILE;
                       END"""])
    server.execute("CALL tick(4, 7)", db="app")
    server.flush_logs()
    from dumpfilter.codec import read_events

    texts = [event.sql for path in server.binlog_files() for event in read_events(path.read_bytes())
             if event.type_code == EventType.ANNOTATE_ROWS and event.sql and "NAME_CONST" in event.sql]
    assert len(texts) == 8, texts
    for text in texts:
        assert reaches_key_alone(text.encode()), text
        reach = statement_reach(text, "app")
        assert reach is not None and len(reach.tables) == 1, (text, reach)


def test_a_gate_bounds_only_what_it_can_refuse():
    """A pattern every `db.table` matches (`%.%`) leaves nothing for the gate to refuse: it is still
    the identity's policy (`restricted`, shown), but it checks nothing (`bounds`)."""
    from dumpfilter.rules.gate import Gate

    assert not Gate(("%.%",), restricted=True).bounds and Gate(("%.%",), restricted=True).restricted
    assert not Gate(("shop.%", "%%.%"), restricted=True).bounds
    for allow in (("shop.%",), ("%.t1",), ("s%.%",), ("%.%x",)):
        assert Gate(allow, restricted=True).bounds, allow
    assert not _policy("%.%").bounds_any and _policy("shop.%").bounds_any


@pytest.mark.mariadb
def test_a_policy_allowing_everything_reads_no_text(mariadb_factory, tmp_path):
    """Issue #80: a master policy whose identity is allowed every table made its stream read, in
    Python, each Annotate_rows text the core cannot clear (a stored function's call here), though
    nothing it reaches could be refused: a small-transaction stream ran 0.17x as fast. Now such a
    stream reads no text and receives what a stream without a policy does; a policy that bounds
    the identity still reads them."""
    server = mariadb_factory("allow-all", binlog_format="ROW")
    server.execute(["CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, a INT)",
                    "CREATE FUNCTION app.f(x INT) RETURNS INT DETERMINISTIC RETURN x + 1"]
                   + [f"INSERT INTO app.t VALUES ({k}, app.f({k}))" for k in range(20)]
                   + [f"UPDATE app.t SET a = app.f(a) WHERE id = {k}" for k in range(20)])
    server.flush_logs()
    directory = tmp_path / "binlog"
    directory.mkdir()
    for path in server.binlog_files():
        shutil.copy(path, directory / path.name)
    plain, _, _ = _stream(directory, tmp_path / "plain", None)
    everything, counts, _ = _stream(directory, tmp_path / "everything", _policy("%.%"))
    assert everything == plain and counts.policy_text_units == 0, counts
    _, bounded, _ = _stream(directory, tmp_path / "bounded", _policy("app.%"))
    assert bounded.policy_text_units >= 40, bounded
    assert DumpService(directory, policy=_policy("%.%")).segments.annotations_ahead is False
