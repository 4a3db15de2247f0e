"""The authentication exchange of the MySQL endpoint, per policy identity, as a MySQL 8.4 server
runs it: the handshake names caching_sha2_password, then an AuthSwitch to the plugin the identity
uses (mysql_native_password for MariaDB and older clients, client_ed25519 for MariaDB replicas).

caching_sha2_password, after MySQL's sql/auth/sha2_password.cc:
- fast auth: the client sends XOR(SHA256(pw), SHA256(SHA256(SHA256(pw)) + nonce)); a server that
  holds SHA256(SHA256(pw)) in its cache (filled by an earlier full authentication) checks it and
  answers fast_auth_success (0x03);
- else perform_full_authentication (0x04): over TLS the client sends its password in clear; on a
  plain connection it asks for the server's RSA public key (0x02) unless it has it, and sends
  RSA-OAEP(password + NUL, XORed with the nonce).
A wrong password, or a name the policy does not know, takes the same path and gets the same
error (1045) in the same time: an unknown name is answered as a decoy identity, whose plugins and
kind of secret (a PBKDF2 hash's iterations too) are one of the policy's identities', picked by a
keyed hash of the name (MySQL's mock accounts do the same; MasterPolicy.decoy).

Every exchange of a policy's identity goes through the policy's login guard (master.login_guard):
an address or a name that failed too often lately waits for its reserved turn before the exchange
(each connection is a fresh one; 1129, no password checked, only when too many wait), and the
expensive checks (PBKDF2, ed25519's key derivation) run in its pool,
off the connection threads."""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa

from dumpfilter.errors import InvalidArgumentError
from dumpfilter.master.endpoint.handshake import native_scramble_matches
from dumpfilter.master.login_guard import LoginGuard
from dumpfilter.master.policy import (
    CACHING_SHA2,
    ED25519,
    MYSQL_AUTH_PLUGINS,
    NATIVE,
    MasterPolicy,
    is_expensive,
)
from dumpfilter.rules.policy_gates import Secret

# caching_sha2_password's one-byte messages after 0x01 (AuthMoreData), and the client's key request
FAST_AUTH_SUCCESS, PERFORM_FULL_AUTHENTICATION, REQUEST_PUBLIC_KEY = b"\x03", b"\x04", b"\x02"
MAX_PASSWORD = 256         # MySQL's CACHING_SHA2_PASSWORD_MAX_PASSWORD_LENGTH
RSA_BITS = 2048            # MySQL's auto-generated key pair (caching_sha2_password_auto_generate_rsa_keys)
_OAEP = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)


def xor_cycle(data: bytes, key: bytes) -> bytes:
    return bytes(b ^ key[i % len(key)] for i, b in enumerate(data))


def sha2_digest(password: bytes) -> bytes:
    """What the cache holds: SHA256(SHA256(password))."""
    return hashlib.sha256(hashlib.sha256(password).digest()).digest()


def sha2_fast_matches(digest: bytes, nonce: bytes, response: bytes) -> bool:
    """The fast-auth check: response XOR SHA256(digest + nonce) is SHA256(pw), whose hash is the digest."""
    if len(response) != 32:
        return False
    stage1 = xor_cycle(response, hashlib.sha256(digest + nonce).digest())
    return hmac.compare_digest(hashlib.sha256(stage1).digest(), digest)


def ed25519_public_key(password: bytes) -> bytes:
    """MariaDB's ed25519 account key: the point a*B where a is the clamped first half of
    SHA512(password) (the whole password is the seed, of any length; RFC 8032 hashes a 32-byte
    seed the same way, which is why cryptography's own key derivation cannot be used here)."""
    a = int.from_bytes(hashlib.sha512(password).digest()[:32], "little")
    a = (a & ((1 << 254) - 8)) | (1 << 254)
    return _encode_point(_scalar_mult(a, _BASE))


# -- ed25519 arithmetic for the one derivation above (extended coordinates; verifying uses cryptography)
_P = 2 ** 255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P
_BY = 4 * pow(5, _P - 2, _P) % _P
_BX = 15112221349535400772501151409588531511454012693041857206046113283949847762202
_BASE = (_BX, _BY, 1, _BX * _BY % _P)
_Point = tuple[int, int, int, int]  # (X, Y, Z, T)


def _add(p: _Point, q: _Point) -> _Point:
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _scalar_mult(k: int, point: _Point) -> _Point:
    result = (0, 1, 1, 0)
    while k:
        if k & 1:
            result = _add(result, point)
        point = _add(point, point)
        k >>= 1
    return result


def _encode_point(point: _Point) -> bytes:
    zinv = pow(point[2], _P - 2, _P)
    x, y = point[0] * zinv % _P, point[1] * zinv % _P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


