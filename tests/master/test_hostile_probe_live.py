"""What a mutation probe of a live `master serve` (its MySQL endpoint, its gRPC API and its
/metrics) found, each against one real `master serve` process with a policy, the three faces
and a token, shared by the module: a binlog file name that forged a log line, a SELECT that made
hundreds of MB per connection, system variables read from disk once per mention, requests that
do not parse answered INTERNAL, an unknown FilterSemantics served as another, Registers of
unbounded channels, hostnames, filter requests and replica schemas (CPU, replies and memory
outside the rule budget), sockets trickling their headers that held every /metrics place, and
/metrics answering POST. After each, a gRPC slave still streams to the binlog's end.

Work is shown bounded without timing it: by an answer (an ERR, a status) instead of the work, or
by counting the master's reads of its binlog index (inotify) instead of its CPU seconds. Each
probe gives up after a generous timeout, never asserting speed."""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import grpc
import pymysql
import pytest
from inotify_simple import INotify, flags

from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.support.master_process import free_port, serve_master
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

POLICY = """
[slave.repl]
password = "s3cret"
allow = ["%.%"]

[slave.small]
password = "small-pw"
allow = ["%.%"]
max_rules = 1000

[login]
hold_seconds = 0
"""
TOKEN = "probe-token-0123456789abcdef"
GIVE_UP = 60.0
CREDS = [("dumpfilter-user", "repl"), ("dumpfilter-password", "s3cret")]
HOSTILE_HOST = "127.0.0.2"  # Linux routes all of 127/8 to loopback: a second client address
SERVICE = "/dumpfilter.v1.DumpFilter/"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probe")
    binlogs = tmp / "binlogs"
    generate(WorkloadSpec(seed=7, transactions=300), binlogs)
    (tmp / "policy.toml").write_text(POLICY)
    (tmp / "policy.toml").chmod(0o600)
    (tmp / "token").write_text(TOKEN + "\n")
    metrics_port = free_port()
    master = serve_master(binlogs, tmp / "master.log", "--policy", str(tmp / "policy.toml"),
                          "--metrics-listen", f"127.0.0.1:{metrics_port}", "--metrics-token-file", str(tmp / "token"))
    channel = grpc.insecure_channel(master.grpc_address)
    try:
        yield SimpleNamespace(master=master, port=master.mysql_port, binlogs=binlogs, channel=channel,
                              stub=dump_pb2_grpc.DumpFilterStub(channel), metrics_port=metrics_port,
                              server_ids=itertools.count(801))
    finally:
        channel.close()
        master.stop()


def _still_served(env) -> None:
    """The master is up, answers a health check, and a newly registered slave streams to the
    binlog's end."""
    assert env.master.proc.poll() is None, env.master.log_text()[-2000:]
    assert env.master.health(timeout=GIVE_UP), "the master did not answer a gRPC health check"
    server_id = next(env.server_ids)
    env.stub.Register(dump_pb2.RegisterRequest(server_id=server_id), metadata=CREDS, timeout=GIVE_UP)
    batches = env.stub.Dump(dump_pb2.DumpRequest(server_id=server_id), metadata=CREDS, timeout=GIVE_UP)
    try:
        assert any(batch.caught_up for batch in batches), "the stream ended before the binlog's end"
    finally:
        batches.cancel()
    env.stub.Unregister(dump_pb2.UnregisterRequest(server_id=server_id), metadata=CREDS, timeout=GIVE_UP)


def _login(port: int):
    return pymysql.connect(host="127.0.0.1", port=port, user="repl", password="s3cret", connect_timeout=GIVE_UP,
                           read_timeout=GIVE_UP, write_timeout=GIVE_UP)


def _error(call) -> tuple[int, str]:
    with pytest.raises(pymysql.err.MySQLError) as info:
        call()
    return info.value.args[0], info.value.args[1]


