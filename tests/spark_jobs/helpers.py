"""Checks shared by the split tests: every output file is a valid binlog series."""

from __future__ import annotations

from pathlib import Path

from dumpfilter.codec import BinlogReader, EventType, GtidTracker
from dumpfilter.binlogs import read_index


def series_events(directory: Path, name: str) -> list:
    """Events of `<name>-bin.*` in index order, CRCs verified."""
    events = []
    for path in read_index(directory / f"{name}-bin.index"):
        with open(path, "rb") as f:
            events.extend(BinlogReader(f, str(path), verify_checksums=True))
    return events


def check_series(directory: Path, name: str, start_state=None) -> list[Path]:
    """Magic and FDE first, then the GTID state of everything written before; log_pos renumbered;
    Rotate naming the next file between files and only there."""
    files = read_index(directory / f"{name}-bin.index")
    assert files and [p.name for p in files] == [f"{name}-bin.{i:06d}" for i in range(1, len(files) + 1)]
    tracker = GtidTracker()
    if start_state is not None:
        tracker.start_from(start_state)
    for i, path in enumerate(files):
        data = path.read_bytes()
        assert data[:4] == b"\xfebin"
        with open(path, "rb") as f:
            events = list(BinlogReader(f, str(path), verify_checksums=True))
        assert events[0].type_code == EventType.FORMAT_DESCRIPTION
        state = events[1]
        if state.type_code == EventType.MARIADB_GTID_LIST:
            assert state.body == tracker.mariadb.encode()
        else:
            assert state.type_code == EventType.PREVIOUS_GTIDS
            assert state.body == tracker.mysql.encode()
        for event in events:
            assert event.log_pos in (0, event.end_pos), f"{path.name}: {event} not renumbered"
            if event.is_gtid:
                tracker.add(event)
        rotates = [e for e in events if e.type_code == EventType.ROTATE]
        if i + 1 < len(files):
            assert rotates == [events[-1]] and events[-1].rotate == (4, files[i + 1].name)
        else:
            assert rotates == []
        assert events[-1].end_pos == len(data)
    return files


def same_tree(a: Path, b: Path) -> None:
    """Both directories hold the same file names with the same bytes."""
    names_a = sorted(p.name for p in a.iterdir())
    names_b = sorted(p.name for p in b.iterdir())
    assert names_a == names_b
    for name in names_a:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
