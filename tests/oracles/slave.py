"""The slave's reference receive: every unit of a batch as Events through its TransactionGrouper,
its own check (the trust check, by its rules) and the rewrites, never a byte range written as it
came. `reference_receive(slave)` puts it in place of the compiled relay runs on one Slave."""

from __future__ import annotations

import types

from dumpfilter.codec import TransactionGrouper
from dumpfilter.codec.scanner import unit_events
from dumpfilter.slave.node import Slave, scan_batch


def _receive(self: Slave, blob: bytes) -> TransactionGrouper:
    scan = scan_batch(blob, self.fmt, self._scanner)
    self.trust.scanned(scan.last_rotate >= 0)
    self._received(scan)
    grouper = TransactionGrouper()
    fmt = self.fmt
    units = scan.units
    for i in range(len(units)):
        rec = units[i]
        events, fmt = unit_events(blob[rec.start:rec.end], rec.start, fmt, path="<stream>", stream_positions=True)
        for event in events:
            self._event(event, grouper)
    self.fmt = fmt
    return grouper


def reference_receive(slave: Slave) -> Slave:
    """`slave`, receiving by the reference path."""
    slave._receive = types.MethodType(_receive, slave)
    return slave
