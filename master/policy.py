"""The master-side policy file (WL#2387's "master controlled" option): who a caller is (password or
mTLS client certificate), which schemas and tables each slave identity may ever receive whatever
rules it asks for, which server_ids it may use, and how many streams it may hold."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.errors import AccessDeniedError, RuleError
from dumpfilter.rules.gate import Gate

log = logging.getLogger("dumpfilter.master.policy")


# The MySQL endpoint's authentication plugins (the names clients use), and an identity's list when
# its entry gives no `mysql_auth`: caching_sha2_password (MySQL 8.4's default) first, then
# mysql_native_password for MariaDB replicas and older clients.
CACHING_SHA2, NATIVE, ED25519 = "caching_sha2_password", "mysql_native_password", "client_ed25519"
MYSQL_AUTH_PLUGINS = (CACHING_SHA2, NATIVE, ED25519)
DEFAULT_MYSQL_AUTH = (CACHING_SHA2, NATIVE)


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

    A server_id belongs to the identity that registered it: only that identity may register it
    again; only it or an admin may Dump it, change its filters, unregister it or see it.
    """

    def __init__(self, entries: dict[str, PolicyEntry], default: PolicyEntry | None):
        self.entries = entries
        self.default = default

    @classmethod
    def load(cls, path: str | Path) -> MasterPolicy:
        try:
            text = Path(path).read_text(encoding="utf-8")
            data = tomllib.loads(text)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise RuleError(f"policy file {path}: {exc}") from None
        where = _Where(path, text)
        for section in data:
            if section not in ("slave", "default"):
                raise RuleError(f"{where.at(section)}: unknown section [{section}] (known: [slave.NAME], [default])")
        for section in ("slave", "default"):
            if section in data and not isinstance(data[section], dict):
                raise RuleError(f"{where.at(section)}: [{section}] must be a table")
        entries = {name: _entry(name, body, where) for name, body in data.get("slave", {}).items()}
        default = _entry("default", data["default"], where, is_default=True) if "default" in data else None
        owners: dict[int, str] = {}
        for name, entry in entries.items():
            for server_id in entry.server_ids:
                if server_id in owners:
                    raise RuleError(f"{where.at(name, 'server_ids')}: server_id {server_id} is listed by both "
                                    f"[slave.{owners[server_id]}] and [slave.{name}]: a server_id belongs to one identity")
                owners[server_id] = name
        _warn_open_doors(entries, default, path)
        _warn_readable_secrets(entries, default, path)
        return cls(entries, default)

    def authenticate(self, user: str, password: str, certificate_name: str | None = None) -> Identity:
        """The caller's identity. An mTLS client certificate authenticates by itself (its CN is
        the identity; a user claim that differs is refused); else the password must match the
        identity's, when it has one."""
        return self._identity(user, certificate_name, password)

    def proven(self, user: str, certificate_name: str | None = None) -> Identity:
        """The identity of a caller whose password an exchange already proved (the MySQL
        endpoint's plugins check it against the secret themselves)."""
        return self._identity(user, certificate_name, None)

    def _identity(self, user: str, certificate_name: str | None, password: str | None) -> Identity:
        if certificate_name is not None:
            if user and user != certificate_name:
                raise AccessDeniedError(f"user {user!r} does not match the client certificate ({certificate_name!r})")
            user = certificate_name
        entry = self.entries.get(user) if user else None
        if entry is None:
            if self.default is None:
                raise AccessDeniedError(f"identity {user!r} is not in the master policy and there is no [default]")
            entry = self.default
        elif certificate_name is None and password is not None and entry.secret is not None and \
                not entry.secret.matches(password.encode("utf-8", "surrogateescape")):
            raise AccessDeniedError(f"wrong password for identity {user!r}")
        return Identity(user, entry, admin=entry.admin)

    def owner_of(self, server_id: int) -> str | None:
        """The identity whose `server_ids` list names `server_id`, if any."""
        for name, entry in self.entries.items():
            if server_id in entry.server_ids:
                return name
        return None

    def gate_for_identity(self, identity: Identity, server_id: int) -> Gate:
        entry = identity.entry or self.default
        if entry is None:
            raise AccessDeniedError(f"identity {identity.name!r} is not in the master policy")
        if entry.server_ids and server_id not in entry.server_ids:
            raise AccessDeniedError(f"identity {identity.name!r} may not register server_id {server_id}")
        owner = self.owner_of(server_id)
        if owner is not None and owner != identity.name:
            raise AccessDeniedError(f"identity {identity.name!r} may not register server_id {server_id}")
        return Gate(entry.allow, restricted=True)

    def gate_for(self, user: str, password: str, server_id: int) -> Gate:
        return self.gate_for_identity(self.authenticate(user, password), server_id)


class _Where:
    """`file:line` of a section or a key of the policy file, for its error lines (tomllib gives
    the values, not where they stand)."""

    def __init__(self, path, text: str):
        self.path = path
        self._lines = text.splitlines()

    def at(self, section: str, key: str | None = None) -> str:
        header = re.compile(r"\s*\[\s*(slave\s*\.\s*)?[\"']?" + re.escape(section) + r"[\"']?\s*\]")
        line = None
        for n, text in enumerate(self._lines, 1):
            if line is None:
                if header.match(text):
                    line = n
                    if key is None:
                        break
            elif re.match(r"\s*\[", text):
                break
            elif re.match(r"\s*[\"']?" + re.escape(key) + r"[\"']?\s*=", text):
                line = n
                break
        return f"policy file {self.path}" + (f":{line}" if line is not None else "")


_KEYS = ("allow", "password", "password_hash", "server_ids", "admin", "mysql_auth")


def _entry(name: str, body: dict, where: _Where, is_default: bool = False) -> PolicyEntry:
    section = "default" if is_default else f"slave.{name}"
    def fail(key: str | None, message: str):
        raise RuleError(f"{where.at(name, key)}: [{section}] {message}")
    if not isinstance(body, dict):
        fail(None, "must be a table")
    unknown = [key for key in body if key not in _KEYS and key not in _CAPS]
    if unknown:
        fail(unknown[0], f"unknown key {unknown[0]!r} (known: {', '.join(_KEYS + _CAPS)})")
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
    admin = body.get("admin", False)
    caps = {key: body.get(key) for key in _CAPS}
    server_ids = body.get("server_ids", [])
    secret = _secret(body, fail)
    if not isinstance(admin, bool):
        fail("admin", "admin must be true or false")
    for key, value in caps.items():
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            fail(key, f"{key} must be a whole number >= 0")
    if not isinstance(server_ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                   and 0 < i <= 0xFFFFFFFF for i in server_ids):
        fail("server_ids", "server_ids must be a list of server ids (1..4294967295)")
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
    return PolicyEntry(name, tuple(allow), secret, tuple(server_ids), admin, **caps, is_default=is_default,
                       mysql_auth=tuple(dict.fromkeys(mysql_auth)))


def _secret(body: dict, fail) -> Secret | None:
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
    return None


_CAPS = ("max_streams", "max_registrations", "max_rules", "max_calls", "max_lint_jobs", "max_sessions")


def _warn_open_doors(entries: dict[str, PolicyEntry], default: PolicyEntry | None, path) -> None:
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


def _warn_readable_secrets(entries: dict[str, PolicyEntry], default: PolicyEntry | None, path) -> None:
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
