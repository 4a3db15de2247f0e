"""Issue #27 item 10: /metrics of a real `master serve` process, scraped with a real HTTP client
(urllib). Under a policy an anonymous scrape names no slave (totals only, which add up to the
per-slave figures); `--metrics-token-file` makes a bearer token compulsory and shows every slave;
under mTLS a client certificate's identity sees its own slaves only, as over gRPC; an open master
shows every slave, as its gRPC side does."""

from __future__ import annotations

import os
import re
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import contextmanager, suppress
from pathlib import Path

import grpc
import pytest

from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from tests.support.dump_helpers import run_slave
from tests.support.tls_helpers import make_pki

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(180)]
ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
TOKEN = "s3cret-scrape-token-0123456789"
POLICY = """
[slave.ana]
password = "pw-ana"
allow = ["db1.%", "db2.%"]

[slave.bob]
password = "pw-bob"
allow = ["db1.%"]

[slave.ops]
password = "pw-ops"
admin = true
allow = []
"""


@contextmanager
def serving(binlog_dir, *options: str):
    """A `master serve` process on free ports: yields (gRPC address, metrics URL)."""
    proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(binlog_dir),
                             "--listen", "127.0.0.1:0", "--lint-max-mb", "0", *options], cwd=ROOT,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "metrics on" in line:
                break
        address = re.search(r"serving .* on (\S+)", "".join(lines)).group(1)
        url = re.search(r"metrics on (\S+)", "".join(lines)).group(1)
        yield address, url
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143  # drained, then as every command ends at SIGTERM
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def scrape(url: str, token: str | None = None, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=20, context=context) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str, name: str) -> dict[str, float]:
    """{labels text: value} of one metric."""
    return {m.group(1) or "": float(m.group(2)) for m in re.finditer(rf"^{name}(?:{{(.*)}})? (\S+)$", text, re.M)}


def slave_labels(text: str) -> set[str]:
    return set(re.findall(r'slave="([^"]*)"', text))


def _register(address: str, server_id: int, user: str) -> None:
    with grpc.insecure_channel(address) as channel:
        dump_pb2_grpc.DumpFilterStub(channel).Register(
            dump_pb2.RegisterRequest(server_id=server_id),
            metadata=[("dumpfilter-user", user), ("dumpfilter-password", f"pw-{user}")], timeout=20)


@pytest.fixture
def policy(tmp_path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return path


def test_anonymous_scrape_under_a_policy_names_no_slave(workload_dir, tmp_path, policy):
    with serving(workload_dir, "--policy", str(policy), "--metrics-port", "0") as (address, url):
        run_slave(address, tmp_path / "ana", 41, user="ana", password="pw-ana")
        _register(address, 77, "bob")
        status, text = scrape(url)
        assert status == 200
        assert slave_labels(text) == {""}  # one summed series per family, no server_id
        assert samples(text, "dumpfilter_registered_slaves") == {"": 2}
        assert samples(text, "dumpfilter_bytes_sent_total")[r'slave=""'] > 0
        assert "identity" not in text and "ana" not in text and "bob" not in text
        # A token sent where none is configured changes nothing.
        status, text = scrape(url, token=TOKEN)
        assert status == 200 and slave_labels(text) == {""}


def test_the_metrics_token_is_required_and_shows_every_slave(workload_dir, tmp_path, policy):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with serving(workload_dir, "--policy", str(policy), "--metrics-listen", "127.0.0.1:0",
                 "--metrics-token-file", str(token_file)) as (address, url):
        run_slave(address, tmp_path / "ana", 41, user="ana", password="pw-ana")
        _register(address, 77, "bob")
        for token in (None, "wrong-token-0123456789", TOKEN + "x"):
            status, body = scrape(url, token)
            assert status == 401 and "slave" not in body and "dumpfilter_" not in body, (token, body)
        status, text = scrape(url, TOKEN)
        assert status == 200
        assert slave_labels(text) == {"41", "77"}
        sent = samples(text, "dumpfilter_bytes_sent_total")
        assert sent['slave="41"'] > 0
        uses = samples(text, "dumpfilter_identity_use")
        assert uses['identity="ana",resource="registrations"'] == 1
        assert uses['identity="bob",resource="registrations"'] == 1
        assert scrape(url.replace("/metrics", "/other"), TOKEN)[0] == 404


def test_a_client_certificate_sees_its_own_slaves(workload_dir, tmp_path, policy):
    pki = make_pki(tmp_path / "pki", clients=("ana", "bob", "ops"))
    if pki is None:
        message = "the openssl command is needed to make test certificates"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    with serving(workload_dir, "--policy", str(policy), "--metrics-port", "0", "--tls-cert", str(pki / "server.crt"),
                 "--tls-key", str(pki / "server.key"), "--tls-client-ca", str(pki / "ca.crt")) as (address, url):
        assert url.startswith("https://")
        run_slave(address, tmp_path / "ana", 41, tls_ca=pki / "ca.crt", tls_cert=pki / "ana.crt",
                  tls_key=pki / "ana.key")
        run_slave(address, tmp_path / "bob", 77, tls_ca=pki / "ca.crt", tls_cert=pki / "bob.crt",
                  tls_key=pki / "bob.key")

        def as_client(name: str | None) -> tuple[int, str]:
            context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
            if name:
                context.load_cert_chain(pki / f"{name}.crt", pki / f"{name}.key")
            return scrape(url, context=context)

        ana, bob, ops = as_client("ana"), as_client("bob"), as_client("ops")
        assert (ana[0], bob[0], ops[0]) == (200, 200, 200)
        assert slave_labels(ana[1]) == {"41", ""} and slave_labels(bob[1]) == {"77", ""}
        assert slave_labels(ops[1]) == {"41", "77"}
        # Whatever the view, the totals are the same: each family sums to the master's figure.
        totals = [sum(samples(text, "dumpfilter_bytes_sent_total").values()) for _, text in (ana, bob, ops)]
        assert totals[0] == totals[1] == totals[2] > 0
        assert 'identity="bob"' not in ana[1] and 'identity="ana"' in ana[1]
        for client in (None, "rogue-ana"):  # no certificate, or one from another CA: no TLS session
            with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
                as_client(client)


def test_an_open_master_shows_every_slave(workload_dir, tmp_path):
    with serving(workload_dir, "--metrics-port", "0") as (address, url):
        run_slave(address, tmp_path / "seven", 7)
        status, text = scrape(url)
        assert status == 200 and slave_labels(text) == {"7"}
        assert samples(text, "dumpfilter_registered_slaves") == {"": 1}


@pytest.mark.parametrize("options, expected", [
    (["--metrics-token-file", "/nonexistent/token"], "--metrics-token-file needs --metrics-port or --metrics-listen"),
    (["--metrics-port", "0", "--metrics-token-file", "/nonexistent/token"],
     "--metrics-token-file /nonexistent/token: No such file or directory"),
    (["--metrics-listen", "127.0.0.1"], "--metrics-listen '127.0.0.1': expected HOST:PORT"),
])
def test_metrics_options_errors_are_one_line(workload_dir, options, expected):
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(workload_dir),
                          "--listen", "127.0.0.1:0", *options], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stderr.strip().splitlines() == [f"dumpfilter: error: {expected}"], run.stderr


