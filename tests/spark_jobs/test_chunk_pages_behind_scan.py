"""A chunk's read and the cut walk hand back the pages of their mapping behind them (issue #60,
goal 4: `simulate` on a 500 MB MariaDB MIXED binlog peaked at 558 MB, the whole file mapped and
resident while spark_jobs counted it). Checked in /proc/self/smaps while `chunk_buffers` hands out
its buffers and while `gtid_boundaries` walks: the mapping's resident bytes are a few buffers
(windows), not the file; the buffers, units and cuts are those of a read that keeps every page."""

from __future__ import annotations

from pathlib import Path

import pytest

from dumpfilter.codec.scanner import Scanner
from dumpfilter.spark_jobs.tasks import chunks
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.support.smaps import needs_smaps, resident

pytestmark = needs_smaps

WINDOW = 128 << 10  # READ_BYTES / WALK_BYTES in these tests
SLACK = 64 << 10


@pytest.fixture(scope="module")
def binlog(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("binlogs")
    spec = WorkloadSpec(seed=7, schemas=3, transactions=12000, binlog_format="mixed", flavor="mariadb",
                        max_binlog_size=4 << 20)
    path = sorted(generate(spec, out))[0]
    assert path.stat().st_size > 6 * (4 * WINDOW + SLACK)
    return path


def _buffers(path: Path) -> tuple[list[tuple[int, int, int]], int]:
    """(file offset, length, units) of each buffer of the whole file as one chunk, and the most
    of the mapping resident while one was handed out."""
    chunk = chunks.plan_chunks([path], None)[0]
    seen, most = [], 0
    for _fmt, buf, base, _units, n, _crc in chunks.chunk_buffers(chunk, Scanner(chunk.path)):
        most = max(most, resident(path))
        seen.append((base, len(buf), n))
    return seen, most


def test_a_chunks_read_keeps_two_buffers_of_its_mappingresident(binlog, monkeypatch):
    monkeypatch.setattr(chunks, "READ_BYTES", WINDOW)
    seen, most = _buffers(binlog)
    assert len(seen) > 16 and sum(n for *_, n in seen) > 1000
    # The buffer handed out, the next one (scanned meanwhile), a page at each edge; twice that
    # for a unit longer than a buffer.
    assert 0 < most <= 4 * WINDOW + SLACK, (most, binlog.stat().st_size)
    monkeypatch.setattr(chunks, "_hand_back", lambda mapped, released, upto: released, raising=False)
    kept, _ = _buffers(binlog)  # every page kept: the same buffers and units
    assert seen == kept


class _Watched(Scanner):
    most = 0

    def walk(self, buf, off, base, types):  # type: ignore[override]
        out = super().walk(buf, off, base, types)
        _Watched.most = max(_Watched.most, resident(Path(self.path)))
        return out


def test_the_cut_walk_keeps_one_window_of_its_mappingresident(binlog, monkeypatch):
    monkeypatch.setattr(chunks, "Scanner", _Watched)
    monkeypatch.setattr(chunks, "WALK_BYTES", WINDOW, raising=False)
    size = binlog.stat().st_size
    cuts = chunks.gtid_boundaries(binlog, 200_000)
    assert len(cuts) > 8
    # The window just walked, the page it started in, and the page of the magic.
    assert 0 < _Watched.most <= 2 * WINDOW + SLACK, (_Watched.most, size)
    monkeypatch.setattr(chunks, "Scanner", Scanner)
    monkeypatch.setattr(chunks, "WALK_BYTES", 100, raising=False)  # events longer than a window: it grows
    assert chunks.gtid_boundaries(binlog, 200_000) == cuts
    monkeypatch.setattr(chunks, "WALK_BYTES", 2 * size, raising=False)  # one walk of it all
    assert chunks.gtid_boundaries(binlog, 200_000) == cuts
