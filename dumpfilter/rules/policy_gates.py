"""What a master policy file says of each slave identity that every consumer needs: the file read
strictly (sections, keys, `allow`, `server_ids`, the password kept in clear or hashed: each mistake
one line with file:line and key), and the one derivation of a slave's `Gate` from it (identity +
server_id). Pure, below the edges: the master (master/policy.py, which adds what only it uses:
admin, caps, --mysql-listen plugins), `simulate` and `experiment` read the file and derive a
slave's gate here, the same way.

    [slave.analytics]             # the identity (a slave's `user` in a topology)
    allow = ["shop.%", "crm.customers"]   # required: [] is nothing, ["%.%"] everything
    server_ids = [21, 22]         # optional: only these server_ids may use the identity
    password = "s3cret"           # or password_hash = "*..." / "pbkdf2_sha256$..."

    [default]                     # identities not listed; omit it to refuse them
    allow = []

    [login]                       # the master's failed-login back-off (master/login_guard.py)
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Protocol

from dumpfilter.errors import AccessDeniedError, RuleError
from dumpfilter.rules import toml_text
from dumpfilter.rules.gate import Gate

MAX_SERVER_ID = 0xFFFFFFFF
Fail = Callable[[str | None, str], NoReturn]

# Every key a section may hold: the ones read here, and the master's own (master/policy.py).
SHARED_KEYS = ("allow", "password", "password_hash", "server_ids")
MASTER_KEYS = ("admin", "mysql_auth", "max_streams", "max_registrations", "max_rules", "max_calls",
               "max_lint_jobs", "max_sessions")


@dataclass(frozen=True)
class Secret:
    """An identity's password as the policy file keeps it: in clear (`password`), or hashed
    (`password_hash`) as MySQL's mysql_native_password hash (`*` and 40 hex digits:
    SHA1(SHA1(password)), what `SELECT PASSWORD('...')` and mysql.user show) or as a salted
    PBKDF2-HMAC-SHA256 (`pbkdf2_sha256$ITERATIONS$SALT_HEX$HASH_HEX`, what `dumpfilter master
    hash-password` prints). What each --mysql-listen plugin can check follows: the native hash is
    that plugin's own stored form; ed25519 needs the password itself."""

    kind: str    # PLAIN | NATIVE_HASH | PBKDF2
    value: str

    def matches(self, given: bytes) -> bool:
        """Whether `given` (a password in clear) is this one; the same work for a wrong one."""
        if self.kind == PLAIN:
            return hmac.compare_digest(self.value.encode("utf-8", "surrogateescape"), given)
        if self.kind == NATIVE_HASH:
            return hmac.compare_digest(self.native_stage2() or b"", hashlib.sha1(hashlib.sha1(given).digest()).digest())
        _, iterations, salt, digest = self.value.split("$")
        computed = hashlib.pbkdf2_hmac("sha256", given, bytes.fromhex(salt), int(iterations))
        return hmac.compare_digest(computed, bytes.fromhex(digest))

    @property
    def clear(self) -> bytes | None:
        """The password itself, where the file holds it."""
        return self.value.encode("utf-8", "surrogateescape") if self.kind == PLAIN else None

    def native_stage2(self) -> bytes | None:
        """SHA1(SHA1(password)), what mysql_native_password's scramble is checked against; None
        for a PBKDF2 hash."""
        if self.kind == PLAIN:
            return hashlib.sha1(hashlib.sha1(self.value.encode("utf-8")).digest()).digest() if self.value else b""
        if self.kind == NATIVE_HASH:
            return bytes.fromhex(self.value[1:])
        return None


PLAIN, NATIVE_HASH, PBKDF2 = "plain", "native", "pbkdf2_sha256"
_NATIVE_HASH = re.compile(r"\*[0-9A-Fa-f]{40}")
_PBKDF2_HASH = re.compile(r"pbkdf2_sha256\$([1-9][0-9]{0,8})\$([0-9a-f]{16,128})\$([0-9a-f]{64})")
PBKDF2_ITERATIONS = 600_000  # OWASP's figure for PBKDF2-HMAC-SHA256


