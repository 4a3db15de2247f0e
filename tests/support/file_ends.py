"""A binlog series whose files end every way a server leaves them: with a Rotate, with nothing
(a crash, kill -9) and with a Stop (a clean shutdown), for the tests of issue #61."""

from __future__ import annotations

import shutil

from dumpfilter.codec import EventType, read_events
from dumpfilter.codec.encode import build_event


def series_with_every_end(source, target):
    """The workload's files, each ending in turn with its Rotate, with nothing (its Rotate cut, as
    a crash leaves it) or with a Stop (a clean shutdown). Returns the files and how each ends."""
    shutil.copytree(source, target)
    names = sorted(p.name for p in target.iterdir() if p.suffix[1:].isdigit())
    ends = {}
    for k, name in enumerate(names[:-1]):
        path = target / name
        data = path.read_bytes()
        events = read_events(data, name)
        last = events[-1]
        assert last.type_code == EventType.ROTATE
        how = ("rotate", "nothing", "stop")[k % 3]
        if how == "nothing":
            path.write_bytes(data[: last.pos])
        elif how == "stop":
            stop = build_event(EventType.STOP, b"", fmt=events[0].fmt, server_id=last.server_id,
                               timestamp=last.timestamp, log_pos=last.pos + 19 + 4, pos=last.pos)
            path.write_bytes(data[: last.pos] + stop.raw)
        ends[name] = how
    return names, ends
