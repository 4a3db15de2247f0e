"""codec.rename.position_reset: the artificial Rotate and Format_description a real replica is sent
to bring its counted position back to the master's, checksummed as the stream's other events are."""

from __future__ import annotations

import pytest

from dumpfilter.codec.constants import HEADER_LEN, LOG_EVENT_ARTIFICIAL_F, EventType
from dumpfilter.codec.encode import format_description
from dumpfilter.codec.event import Event
from dumpfilter.codec.rename import position_reset


@pytest.mark.parametrize("checksum", [True, False])
def test_the_rotate_carries_a_crc_only_where_the_binlog_does(checksum):
    """A MySQL 8 binlog written with binlog_checksum=NONE still ends its Format_description with a
    CRC (a checksum-aware server's always does); its other events, the Rotate included, have none.
    The Rotate was checksummed as the Format_description is: 4 bytes a replica reads as the end of
    the file name."""
    fde = format_description("8.0.36-dumpfilter", checksum=checksum)
    rotate, again = position_reset("bin.000002", 1234, fde, server_id=7)
    assert rotate.type_code == EventType.ROTATE and rotate.flags & LOG_EVENT_ARTIFICIAL_F
    assert rotate.size == HEADER_LEN + 8 + len("bin.000002") + (4 if checksum else 0)
    assert Event(rotate.raw, 0, fde.fmt).rotate == (1234, "bin.000002")
    assert (again.type_code, again.log_pos, again.size) == (EventType.FORMAT_DESCRIPTION, 0, fde.size)
