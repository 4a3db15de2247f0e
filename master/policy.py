"""The master-side policy file (WL#2387's "master controlled" option): per slave identity, which
schemas and tables that slave may ever receive, whatever rules it asks for."""

from __future__ import annotations

import hmac
import tomllib
from dataclasses import dataclass
from pathlib import Path

from binlog_codec.errors import DumpFilterError, RuleError
from filter_rules.statements import Kind, statement_tables
from filter_rules.wildcards import compile_like


class AccessDeniedError(DumpFilterError):
    """Credentials that the policy file refuses (mapped to PERMISSION_DENIED)."""


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


class MasterPolicy:
    """Parsed policy TOML:

        [slave.analytics]                 # identity = the user in Register's credentials
        password = "s3cret"               # optional: Register must present it
        server_ids = [21, 22]             # optional: only these server_ids may use the identity
        allow = ["shop.%", "crm.customers"]

        [default]                         # identities not listed; omit it to refuse them
        allow = []
    """

    def __init__(self, entries: dict[str, PolicyEntry], default: PolicyEntry | None):
        self.entries = entries
        self.default = default

    @classmethod
    def load(cls, path: str | Path) -> MasterPolicy:
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise RuleError(f"policy file {path}: {exc}") from None
        entries = {name: _entry(name, body, path) for name, body in data.get("slave", {}).items()}
        default = _entry("default", data["default"], path) if "default" in data else None
        return cls(entries, default)

    def gate_for(self, user: str, password: str, server_id: int) -> Gate:
        entry = self.entries.get(user) if user else None
        if entry is None:
            if self.default is None:
                raise AccessDeniedError(f"identity {user!r} is not in the master policy and there is no [default]")
            entry = self.default
        elif entry.password is not None and not hmac.compare_digest(entry.password, password or ""):
            raise AccessDeniedError(f"wrong password for identity {user!r}")
        if entry.server_ids and server_id not in entry.server_ids:
            raise AccessDeniedError(f"identity {user!r} may not register server_id {server_id}")
        return Gate(entry.allow, restricted=True)


def _entry(name: str, body: dict, path) -> PolicyEntry:
    allow = body.get("allow", [])
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise RuleError(f"policy file {path}: [{name}] allow must be a list of 'db.table' patterns")
    Gate(tuple(allow))  # validates the patterns
    return PolicyEntry(name, tuple(allow), body.get("password"), tuple(int(i) for i in body.get("server_ids", [])))