def _code(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details() or ""


# -- the MySQL endpoint -------------------------------------------------------------------------

def test_a_binlog_file_name_cannot_forge_a_line_of_the_masters_log(served):
    """COM_BINLOG_DUMP from position 1 of `evil\\nFORGED ...`: the 1236 quoted the name, and the
    connection's WARNING line carried its newline: a line of the client's making in the log."""
    def dumped() -> bool:
        with _login(served.port) as conn:
            conn.query("SET @master_binlog_checksum = @@global.binlog_checksum")
            conn._execute_command(0x12, struct.pack("<IHI", 1, 0, 811) + b"evil\nFORGED LINE: root logged in")
            code, _ = _error(conn._read_packet)
            assert code == 1236
        return "evil" in served.master.log_text()   # (the connection's line, once the rate limit lets it)

    assert wait_for(dumped, GIVE_UP, every=0.5), "the refused dump was never logged"
    lines = served.master.log_text().splitlines()
    assert not any(line.startswith("FORGED") for line in lines), "a file name forged a log line"
    assert any("evil\\nFORGED LINE" in line for line in lines)
    _still_served(served)


def test_a_select_has_bounded_columns_and_row_bytes(served):
    """`SELECT 1,1,...` in one 1 MiB packet made 524 000 columns: about 110 MB of the master's
    memory for each connection sending it (20 of them: 2.2 GB, kept after they closed), and
    `SELECT @a,@a,...` of a 200 KB variable as much again. Now ER_TOO_MANY_FIELDS past 4096
    columns, ER_NET_PACKET_TOO_LARGE past max_allowed_packet of values; the session goes on."""
    with _login(served.port) as conn, conn.cursor() as cur:
        code, message = _error(lambda: cur.execute("SELECT " + ",".join(["1"] * 300_000)))
        assert code == 1117 and "at most 4096" in message, (code, message)
        cur.execute("SELECT " + ",".join(["1"] * 4096))
        assert len(cur.fetchone()) == 4096
        cur.execute("SET @a = '" + "x" * 200_000 + "'")
        code, message = _error(lambda: cur.execute("SELECT " + ",".join(["@a"] * 1000)))
        assert code == 1153 and "max_allowed_packet" in message, (code, message)
        cur.execute("SELECT @a, @@server_id")
        assert len(cur.fetchone()[0]) == 200_000
    _still_served(served)


def test_system_variables_are_read_once_per_statement(served):
    """Each `@@name` of a statement looked the system variables up anew, reading the binlog index
    each time: `SET @a=@@server_id, ...` in one 1 MiB packet cost the master 5.5 s of CPU. The
    master's opens of its index during one statement of 2000 of them are counted here."""
    index = next(served.binlogs.glob("*.index")).name
    with _login(served.port) as conn, conn.cursor() as cur, INotify() as watch:
        cur.execute("SELECT @@server_id")  # the session's first look, before the watch counts
        watch.add_watch(str(served.binlogs), flags.OPEN)
        cur.execute("SET " + ",".join(["@a = @@server_id"] * 2000))
        cur.execute("SELECT @a")
        assert cur.fetchone()[0] is not None
        opens = sum(1 for event in watch.read(timeout=0) if event.name == index)
    assert opens < 100, f"the index was opened {opens} times for one statement"


# -- gRPC -----------------------------------------------------------------------------------------

def _raw_call(env, method: str, payload: bytes, stream: bool = False, metadata=CREDS):
    make = env.channel.unary_stream if stream else env.channel.unary_unary
    call = make(SERVICE + method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    reply = call(payload, metadata=metadata, timeout=GIVE_UP)
    return list(reply) if stream else reply


def test_a_request_that_does_not_parse_is_invalid_argument(served):
    """A string field that is not UTF-8 (proto3 requires it), a truncated field, random bytes:
    grpc answered INTERNAL ("Exception deserializing request!"), the code of a master's bug, to
    anyone. Now INVALID_ARGUMENT, to an authenticated caller; a stranger gets UNAUTHENTICATED."""
    not_utf8 = b"\x12\x04\xff\xfe\xc3("               # field 2 (a string), 4 bytes that are not UTF-8
    for method, payload, stream in [("Register", b"\x08\x01" + not_utf8, False),
                                    ("Dump", b"\x08\x01\x22\x02\xff\xfe", True),   # gtid_state
                                    ("ChangeFilter", b"\x08\x01" + not_utf8, False),
                                    ("Stats", b"\x08", False),                   # a field cut short
                                    ("Unregister", b"\xff\xff\xff\xff\xff", False)]:
        code, details = _code(lambda: _raw_call(served, method, payload, stream))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "well-formed" in details, (method, code, details)
    code, _ = _code(lambda: _raw_call(served, "Stats", b"\x08", metadata=[]))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    _still_served(served)


def test_an_unknown_filter_semantics_is_refused(served):
    """FilterSemantics 99 (a newer slave's) was served as MySQL's semantics: rules filtering by
    other semantics than the slave asked for, without a word. SkipPolicy and FilterType numbers
    nobody knows were INVALID_ARGUMENT already; now FilterSemantics too."""
    code, details = _code(lambda: served.stub.Register(dump_pb2.RegisterRequest(server_id=812, semantics=99),
                                                       metadata=CREDS, timeout=GIVE_UP))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "FilterSemantics" in details, details


def test_a_register_has_bounded_channels_and_hostname(served):
    """One Register of 200 000 channels cost the master 30 s of CPU and a 50 MB reply (each kept
    too); a hostname of 4 MB was kept with each registration. Now MySQL's bounds: 256 channels of
    at most 64 characters, a report_host of 255."""
    def register(**fields):
        return served.stub.Register(dump_pb2.RegisterRequest(server_id=813, **fields), metadata=CREDS, timeout=GIVE_UP)

    for fields, words in [({"channels": [f"c{i}" for i in range(257)]}, "at most 256"),
                          ({"channels": ["c" * 65]}, "at most 64 characters"),
                          ({"hostname": "h" * 256}, "at most 255")]:
        code, details = _code(lambda: register(**fields))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and words in details, (code, details)
    reply = register(channels=[f"c{i}" for i in range(256)], hostname="h" * 255)
    assert len(reply.effective) == 256
    served.stub.Unregister(dump_pb2.UnregisterRequest(server_id=813), metadata=CREDS, timeout=GIVE_UP)
    _still_served(served)


def test_a_register_has_bounded_filter_requests(served):
    """120 000 ChannelFilters of one rule each (1.3 MB) took the master 24 s of CPU, their rules
    joined one request at a time (quadratic), before the rule count refused them. Now more than
    512 filter requests are INVALID_ARGUMENT before any of that work."""
    one = dump_pb2.ChannelFilters(rules=dump_pb2.RuleList(rules=[dump_pb2.FilterRule(type=1, value="db1")]))
    code, details = _code(lambda: served.stub.Register(dump_pb2.RegisterRequest(server_id=814, filters=[one] * 200_000),
                                                       metadata=CREDS, timeout=GIVE_UP))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "at most 512" in details, (code, details)
    served.stub.Register(dump_pb2.RegisterRequest(server_id=814, filters=[one] * 512), metadata=CREDS, timeout=GIVE_UP)
    served.stub.Unregister(dump_pb2.UnregisterRequest(server_id=814), metadata=CREDS, timeout=GIVE_UP)
    _still_served(served)


def test_a_replica_schema_counts_against_the_rule_budget(served):
    """A Register's replica schema (4 MiB: 50 000 tables of 20 columns) was kept with the
    registration and by lint, about 87 MB each, outside every budget: 10 Registers took 875 MB.
    Its databases, tables and columns now count as rules: `small` (max_rules 1000) cannot
    register 2000 tables, and may register 900."""
    small = [("dumpfilter-user", "small"), ("dumpfilter-password", "small-pw")]

    def register(tables: int):
        schema = dump_pb2.ReplicaSchema(tables=[dump_pb2.SchemaTable(db="d", name=f"t{i}") for i in range(tables)])
        return served.stub.Register(dump_pb2.RegisterRequest(server_id=815, replica_schema=schema), metadata=small,
                                    timeout=GIVE_UP)

    code, details = _code(lambda: register(2000))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "replica_schema" in details, (code, details)
    register(900)
    served.stub.Unregister(dump_pb2.UnregisterRequest(server_id=815), metadata=small, timeout=GIVE_UP)
    _still_served(served)


# -- /metrics --------------------------------------------------------------------------------------

def _scrape(port: int, method: str = "GET") -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", method=method,
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=GIVE_UP) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_slow_senders_do_not_keep_a_scraper_out(served):
    """Twenty sockets from another address, each sending a header line every second and never
    the end of its request (slowloris), held the 16 places of /metrics for as long as they went
    on: every scrape was closed unanswered. Now a scraper takes the place of the busiest
    address's oldest unfinished request."""
    stop = threading.Event()
    socks: list[socket.socket] = []

    def trickle() -> None:
        while not stop.wait(1.0):
            for sock in list(socks):
                try:
                    sock.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    socks.remove(sock)

    for _ in range(20):
        sock = socket.create_connection(("127.0.0.1", served.metrics_port), timeout=GIVE_UP,
                                        source_address=(HOSTILE_HOST, 0))
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        socks.append(sock)
    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        time.sleep(1.0)   # the sockets hold their places (a scrape here was refused before the fix)
        results = []
        for _ in range(3):  # while the trickle goes on: its sockets keep their places until made room
            try:
                results.append(_scrape(served.metrics_port)[0])
            except (urllib.error.URLError, ConnectionError) as exc:
                results.append(repr(exc))
        assert results == [200, 200, 200], results
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(GIVE_UP)
        for sock in socks:
            sock.close()


def test_metrics_answers_get_and_head_only(served):
    """POST and PUT were answered as GET, HEAD with the whole body: now 405 naming GET and HEAD,
    and a HEAD gets the headers alone."""
    assert _scrape(served.metrics_port, "POST")[0] == 405
    assert _scrape(served.metrics_port, "PUT")[0] == 405
    status, body = _scrape(served.metrics_port, "HEAD")
    assert status == 200 and body == b""
    status, body = _scrape(served.metrics_port)
    assert status == 200 and b"dumpfilter_" in body


def test_no_traceback_and_the_master_is_up(served):
    _still_served(served)
    log = served.master.log_text()
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]


