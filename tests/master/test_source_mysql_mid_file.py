"""`--source-file F --source-pos P` from a MySQL 8.4/9-style primary (issue #31 item 4): the series
starts inside F, its F opening with the primary's FDE, a Previous_gtids (type 35) holding the
executed set at P (F's own Previous_gtids and the GTIDs before P, tagged ones included) and
IGNORABLE fillers up to P, then the primary's bytes from P at P. No MySQL server exists here: the
primary is dumpfilter's own --mysql-listen endpoint (caching_sha2_password only, over TLS) serving
the real MySQL 9.6 tagged-GTID fixture and the MySQL 5.7 GTID fixture, as in
test_source_mysql_primary.py. A second endpoint over the series (a tier) serves it by
auto-position: python-mysql-replication (untagged sets) and a tagged COM_BINLOG_DUMP_GTID get
exactly the transactions after P, and a set lacking a GTID before P is refused (1236), as the
series' Previous_gtids says those are not in it; in-process and as `master serve` processes. A
restart resumes by GTID over the series' own head. A P that is no boundary is one line (exit 2)."""

from __future__ import annotations

import uuid

import pymysql
import pytest
from hypothesis import given, settings, strategies as st
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent

from dumpfilter.cli.app import main
from dumpfilter.codec import EventType
from dumpfilter.codec.constants import LOG_EVENT_IGNORABLE_F
from dumpfilter.codec.encode import format_description
from dumpfilter.codec.gtid import MysqlGtidSet
from dumpfilter.codec.reader import read_events
from dumpfilter.codec.scanner import Scanner
from dumpfilter.codec.transactions import group_transactions
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.master.endpoint import MysqlEndpoint
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror
from dumpfilter.master.upstream.mid_file import series_head
from dumpfilter.master.upstream.source import SourceReplicator, SourceURL
from tests.master.test_source_mysql_primary import EXECUTED, GTID_57, TAGGED, Primary, _complete, _setup, pki  # noqa: F401
from tests.support.source_checks import assert_positions_refused, dump_by_gtid
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.timeout(240)]


def _expected_at(data: bytes, name: str, pos: int) -> tuple[MysqlGtidSet, list[str]]:
    """Independently of mid_file: the executed set at `pos` as text (the file's Previous_gtids and
    every GTID event's GTID before `pos`) and the GTIDs from `pos` on."""
    before, after = [], []
    for event in read_events(data, name, verify_checksums=False):
        if event.type_code == EventType.PREVIOUS_GTIDS:
            before.append(str(event.gtid_set))
        elif event.type_code in (EventType.GTID, EventType.GTID_TAGGED):
            info = event.gtid_info
            text = f"{info.source}:{info.tag}:{info.gno}" if info.tag else f"{info.source}:{info.gno}"
            (before if event.pos < pos else after).append(text)
    return MysqlGtidSet.parse(",".join(t for t in before if t)), after


def _replicator(url: str, local, name: str, pos: int) -> SourceReplicator:
    return SourceReplicator(SourceURL.parse(url), BinlogMirror(local), start_file=name, start_pos=pos)


def _start(url: str, local, name: str, pos: int) -> SourceReplicator:
    replicator = _replicator(url, local, name, pos)
    replicator.start()
    return replicator


def _tier(local):
    master, _port = create_server(local, "127.0.0.1:0")
    return master, MysqlEndpoint(master.service, "127.0.0.1:0")


def _auto_position(port: int, executed: str) -> list[str]:
    """python-mysql-replication, a MySQL-flavor GTID client: the GTIDs it reads by auto-position."""
    stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": port, "user": "gtid-client",
                                                     "password": "x"},
                                server_id=4244, auto_position=executed, blocking=False, only_events=[GtidEvent])
    try:
        return [event.gtid for event in stream]
    finally:
        stream.close()


@pytest.mark.parametrize("fixture, pos", [(GTID_57, 357), (GTID_57, 719), (TAGGED, 541)],
                         ids=["5.7-after-gtid-1", "5.7-after-gtid-2", "9.6-tagged-after-mytag:3"])