class RsaKeys:
    """The key pair of caching_sha2_password's RSA exchange: from --mysql-rsa-key (a PEM private
    key), else generated at start (as MySQL does when it finds no key files)."""

    def __init__(self, path: str | Path | None = None):
        if path is None:
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
        else:
            try:
                key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
            except (OSError, ValueError, TypeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a PEM private key"
                raise InvalidArgumentError(f"--mysql-rsa-key {path}: {reason}") from None
            if not isinstance(key, rsa.RSAPrivateKey) or key.key_size < 1024:
                raise InvalidArgumentError(f"--mysql-rsa-key {path}: not an RSA private key of 1024 bits or more")
            self.private = key
        self.public_pem = self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                                 serialization.PublicFormat.SubjectPublicKeyInfo)
        self.cipher_length = self.private.key_size // 8

    def decrypt(self, data: bytes) -> bytes | None:
        if len(data) != self.cipher_length:
            return None
        try:
            return self.private.decrypt(data, _OAEP)
        except ValueError:
            return None


@dataclass(frozen=True)
class Account:
    """Who the exchange checks: `secret` None means the identity has none (any answer passes);
    `decoy` an unknown name, which no answer passes; `guard` the policy's login guard (None on
    an open master)."""

    name: str
    plugins: tuple[str, ...]
    secret: Secret | None
    decoy: bool = False
    guard: LoginGuard | None = None


@dataclass(frozen=True)
class Outcome:
    ok: bool
    plugin: str
    path: str           # fast | full-tls | full-rsa | scramble | signature | none
    password_used: bool
    reason: str = ""    # why a refusal is not simply a wrong password (for the log, never the client)


class Conversation:
    """The packets of one exchange: `send` frames a payload, `read` returns the client's next one."""

    def __init__(self, send: Callable[[bytes], None], read: Callable[[], bytes]) -> None:
        self.send, self.read = send, read


