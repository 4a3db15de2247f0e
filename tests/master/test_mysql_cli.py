"""The command line of the MySQL endpoint and of --source: misuse is one line and exit 2."""

from __future__ import annotations

import pytest

from dumpfilter.cli.app import main


@pytest.mark.parametrize("extra, message", [
    (["--replicas", "r.toml"], "--replicas names real replicas' rules: it needs --mysql-listen"),
    (["--mysql-listen", "127.0.0.1:99999"], "--mysql-listen '127.0.0.1:99999': port 99999 is out of range"),
    (["--mysql-listen", "127.0.0.1:0", "--replicas", "missing.toml"], "missing.toml"),
    (["--source-file", "x.000001"], "need --source"),
    (["--source", "mysql://u:p@127.0.0.1:1", "--source-pos", "120"], "a start inside a file needs --source-file"),
    (["--source", "mysql://u:p@127.0.0.1:1", "--source-file", "a.000001", "--source-pos", "3"],
     "--source-pos 3: a start inside a file needs --source-file and a position of 4 or more"),
    (["--source", "http://127.0.0.1:1"], "expected mysql://USER:PASS@HOST:PORT"),
    (["--source", "mysql://u@127.0.0.1:1", "--source-file", "a.000001", "--source-gtid", "0-1-1"], "give one start"),
    (["--mysql-require-secure-transport"], "need --mysql-listen"),
    (["--mysql-listen", "127.0.0.1:0", "--mysql-require-secure-transport"],
     "--mysql-require-secure-transport needs TLS: give --tls-cert and --tls-key"),
    (["--mysql-listen", "127.0.0.1:0", "--mysql-rsa-key", "missing.pem"], "--mysql-rsa-key missing.pem:"),
])
def test_misuse_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    code = main(["master", "serve", "--binlog-dir", str(tmp_path), "--listen", "127.0.0.1:0", *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_serve_with_tls_rsa_key_and_required_secure_transport(tmp_path):
    """The options end to end, in `master serve` processes: the RSA key of --mysql-rsa-key is
    the one pymysql gets when it asks for the public key on a plain connection; under
    --mysql-require-secure-transport a plain connection gets 3159 and TLS logs in."""
    import pymysql
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from dumpfilter.workload.generator import WorkloadSpec, generate
    from tests.support.master_process import free_port
    from tests.support.mysql_replicas import serve_master
    from tests.support.tls_helpers import make_pki

    pki = make_pki(tmp_path / "pki")
    if pki is None:
        pytest.skip("openssl is not installed")
    generate(WorkloadSpec(seed=4, transactions=5, max_binlog_size=60_000), tmp_path / "binlogs")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "rsa.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    (tmp_path / "policy.toml").write_text('[slave.repl]\npassword = "pw"\nallow = ["%.%"]\n')

    def serve(*options: str):
        port = free_port()
        proc = serve_master(tmp_path / "binlogs", tmp_path / "master.log", [port], "--listen",
                            f"127.0.0.1:{free_port()}", "--mysql-listen", f"127.0.0.1:{port}", "--policy",
                            str(tmp_path / "policy.toml"), "--tls-cert", str(pki / "server.crt"), "--tls-key",
                            str(pki / "server.key"), *options)
        return proc, port

    proc, port = serve("--mysql-rsa-key", str(tmp_path / "rsa.pem"))
    try:
        conn = pymysql.connect(host="127.0.0.1", port=port, user="repl", password="pw", ssl_disabled=True)
        assert conn.server_public_key == public
        conn.close()
    finally:
        proc.terminate()
        proc.wait(30)
    proc, port = serve("--mysql-require-secure-transport")
    try:
        with pytest.raises(pymysql.err.OperationalError) as info:
            pymysql.connect(host="127.0.0.1", port=port, user="repl", password="pw", ssl_disabled=True)
        assert info.value.args[0] == 3159
        conn = pymysql.connect(host="127.0.0.1", port=port, user="repl", password="pw", ssl={"ca": str(pki / "ca.crt")})
        with conn.cursor() as cur:
            cur.execute("SHOW STATUS LIKE 'Ssl_version'")
            assert cur.fetchone()[1].startswith("TLSv1.")
            cur.execute("SELECT @@require_secure_transport, @@have_ssl")
            assert cur.fetchone() == ("ON", "YES")
        conn.close()
    finally:
        proc.terminate()
        proc.wait(30)