def test_series_starts_inside_a_mysql_primary_file(shared_fixtures, tmp_path, pki, fixture, pos):  # noqa: F811
    up, name, data, policy = _setup(shared_fixtures, tmp_path, fixture)
    units = list(group_transactions(list(read_events(data, name, verify_checksums=False))))
    assert pos in {u.events[-1].end_pos for u in units}  # the case is a boundary of the fixture itself
    at_p, after = _expected_at(data, name, pos)
    primary = Primary(up, policy, pki)
    local = tmp_path / "series"
    url = f"mysql://sha2:sha2-pw@127.0.0.1:{primary.endpoint.port}?ssl-mode=VERIFY_IDENTITY&ssl-ca={pki / 'ca.crt'}"
    replicator = _start(url, local, name, pos)
    master = endpoint = None
    try:
        assert wait_for(lambda: _complete(local, name, data), every=0.1), replicator.last_error
        ours = (local / name).read_bytes()
        assert ours[pos:] == data[pos:]  # the primary's bytes from P, at P
        head = list(read_events(ours[:pos], name))  # CRCs checked
        fde = next(e for e in read_events(data, name, verify_checksums=False))
        assert head[0].type_code == EventType.FORMAT_DESCRIPTION and head[0].raw == fde.raw
        assert head[1].type_code == EventType.PREVIOUS_GTIDS
        assert str(head[1].gtid_set) == str(at_p)  # the executed set at P, tagged GTIDs included
        assert head[1].gtid_set.tagged == (fixture is TAGGED)
        fillers = head[2:]
        assert fillers and all(e.type_code == EventType.IGNORABLE and e.flags & LOG_EVENT_IGNORABLE_F
                               for e in fillers)
        assert fillers[-1].end_pos == pos
        assert str(replicator.mirror.gtids.mysql) == EXECUTED[name]

        # A tier: a second endpoint over the series serves it by auto-position.
        master, endpoint = _tier(local)
        if fixture is TAGGED:
            received = [e for e in dump_by_gtid(endpoint.port, at_p) if e[4] == EventType.GTID_TAGGED]
            assert len(received) == len(after)
        else:
            assert _auto_position(endpoint.port, str(at_p)) == after
        # A set lacking a GTID before P: the series' Previous_gtids says it does not hold it.
        lacking = MysqlGtidSet({k: [list(iv) for iv in ivs] for k, ivs in at_p.intervals.items()})
        key = sorted(lacking.intervals)[-1]
        lacking.intervals[key][-1][1] -= 1
        lacking.intervals[key] = [iv for iv in lacking.intervals[key] if iv[0] < iv[1]]
        lacking.intervals = {k: ivs for k, ivs in lacking.intervals.items() if ivs}
        if lacking.intervals:  # (an empty set is the endpoint's positional dump: not asked here)
            with pytest.raises(pymysql.err.OperationalError) as refused:
                dump_by_gtid(endpoint.port, lacking)
            assert refused.value.args[0] == 1236 and name in refused.value.args[1], refused.value.args
    finally:
        if endpoint is not None:
            endpoint.stop()
        if master is not None:
            master.stop(0)
        replicator.stop()
        primary.stop()


def test_a_restart_continues_a_mid_file_series_by_gtid(shared_fixtures, tmp_path, pki):  # noqa: F811
    """The series begun at 357 takes the primary up to 719; the master stops; the primary writes
    the rest; a new master resumes by GTID with the series' executed set. The primary re-sends its
    file's head: its own Previous_gtids (a subset of the series') stands for the series' one before
    the fillers; the rest is checked byte for byte, and the series ends as the fixture from P."""
    _source, name = GTID_57
    data = (shared_fixtures / GTID_57[0]).read_bytes()
    up, name, data, policy = _setup(shared_fixtures, tmp_path, GTID_57, 719)
    primary = Primary(up, policy, pki)
    local = tmp_path / "series"
    url = f"mysql://sha2:sha2-pw@127.0.0.1:{primary.endpoint.port}?ssl-mode=REQUIRED"
    try:
        first = _start(url, local, name, 357)
        assert wait_for(lambda: first.mirror.safe == (name, 719), every=0.1), first.last_error
        first.stop()
        head = (local / name).read_bytes()[:357]
        with open(up / name, "ab") as f:
            f.write(data[719:])
        second = SourceReplicator(SourceURL.parse(url), BinlogMirror(local))
        second.start()
        try:
            assert wait_for(lambda: _complete(local, name, data), every=0.1), second.last_error
            assert (local / name).read_bytes() == head + data[357:]
            assert (second.last_error, str(second.mirror.gtids.mysql)) == (None, EXECUTED[name])
        finally:
            second.stop()
    finally:
        primary.stop()