def test_a_short_token_is_refused(workload_dir, tmp_path):
    token = tmp_path / "token"
    token.write_text("short\n")
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(workload_dir),
                          "--metrics-port", "0", "--metrics-token-file", str(token)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2 and "at least 16 characters" in run.stderr and run.stderr.count("\n") == 1


def test_metrics_connections_are_bounded(workload_dir):
    """Connections that send nothing hold no thread: MAX_PENDING of them wait for their request on
    the acceptor's one thread, a newcomer past them closes the oldest, and a scrape is answered
    while they all wait."""
    import socket
    import threading

    from dumpfilter.master.serve.http_acceptor import MAX_PENDING, WORKERS
    from dumpfilter.master.serve.metrics_http import MetricsEndpoint
    from dumpfilter.master.service import DumpService
    from tests.support.waiting import wait_for

    service = DumpService(workload_dir, lint_bytes=0)
    endpoint = MetricsEndpoint(service, "127.0.0.1", 0)
    acceptor = endpoint.acceptor
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", endpoint.port), timeout=30) for _ in range(MAX_PENDING + 4)]
    try:
        assert wait_for(lambda: acceptor.evicted == 4 and len(acceptor.pending) == MAX_PENDING)
        for sock in idle[:4]:
            assert sock.recv(1) == b""  # the oldest, closed unanswered for the newcomers
        status, text = scrape(f"http://127.0.0.1:{endpoint.port}/metrics")
        assert status == 200 and "dumpfilter_registered_slaves 0.0" in text
        assert threading.active_count() - before <= WORKERS   # no thread per connection
    finally:
        for sock in idle:
            sock.close()
        endpoint.stop()
        service.shutdown()


def test_slow_senders_from_the_scrapers_own_address_never_keep_it_out(workload_dir):
    """Issue #82: 40 sockets from the scraper's own address (127.0.0.1: a NAT, a shared host),
    each trickling header lines and never ending its request, reconnecting when closed, made 13
    scrapes in a row fail over 25 s (`Empty reply from server`): they held the connection places,
    and a newcomer could close one only once it was older than REQUEST_TIMEOUT. Now they wait
    for their head on the acceptor's thread and a scrape is answered among them, every time."""
    import socket
    import threading

    from dumpfilter.master.serve import metrics_http
    from dumpfilter.master.service import DumpService
    from tests.support.waiting import wait_for

    service = DumpService(workload_dir, lint_bytes=0)
    endpoint = metrics_http.MetricsEndpoint(service, "127.0.0.1", 0)
    stop, rounds = threading.Event(), [0]

    def connect() -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", endpoint.port), timeout=30)
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        return sock

    socks = [connect() for _ in range(40)]

    def trickle() -> None:
        while not stop.wait(0.05):
            for n, sock in enumerate(socks):
                try:
                    sock.sendall(b"X-Slow: 1\r\n")
                except OSError:   # closed by the master: come back at once
                    sock.close()
                    with suppress(OSError):
                        socks[n] = connect()
            rounds[0] += 1

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: rounds[0] >= 5)
        for _ in range(5):
            status, text = scrape(f"http://127.0.0.1:{endpoint.port}/metrics")
            assert status == 200 and "dumpfilter_registered_slaves" in text
        assert thread.is_alive() and len(endpoint.acceptor.pending) >= 40
    finally:
        stop.set()
        thread.join(30)
        for sock in socks:
            sock.close()
        endpoint.stop()
        service.shutdown()
