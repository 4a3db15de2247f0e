"""--apply: the relay log executed on a target server through mariadb-binlog | mysql (or mariadb),
the target named by a mysql:// URL, and the SQL-thread quirks the output needs fixing for."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TypedDict
from urllib.parse import unquote, urlparse

from dumpfilter.errors import ExternalError, without_password


class ApplyError(ExternalError):
    """--apply could not execute the relay log on the target server."""


class Target(TypedDict):
    """The server --apply executes on, as a mysql:// URL names it."""
    user: str
    password: str
    host: str
    port: int


def parse_mysql_url(url: str) -> Target:
    """mysql://USER[:PASSWORD]@HOST[:PORT][/]"""
    try:
        parsed = urlparse(url)  # (an unclosed [IPv6 address raises, and a bad port once asked for)
        port = parsed.port or 3306
    except ValueError as exc:
        raise ApplyError(f"--apply: {without_password(url)!r}: {exc}") from None
    if parsed.scheme not in ("mysql", "mariadb") or not parsed.hostname:
        raise ApplyError(f"--apply: {without_password(url)!r} is not mysql://USER[:PASSWORD]@HOST:PORT")
    return {"user": unquote(parsed.username or "root"), "password": unquote(parsed.password or ""),
            "host": parsed.hostname, "port": port}


def _tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name) or next((f"{d}/{name}" for d in ("/usr/bin", "/usr/sbin", "/usr/local/bin")
                                            if Path(d, name).exists()), None)
        if found:
            return found
    raise ApplyError(f"--apply needs {' or '.join(names)} on PATH")


def apply_relay(directory: Path, files: list[str], start_pos: int, end_pos: int, target: Target) -> None:
    decoder = [_tool("mariadb-binlog", "mysqlbinlog"), "--no-defaults"]
    if start_pos > 4:
        decoder.append(f"--start-position={start_pos}")
    decoder.append(f"--stop-position={end_pos}")
    decoder += [str(directory / f) for f in files]
    client = [_tool("mariadb", "mysql"), "--no-defaults", f"--host={target['host']}", f"--port={target['port']}",
              f"--user={target['user']}", "--protocol=TCP", "--binary-mode", "--batch", "--max-allowed-packet=1G"]
    if target["password"]:
        client.append(f"--password={target['password']}")
    dec = subprocess.Popen(decoder, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    cli = subprocess.Popen(client, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # stderr of both is drained in threads so that neither blocks on a full pipe.
    # Popen made each with a pipe (stdout=/stdin=/stderr=PIPE), so none is None
    assert dec.stdout is not None and dec.stderr is not None and cli.stdin is not None and cli.stderr is not None
    dec_out, cli_in = dec.stdout, cli.stdin
    errs: dict[str, bytes] = {}

    def drain(key: str, pipe: IO[bytes]) -> None:
        errs[key] = pipe.read()

    readers = [threading.Thread(target=drain, args=(k, f), daemon=True)
               for k, f in (("dec", dec.stderr), ("cli", cli.stderr))]
    for reader in readers:
        reader.start()
    try:
        for line in replica_thread_sql(dec_out):
            cli_in.write(line)
    except BrokenPipeError:
        pass  # the client stopped at an error: its exit status and stderr say which
    finally:
        with contextlib.suppress(BrokenPipeError):
            cli_in.close()
        dec_out.close()
    cli.wait()
    dec.wait()
    for reader in readers:
        reader.join()
    dec_err = errs.get("dec", b"").decode("utf-8", "replace").strip()
    # The client first: when it stops at an error, the decoder dies of the closed pipe (SIGPIPE,
    # nothing on its stderr), and the client's message is the one that says what went wrong.
    if cli.returncode != 0:
        cli_err = _error_line(errs.get("cli", b"").decode("utf-8", "replace")) or _exit_text("mariadb", cli.returncode)
        raise ApplyError(f"applying {', '.join(files)} failed: {cli_err}")
    if dec.returncode != 0:
        raise ApplyError(f"mariadb-binlog failed on {', '.join(files)}: "
                         f"{dec_err or _exit_text('mariadb-binlog', dec.returncode)}")


def _error_line(stderr: str) -> str:
    """The client's `ERROR 1050 (42S01) at line 12: ...` line (it may echo the failed statement
    between dashed lines first), else its last line: one line for the CLI and Last_SQL_Error."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR ")]
    return errors[0] if errors else (lines[-1] if lines else "")


def _exit_text(tool: str, status: int) -> str:
    return f"{tool} was killed by signal {-status}" if status < 0 else f"{tool} exited with status {status}"


# The first line of a statement in mariadb-binlog output that drops a trigger without IF EXISTS.
_DROP_TRIGGER = re.compile(rb"^(\s*DROP\s+(?:DEFINER\s*=\s*\S+\s+)?TRIGGER\s+)(?!IF\s+EXISTS\b)", re.IGNORECASE)


def replica_thread_sql(lines: Iterable[bytes]) -> Iterator[bytes]:
    """The decoded relay log, as the replica SQL thread would execute it rather than a client.

    One difference matters: a replica SQL thread executes `DROP TRIGGER t` of a trigger that does not
    exist as a no-op (sql_parse.cc, slave branch: "the trigger does not exist possibly because CREATE
    TRIGGER was previously skipped ... according to slave filtering rules. Returning success"), where
    a client gets error 1360. Neither the master nor the slave can know whether the trigger exists on
    the target (replicate-rewrite-db can move a CREATE TRIGGER to another database, for instance), so
    --apply sends such statements as `DROP TRIGGER IF EXISTS t`, which is exactly that no-op.
    `dumpfilter verify` found this against a real replica. Only the first line of a statement is
    looked at (mariadb-binlog ends every statement with a `/*!*/;` line), never data inside one.
    """
    at_start = True
    for line in lines:
        if at_start and line.lstrip()[:4].upper() == b"DROP" and _DROP_TRIGGER.match(line):
            line = _DROP_TRIGGER.sub(rb"\1IF EXISTS ", line, count=1)
        stripped = line.rstrip()
        at_start = stripped.endswith(b"/*!*/;") or stripped.startswith(b"#") or not stripped
        yield line
