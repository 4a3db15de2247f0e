"""A closed binlog file the master maps (windows.Window) and someone then truncates: its pages past
the new end would fault (SIGBUS, the end of the process) when touched. The cache reads such a
segment again instead of handing it out, and a stream holding one ends with one line naming the
file and its new size; the process lives. Each case runs in a process of its own, since the
failure it guards against kills the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from dumpfilter.workload.generator import WorkloadSpec, generate

PRELUDE = """
import mmap, os, sys
from dumpfilter.errors import DumpFilterError
from dumpfilter.master.read import windows
windows.Window.MAP_MIN = 0  # every closed file mapped, however small
directory = sys.argv[1]
"""

CACHE = """
from dumpfilter.master.read.segments import SegmentCache
cache = SegmentCache(directory, read_ahead=False)
first = cache.file_names()[0]
seg = cache.get((first, 4))
assert any(isinstance(part.buf, mmap.mmap) or windows.shared_view(part.buf) for part in seg.index._parts), "not mapped"
n = len(seg.units)
del seg
path = os.path.join(directory, first)
os.truncate(path, os.path.getsize(path) // 2)
seg = cache.get((first, 4))  # the cached segment maps the lost half
total = sum(len(seg.units[k].raw or b"") for k in range(len(seg.units)))  # touches every unit
print("units", n, len(seg.units), "error", seg.error)
"""

PAST_UNITS = """
from dumpfilter.master.read.segments import SegmentCache
cache = SegmentCache(directory, read_ahead=False, segment_bytes=20_000)
first = cache.file_names()[0]
seg = cache.get((first, 4))
assert seg.end[0] == first and any(windows.shared_view(part.buf) for part in seg.index._parts)
os.truncate(os.path.join(directory, first), seg.end[1])  # only bytes past the segment's units go
again = cache.get((first, 4))
print("same" if again is seg and again.index.cut_short() is None else "read again")
"""

STREAM = """
from dumpfilter.master.model import Registration
from dumpfilter.master.service import DumpService
service = DumpService(directory, batch_bytes=1)
service.segments.read_ahead = False
service.register(Registration(server_id=9))
first = service.segments.file_names()[0]
stream = service.stream(9, start=(first, 4))
next(stream)
path = os.path.join(directory, first)
os.truncate(path, os.path.getsize(path) // 2)
try:
    for _ in range(10_000):
        next(stream)
    print("no error")
except DumpFilterError as exc:
    print("error:", exc)
"""


def _run(directory: Path, body: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(PRELUDE + body), str(directory)],
                          capture_output=True, text=True, timeout=120)


def _series(tmp_path: Path) -> tuple[Path, str]:
    generate(WorkloadSpec(seed=8, schemas=2, transactions=400, flavor="mariadb", max_binlog_size=60_000), tmp_path)
    first = sorted(p.name for p in tmp_path.iterdir() if p.suffix[1:].isdigit())[0]
    return tmp_path, first


def test_the_cache_reads_a_truncated_mapped_file_again_instead_of_faulting(tmp_path):
    directory, first = _series(tmp_path)
    done = _run(directory, CACHE)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-800:]}"
    words = done.stdout.split()
    assert words[0] == "units" and int(words[2]) < int(words[1])  # only the units left
    assert first in done.stdout and "ends inside an event" in done.stdout


def test_a_stream_over_a_truncated_mapped_file_ends_with_one_line_naming_it(tmp_path):
    directory, first = _series(tmp_path)
    done = _run(directory, STREAM)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-800:]}"
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stdout
    assert first in lines[0] and "truncated to" in lines[0]


def test_a_cut_past_a_segments_units_leaves_it_cached(tmp_path):
    """A --source series cut back to its last whole transaction (a reconnect) takes none of a
    segment's units: the segment stays cached, and no stream is told of a truncation."""
    directory, _ = _series(tmp_path)
    done = _run(directory, PAST_UNITS)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-800:]}"
    assert done.stdout.split() == ["same"]