@pytest.mark.parametrize("asked, used", [(1e-300, 0.001), (0.0004, 0.001), (2.5, 2.5), (1e300, 4294967.0),
                                         (float("inf"), 4294967.0), (float("nan"), 1.0), (0.0, 1.0), (-3.0, 1.0)])
def test_a_heartbeat_period_is_read_in_mysqls_range(workload_dir, monkeypatch, asked, used):
    """A Dump's heartbeat_period (or a replica's @master_heartbeat_period) in MASTER_HEARTBEAT_PERIOD's
    range, 1 ms to 4294967 s: a slave asking for 1e-300 s had its stream send heartbeats in a loop,
    88% of a core for one stream. What the stream was built with is read, not how often it woke."""
    from dumpfilter.master.model import ChannelSpec, Registration
    from dumpfilter.master.service import DumpService
    from dumpfilter.master.stream import slave_stream
    from dumpfilter.rules.ruleset import RuleSet

    seen: list[float] = []

    def run(self):
        seen.append(self.heartbeat_period)
        yield from ()

    monkeypatch.setattr(slave_stream.SlaveStream, "run", run)
    service = DumpService(workload_dir, lint_bytes=0)  # (no lint: this test reads the stream's start only)
    service.register(Registration(server_id=5, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)))
    assert list(service.stream(5, heartbeat_period=asked)) == []
    assert seen == [used]
    service.shutdown()
