"""Lifecycle of one throwaway MariaDB server: fresh datadir, loopback port, start, stop.

Every started server is tracked and stopped on interpreter exit and on SIGTERM;
servers started from the main thread also die with it (PR_SET_PDEATHSIG), so
even SIGKILL of the Python process leaves no mariadbd behind.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any


from dumpfilter.binlogs.files import read_index
from dumpfilter.errors import ExternalError
from dumpfilter.children import dies_with_parent
from dumpfilter.lab.ports import free_port
from dumpfilter.lab.sandbox.datadir import copy_fresh_datadir, template_key

if TYPE_CHECKING:
    import pymysql


REPL_USER = "repl"
REPL_PASSWORD = "repl-sandbox"

_BINARY_NAMES = {
    "mariadbd": ("mariadbd", "mysqld"),
    "mariadb-install-db": ("mariadb-install-db", "mysql_install_db"),
    "mariadb": ("mariadb", "mysql"),
    "mariadb-binlog": ("mariadb-binlog", "mysqlbinlog"),
}
_FALLBACK_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin")

# pymysql 1.2 connects in TLS mode PREFERRED by default: every connection builds a default SSL
# context, loading the system's CA bundle (60-100 ms of CPU), and a server that offers TLS is then
# spoken to through it. A sandbox server is this process's own, on loopback: its connections (a
# verify run or a replica's wait opens hundreds) go without.
NO_TLS: dict[str, Any] = {"ssl_disabled": True}

# Small-memory, fast-start settings, used both for mariadb-install-db and mariadbd.
_INSTALL_OPTIONS = ("--auth-root-authentication-method=normal", "--skip-test-db")
_COMMON_OPTIONS = (
    "--skip-name-resolve",
    "--innodb-buffer-pool-size=16M",
    "--innodb-log-file-size=8M",
    "--innodb-log-buffer-size=1M",
    "--innodb-doublewrite=0",
    "--innodb-flush-log-at-trx-commit=0",
    "--innodb-buffer-pool-dump-at-shutdown=0",
    "--innodb-buffer-pool-load-at-startup=0",
    "--skip-innodb-adaptive-hash-index",
    "--loose-skip-performance-schema",
    "--key-buffer-size=1M",
    "--aria-pagecache-buffer-size=1M",
)


class SandboxError(ExternalError):
    """Base class for every error raised by dumpfilter.lab.sandbox."""


class ServerStartError(SandboxError):
    """mariadb-install-db or mariadbd failed; the message carries the log tail."""


def find_binary(name: str) -> str | None:
    """Path of a MariaDB program (`mariadbd`, `mariadb`, ...) or None: on PATH, then in the usual
    sbin/bin directories (root's PATH may lack /usr/sbin).
    """
    names = _BINARY_NAMES.get(name, (name,))
    places = [(n, None) for n in names] + [(n, d) for d in _FALLBACK_DIRS for n in names]
    return next((found for n, d in places if (found := shutil.which(n, path=d))), None)


def mariadb_available() -> bool:
    """True when mariadbd, mariadb-install-db, mariadb and mariadb-binlog are all found."""
    return all(find_binary(n) for n in _BINARY_NAMES)


def _require_binary(name: str) -> str:
    path = find_binary(name)
    if path is None:
        raise SandboxError(f"{name} not found on PATH; install MariaDB server/client packages")
    return path


# --- tracking and cleanup -------------------------------------------------------------

_LIVE: set[MariaDBServer] = set()
_LIVE_LOCK = threading.RLock()
_HANDLER_INSTALLED = False


def stop_all_servers() -> None:
    """Stop every server this process started and has not stopped yet."""
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for error in stop_servers(servers):  # never let cleanup mask the original problem
        print(f"sandbox: {error}", file=sys.stderr)


def stop_servers(servers: Iterable[MariaDBServer], keep: bool = False) -> list[str]:
    """Stop `servers`, all signalled first so they shut down in parallel; the failures, one line each."""
    servers = list(servers)
    for s in servers:
        if s._proc is not None:
            s._proc.send_signal(signal.SIGTERM)  # (nothing once it has exited)
    errors = []
    for s in servers:
        try:
            s.stop(keep=keep)
        except Exception as exc:
            errors.append(f"failed to stop {s.name}: {exc}")
    return errors


atexit.register(stop_all_servers)


def _sigterm_handler(signum: int, frame: FrameType | None) -> None:
    prev = _PREVIOUS_SIGTERM
    stop_all_servers()
    if callable(prev):
        prev(signum, frame)
    else:  # SIG_DFL (or None): die by the signal as if we were never here
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


_PREVIOUS_SIGTERM: Any = None


def _install_sigterm_handler() -> None:
    """Chain a SIGTERM handler once (main thread only; left alone if SIGTERM is ignored)."""
    global _HANDLER_INSTALLED, _PREVIOUS_SIGTERM
    if _HANDLER_INSTALLED or threading.current_thread() is not threading.main_thread():
        return
    prev = signal.getsignal(signal.SIGTERM)
    if prev is signal.SIG_IGN:
        return
    _PREVIOUS_SIGTERM = prev
    signal.signal(signal.SIGTERM, _sigterm_handler)
    _HANDLER_INSTALLED = True


# --- the server ----------------------------------------------------------------------


class MariaDBServer:
    """One throwaway mariadbd on 127.0.0.1 with its own temp datadir.

    Usage: ``with MariaDBServer("primary", server_id=1) as srv: srv.execute("CREATE DATABASE a")``.
    Root has no password over TCP; `repl_user`/`repl_password` may replicate.
    """

    start_timeout = 30.0  # seconds for a started mariadbd to accept connections
    stop_timeout = 15.0  # seconds from SIGTERM to SIGKILL

    def __init__(
        self,
        name: str,
        *,
        server_id: int,
        log_bin: bool = True,
        binlog_format: str = "ROW",
        options: Sequence[str] = (),
        tmp_root: str | os.PathLike[str] | None = None,
        port: int | None = None,
    ) -> None:
        if not name or "/" in name:
            raise ValueError(f"bad server name {name!r}")
        self.name = name
        self.server_id = int(server_id)
        self.log_bin = log_bin
        self.binlog_format = binlog_format
        self.options = list(options)
        self.tmp_root = tmp_root
        self.repl_user = REPL_USER
        self.repl_password = REPL_PASSWORD
        self.root: Path | None = None
        self.port: int | None = None
        self.chosen_port = port  # None: a free loopback port, picked at each start
        self._proc: subprocess.Popen[bytes] | None = None
        self._socket_dir: Path | None = None

    # paths
    def _need_root(self) -> Path:
        if self.root is None:
            raise SandboxError(f"server {self.name} has not been started")
        return self.root

    @property
    def datadir(self) -> Path:
        return self._need_root() / "data"

    @property
    def binlog_dir(self) -> Path:
        return self.datadir

    @property
    def binlog_basename(self) -> Path:
        return self.datadir / "mariadb-bin"

    @property
    def error_log(self) -> Path:
        return self._need_root() / "mariadbd.err"

    @property
    def socket_path(self) -> Path:
        return (self._socket_dir or self._need_root()) / "mariadbd.sock"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __repr__(self) -> str:
        state = f"port={self.port} pid={self.pid}" if self.running else "stopped"
        return f"<MariaDBServer {self.name} server_id={self.server_id} {state}>"

    # lifecycle
    def start(self) -> MariaDBServer:
        if self.running:
            raise SandboxError(f"server {self.name} is already running")
        mariadbd = _require_binary("mariadbd")
        install_db = _require_binary("mariadb-install-db")
        self.root = Path(tempfile.mkdtemp(prefix=f"mdb-{self.name}-", dir=self.tmp_root))
        if len(str(self.root / "mariadbd.sock")) > 100:  # AF_UNIX path limit is 108
            self._socket_dir = Path(tempfile.mkdtemp(prefix="mdbs-", dir="/tmp"))
        (self.root / "tmp").mkdir()
        try:
            settings = [*_INSTALL_OPTIONS, *_COMMON_OPTIONS, str(os.geteuid() == 0)]
            key = template_key([install_db, mariadbd], settings)
            copy_fresh_datadir(self.datadir, key, lambda root: self._install(install_db, root))
            for attempt in range(3):
                self.port = self.chosen_port or free_port()
                self._launch(mariadbd)
                try:
                    self._wait_ready()
                    break
                except ServerStartError:
                    if attempt < 2 and self.chosen_port is None and self._port_clash():
                        continue  # someone grabbed the port between probe and bind
                    raise
            with self.connect() as conn, conn.cursor() as cur:
                cur.execute("SET sql_log_bin=0")  # keep the user out of the binlog
                cur.execute(
                    f"CREATE USER '{self.repl_user}'@'127.0.0.1' IDENTIFIED BY %s",
                    (self.repl_password,),
                )
                cur.execute(
                    f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* "
                    f"TO '{self.repl_user}'@'127.0.0.1'"
                )
        except BaseException:
            self.stop(keep=bool(os.environ.get("MARIADB_SANDBOX_KEEP")))
            raise
        return self

    def _install(self, install_db: str, root: Path) -> None:
        """mariadb-install-db into root/data (a template's, see datadir.py, or this server's)."""
        cmd = [
            install_db,
            "--no-defaults",
            f"--datadir={root / 'data'}",
            *_INSTALL_OPTIONS,
            # Its own tmpdir: a bootstrapping mariadbd deletes every `#sql*` file in its tmpdir at
            # startup, so parallel installs sharing /tmp remove each other's temporary tables
            # ("Unknown table 'mysql.tmp_proxies_priv'").
            f"--tmpdir={root / 'tmp'}",
            *_COMMON_OPTIONS,
        ]
        if os.geteuid() == 0:
            cmd.append("--user=root")
        log = root / "install.log"
        with open(log, "wb") as out:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, timeout=120).returncode
        if rc != 0:
            raise ServerStartError(
                f"mariadb-install-db failed for {self.name} (exit {rc}):\n"
                + _tail(log, 30)
            )

    def _launch(self, mariadbd: str) -> None:
        root = self._need_root()
        self.error_log.unlink(missing_ok=True)
        cmd = [
            mariadbd,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.socket_path}",
            f"--pid-file={root / 'mariadbd.pid'}",
            f"--log-error={self.error_log}",
            f"--tmpdir={root / 'tmp'}",
            f"--server-id={self.server_id}",
            f"--relay-log={self.datadir / 'relay-bin'}",
            f"--relay-log-index={self.datadir / 'relay-bin.index'}",
            "--skip-slave-start",
            "--max-connections=60",
            "--max-allowed-packet=256M",
            *_COMMON_OPTIONS,
        ]
        if os.geteuid() == 0:
            cmd.append("--user=root")
        if self.log_bin:
            cmd += [f"--log-bin={self.binlog_basename}",
                    f"--binlog-format={self.binlog_format}", "--sync-binlog=0"]
        cmd += self.options
        with open(root / "mariadbd.stderr", "ab") as stderr:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,  # Ctrl-C reaches us only; we stop it in order
                preexec_fn=dies_with_parent(),
            )
        with _LIVE_LOCK:
            _LIVE.add(self)
        _install_sigterm_handler()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last_exc: Exception | None = None
        proc, port = self._proc, self.port
        assert proc is not None and port is not None  # _launch started it on its port
        while True:
            rc = proc.poll()
            if rc is not None:
                raise ServerStartError(
                    f"mariadbd {self.name} exited with {rc} during startup; "
                    f"error log tail:\n{self.error_log_tail()}"
                )
            import pymysql  # on first use: simulate without a real server never loads it (nor cryptography)

            try:
                # Over this server's own socket: its TCP port may answer for another sandbox server
                # that took the same free port first (this one then exits: "Bind on TCP/IP port").
                # mariadbd listens on its socket only once its port is bound.
                pymysql.connect(unix_socket=str(self.socket_path), user="root", connect_timeout=2,
                                **NO_TLS).close()
                return
            except pymysql.err.OperationalError as exc:
                last_exc = exc
            if time.monotonic() > deadline:
                self._kill()
                raise ServerStartError(
                    f"mariadbd {self.name} did not accept connections on port {self.port} "
                    f"within {self.start_timeout}s ({last_exc}); error log tail:\n"
                    f"{self.error_log_tail()}"
                )
            time.sleep(0.03)

    def _port_clash(self) -> bool:
        text = self.error_log_tail(50)
        return "Address already in use" in text or "Bind on TCP/IP port" in text

    def _kill(self, sig: int = signal.SIGTERM) -> None:
        if self.running and self._proc is not None:
            self._proc.send_signal(sig)
            try:
                self._proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)

    def restart(self, while_down: Callable[[], None] | None = None, *, crash: bool = False) -> MariaDBServer:
        """Stops the server and starts it again on the same datadir and port; `while_down` runs
        in between (a bench puts binlog files of its own in place of the server's). With `crash`
        the server is killed with SIGKILL, as a crash ends it: its last binlog file ends without
        a Rotate or a Stop."""
        self._kill(signal.SIGKILL if crash else signal.SIGTERM)
        if while_down is not None:
            while_down()
        self._launch(_require_binary("mariadbd"))
        self._wait_ready()
        return self

    def stop(self, keep: bool = False) -> None:
        """SIGTERM the server (SIGKILL after `stop_timeout`); remove its files unless keep."""
        try:
            self._kill()
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self)
            if not keep:
                for d in (self.root, self._socket_dir):
                    if d is not None:
                        shutil.rmtree(d, ignore_errors=True)
                self.root = None
                self._socket_dir = None

    def __enter__(self) -> MariaDBServer:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # SQL helpers
    def connect(self, db: str | None = None, *, dict_cursor: bool = False,
                **kwargs: Any) -> pymysql.connections.Connection[Any]:
        """New autocommit pymysql connection as root over TCP, without TLS unless `kwargs` ask
        for it (`ssl_disabled=False` and pymysql's ssl options)."""
        import pymysql.cursors

        if not self.running:
            raise SandboxError(f"server {self.name} is not running")
        params: dict[str, Any] = dict(host="127.0.0.1", port=self.port, user="root", database=db,
                                      autocommit=True, charset="utf8mb4", connect_timeout=5, **NO_TLS)
        if dict_cursor:
            params["cursorclass"] = pymysql.cursors.DictCursor
        params.update(kwargs)
        return pymysql.connect(**params)

    def execute(self, sql: str | Iterable[str], db: str | None = None) -> None:
        """Run one statement or a list of statements, in order, on one connection."""
        statements = [sql] if isinstance(sql, str) else list(sql)
        with self.connect(db) as conn, conn.cursor() as cur:
            for stmt in statements:
                cur.execute(stmt)

    def query(self, sql: str, args: Any = None, db: str | None = None) -> list[dict[str, Any]]:
        """Rows of one statement as dicts."""
        with self.connect(db, dict_cursor=True) as conn, conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def binlog_files(self) -> list[Path]:
        """Binlog files in order, from the index file."""
        index = Path(f"{self.binlog_basename}.index")
        return read_index(index) if index.exists() else []

    def flush_logs(self) -> None:
        """FLUSH BINARY LOGS: closes the current binlog and opens the next one."""
        self.execute("FLUSH BINARY LOGS")

    def reset_master(self) -> None:
        """RESET MASTER: every binlog file removed, the series started again at .000001.

        MariaDB's RESET MASTER first waits for InnoDB to report its pending binlog checkpoint,
        which it does only when the redo log is next flushed: InnoDB's once-a-second flush, so
        about 1 s after any committed DML (whatever innodb_flush_log_at_trx_commit). A checkpoint
        asked for first leaves nothing pending. (innodb_log_checkpoint_now is in every build from
        MariaDB 10.11.8 and 11.x, MDEV-30000; before, in debug builds only: without it, the wait.)"""
        import pymysql

        try:
            self.execute("SET GLOBAL innodb_log_checkpoint_now = ON")
        except pymysql.err.MySQLError as exc:
            if exc.args[0] != 1193:  # ER_UNKNOWN_SYSTEM_VARIABLE
                raise
        self.execute("RESET MASTER")

    def master_position(self) -> tuple[str, int]:
        """(file, position) of the end of the current binlog (SHOW MASTER STATUS)."""
        rows = self.query("SHOW MASTER STATUS")
        if not rows:
            raise SandboxError(f"server {self.name} has no binary log enabled")
        return rows[0]["File"], int(rows[0]["Position"])

    def error_log_tail(self, lines: int = 30) -> str:
        if self.root is None:
            return "(no error log: server files removed)"
        text = _tail(self.error_log, lines)
        stderr = self.root / "mariadbd.stderr"
        if stderr.exists() and stderr.stat().st_size:
            text += "\n--- stderr ---\n" + _tail(stderr, 10)
        return text


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"({path}: {exc.strerror})"
    return "\n".join(data.splitlines()[-lines:])