def test_a_position_that_is_no_boundary_is_one_line(shared_fixtures, tmp_path, pki, capsys):  # noqa: F811
    up, name, data, policy = _setup(shared_fixtures, tmp_path, GTID_57)
    primary = Primary(up, policy, pki)
    url = f"mysql://sha2:sha2-pw@127.0.0.1:{primary.endpoint.port}?ssl-mode=REQUIRED"
    cases = {219: "inside the transaction", 220: "inside the event", len(data) + 100: "past the end"}
    try:
        assert_positions_refused(lambda n, pos: _replicator(url, tmp_path / f"series{n}", name, pos), cases)
        secret = tmp_path / "pw"
        secret.write_text("sha2-pw")
        code = main(["master", "serve", "--binlog-dir", str(tmp_path / "cli"), "--listen", "127.0.0.1:0",
                     "--source", f"mysql://sha2@127.0.0.1:{primary.endpoint.port}?ssl-mode=REQUIRED",
                     "--source-password-file", str(secret), "--source-file", name, "--source-pos", "219"])
        err = capsys.readouterr().err
        assert code == 2 and "inside the transaction" in err and len(err.strip().splitlines()) == 1, err
    finally:
        primary.stop()


_GTIDS = st.lists(st.tuples(st.sampled_from([str(uuid.UUID(int=n)) for n in (1, 2**100, 2**127 + 5)]),
                            st.sampled_from(["", "", "mytag", "t_2"]), st.integers(1, 2**40), st.integers(0, 50)),
                  max_size=12)


@settings(max_examples=60, deadline=None)
@given(gtids=_GTIDS, gap=st.integers(23, 3000), checksum=st.booleans())
def test_a_mysql_head_holds_the_executed_set_and_fillers_up_to_p(gtids, gap, checksum):
    """Any executed set (tagged or not): the head's Previous_gtids reads back as the set, in MySQL's
    text form as @@gtid_executed prints it, and the fillers end exactly at P."""
    text = ",".join(f"{u}:{t}:{a}-{a + n}" if t else f"{u}:{a}-{a + n}" for u, t, a, n in gtids)
    executed = MysqlGtidSet.parse(text)
    fde = format_description("8.4.3", checksum=checksum).raw
    start = 4 + len(fde) + 19 + len(executed.encode()) + (4 if checksum else 0)
    head = series_head(fde, executed, start + gap)
    events = list(read_events(head, "head"))  # CRCs and log_pos checked as any binlog's
    assert [e.type_code for e in events[:2]] == [EventType.FORMAT_DESCRIPTION, EventType.PREVIOUS_GTIDS]
    assert str(events[1].gtid_set) == str(executed) and events[1].gtid_set.tagged == executed.tagged
    assert events[-1].end_pos == len(head) == start + gap
    assert all(e.type_code == EventType.IGNORABLE and e.flags & LOG_EVENT_IGNORABLE_F for e in events[2:])
    # The Python grouper and the Rust core both take the head as control units, outside any transaction.
    assert {t.kind for t in group_transactions(events)} == {"control"}
    scan = Scanner("head").units(head, 4, 0, at_eof=True)
    assert scan.error is None and [u.kind for u in scan.units] == ["control"] * len(events)



def test_master_serve_processes_start_inside_the_file_and_serve_a_tier(shared_fixtures, tmp_path, pki):  # noqa: F811
    """The production shape: the emulated primary (`master serve --mysql-listen --policy --tls-cert
    --tls-key`) over the MySQL 5.7 fixture; a binlog server `master serve --source URL
    --source-password-file --source-file F --source-pos 719 --mysql-listen`; python-mysql-replication
    reads that binlog server by auto-position with the executed set at P and gets exactly the
    transactions after P."""
    from tests.support.master_command import free_port, serve_master, stop_master, wait_mysql_endpoint

    up, name, data, policy = _setup(shared_fixtures, tmp_path, GTID_57)
    at_p, after = _expected_at(data, name, 719)
    (tmp_path / "password").write_text("sha2-pw\n")
    port, tier_port = free_port(), free_port()
    local = tmp_path / "series"
    errors = []
    primary = serve_master(up, "--mysql-listen", f"127.0.0.1:{port}", "--policy", str(policy), "--tls-cert",
                           str(pki / "server.crt"), "--tls-key", str(pki / "server.key"))[0]
    try:
        server = serve_master(local, "--source", f"mysql://sha2@127.0.0.1:{port}?ssl-mode=VERIFY_IDENTITY&ssl-ca="
                              f"{pki / 'ca.crt'}", "--source-password-file", str(tmp_path / "password"),
                              "--source-file", name, "--source-pos", "719", "--mysql-listen",
                              f"127.0.0.1:{tier_port}")[0]
        try:
            assert wait_for(lambda: _complete(local, name, data), every=0.1)
            assert (local / name).read_bytes()[719:] == data[719:]
            wait_mysql_endpoint(server)  # (it listens after gRPC's "serving": a client connecting once races it)
            assert after and _auto_position(tier_port, str(at_p)) == after
        finally:
            errors.append(stop_master(server))
    finally:
        errors.append(stop_master(primary))
    for stderr in errors:
        assert "Traceback" not in stderr and "error" not in stderr.lower(), stderr
