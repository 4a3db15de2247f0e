"""A throw-away PKI for the TLS tests, made with the openssl command: a CA, a server certificate
for 127.0.0.1, client certificates (CN = policy identity) and a client signed by a rogue CA."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(directory: Path, name: str) -> None:
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=directory)


def _signed(directory: Path, ca: str, name: str, cn: str, server: bool = False) -> None:
    _run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{name}.key",
         "-out", f"{name}.csr", cwd=directory)
    ext = directory / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n" if server else "extendedKeyUsage=clientAuth\n")
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
         "-days", "2", "-extfile", ext.name, "-out", f"{name}.crt", cwd=directory)


def make_pki(directory: Path, clients: tuple[str, ...] = ("ana",)) -> Path | None:
    """Files: ca.crt, server.crt/key, <cn>.crt/key per client, rogue-ana.crt/key (rogue CA).
    None when openssl is not installed."""
    if shutil.which("openssl") is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca")
    _ca(directory, "rogue")
    _signed(directory, "ca", "server", "127.0.0.1", server=True)
    for cn in clients:
        _signed(directory, "ca", cn, cn)
    _signed(directory, "rogue", "rogue-ana", "ana")
    return directory
