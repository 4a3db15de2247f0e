"""A local-mode Spark session listens only on loopback: every listening TCP socket of its JVM."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def _listening_addresses(pid: int) -> list[str]:
    """The local addresses of the LISTEN sockets process `pid` holds (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table in (f"/proc/{pid}/net/tcp", f"/proc/{pid}/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: TCP_LISTEN
                out.append(local.split(":")[0])
    return out


def _is_loopback(hex_addr: str) -> bool:
    if len(hex_addr) == 8:  # IPv4, little-endian words: 0100007F is 127.0.0.1
        return hex_addr.endswith("7F")
    return hex_addr in ("00000000000000000000000001000000", "0000000000000000FFFF00000100007F")


def test_local_session_listens_only_on_loopback(spark):
    proc = spark.sparkContext._gateway.proc  # the JVM py4j launched for this session
    spark.range(10).count()  # executors and the block manager are up
    addresses = _listening_addresses(proc.pid)
    assert addresses, "the JVM listens on nothing?"
    assert all(_is_loopback(a) for a in addresses), addresses
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"
