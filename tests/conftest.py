"""Shared pytest wiring: the `mariadb` marker gate, MariaDB server factory, shared fixtures.

With CI=true, missing prerequisites fail the tests instead of skipping them.

`make test` runs the suite on two pytest-xdist workers (Makefile's TEST_WORKERS), a whole test file
per worker (`-n 2 --dist loadfile`: a module's fixtures, a MariaDB primary or a Spark cluster, are
made once): much of the time goes to waiting on servers and subprocesses, so two workers overlap
even on two cores. Each worker is its own process with its own session fixtures
(MariaDB servers, the Spark session, generated workloads, under its own tmp_path_factory root);
ports come from dumpfilter.lab.ports (random below the ephemeral range, a bind probe first),
sandbox datadirs from one cache template made atomically (lab/sandbox/datadir.py), so workers
share nothing else.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# grpcio >= 1.80 restarts its epoll poller in a forked child when fork support is on; a
# subprocess started with preexec_fn (the MariaDB sandbox) closes that fd before exec and the
# child aborts with "epoll_wait error: Bad file descriptor" (grpc/grpc#43055). The tests run
# gRPC masters and MariaDB servers in one process; gRPC is never used across a fork here.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

# The package is imported as installed (`make setup`: an editable install maps master/, slave/, ...
# to dumpfilter.*); the checkout root is on sys.path only so tests can share `tests.support`.
PROJECT_ROOT = Path(__file__).resolve().parents[1]
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from dumpfilter.lab.sandbox import MariaDBServer, find_binary, mariadb_available, stop_servers  # noqa: E402
from tests.support.schedule import cost as _file_cost  # noqa: E402
from tests.support.thread_altstack import install as _thread_altstacks  # noqa: E402

# Before any thread starts: a thread that overflows its stack is reported by faulthandler with its
# Python stack, not a bare "Segmentation fault" (tests/support/thread_altstack.py).
_thread_altstacks()

# A suite started in the background (`cmd &` in a shell without job control, nohup, some CI
# runners) inherits SIGINT ignored, and a child started from here keeps it ignored across exec:
# Python then installs no KeyboardInterrupt handler, and the Ctrl-C tests' commands run on to
# their end. The tests' own processes take SIGINT as a terminal gives it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Each xdist worker chooses loopback ports in a slice of its own (dumpfilter.lab.ports): two
# workers once chose the same port, one for a master it was restarting on it, the other for a
# listener, and both tests failed.
if os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw") and "DUMPFILTER_PORTS" not in os.environ:
    from dumpfilter.lab.ports import port_range as _port_range

    _low, _high = _port_range()
    _worker, _workers = int(os.environ["PYTEST_XDIST_WORKER"][2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    _width = (_high - _low) // max(_workers, 1)
    if _width > 100:  # (else free_port takes the kernel's choice: no range below the ephemeral one to slice)
        os.environ["DUMPFILTER_PORTS"] = f"{_low + _worker * _width}-{_low + (_worker + 1) * _width}"

pytest_plugins = ["tests.support.grpc_fixtures"]

# ../shared/fixtures/real_binlogs beside the checkout; a git worktree nested deeper (wt/NAME) finds it
# in the first ancestor that has it.
SHARED_FIXTURES = next((p / "shared" / "fixtures" / "real_binlogs" for p in PROJECT_ROOT.parents
                        if (p / "shared" / "fixtures" / "real_binlogs").is_dir()),
                       PROJECT_ROOT.parent / "shared" / "fixtures" / "real_binlogs")
IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")

# Under CI=true, hypothesis draws the same examples every run (derived from each test), so a
# submission's CI result does not depend on luck; every other run explores new examples, and
# what it finds becomes a fixed regression test.
# No example has a deadline (hypothesis' default is 200 ms of wall-clock time, which a loaded CI
# machine exceeds): a test bounds work (input sizes, example counts), never seconds.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", parent=settings.get_profile("dev"), derandomize=True, print_blob=True)
settings.load_profile("ci" if IN_CI else "dev")


def skip_or_fail(message: str) -> None:
    """Skip the current test, or fail it under CI=true (CI must never skip silently)."""
    if IN_CI:
        pytest.fail(f"{message} (CI=true: failing instead of skipping)", pytrace=False)
    pytest.skip(message)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The costliest files first (tests/support/schedule.py): with `--dist loadfile
    --no-loadscope-reorder` the workers take files in this order, so no slow file starts last.
    A stable sort: the tests of a file, and the files not listed, keep their order."""
    items.sort(key=lambda item: -_file_cost(item.nodeid))


def _mariadb_missing() -> str | None:
    if mariadb_available():
        return None
    missing = [n for n in ("mariadbd", "mariadb-install-db", "mariadb", "mariadb-binlog")
               if find_binary(n) is None]
    return (f"MariaDB not available: {', '.join(missing)} not found on PATH "
            "(install mariadb-server and mariadb-client)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("mariadb") is not None:
        missing = _mariadb_missing()
        if missing:
            skip_or_fail(missing)


# Servers made by mariadb_factory and still running, in order. Those a test that takes the
# factory itself made in its body are stopped when it ends (an idle mariadbd still wakes its
# threads, and a run makes about a hundred); those fixtures made, eagerly or lazily (a module
# fixture's function called by its tests), live until the session ends.
_SERVERS: list[MariaDBServer] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    first = len(_SERVERS)
    yield
    if "mariadb_factory" not in getattr(getattr(item, "_fixtureinfo", None), "argnames", ()):
        return
    made, _SERVERS[first:] = _SERVERS[first:], []
    errors = stop_servers(made, keep=bool(os.environ.get("MARIADB_SANDBOX_KEEP")))
    if errors:
        raise RuntimeError("could not stop MariaDB servers: " + "; ".join(errors))


@pytest.fixture(scope="session")
def mariadb_factory():
    """Callable `(name, *, server_id=None, **kwargs) -> started MariaDBServer`.

    A server made in a test's body is stopped (and its files removed) when the test ends; one made
    by a fixture at session end. Tests may also stop servers themselves earlier.
    """
    missing = _mariadb_missing()
    if missing:
        skip_or_fail(missing)
    next_id = iter(range(100, 10_000))

    def make(name: str = "srv", *, server_id: int | None = None, **kwargs) -> MariaDBServer:
        sid = server_id if server_id is not None else next(next_id)
        srv = MariaDBServer(name, server_id=sid, **kwargs)
        _SERVERS.append(srv)
        return srv.start()

    yield make
    servers, _SERVERS[:] = list(_SERVERS), []
    errors = stop_servers(servers)
    if errors:
        raise RuntimeError("could not stop MariaDB servers: " + "; ".join(errors))


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """../shared/fixtures/real_binlogs (skipped when absent; failure under CI=true)."""
    if not SHARED_FIXTURES.is_dir():
        skip_or_fail(f"shared fixtures not found at {SHARED_FIXTURES}")
    return SHARED_FIXTURES
