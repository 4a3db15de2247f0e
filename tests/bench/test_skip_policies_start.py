"""bench/bench_skip_policies.py's measure of a slave's start: the binlog `_format_only` writes holds
the real binlog's magic and Format_description alone, byte for byte, under the same file name, so
a slave against a master serving it pays its start and nothing else. Nothing here asserts a time."""

from __future__ import annotations

from pathlib import Path

from bench.bench_skip_policies import _format_only
from dumpfilter.codec import EventType
from dumpfilter.codec.reader import MAGIC, read_events


def _binlogs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.read_bytes()[:4] == MAGIC)


def test_format_only_keeps_the_format_description_alone(shared_fixtures, tmp_path):
    binlogs = _binlogs(shared_fixtures)
    assert binlogs
    for n, path in enumerate(binlogs):
        made = tmp_path / f"empty{n}"
        _format_only(path, made)
        (written,) = made.iterdir()
        assert written.name == path.name
        events = read_events(written.read_bytes(), written.name)
        assert [e.type_code for e in events] == [EventType.FORMAT_DESCRIPTION]
        source = read_events(path.read_bytes(), path.name)
        assert source[0].type_code == EventType.FORMAT_DESCRIPTION and len(source) > 1
        assert written.read_bytes() == MAGIC + source[0].raw
