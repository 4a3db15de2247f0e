"""A rows event is routed by its own statement's Table_map only (issue #44 item 4). A crafted copy
of a real binlog whose rows event names the table id an earlier transaction mapped (to another
schema) was classified by that stale map: `secret`'s rows went to an identity allowed only `shop`.
A replica forgets its table maps at each statement's end; so does every path here, and a rows
event without its map is refused with one DATA_LOSS line naming file and offset: `filter`, `lint`,
`split` and the master's stream alike."""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from dumpfilter.codec import BinlogReader, EventType
from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.rules.transaction_filter import TransactionFilter
from dumpfilter.workload.generator import WorkloadSpec, generate


def craft(tmp_path: Path) -> tuple[Path, int]:
    """A one-file ROW binlog where a transaction's rows event of a `db1` table names the table id
    an earlier transaction mapped to a `db2` table (same size: positions unchanged, CRC fixed).
    Returns the file and the crafted event's offset."""
    source = tmp_path / "source"
    source.mkdir()
    generate(WorkloadSpec(seed=9, schemas=2, transactions=60, cross_db_share=0.0, ddl_share=0.0,
                          statements_per_transaction=1), source)
    path = sorted(p for p in source.iterdir() if not p.name.endswith(".index"))[0]
    data = bytearray(path.read_bytes())
    with path.open("rb") as stream:
        events = list(BinlogReader(stream, str(path)))
    maps: dict[int, str] = {}
    stale_id, target = None, None
    for i, event in enumerate(events):
        if event.type_code == EventType.TABLE_MAP:
            table_id, db, _ = event.table_map
            maps[table_id] = db
            if db == "db2" and stale_id is None:
                stale_id = table_id
            if db == "db1" and stale_id is not None and table_id != stale_id:
                target = events[i + 1]   # its rows event
                break
    assert stale_id is not None and target is not None and target.is_rows
    at = target.pos + HEADER_LEN
    data[at:at + 6] = stale_id.to_bytes(6, "little")
    end = target.pos + target.size
    data[end - 4:end] = zlib.crc32(bytes(data[target.pos:end - 4])).to_bytes(4, "little")
    crafted = tmp_path / "crafted"
    crafted.mkdir()
    out = crafted / path.name
    out.write_bytes(bytes(data))
    return out, target.pos


def dumpfilter(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpfilter", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def _checker(kind: str, engine):
    """What takes each unit: the reference TransactionFilter, or a slave's check of what its master
    sends (slave/trust.py: a hostile or broken master cannot slip one table's rows in as another's)."""
    from dumpfilter.slave.config import Counters
    from dumpfilter.slave.trust import MasterTrust

    if kind == "reference filter":
        return TransactionFilter(engine).filter
    return MasterTrust(engine, "warn", Counters(), lambda _text: None, lambda _text: None).unit


@pytest.mark.parametrize("kind", ["reference filter", "slave check"])
def test_rows_without_their_map_are_refused(tmp_path, kind):
    from dumpfilter.codec import TransactionGrouper
    from dumpfilter.errors import MalformedEventError
    from dumpfilter.rules.evaluate import RuleEngine
    from dumpfilter.rules.parse import StartupFilters

    path, offset = craft(tmp_path)
    check = _checker(kind, RuleEngine(StartupFilters.from_options([("replicate-do-db", "db2")]).global_rules))
    grouper = TransactionGrouper()
    with path.open("rb") as stream, pytest.raises(MalformedEventError) as info:
        for event in BinlogReader(stream, str(path)):
            for txn in grouper.push(event):
                check(txn)
    assert info.value.offset == offset and "no Table_map in its statement" in str(info.value)


@pytest.mark.parametrize("command", [
    ("filter", "{file}", "-o", "out.bin", "--replicate-do-db=db2"),
    ("lint", "{file}", "--replicate-do-db=db2"),
    ("split", "{file}", "--out", "split", "--no-spark"),
], ids=["filter", "lint", "split"])
def test_every_command_refuses_it_with_one_line(tmp_path, command):
    path, offset = craft(tmp_path)
    run = dumpfilter(*(a.format(file=path) for a in command), cwd=tmp_path)
    assert run.returncode == 2, (run.stdout, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert path.name in lines[0] and f"at byte {offset}" in lines[0] and "Table_map" in lines[0], lines[0]
    assert not (tmp_path / "out.bin").exists() and not (tmp_path / "split").exists()


@pytest.mark.grpc
def test_the_master_refuses_the_stream_with_data_loss(tmp_path, master_factory):
    """The master's fast path sends a transaction whose rows name a map outside their own
    statement to the reference path, which refuses it: the stream ends with DATA_LOSS naming the
    file and offset, the secret rows never sent."""
    from dumpfilter.rules.parse import StartupFilters
    from dumpfilter.slave.node import Slave
    from dumpfilter.slave.config import SlaveConfig

    path, offset = craft(tmp_path)
    _, address = master_factory(path.parent)
    config = SlaveConfig(master=address, server_id=7, relay_dir=tmp_path / "relay", until_caught_up=True,
                         connect_retry=0, rules=StartupFilters.from_options([("replicate-do-db", "db2")]).global_rules)
    slave = Slave(config)
    try:
        status = slave.run()
    except Exception as exc:  # noqa: BLE001 - the slave may raise the master's error
        message = str(exc)
    else:
        assert status != 0
        message = slave.info.last_error if hasattr(slave.info, "last_error") else ""
    assert "Table_map" in message and f"at byte {offset}" in message, message

