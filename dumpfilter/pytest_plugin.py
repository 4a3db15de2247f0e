"""dumpfilter's pytest plugin (issue #44), registered as the `dumpfilter` entry point of
`pytest11`: fixtures over `dumpfilter.harness` for integration harnesses.

* `dumpfilter_binlog(**workload)`: a generated binlog directory under the test's tmp_path;
* `dumpfilter_master(binlog_dir, **options)`: a started `Master` (gRPC on a free loopback port);
* `dumpfilter_slave(master, rules, **options)`: a `Slave` of it (call `catch_up()` or `start()`);
* `dumpfilter_replica(master, rules, port=None, **options)`: a started real MariaDB `Replica` behind
  the master's MySQL endpoint (the master needs `mysql_listen="127.0.0.1:0"`, or a port of your
  choosing); the test is skipped,
  saying why, where `mariadbd` is not installed.

Each is a factory; whatever it made is stopped when the test ends, passed, failed or interrupted
(Ctrl-C: pytest tears fixtures down before it exits; SIGTERM too, taken as Ctrl-C while one of
these fixtures is alive, pytest then ending by the signal once torn down), each in its own
`finally`, replicas first, then slaves, then masters. MariaDB servers run in their own process group and are stopped by
process id. The harness is imported when a fixture is first used, never at pytest's start.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from dumpfilter.harness import Master, Replica, Slave

MARIADB_MISSING = ("dumpfilter_replica needs MariaDB: mariadbd, mariadb-install-db, mariadb and mariadb-binlog "
                   "were not all found on PATH or in /usr/sbin, /usr/local/sbin, /usr/bin, /usr/local/bin "
                   "(install mariadb-server and mariadb-client)")


def _stop_all(items: list[Any], stop: Callable[[Any], None]) -> None:
    """Stop every item, newest first, each whatever the others did; the first failure is raised
    once all were tried."""
    first: BaseException | None = None
    while items:
        item = items.pop()
        try:
            stop(item)
        except BaseException as exc:  # noqa: BLE001 - the rest are still stopped
            first = first or exc
    if first is not None:
        raise first


class _Terminated(KeyboardInterrupt):
    """SIGTERM during a test that holds one of these fixtures: pytest's own Ctrl-C path (fixtures
    torn down, the session finished), then the process ends by the signal (`_die_by_sigterm`)."""


_alive = 0
_previous_sigterm: Any = None


def _on_sigterm(_signum: int, _frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one does not cut the teardown short
    atexit.register(_die_by_sigterm)
    raise _Terminated("SIGTERM")


def _die_by_sigterm() -> None:
    """The status a supervisor expects of a process SIGTERM ended (143 in a shell)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


@contextlib.contextmanager
def _sigterm_tears_down(made: list[Any], stop: Callable[[Any], None]) -> Iterator[None]:
    """While a fixture lives, SIGTERM (left at its default, which ends pytest with no teardown: the
    slaves' relay directories and the servers' data stayed) raises in the main thread as Ctrl-C
    does; when it ends, what it `made` is stopped (`_stop_all`), then the previous handler is back
    once the last one is torn down."""
    global _alive, _previous_sigterm
    installed = False
    if _alive == 0:
        with contextlib.suppress(ValueError):  # not the main thread: left as it is
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                _previous_sigterm = signal.signal(signal.SIGTERM, _on_sigterm)
                installed = True
    if installed or _alive:
        _alive += 1
    try:
        yield
    finally:
        try:
            _stop_all(made, stop)
        finally:
            if installed or _alive:
                _alive -= 1
                if _alive == 0 and signal.getsignal(signal.SIGTERM) is _on_sigterm:
                    signal.signal(signal.SIGTERM, _previous_sigterm)


@pytest.fixture
def dumpfilter_binlog(tmp_path: Path) -> Callable[..., Path]:
    """Factory: `dumpfilter_binlog(transactions=500, schemas=3, ...)` writes the built-in
    workload (`harness.generate_binlog`'s options) into a new directory under tmp_path and
    returns the directory."""
    made = iter(range(1, 1 << 30))

    def make(**workload: Any) -> Path:
        from dumpfilter.harness import generate_binlog

        directory = tmp_path / f"dumpfilter-binlog-{next(made)}"
        generate_binlog(directory, **workload)
        return directory

    return make


@contextlib.contextmanager
def _factory(name: str, stop: Callable[[Any], None], *, start: bool = True) -> Iterator[Callable[..., Any]]:
    """A fixture's factory of the harness class `name` (the harness imported at its first call):
    each one it makes is started (with `start`), and stopped by `stop` when the test ends."""
    made: list[Any] = []

    def make(*args: Any, **options: Any) -> Any:
        import dumpfilter.harness

        item = getattr(dumpfilter.harness, name)(*args, **options)
        made.append(item)
        return item.start() if start else item

    with _sigterm_tears_down(made, stop):
        yield make


@pytest.fixture
def dumpfilter_master() -> Iterator[Callable[..., Master]]:
    """Factory: `dumpfilter_master(binlog_dir, listen="127.0.0.1:0", policy=None,
    mysql_listen=None, ...)` -> a started `Master`, stopped when the test ends."""
    with _factory("Master", lambda master: master.stop()) as make:
        yield make


@pytest.fixture
def dumpfilter_slave() -> Iterator[Callable[..., Slave]]:
    """Factory: `dumpfilter_slave(master, ["replicate-do-db=db1"], skip_policy=..., server_id=...,
    relay_dir=..., user=..., password=...)` -> a `Slave` (not started: `catch_up()` or `start()`),
    stopped and its temporary relay log removed when the test ends."""
    with _factory("Slave", lambda slave: slave.close(), start=False) as make:
        yield make


@pytest.fixture
def dumpfilter_replica() -> Iterator[Callable[..., Replica]]:
    """Factory: `dumpfilter_replica(master, ["replicate-do-db=db1"], server_id=..., gtid=True,
    port=...)` -> a started real MariaDB `Replica` of `master` (started with `mysql_listen`), its
    server on loopback `port` (default: a free one), stopped by process id when the test ends.
    Skips the test where MariaDB is not installed."""
    from dumpfilter.harness import Replica

    if not Replica.available():
        pytest.skip(MARIADB_MISSING)
    with _factory("Replica", lambda replica: replica.stop()) as make:
        yield make
