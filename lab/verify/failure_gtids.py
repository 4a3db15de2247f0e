"""Which GTID a failure happened in, for `dumpfilter verify`'s verdicts: a reference replica's SQL
error (from the primary's binlog; a replica of a filtered stream's is sandbox.relay_group_at) and a
failed --apply (from the line `mariadb-binlog | mariadb` stopped at)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from dumpfilter.codec import EventType, read_events
from dumpfilter.lab.sandbox import MariaDBServer
from dumpfilter.lab.sandbox.server import find_binary

# "#251122  5:30:01 server id 1  end_log_pos 1234 CRC32 0x0a1b2c3d 	GTID 0-1-17 ddl" (mariadb-binlog)
_GTID_COMMENT = re.compile(r"^#.*\bGTID (\d+-\d+-\d+)\b")


def gtid_at(primary: MariaDBServer, file: str, pos: int) -> str | None:
    """The GTID of the primary transaction that contains `file:pos` (the replica's Exec_Master_Log_Pos
    after an SQL error is the start of the failed event group, i.e. its GTID event)."""
    path = primary.binlog_dir / Path(file).name
    if not path.exists():
        return None
    gtid = None
    for event in read_events(path.read_bytes(), str(path)):
        if event.pos > pos:
            break
        if event.type_code == EventType.MARIADB_GTID:
            gtid = event.gtid
    return gtid


def apply_failure_gtid(relay_dir: Path, files: list[str], end_pos: int, line: int) -> str | None:
    """The GTID whose statement failed when --apply ran `mariadb-binlog files | mariadb`: decode the
    same files with the same arguments as slave.node.apply_relay, so line numbers match, and take
    the last GTID comment at or before the failing line."""
    tool = find_binary("mariadb-binlog")
    if tool is None or not files:
        return None
    cmd = [tool, "--no-defaults", f"--stop-position={end_pos}", *(str(relay_dir / f) for f in files)]
    text = subprocess.run(cmd, capture_output=True, check=False).stdout.decode("utf-8", "replace")
    gtid = None
    for number, text_line in enumerate(text.splitlines(), 1):
        if number > line:
            break
        match = _GTID_COMMENT.match(text_line)
        if match:
            gtid = match.group(1)
    return gtid
