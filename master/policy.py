"""The master-side policy file (WL#2387's "master controlled" option): who a caller is (password or
mTLS client certificate), which schemas and tables each slave identity may ever receive whatever
rules it asks for, which server_ids it may use, and how many streams it may hold."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from dumpfilter.errors import AccessDeniedError, RuleError
from dumpfilter.master.login_guard import LoginGuard, LoginLimits
from dumpfilter.rules.gate import Gate
from dumpfilter.rules.policy_gates import (NATIVE_HASH, PBKDF2, PLAIN, Fail, Grant, Secret, owner_of, read_policy,
                                           slave_gate)

log = logging.getLogger("dumpfilter.master.policy")


# The MySQL endpoint's authentication plugins (the names clients use), and an identity's list when
# its entry gives no `mysql_auth`: caching_sha2_password (MySQL 8.4's default) first, then
# mysql_native_password for MariaDB replicas and older clients.
CACHING_SHA2, NATIVE, ED25519 = "caching_sha2_password", "mysql_native_password", "client_ed25519"
MYSQL_AUTH_PLUGINS = (CACHING_SHA2, NATIVE, ED25519)
DEFAULT_MYSQL_AUTH = (CACHING_SHA2, NATIVE)


@dataclass(frozen=True)
class PolicyEntry:
    identity: str
    allow: tuple[str, ...]
    secret: Secret | None = None      # None: the identity has no password
    server_ids: tuple[int, ...] = ()
    admin: bool = False               # sees and may act on every slave (Stats, ListFilters, ...)
    max_streams: int | None = None    # concurrent Dump streams of this identity (None: the master's default)
    # The other per-identity caps (master.shares; None: the identity's default share).
    max_registrations: int | None = None
    max_rules: int | None = None
    max_calls: int | None = None
    max_lint_jobs: int | None = None
    max_sessions: int | None = None   # authenticated --mysql-listen sessions (MySQL's max_user_connections)
    is_default: bool = False          # the [default] section: every identity it admits is one account
    mysql_auth: tuple[str, ...] = DEFAULT_MYSQL_AUTH   # --mysql-listen's plugins for it, preferred first

    @property
    def limits(self) -> dict[str, int | None]:
        return {"registrations": self.max_registrations, "rules": self.max_rules, "streams": self.max_streams,
                "calls": self.max_calls, "lint_jobs": self.max_lint_jobs, "sessions": self.max_sessions}


@dataclass(frozen=True)
class Identity:
    """An authenticated caller: `name` is the policy identity (the user, or the client
    certificate's common name under mTLS); `entry` the policy section that applies to it."""

    name: str
    entry: PolicyEntry | None = None
    admin: bool = False


# Without a policy file the master is open: every caller acts as an administrator.
OPEN = Identity("", None, admin=True)


class AuthenticationError(AccessDeniedError):
    """Credentials the policy refuses (gRPC's UNAUTHENTICATED; MySQL's 1045, as its parent). A
    wrong password and a name the policy does not know get the same words; `reason` says which,
    for the master's log only. PERMISSION_DENIED stays for a known identity asking for what its
    policy forbids."""

    grpc_code = "UNAUTHENTICATED"

    def __init__(self, user: str, password_used: bool, reason: str):
        super().__init__(f"access denied for identity {user[:64]!r} (using password: "
                         f"{'YES' if password_used else 'NO'})")
        self.reason = reason


def is_expensive(secret: Secret | None) -> bool:
    """Whether checking a password against `secret` costs real CPU (a PBKDF2 hash: about 0.2 s
    at `hash-password`'s 600,000 iterations), and so runs in the login guard's pool."""
    return secret is not None and secret.kind == PBKDF2


class MasterPolicy:
    """Parsed policy TOML:

        [slave.analytics]                 # identity = the user (metadata or Register's credentials),
        password = "s3cret"               #   or the CN of an mTLS client certificate; optional password
        server_ids = [21, 22]             # optional: only these server_ids may use the identity (and
                                          #   no other identity may use them)
        allow = ["shop.%", "crm.customers"]
        max_streams = 4                   # optional caps of this identity (master.shares); each
        max_registrations = 16            #   defaults to its share: max(1, the master's total //
        max_rules = 20000                 #   the number of sections); [default]'s identities
        max_calls = 2                     #   share one set of caps
        max_lint_jobs = 4
        max_sessions = 8                  #   (MySQL endpoint sessions: max_user_connections)
        mysql_auth = ["caching_sha2_password"]   # optional: --mysql-listen's plugins for it, preferred
                                          #   first (caching_sha2_password, mysql_native_password,
                                          #   client_ed25519; default the first two)

        [slave.ops]
        password = "..."
        admin = true                      # sees every slave; may Dump/ChangeFilter/Unregister any

        [default]                         # identities not listed; omit it to refuse them
        allow = []

        [login]                           # optional: the failed-login back-off's thresholds
        block_after = 10                  #   (master.login_guard.LoginLimits; each key defaults
                                          #   to MySQL's figure)

    A server_id belongs to the identity that registered it: only that identity may register it
    again; only it or an admin may Dump it, change its filters, unregister it or see it.
    """

    def __init__(self, entries: dict[str, PolicyEntry], default: PolicyEntry | None,
                 login: LoginLimits | None = None):
        self.entries = entries
        self.default = default
        self.logins = LoginGuard(limits=login)   # failed logins of every face: back-off, check pool, counts
        self._key = os.urandom(32)   # picks decoys; keys the proved-password cache
        # identity -> (the secret, a keyed hash of the password a check proved against it): the
        # same password again skips the expensive check (every gRPC call carries it)
        self._proven: dict[str, tuple[Secret, bytes]] = {}

    @property
    def bounds_any(self) -> bool:
        """Whether some identity's gate can refuse anything (`Gate.bounds`): a policy whose every
        section allows every table checks no text, and reads none ahead."""
        sections = [*self.entries.values(), *([self.default] if self.default is not None else [])]
        return any(Gate(tuple(entry.allow), restricted=True).bounds for entry in sections)

    @classmethod
    def load(cls, path: str | Path) -> MasterPolicy:
        text = read_policy(path)  # sections, keys, allow, server_ids and passwords, read as everyone reads them
        entries = {name: _entry(name, body, text.grants[name], text.fail_for(name))
                   for name, body in text.bodies.items()}
        default = None
        if text.default is not None and text.default_grant is not None:
            default = _entry("default", text.default, text.default_grant, text.fail_for("default", True),
                             is_default=True)
        login = None
        if text.login is not None:
            def fail(key: str | None, message: str) -> NoReturn:
                raise RuleError(f"{text.where.at('login', key)}: [login] {message}")
            login = LoginLimits.from_table(text.login, fail)
        _warn_open_doors(entries, default, path)
        _warn_readable_secrets(entries, path)
        return cls(entries, default, login)

    def authenticate(self, user: str, password: str, certificate_name: str | None = None,
                     address: str = "", connection: str = "") -> Identity:
        """The caller's identity. An mTLS client certificate authenticates by itself (its CN is
        the identity; a user claim that differs is refused); else the password must match the
        identity's, when it has one. A name the policy does not know (and no [default]) is
        checked against a decoy's secret, as costly as an identity's, and refused in the same
        words (AuthenticationError). Password checks go through the login guard: `address`
        (the caller's, "" when unknown) and the name back off after failures (LoginThrottled), except
        over a fresh `connection` (the transport's peer), which waits for a reserved check."""
        if certificate_name is not None:
            return self.proven(user, certificate_name)
        entry = self.entries.get(user) if user else None
        if entry is None and self.default is not None:
            return self.proven(user, None)
        secret = entry.secret if entry is not None else None if not user else self.decoy(user)[1]
        if entry is not None and secret is None:
            return self.proven(user, None)   # an identity without a password
        guard = self.logins
        given = password.encode("utf-8", "surrogateescape")
        admitted = guard.admit(address, user, connection,
                               lambda: entry is not None and secret is not None and self._proved_before(user, secret, given))
        ok = secret is not None and (admitted == "proven" or
                                     entry is not None and self._proved_before(user, secret, given) or
                                     guard.check(lambda: secret.matches(given), is_expensive(secret), address, user,
                                                 admitted == "turn"))
        if not ok or entry is None or secret is None:
            guard.failed(address, user, known=entry is not None, connection=connection)
            reason = "no user name" if not user else "wrong password" if entry is not None else \
                "not in the master policy, which has no [default]"
            raise AuthenticationError(user, bool(password), reason)
        guard.succeeded(address, user, connection)
        if is_expensive(secret):
            self._proven[user] = (secret, self._keyed(given))
        return self.proven(user, None)

    def _keyed(self, password: bytes) -> bytes:
        return hmac.new(self._key, password, hashlib.sha256).digest()

    def _proved_before(self, user: str, secret: Secret, given: bytes) -> bool:
        proven = self._proven.get(user)
        return proven is not None and proven[0] == secret and hmac.compare_digest(proven[1], self._keyed(given))

    def decoy(self, name: str) -> tuple[tuple[str, ...], Secret]:
        """What a name the policy does not know is checked as: (MySQL endpoint plugins, a secret
        nobody knows) shaped like one of the policy's identities (the same kind of hash, as many
        PBKDF2 iterations), picked by a keyed hash of the name, so the same name takes the same
        path and time every time, as MySQL's mock accounts do."""
        entries = [self.entries[n] for n in sorted(self.entries)]
        if not entries:
            return DEFAULT_MYSQL_AUTH, Secret(PLAIN, os.urandom(16).hex())
        pick = int.from_bytes(hmac.new(self._key, name.encode("utf-8", "surrogateescape"),
                                       hashlib.sha256).digest()[:4], "big")
        entry = entries[pick % len(entries)]
        return entry.mysql_auth, _dummy_like(entry.secret)

    def proven(self, user: str, certificate_name: str | None = None) -> Identity:
        """The identity of a caller whose password an exchange already proved (the MySQL
        endpoint's plugins check it against the secret themselves; `authenticate` once it has)."""
        if certificate_name is not None:
            if user and user != certificate_name:   # the certificate's identity asks for another's rights
                raise AccessDeniedError(f"user {user!r} does not match the client certificate ({certificate_name!r})")
            user = certificate_name
        entry = self.entries.get(user) if user else None
        if entry is None:
            if self.default is None:
                raise AuthenticationError(user, False, "not in the master policy, which has no [default]")
            entry = self.default
        return Identity(user, entry, admin=entry.admin)

    def gate_for_identity(self, identity: Identity, server_id: int) -> Gate:
        # derived as simulate and experiment derive it (rules/policy_gates.py)
        return slave_gate(identity.name, identity.entry or self.default, server_id, owner_of(self.entries, server_id))


def _dummy_like(secret: Secret | None) -> Secret:
    """A secret no password matches, that costs what checking `secret` costs."""
    if secret is not None and secret.kind == PBKDF2:
        iterations = secret.value.split("$")[1]
        return Secret(PBKDF2, f"pbkdf2_sha256${iterations}${os.urandom(16).hex()}${os.urandom(32).hex()}")
    if secret is not None and secret.kind == NATIVE_HASH:
        return Secret(NATIVE_HASH, "*" + os.urandom(20).hex().upper())
    return Secret(PLAIN, os.urandom(16).hex())


def _entry(name: str, body: dict[str, Any], grant: Grant, fail: Fail, is_default: bool = False) -> PolicyEntry:
    """A section's entry: its grant (read by rules.policy_gates) and the keys only the master uses."""
    admin = body.get("admin", False)
    caps = {key: body.get(key) for key in _CAPS}
    secret = grant.secret
    if not isinstance(admin, bool):
        fail("admin", "admin must be true or false")
    for key, value in caps.items():
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            fail(key, f"{key} must be a whole number >= 0")
    default_auth = list(DEFAULT_MYSQL_AUTH) if secret is None or secret.native_stage2() is not None else [CACHING_SHA2]
    mysql_auth = body.get("mysql_auth", default_auth)
    if not isinstance(mysql_auth, list) or not mysql_auth or not all(isinstance(p, str) for p in mysql_auth):
        fail("mysql_auth", "mysql_auth must be a non-empty list of plugin names")
    unknown = [p for p in mysql_auth if p not in MYSQL_AUTH_PLUGINS]
    if unknown:
        fail("mysql_auth", f"mysql_auth: unknown plugin {unknown[0]!r} (known: {', '.join(MYSQL_AUTH_PLUGINS)})")
    if secret is not None and secret.kind != PLAIN:
        # What a plugin checks a hashed password against: caching_sha2_password's full
        # authentication sends the password itself; mysql_native_password's scramble needs
        # SHA1(SHA1(password)), the native hash; ed25519's signature needs the password.
        cannot = [p for p in mysql_auth if p == ED25519 or (p == NATIVE and secret.native_stage2() is None)]
        if cannot:
            fail("mysql_auth", f"mysql_auth: {cannot[0]} cannot check a password stored as {secret.kind} "
                               "(give password in clear, or leave that plugin out)")
    return PolicyEntry(name, grant.allow, secret, grant.server_ids, admin, **caps, is_default=is_default,
                       mysql_auth=tuple(dict.fromkeys(mysql_auth)))


_CAPS = ("max_streams", "max_registrations", "max_rules", "max_calls", "max_lint_jobs", "max_sessions")


def _warn_open_doors(entries: dict[str, PolicyEntry], default: PolicyEntry | None, path: str | Path) -> None:
    """One WARNING line per identity that any client can claim: an entry without a password
    (only an mTLS client certificate would still prove it), and a [default], which takes every
    name not listed."""
    for name, entry in entries.items():
        if entry.secret is None:
            log.warning("policy file %s: identity %r has no password: any client that gives its name gets its "
                        "rights (unless --tls-client-ca authenticates clients)",
                        path, name)
    if default is not None:
        log.warning("policy file %s: [default] lets any identity not listed in, without a password, with its rights",
                    path)


def _warn_readable_secrets(entries: dict[str, PolicyEntry], path: str | Path) -> None:
    """One WARNING line when a policy file that others may read holds passwords in clear."""
    clear = [name for name, entry in entries.items() if entry.secret is not None and entry.secret.kind == PLAIN]
    if not clear:
        return
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if mode & (stat.S_IROTH | stat.S_IRGRP):
        log.warning("policy file %s is readable by %s and holds the password of %s in clear: chmod 600 it, or store "
                    "password_hash (dumpfilter master hash-password)", path,
                    "everyone" if mode & stat.S_IROTH else "its group", ", ".join(repr(n) for n in clear))
