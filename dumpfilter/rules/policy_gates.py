"""What a master policy file says each slave identity may receive: its sections' `allow` lists and
`server_ids`, and the one derivation of a slave's `Gate` from them (identity + server_id). Pure,
below the edges: the master (master/policy.py, which reads the rest of the file: passwords, admin,
caps, plugins), `simulate` and `experiment` derive a slave's gate here, the same way.

    [slave.analytics]             # the identity (a slave's `user` in a topology)
    allow = ["shop.%", "crm.customers"]
    server_ids = [21, 22]         # optional: only these server_ids may use the identity
    password = "s3cret"           # checked by `PolicyGates.gate_for_slave` as the master checks it

    [default]                     # identities not listed; omit it to refuse them
    allow = []
"""

from __future__ import annotations

import hmac
import tomllib
from dataclasses import dataclass
from pathlib import Path

from dumpfilter.errors import AccessDeniedError, RuleError
from dumpfilter.rules.gate import Gate

MAX_SERVER_ID = 0xFFFFFFFF


def allow_list(value, where: str) -> tuple[str, ...]:
    """A section's `allow` value, checked (`where`: "policy file F: [name]" for the messages)."""
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise RuleError(f"{where} allow must be a list of 'db.table' patterns")
    Gate(tuple(value))  # validates the patterns
    return tuple(value)


def server_id_list(value, where: str) -> tuple[int, ...]:
    """A section's `server_ids` value, checked."""
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                              and 0 < i <= MAX_SERVER_ID for i in value):
        raise RuleError(f"{where} server_ids must be a list of server ids (1..4294967295)")
    return tuple(value)


@dataclass(frozen=True)
class Grant:
    """One section's part in gates: what its identity may receive and which server_ids it may use."""

    allow: tuple[str, ...] = ()
    server_ids: tuple[int, ...] = ()
    password: str | None = None


def owner_of(grants: dict[str, Grant], server_id: int) -> str | None:
    """The identity whose `server_ids` list names `server_id`, if any."""
    for name, grant in grants.items():
        if server_id in grant.server_ids:
            return name
    return None


def slave_gate(identity: str, grant, server_id: int, owner: str | None) -> Gate:
    """The gate of a slave registering `server_id` as `identity`, whose section (or [default]) is
    `grant` (anything with `allow` and `server_ids`; None: not in the policy); `owner` is the
    identity whose `server_ids` name `server_id`. AccessDeniedError when the master refuses it."""
    if grant is None:
        raise AccessDeniedError(f"identity {identity!r} is not in the master policy")
    if grant.server_ids and server_id not in grant.server_ids:
        raise AccessDeniedError(f"identity {identity!r} may not register server_id {server_id}")
    if owner is not None and owner != identity:
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
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise RuleError(f"policy file {path}: {exc}") from None
        return cls.parse(data, path)

    @classmethod
    def parse(cls, data: dict, path) -> PolicyGates:
        for section in ("slave", "default"):
            if section in data and not isinstance(data[section], dict):
                raise RuleError(f"policy file {path}: [{section}] must be a table")

        def grant(name: str, body) -> Grant:
            if not isinstance(body, dict):
                raise RuleError(f"policy file {path}: [{name}] must be a table")
            where = f"policy file {path}: [{name}]"
            password = body.get("password")
            if password is not None and not isinstance(password, str):
                raise RuleError(f"{where} password must be a string")
            return Grant(allow_list(body.get("allow", []), where), server_id_list(body.get("server_ids", []), where),
                         password)

        grants = {name: grant(name, body) for name, body in data.get("slave", {}).items()}
        default = grant("default", data["default"]) if "default" in data else None
        return cls(grants, default)

    def gate_for_slave(self, user: str, password: str, server_id: int) -> Gate:
        """The gate the master gives a slave that presents `user` and `password` (no client
        certificate) and registers `server_id`; AccessDeniedError when it would refuse it."""
        grant = self.grants.get(user) if user else None
        if grant is None:
            if self.default is None:
                raise AccessDeniedError(f"identity {user!r} is not in the master policy and there is no [default]")
            grant = self.default
        elif grant.password is not None and \
                not hmac.compare_digest(grant.password.encode(), (password or "").encode("utf-8", "surrogateescape")):
            raise AccessDeniedError(f"wrong password for identity {user!r}")
        return slave_gate(user, grant, server_id, owner_of(self.grants, server_id))
