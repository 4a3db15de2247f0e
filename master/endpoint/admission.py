"""Who may hold a socket of the MySQL endpoint, and for how long: the limits (MySQL's
connect_timeout, wait_timeout, max_connections and max_allowed_packet, plus caps on sockets still
in the handshake) and the bookkeeping that enforces them.

A socket that has not authenticated is not a session: it has its own cap, in all and per client
address, so a flood of half-open sockets can neither fill max_connections (which counts
authenticated sessions, as MySQL's does) nor keep another address from logging in. A newcomer
from an address at its cap takes the place of that address's oldest unfinished handshake; when
the cap in all is full, a newcomer from an address holding fewer handshake sockets than the
busiest address takes the place of that address's oldest socket, instead of being refused.
An identity's sessions are capped at its share of max_connections (master.shares, policy
`max_sessions`), as MySQL's max_user_connections caps a user's: one identity cannot take every
session."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from dumpfilter.errors import InvalidArgumentError, ResourceExhaustedError
from dumpfilter.master.protocol.packets import ER_CON_COUNT_ERROR, ER_TOO_MANY_USER_CONNECTIONS, MAX_COMMAND_BYTES
from dumpfilter.master.policy import Identity, MasterPolicy
from dumpfilter.master.shares import SESSIONS, InFlight, Shares

CONNECT_TIMEOUT = 10.0     # MySQL's connect_timeout default
WAIT_TIMEOUT = 600.0       # MySQL's is 8 hours; a replica runs its queries within a second of connecting
MAX_CONNECTIONS = 256
MAX_HANDSHAKES = 128
MAX_HANDSHAKES_PER_HOST = 16


@dataclass(frozen=True)
class EndpointLimits:
    """The per-connection limits of `master serve --mysql-listen` (each a --mysql-* option)."""

    connect_timeout: float = CONNECT_TIMEOUT   # seconds from accept to an authenticated session
    wait_timeout: float = WAIT_TIMEOUT         # seconds an authenticated session may sit between commands
    max_connections: int = MAX_CONNECTIONS     # authenticated sessions, dumps included
    max_handshakes: int = MAX_HANDSHAKES       # sockets still in the handshake, in all
    max_handshakes_per_host: int = MAX_HANDSHAKES_PER_HOST
    max_packet: int = MAX_COMMAND_BYTES        # max_allowed_packet: the largest command accepted

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "wait_timeout"):
            if not getattr(self, name) > 0:
                raise InvalidArgumentError(f"--mysql-{name.replace('_', '-')} {getattr(self, name)}: must be more "
                                           "than 0 seconds")
        for name in ("max_connections", "max_handshakes", "max_handshakes_per_host"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"--mysql-{name.replace('_', '-')} {getattr(self, name)}: must be at "
                                           "least 1")
        if self.max_packet < 1024:
            raise InvalidArgumentError(f"--mysql-max-packet {self.max_packet}: must be at least 1024 bytes "
                                       "(MySQL's smallest max_allowed_packet)")


class Refused(Exception):
    """A connection the limits turn away: MySQL's ER_CON_COUNT_ERROR (or, past an identity's
    share, ER_TOO_MANY_USER_CONNECTIONS) with this message."""

    def __init__(self, message: str, errno: int = ER_CON_COUNT_ERROR):
        super().__init__(message)
        self.errno = errno


class Admission:
    """The endpoint's counts: sockets in the handshake (per client address, in arrival order)
    and authenticated sessions. Every method takes the one lock; none blocks."""

    def __init__(self, limits: EndpointLimits, policy: MasterPolicy | None = None):
        self.limits = limits
        self._per_identity = InFlight(Shares(policy, {SESSIONS: limits.max_connections}), SESSIONS)
        self._lock = threading.Lock()
        self._handshaking: dict[str, list[Callable[[], None]]] = {}  # host -> each socket's close, oldest first
        self._handshake_count = 0
        self.sessions = 0

    def enter_handshake(self, host: str, close: Callable[[], None]) -> str | None:
        """Count a new socket from `host` (`close` ends it, if it must make room); Refused when
        its address already holds its share. Returns the address whose oldest socket was closed
        to make room, if one was."""
        limits = self.limits
        victim, victim_host = None, None
        with self._lock:
            mine = self._handshaking.get(host, [])
            if len(mine) >= limits.max_handshakes_per_host:
                # The address's own oldest unfinished handshake makes room: sockets an attacker
                # keeps opening from a replica's address (each held until connect_timeout) then
                # displace one another, and the replica's reconnection still gets its turn.
                victim, victim_host = mine.pop(0), host
                self._handshake_count -= 1
            elif self._handshake_count >= limits.max_handshakes:
                victim_host, busiest = max(self._handshaking.items(), key=lambda item: len(item[1]))
                if len(busiest) <= len(mine):
                    raise Refused(f"Too many connections: {self._handshake_count} connections have not finished "
                                  "the handshake")
                victim = busiest.pop(0)
                self._handshake_count -= 1
            mine.append(close)
            self._handshaking[host] = mine
            self._handshake_count += 1
        if victim is not None:
            victim()
        return victim_host if victim is not None else None

    def leave_handshake(self, host: str, close: Callable[[], None]) -> None:
        with self._lock:
            mine = self._handshaking.get(host, [])
            if close in mine:   # absent when it was evicted
                mine.remove(close)
                self._handshake_count -= 1
            if not mine:
                self._handshaking.pop(host, None)

    @contextmanager
    def session(self, identity: Identity | None) -> Iterator[None]:
        """The `with` block of an authenticated session of `identity`: Refused past
        max_connections in all, or past the identity's share of them."""
        with ExitStack() as stack:
            with self._lock:
                if self.sessions >= self.limits.max_connections:
                    raise Refused("Too many connections")
                self.sessions += 1
            stack.callback(self._left)
            try:
                stack.enter_context(self._per_identity.hold(identity))
            except ResourceExhaustedError as exc:
                name = identity.name if identity is not None else ""  # (a limit is an identity's)
                raise Refused(f"User {name!r} already has more than 'max_user_connections' active "
                              f"connections ({exc})", ER_TOO_MANY_USER_CONNECTIONS) from None
            yield

    def _left(self) -> None:
        with self._lock:
            self.sessions -= 1
