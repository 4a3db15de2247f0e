"""The master-side policy file (WL#2387's "master controlled" option): who a caller is (password or
mTLS client certificate), which schemas and tables each slave identity may ever receive whatever
rules it asks for, which server_ids it may use, and how many streams it may hold."""

from __future__ import annotations

import hmac
import tomllib
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.errors import AccessDeniedError, RuleError
from dumpfilter.rules.statements import Kind, statement_tables
from dumpfilter.rules.wildcards import compile_like


@dataclass(frozen=True)
class Gate:
    """What one slave may receive: `db.table` LIKE patterns (`shop.%` is a whole schema).
    `restricted=False` lets everything through. Hashable: it is part of a slave's rule-group key."""

    allow: tuple[str, ...] = ()
    restricted: bool = False

    def __post_init__(self) -> None:
        for pattern in self.allow:
            if "." not in pattern:
                raise RuleError(f"policy allow: {pattern!r} is not a db.table pattern (use 'db.%' for a schema)")
        object.__setattr__(self, "_compiled", tuple(compile_like(p) for p in self.allow))
        schema_wide = tuple(compile_like(p.split(".", 1)[0]) for p in self.allow if p.endswith(".%"))
        object.__setattr__(self, "_schemas", schema_wide)

    def table_allowed(self, db: str, table: str) -> bool:
        if not self.restricted:
            return True
        key = f"{db}.{table}"
        return any(rx.fullmatch(key) for rx in self._compiled)

    def schema_allowed(self, db: str | None) -> bool:
        """A whole schema (statements with no table: CREATE DATABASE, ...) needs a `db.%` pattern."""
        if not self.restricted:
            return True
        return bool(db) and any(rx.fullmatch(db) for rx in self._schemas)

    def statement_allowed(self, sql: str, current_db: str | None) -> bool:
        """Deny by default: every table the statement names (updated or read: CREATE ... SELECT
        would copy data) must be allowed; a statement without tables needs its schema allowed."""
        if not self.restricted:
            return True
        info = statement_tables(sql, current_db or "")
        if info.kind is Kind.TRANSACTION:
            return True
        if not info.parse_ok:
            return False
        tables = info.updated + info.read
        if tables:
            return all(self.table_allowed(db, table) for db, table in tables)
        return self.schema_allowed(info.db_statement_name or current_db)


UNRESTRICTED = Gate()


@dataclass(frozen=True)
class PolicyEntry:
    identity: str
    allow: tuple[str, ...]
    password: str | None = None
    server_ids: tuple[int, ...] = ()
    admin: bool = False               # sees and may act on every slave (Stats, ListFilters, ...)
    max_streams: int | None = None    # concurrent Dump streams of this identity (None: the master's default)


@dataclass(frozen=True)
class Identity:
    """An authenticated caller: `name` is the policy identity (the user, or the client
    certificate's common name under mTLS); `entry` the policy section that applies to it."""

    name: str
    entry: PolicyEntry | None = None
    admin: bool = False

    @property
    def max_streams(self) -> int | None:
        return self.entry.max_streams if self.entry is not None else None


# Without a policy file the master is open: every caller acts as an administrator.
OPEN = Identity("", None, admin=True)


class MasterPolicy:
    """Parsed policy TOML:

        [slave.analytics]                 # identity = the user (metadata or Register's credentials),
        password = "s3cret"               #   or the CN of an mTLS client certificate; optional password
        server_ids = [21, 22]             # optional: only these server_ids may use the identity (and
                                          #   no other identity may use them)
        allow = ["shop.%", "crm.customers"]
        max_streams = 4                   # optional: concurrent Dump streams of this identity

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
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise RuleError(f"policy file {path}: {exc}") from None
        for section in ("slave", "default"):
            if section in data and not isinstance(data[section], dict):
                raise RuleError(f"policy file {path}: [{section}] must be a table")
        entries = {name: _entry(name, body, path) for name, body in data.get("slave", {}).items()}
        default = _entry("default", data["default"], path) if "default" in data else None
        return cls(entries, default)

    def authenticate(self, user: str, password: str, certificate_name: str | None = None) -> Identity:
        """The caller's identity. An mTLS client certificate authenticates by itself (its CN is
        the identity; a user claim that differs is refused); else the password must match the
        identity's, when it has one."""
        if certificate_name is not None:
            if user and user != certificate_name:
                raise AccessDeniedError(f"user {user!r} does not match the client certificate ({certificate_name!r})")
            user = certificate_name
        entry = self.entries.get(user) if user else None
        if entry is None:
            if self.default is None:
                raise AccessDeniedError(f"identity {user!r} is not in the master policy and there is no [default]")
            entry = self.default
        elif certificate_name is None and entry.password is not None and \
                not hmac.compare_digest(entry.password.encode(), (password or "").encode("utf-8", "surrogateescape")):
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


def _entry(name: str, body: dict, path) -> PolicyEntry:
    if not isinstance(body, dict):
        raise RuleError(f"policy file {path}: [{name}] must be a table")
    allow = body.get("allow", [])
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise RuleError(f"policy file {path}: [{name}] allow must be a list of 'db.table' patterns")
    Gate(tuple(allow))  # validates the patterns
    password, admin, max_streams = body.get("password"), body.get("admin", False), body.get("max_streams")
    server_ids = body.get("server_ids", [])
    if password is not None and not isinstance(password, str):
        raise RuleError(f"policy file {path}: [{name}] password must be a string")
    if not isinstance(admin, bool):
        raise RuleError(f"policy file {path}: [{name}] admin must be true or false")
    if max_streams is not None and (not isinstance(max_streams, int) or isinstance(max_streams, bool)
                                    or max_streams < 0):
        raise RuleError(f"policy file {path}: [{name}] max_streams must be a whole number >= 0")
    if not isinstance(server_ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                   and 0 < i <= 0xFFFFFFFF for i in server_ids):
        raise RuleError(f"policy file {path}: [{name}] server_ids must be a list of server ids (1..4294967295)")
    return PolicyEntry(name, tuple(allow), password, tuple(server_ids), admin, max_streams)
