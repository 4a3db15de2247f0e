"""Replaying binlog files into a sandbox server: `mariadb-binlog ... | mariadb` (the tests' and benches'
oracle of what a binlog does to a real server; the product's --apply is slave.apply)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from dumpfilter.lab.sandbox.server import MariaDBServer, SandboxError, _require_binary


# "ERROR 1062 (23000) at line 57: Duplicate entry ..." (mariadb client, no --force)
_CLIENT_ERROR = re.compile(r"^ERROR (\d+) \(([0-9A-Z]{5})\)(?: at line (\d+))?: ?(.*)$", re.M)
_AT_POS = re.compile(r"^# at (\d+)\s*$")


class BinlogApplyError(SandboxError):
    """mariadb-binlog could not decode the input, or the client could not talk to
    the server (anything other than the server rejecting a statement)."""


def apply_binlog(
    server: MariaDBServer,
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    extra_args: Sequence[str] = (),
    *,
    timeout: float = 600.0,
) -> tuple[bool, str]:
    """Decode `paths` with mariadb-binlog (plus `extra_args`) and run the SQL on `server`.

    Returns (True, "") on success, or (False, text) when the server rejected a
    statement: the client stops at the first error and `text` holds the error,
    its line in the decoded SQL, the binlog position and the statement.
    Raises BinlogApplyError for decoding, connection or client failures.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    files = [str(p) for p in paths]
    if not files:
        raise ValueError("apply_binlog: no binlog files given")
    for f in files:
        if not Path(f).is_file():
            raise BinlogApplyError(f"binlog file not found: {f}")
    binlog_tool = _require_binary("mariadb-binlog")
    client = _require_binary("mariadb")
    if not server.running:
        raise SandboxError(f"server {server.name} is not running")

    with tempfile.TemporaryDirectory(prefix="mdb-apply-") as tmp:
        sql_path = Path(tmp, "decoded.sql")
        with open(sql_path, "wb") as out:
            dec = subprocess.run(
                [binlog_tool, "--no-defaults", *extra_args, *files],
                stdout=out, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=timeout,
            )
        dec_err = dec.stderr.decode("utf-8", "replace").strip()
        if dec.returncode != 0:
            raise BinlogApplyError(
                f"mariadb-binlog failed (exit {dec.returncode}) on {' '.join(files)}:\n{dec_err}"
            )
        with open(sql_path, "rb") as inp:
            run = subprocess.run(
                [client, "--no-defaults", "--host=127.0.0.1", f"--port={server.port}",
                 "--user=root", "--protocol=TCP", "--binary-mode", "--batch",
                 "--max-allowed-packet=1G", "--connect-timeout=10"],
                stdin=inp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout,
            )
        err = run.stderr.decode("utf-8", "replace").strip()
        if run.returncode == 0:
            return True, ""
        m = _CLIENT_ERROR.search(err)
        if m is None or 2000 <= int(m.group(1)) < 3000:  # 2xxx = client-side errors
            raise BinlogApplyError(
                f"mariadb client failed (exit {run.returncode}) applying "
                f"{' '.join(files)} to {server.name}:\n{err}"
            )
        errno, sqlstate, line, message = m.group(1), m.group(2), m.group(3), m.group(4)
        text = f"ERROR {errno} ({sqlstate}): {message}"
        if line:
            text += "\n" + _locate(sql_path, int(line))
        return False, text


def _locate(sql_path: Path, line_no: int, max_lines: int = 12) -> str:
    """Describe the statement the client reported at `line_no` (its first line)
    in the decoded SQL, with the binlog comments that precede it."""
    with open(sql_path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    first = max(0, min(line_no, len(lines)) - 1)
    last = first
    while last < len(lines) - 1 and not _ends_statement(lines[last]):
        last += 1
    stmt = lines[first:last + 1]
    decoded: list[str] = []  # "### INSERT INTO ..." pseudo-SQL printed by mariadb-binlog -v
    j = last + 1
    while j < len(lines) and lines[j].startswith("###") and len(decoded) < 12:
        decoded.append(lines[j])
        j += 1
    comments: list[str] = []  # event headers / annotations just before the statement
    i = first - 1
    while i >= 0 and (lines[i].startswith("#") or not lines[i].strip()) and len(comments) < 8:
        if lines[i].strip():
            comments.insert(0, lines[i])
        i -= 1
    pos = None
    for k in range(first - 1, max(-1, first - 200), -1):  # the event this belongs to
        if m := _AT_POS.match(lines[k]):
            pos = m.group(1)
            if not comments and k + 1 < first and lines[k + 1].startswith("#"):
                comments = [lines[k + 1]]  # header of a Query event (SET ... precede it)
            break
    out = [f"at line {line_no} of the decoded SQL"
           + (f", binlog event at position {pos}" if pos else "")]
    out += ["  " + ln for ln in comments if not _AT_POS.match(ln)]
    if len(stmt) > max_lines:
        stmt = stmt[:max_lines] + [f"... ({len(stmt) - max_lines} more lines)"]
    out.append("statement:")
    out += ["  " + ln for ln in stmt]
    if decoded:
        out += ["  " + ln for ln in decoded]
    return "\n".join(out)


def _ends_statement(line: str) -> bool:
    s = line.rstrip()
    return s.endswith(("/*!*/;", ";")) or s.startswith("DELIMITER ")
