"""Issue #82 item 1 over a real `master serve` process, real gRPC and a real `slave run`: a flood of
wrong passwords for a slave's identity from the slave's own address blocks the pair (here at its
fourth failure, for 300 s), yet the slave's right password, sent over a connection of its own, is
checked in its key's reserved turn and its stream is served to the binlog's end; during the flood
a known and an unknown name answer alike, over a fresh connection (checked: UNAUTHENTICATED) and
over one of the flood's (refused unchecked: RESOURCE_EXHAUSTED); the flood's checks stay bounded
and its failures are counted in /metrics. Before, the slave was refused unchecked (1129) for as
long as the block held."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest

from dumpfilter.rules.policy_gates import hash_password
from dumpfilter.v1 import dump_pb2_grpc
from tests.master.test_login_flood import _register
from tests.master.test_metrics_auth import ROOT, scrape, serving
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]
TOKEN = "fairness-metrics-token-0123"
THREADS = 8
# A connection of its own per channel: gRPC shares one between a process's channels to a target.
OWN = [("grpc.use_local_subchannel_pool", 1)]


def _policy(tmp_path) -> str:
    path = tmp_path / "policy.toml"
    path.write_text(f'[slave.app]\npassword_hash = "{hash_password("app-pw", 50_000)}"\nallow = ["%.%"]\n'
                    "[login]\nfree_failures = 3\nblock_after = 4\nblock_seconds = 300\n")
    path.chmod(0o600)
    return str(path)


def _series(url: str) -> dict[str, float]:
    status, text = scrape(url, TOKEN)
    assert status == 200
    return {k: float(v) for k, v in re.findall(r"^(dumpfilter_\w*login\w*(?:\{[^}]*\})?) (\S+)$", text, re.M)}


class _Flood:
    """THREADS threads from 127.0.0.1, each on a channel of its own, sending wrong passwords for
    `app` until stopped."""

    def __init__(self, address: str):
        self.address, self.stop, self.sent = address, threading.Event(), 0
        self.channels = [grpc.insecure_channel(address, OWN) for _ in range(THREADS)]
        self.threads = [threading.Thread(target=self._one, args=(n,)) for n in range(THREADS)]
        self.refused = [0] * THREADS   # each thread's attempts refused unchecked
        self.lock = threading.Lock()

    def _one(self, n: int) -> None:
        stub = dump_pb2_grpc.DumpFilterStub(self.channels[n])
        while not self.stop.is_set():
            code = _register(stub, "app", "guess")[0]
            with self.lock:
                self.sent += 1
                self.refused[n] += code == grpc.StatusCode.RESOURCE_EXHAUSTED

    def all_refused(self) -> bool:
        """Every thread had an attempt refused unchecked: none has a check in flight (each
        sends its next attempt when its last is answered)."""
        with self.lock:
            return min(self.refused) >= 1

    def __enter__(self) -> _Flood:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(120)
        for c in self.channels:
            c.close()


@contextmanager
def _flooded(workload_dir, tmp_path) -> Iterator[tuple[str, str, _Flood]]:
    """A `master serve` process (the policy above, /metrics with a token) and a flood against it
    that blocked the pair: (gRPC address, metrics URL, the flood)."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    with serving(workload_dir, "--policy", _policy(tmp_path), "--metrics-listen", "127.0.0.1:0",
                 "--metrics-token-file", str(token)) as (address, url), _Flood(address) as flood:
        assert wait_for(lambda: _blocked(url) and flood.all_refused(), 120), "the flood did not block the pair"
        yield address, url, flood


def _blocked(url: str) -> bool:
    return _series(url).get('dumpfilter_login_backoff_keys{key="pairs",state="blocked"}', 0) >= 1


