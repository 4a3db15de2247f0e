"""Helpers shared by the gRPC tests: run a slave to caught-up, read back a relay log, split a DumpBatch into events."""

from __future__ import annotations

from pathlib import Path

from dumpfilter.codec import Event, FormatDescription, group_transactions
from dumpfilter.codec.scanner import Scanner, unit_events
from dumpfilter.binlogs import TailingReader
from dumpfilter.slave.node import Slave, scan_batch
from dumpfilter.slave.config import SlaveConfig


def run_slave(address: str, relay_dir: Path, server_id: int, after_unit=None, **options) -> Slave:
    config = SlaveConfig(master=address, server_id=server_id, relay_dir=relay_dir, until_caught_up=True,
                         connect_retry=0, **options)
    slave = Slave(config, after_unit=after_unit)
    assert slave.run() == 0
    return slave


def relay_units(relay_dir: Path):
    """The transactions in a slave's relay log, as tuples of raw event bytes (FDEs left out)."""
    events = [e for _, e in TailingReader(relay_dir)]
    return [tuple(e.raw for e in txn.events) for txn in group_transactions(events) if txn.kind != "control"]


def split_events(blob: bytes, fmt: FormatDescription | None) -> tuple[list[Event], FormatDescription | None]:
    """The events of a DumpBatch (see slave.node.scan_batch), with their formats."""
    scan = scan_batch(blob, fmt, Scanner("<stream>"))
    events: list[Event] = []
    for rec in scan.units:
        unit, fmt = unit_events(blob[rec.start : rec.end], rec.start, fmt, path="<stream>", stream_positions=True)
        events.extend(unit)
    return events, fmt