class Authenticator:
    """The endpoint's authentication state: the RSA keys and the caching_sha2_password cache
    (identity -> SHA256(SHA256(password)), filled by full authentications)."""

    def __init__(self, rsa_keys: RsaKeys):
        self.rsa = rsa_keys
        self._cache: dict[str, tuple[bytes, Secret]] = {}   # identity -> (digest, the secret it was proved against)
        self._lock = threading.Lock()
        self.counts: dict[tuple[str, str, bool], int] = {}   # (plugin, path, ok) -> logins

    def account(self, policy: MasterPolicy | None, user: str) -> Account:
        """Whom the exchange checks `user` against. An unknown name is a decoy (it fails the same
        way a wrong password does); [default] identities and an open master take any password."""
        if policy is None:
            return Account(user, MYSQL_AUTH_PLUGINS, None)
        entry = policy.entries.get(user) if user else None
        if entry is not None:
            return Account(user, entry.mysql_auth, entry.secret, guard=policy.logins)
        if policy.default is not None:
            return Account(user, policy.default.mysql_auth, None, guard=policy.logins)
        plugins, secret = policy.decoy(user)
        return Account(user, plugins, secret, decoy=True, guard=policy.logins)

    def forget(self) -> None:
        with self._lock:
            self._cache.clear()

    # -- the exchange -------------------------------------------------------------------------
    def authenticate(self, talk: Conversation, account: Account, client_plugin: str, first: bytes,
                     scramble: bytes, secure: bool, address: str = "", connection: str = "") -> Outcome:
        """Run the exchange after the client's Handshake Response (`first`, made by
        `client_plugin` for the handshake's caching_sha2_password nonce `scramble`), from
        `address` over `connection` (its peer, address and port: a fresh one waits for its
        turn where the address or name backs off). LoginThrottled (before any packet) when the
        login guard refuses the address or the name; ChecksBusy when its check pool is full."""
        guard = account.guard
        if guard is not None:
            guard.admit(address, account.name, connection)
        outcome = self._exchange(talk, account, client_plugin, first, scramble, secure, address)
        if guard is not None:
            if outcome.ok:
                guard.succeeded(address, account.name, connection)
            else:
                guard.failed(address, account.name, known=not account.decoy, connection=connection)
        return outcome

    def _exchange(self, talk: Conversation, account: Account, client_plugin: str, first: bytes, scramble: bytes,
                  secure: bool, address: str) -> Outcome:
        if client_plugin == CACHING_SHA2 and CACHING_SHA2 in account.plugins:
            plugin, response = CACHING_SHA2, first
        else:
            # MySQL switches whenever the identity's plugin is not the handshake's, even when the
            # client named it already: that client made its data for another plugin's nonce (a
            # MariaDB replica sends none at all).
            plugin = client_plugin if client_plugin in account.plugins else account.plugins[0]
            nonce = os.urandom(32) if plugin == ED25519 else scramble
            talk.send(b"\xfe" + plugin.encode() + b"\0" + nonce + (b"" if plugin == ED25519 else b"\0"))
            scramble = nonce
            response = talk.read()
        outcome = self._check(talk, account, plugin, response, scramble, secure, address)
        key = (outcome.plugin, outcome.path, outcome.ok)
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + 1
        return outcome

    def _verify(self, account: Account, check: Callable[[], bool], expensive: bool, address: str) -> bool:
        """`check()`, through the login guard (its pool when expensive) when there is one."""
        if account.guard is None:
            return bool(check())
        return account.guard.check(check, expensive, address, account.name)

    def _check(self, talk: Conversation, account: Account, plugin: str, response: bytes, nonce: bytes,
               secure: bool, address: str) -> Outcome:
        secret = account.secret
        if plugin == NATIVE:
            stage2 = None if secret is None else secret.native_stage2()
            # (A policy never lets a PBKDF2-hashed identity list this plugin: stage2 is there.)
            ok = secret is None or (stage2 is not None and native_scramble_matches(stage2, nonce, response))
            return Outcome(ok and not account.decoy, plugin, "scramble", bool(response))
        if plugin == ED25519:
            clear = None if secret is None else secret.clear
            ok = secret is None or (clear is not None and self._verify(
                account, lambda: self._ed25519(clear, nonce, response), True, address))
            return Outcome(ok and not account.decoy, plugin, "signature", bool(response))
        return self._caching_sha2(talk, account, secret, response, nonce, secure, address)

    def _ed25519(self, password: bytes, nonce: bytes, signature: bytes) -> bool:
        if len(signature) != 64:
            return False
        try:
            ed25519.Ed25519PublicKey.from_public_bytes(ed25519_public_key(password)).verify(signature, nonce)
        except (InvalidSignature, ValueError):
            return False
        return True

    def _caching_sha2(self, talk: Conversation, account: Account, secret: Secret | None, response: bytes,
                      nonce: bytes, secure: bool, address: str) -> Outcome:
        if response in (b"", b"\0"):   # no password given (MySQL's "Case 5")
            ok = secret is None or self._verify(account, lambda: secret.matches(b""), is_expensive(secret), address)
            ok = ok and not account.decoy
            return Outcome(ok, CACHING_SHA2, "none", False)
        if secret is None:             # an identity without a password: the client's answer is not checked
            talk.send(b"\x01" + FAST_AUTH_SUCCESS)
            return Outcome(not account.decoy, CACHING_SHA2, "fast", True)
        with self._lock:
            cached = self._cache.get(account.name) if not account.decoy else None
        # The cached digest counts only while it was made for the identity's current secret (a
        # policy reload that changes it makes the old one useless). A mismatch is not an error:
        # like a miss it asks for the password itself (sha2_password.cc does the same). A hashed
        # secret has no digest of its own: the cache holds the one of the password a full
        # authentication proved, beside the secret it was proved against.
        fast = cached is not None and cached[1] == secret and sha2_fast_matches(cached[0], nonce, response)
        if fast:
            talk.send(b"\x01" + FAST_AUTH_SUCCESS)
            return Outcome(True, CACHING_SHA2, "fast", True)
        talk.send(b"\x01" + PERFORM_FULL_AUTHENTICATION)
        packet = talk.read()
        given: bytes | None
        if secure:
            given, path = packet.split(b"\0", 1)[0], "full-tls"
        else:
            path = "full-rsa"
            if packet == REQUEST_PUBLIC_KEY:
                talk.send(b"\x01" + self.rsa.public_pem)
                packet = talk.read()
            plain = self.rsa.decrypt(packet)
            # Without the key a client cannot send anything decryptable: its password in clear
            # on a plain connection, or garbage, decrypts to nothing and fails as a wrong password
            # would (the client is told no more); the log says when it was the right one in clear.
            given = xor_cycle(plain, nonce[:20]).split(b"\0", 1)[0] if plain is not None else None
            if given is None:   # (checked for a decoy too: it takes the time a known name takes)
                clear = packet.split(b"\0", 1)[0]
                if 0 < len(clear) <= MAX_PASSWORD and self._verify(
                        account, lambda: secret.matches(clear), is_expensive(secret), address) and not account.decoy:
                    return Outcome(False, CACHING_SHA2, path, True, reason=(
                        "the right password, sent in clear over a connection without TLS (refused as MySQL "
                        "refuses it: use TLS, or let the client ask for the server's RSA key)"))
        ok = given is not None and len(given) <= MAX_PASSWORD and self._verify(
            account, lambda: secret.matches(given), is_expensive(secret), address) and not account.decoy
        if ok and given is not None:  # (ok only with a password given)
            with self._lock:
                self._cache[account.name] = (sha2_digest(given), secret)
        return Outcome(ok, CACHING_SHA2, path, True)