def test_a_slave_with_the_right_password_is_served_through_a_flood_from_its_own_address(workload_dir, tmp_path):
    with _flooded(workload_dir, tmp_path) as (address, url, flood):
        at_block = _series(url)
        done = subprocess.run([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", address,
                               "--user", "app", "--password", "app-pw", "--server-id", "7",
                               "--relay-log-dir", str(tmp_path / "relay"), "--until-caught-up",
                               "--connect-retry", "0"], cwd=ROOT, capture_output=True, text=True, timeout=240)
        assert wait_for(lambda: flood.sent >= 4 * THREADS, 120), "the flood stopped short"
        assert _blocked(url)   # the block held all along
        counts = _series(url)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
    assert list((tmp_path / "relay").glob("*relay-bin.0*")), "no relay log"
    assert counts["dumpfilter_logins_checked_in_turn_total"] >= 1
    # Once the pair is blocked, the flood's attempts over its channels (each failed already) are
    # refused unchecked, however long it goes on: the checks after the block are the slave's (its
    # first login; its success does not clear a pair that backs off, which would give the flood
    # its free failures again).
    pool = 'dumpfilter_login_checks_total{where="pool"}'
    assert counts[pool] - at_block[pool] <= 2, (at_block, counts)
    assert counts['dumpfilter_logins_refused_unchecked_total{reason="pair"}'] >= 1
    assert counts['dumpfilter_failed_logins_by_identity_total{identity="app"}'] >= 4
    assert counts['dumpfilter_failed_logins_by_address_total{address="127.0.0.1"}'] >= 4


def test_a_known_and_an_unknown_name_answer_alike_during_a_flood(workload_dir, tmp_path):
    with _flooded(workload_dir, tmp_path) as (address, _, flood):
        fresh = []
        for user in ("app", "nobody"):
            with grpc.insecure_channel(address, OWN) as channel:
                code, details = _register(dump_pb2_grpc.DumpFilterStub(channel), user, "guess")
            fresh.append((code, details.replace(repr(user), "NAME")))
        stub = dump_pb2_grpc.DumpFilterStub(flood.channels[0])   # a connection that failed already
        used = [_register(stub, user, "guess") for user in ("app", "nobody")]
        used = [(code, re.sub(r"\d+ s more", "N s more", details)) for code, details in used]
    assert fresh[0] == fresh[1] == (grpc.StatusCode.UNAUTHENTICATED,
                                    "(1045) access denied for identity NAME (using password: YES)"), fresh
    assert used[0] == used[1] and used[0][0] == grpc.StatusCode.RESOURCE_EXHAUSTED, used


def test_the_mysql_endpoint_checks_the_right_password_through_a_flood_from_its_address(
        workload_dir, master_factory, tmp_path):
    """The MySQL face shares the guard: every login there is a fresh connection, so during a flood
    that blocked the pair (wrong passwords from 127.0.0.1 on 4 threads, a real MySQL client) the
    right password waits for its key's turn and is checked: a session, where it was 1129."""
    import pymysql

    from dumpfilter.master.endpoint import MysqlEndpoint

    master, _ = master_factory(workload_dir, policy=_policy(tmp_path))
    logins = master.service.policy.logins
    endpoint = MysqlEndpoint(master.service, "127.0.0.1:0")
    stop, codes = threading.Event(), []

    def flood() -> None:
        while not stop.is_set():
            try:
                pymysql.connect(host="127.0.0.1", port=endpoint.port, user="app", password="guess",
                                connect_timeout=60).close()
            except pymysql.err.OperationalError as exc:
                codes.append(exc.args[0])

    threads = [threading.Thread(target=flood) for _ in range(4)]
    try:
        for t in threads:
            t.start()
        assert wait_for(lambda: logins.snapshot()["pairs"] == {"blocked": 1}, 120), "the flood did not block the pair"
        with pymysql.connect(host="127.0.0.1", port=endpoint.port, user="app", password="app-pw",
                             connect_timeout=60) as conn, conn.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
        assert wait_for(lambda: len(codes) >= 8, 120), "the flood stopped short"
    finally:
        stop.set()
        for t in threads:
            t.join(120)
        endpoint.stop()
    assert set(codes) <= {1045, 1129} and 1045 in codes, codes
    assert logins.reserved >= 1 and logins.failed_by_identity["app"] >= 4