def hash_password(password: str, iterations: int = PBKDF2_ITERATIONS) -> str:
    """A `password_hash` value for `password`: PBKDF2-HMAC-SHA256 with a random salt."""
    salt = os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8", "surrogateescape"), salt, iterations)
    return f"pbkdf2_sha256${iterations}${salt.hex()}${digest.hex()}"


def secret_of(body: dict[str, Any], fail: Fail) -> Secret | None:
    password, hashed = body.get("password"), body.get("password_hash")
    if password is not None and hashed is not None:
        fail("password_hash", "give password or password_hash, not both")
    if password is not None:
        if not isinstance(password, str):
            fail("password", "password must be a string")
        return Secret(PLAIN, password)
    if hashed is None:
        return None
    if isinstance(hashed, str) and _NATIVE_HASH.fullmatch(hashed):
        return Secret(NATIVE_HASH, hashed.upper())
    if isinstance(hashed, str) and _PBKDF2_HASH.fullmatch(hashed):
        return Secret(PBKDF2, hashed)
    fail("password_hash", "password_hash must be MySQL's mysql_native_password hash ('*' and 40 hex digits) or "
                          "pbkdf2_sha256$ITERATIONS$SALT_HEX$HASH_HEX (dumpfilter master hash-password)")


@dataclass(frozen=True)
class Grant:
    """One section's part in gates: what its identity may receive, which server_ids it may use,
    and its password (None: it has none)."""

    allow: tuple[str, ...] = ()
    server_ids: tuple[int, ...] = ()
    secret: Secret | None = None


@dataclass(frozen=True)
class PolicyText:
    """A policy file read and checked: its sections' bodies, their grants, and where each stands."""

    where: toml_text.Locator
    bodies: dict[str, dict[str, Any]]        # [slave.NAME] bodies by NAME
    default: dict[str, Any] | None           # [default]'s body
    grants: dict[str, Grant]
    default_grant: Grant | None
    login: dict[str, Any] | None = None      # [login]'s body: only the master reads it (master/login_guard.py)

    def fail_for(self, name: str, is_default: bool = False) -> Fail:
        section = "default" if is_default else f"slave.{name}"

        def fail(key: str | None, message: str) -> NoReturn:
            raise RuleError(f"{self.where.at(name, key)}: [{section}] {message}")
        return fail


def read_policy(path: str | Path) -> PolicyText:
    """The policy file at `path`, read strictly (one RuleError line for the first mistake)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleError(f"policy file {path}: {exc}") from None
    data = toml_text.loads(text, f"policy file {path}", RuleError)
    where = toml_text.Locator(text, f"policy file {path}")
    for section in data:
        if section not in ("slave", "default", "login"):
            raise RuleError(f"{where.at(section)}: unknown section [{section}] (known: [slave.NAME], [default], "
                            "[login])")
        if not isinstance(data[section], dict):
            raise RuleError(f"{where.at(section)}: [{section}] must be a table")
    bodies: dict[str, dict[str, Any]] = dict(data.get("slave", {}))
    if "" in bodies:
        # No client presents an empty name (the master reads one as no identity at all): the
        # section would grant nothing to anyone, its rights meant for someone else.
        raise RuleError(f'{where.at("")}: [slave.""]: an identity needs a name (no client can present an '
                        "empty one); [default] is the section for clients the policy does not name")
    default = data.get("default")
    half = PolicyText(where, bodies, default, {}, None)
    grants = {name: _grant(body, half.fail_for(name)) for name, body in bodies.items()}
    default_grant = _grant(default, half.fail_for("default", True)) if default is not None else None
    owners: dict[int, str] = {}
    for name, grant in grants.items():
        for server_id in grant.server_ids:
            if server_id in owners:
                raise RuleError(f"{where.at(name, 'server_ids')}: server_id {server_id} is listed by both "
                                f"[slave.{owners[server_id]}] and [slave.{name}]: a server_id belongs to one identity")
            owners[server_id] = name
    return PolicyText(where, bodies, default, grants, default_grant, data.get("login"))


def _grant(body: Any, fail: Fail) -> Grant:
    if not isinstance(body, dict):
        fail(None, "must be a table")
    unknown = [key for key in body if key not in SHARED_KEYS and key not in MASTER_KEYS]
    if unknown:
        fail(unknown[0], f"unknown key {unknown[0]!r} (known: {', '.join(SHARED_KEYS + MASTER_KEYS)})")
    streams = body.get("max_streams")
    if isinstance(streams, int) and not isinstance(streams, bool) and streams == 0:
        fail("max_streams", "max_streams = 0 would refuse every Dump stream of this identity: leave it out "
                            "(its share of the master's --max-streams), or write allow = [] to serve it nothing")
    if "allow" not in body:
        # An identity for authentication only would be served nothing without a word (#41).
        fail(None, "has no allow: it would receive nothing; write allow = [\"%.%\"] for everything, or "
                   "allow = [] to mean nothing")
    allow = body["allow"]
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        fail("allow", "allow must be a list of 'db.table' patterns")
    try:
        Gate(tuple(allow))  # validates the patterns
    except RuleError as exc:
        fail("allow", str(exc))
    server_ids = body.get("server_ids", [])
    if not isinstance(server_ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                   and 0 < i <= MAX_SERVER_ID for i in server_ids):
        fail("server_ids", "server_ids must be a list of server ids (1..4294967295)")
    return Grant(tuple(allow), tuple(server_ids), secret_of(body, fail))


class Granted(Protocol):
    """What `owner_of` and `slave_gate` read of a section: a Grant, or the master's PolicyEntry."""

    @property
    def allow(self) -> tuple[str, ...]: ...
    @property
    def server_ids(self) -> tuple[int, ...]: ...


def owner_of(grants: Mapping[str, Granted], server_id: int) -> str | None:
    """The identity whose `server_ids` list names `server_id`, if any."""
    return next((name for name, grant in grants.items() if server_id in grant.server_ids), None)


def slave_gate(identity: str, grant: Granted | None, server_id: int, owner: str | None) -> Gate:
    """The gate of a slave registering `server_id` as `identity`, whose section (or [default]) is
    `grant` (None: not in the policy); `owner` is the identity whose `server_ids` name
    `server_id`. AccessDeniedError when the master refuses it."""
    if grant is None:
        raise AccessDeniedError(f"identity {identity!r} is not in the master policy")
    if (grant.server_ids and server_id not in grant.server_ids) or (owner is not None and owner != identity):
        raise AccessDeniedError(f"identity {identity!r} may not register server_id {server_id}")
    return Gate(tuple(grant.allow), restricted=True)


class PolicyGates:
    """The gates of a policy file, for a slave known by its `user`, `password` and `server_id`
    (a topology's slave): as the master authenticates it with a password (an unknown user takes
    [default]) and then derives its gate."""

    def __init__(self, grants: dict[str, Grant], default: Grant | None):
        self.grants, self.default = grants, default

    @classmethod
    def load(cls, path: str | Path) -> PolicyGates:
        policy = read_policy(path)
        return cls(policy.grants, policy.default_grant)

    def gate_for_slave(self, user: str, password: str, server_id: int) -> Gate:
        """The gate the master gives a slave that presents `user` and `password` (no client
        certificate) and registers `server_id`; AccessDeniedError when it would refuse it."""
        grant = self.grants.get(user) if user else None
        if grant is None:
            if self.default is None:
                raise AccessDeniedError(f"identity {user!r} is not in the master policy and there is no [default]")
            grant = self.default
        elif grant.secret is not None and not grant.secret.matches((password or "").encode("utf-8", "surrogateescape")):
            raise AccessDeniedError(f"wrong password for identity {user!r}")
        return slave_gate(user, grant, server_id, owner_of(self.grants, server_id))
