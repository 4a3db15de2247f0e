"""How the master maps closed binlog files (`windows.MappingFiles`): with huge pages
(`master serve --binlog-huge-pages`) a closed binlog read from disk through the segment cache
comes into the page cache in 2 MB folios, without them in the kernel's own (observed through
/proc/kpageflags: root, on a kernel and file system that put file pages in large folios; skipped
elsewhere, with the reason)."""

from __future__ import annotations

import mmap
import os
import struct
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from dumpfilter.binlogs.series import BinlogSeriesWriter
from dumpfilter.codec.constants import EventType
from dumpfilter.master.read.segments import SegmentCache
from dumpfilter.workload.generator import WorkloadSpec, _Generator
from tests.support.dump_helpers import run_slave
from dumpfilter.lab.ports import free_port

IN_USE_AT = 4 + 17  # the FDE's header flags; its CRC is computed without the in-use bit
REGION = 2 << 20


def _file(path: Path, size: int = 3 * REGION) -> Path:
    path.write_bytes(os.urandom(size))
    return path


# -- the page cache's folios ---------------------------------------------------------------------

KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL, KPF_THP = 1 << 15, 1 << 16, 1 << 22


def _regions_in_one_folio(path: Path) -> list[bool]:
    """For each whole 2 MB region of `path`: whether the page cache holds it as one 2 MB folio
    (its pages looked up through a mapping of the file: /proc/self/pagemap, /proc/kpageflags)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), size, mmap.MAP_SHARED, mmap.PROT_READ)
    try:
        for offset in range(0, size, 4096):
            m[offset]  # mapped (and read, for a page not in the page cache)
        base = next(int(line.split("-")[0], 16) for line in open("/proc/self/maps") if str(path) in line)
        out = []
        with open("/proc/self/pagemap", "rb") as pagemap, open("/proc/kpageflags", "rb") as kpageflags:
            for region in range(size // REGION):
                heads = thp = 0
                for page in range(region * 512, region * 512 + 512):
                    pagemap.seek((base // 4096 + page) * 8)
                    pfn = struct.unpack("<Q", pagemap.read(8))[0] & ((1 << 55) - 1)
                    if not pfn:
                        raise PermissionError("no page frame numbers in /proc/self/pagemap")
                    kpageflags.seek(pfn * 8)
                    flags = struct.unpack("<Q", kpageflags.read(8))[0]
                    heads += bool(flags & KPF_COMPOUND_HEAD)
                    thp += bool(flags & KPF_THP) and bool(flags & (KPF_COMPOUND_HEAD | KPF_COMPOUND_TAIL))
                out.append(heads == 1 and thp == 512)
        return out
    finally:
        m.close()


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # (a dirty page is not dropped)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read_as_huge_folios_here(tmp_path: Path) -> str | None:
    """Why this machine cannot show 2 MB folios of a file read from disk (None: it can): one
    mapping with MADV_HUGEPAGE over a file just evicted, touched from its start."""
    if not hasattr(mmap, "MADV_HUGEPAGE") or not hasattr(os, "posix_fadvise"):
        return "no MADV_HUGEPAGE or posix_fadvise here"
    if not os.access("/proc/kpageflags", os.R_OK):
        return "/proc/kpageflags is not readable (root only)"
    path = _file(tmp_path / "control", 4 * REGION)
    _evict(path)
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 4 * REGION, mmap.MAP_SHARED, mmap.PROT_READ)
        m.madvise(mmap.MADV_HUGEPAGE)
        for offset in range(0, 4 * REGION, 4096):
            m[offset]
        m.close()
    try:
        regions = _regions_in_one_folio(path)
    except (OSError, StopIteration) as exc:
        return f"the page cache's folios cannot be seen here ({exc})"
    finally:
        path.unlink()
    if not any(regions):
        return "this kernel or file system reads file pages into small folios even with MADV_HUGEPAGE"
    return None


def _closed_binlog(directory: Path, copies: int) -> Path:
    """A closed MariaDB ROW binlog of `copies` times 1,500 transactions (about 3 MB each)."""
    spec = WorkloadSpec(transactions=1500, rows_per_statement=20, statements_per_transaction=3, ddl_share=0)
    gen = _Generator(spec)
    units = list(gen.units())
    with BinlogSeriesWriter(directory, "master-bin", gen.fde, max_size=1 << 30,
                            start_state=gen.event(EventType.MARIADB_GTID_LIST, b"\0" * 6)) as series:
        for _ in range(copies):
            for unit in units:
                series.write_transaction(unit)
    path = series.close()[0]
    data = bytearray(path.read_bytes())
    data[IN_USE_AT] &= ~1  # closed by the server: mapped
    path.write_bytes(bytes(data))
    return path


def test_with_huge_pages_a_closed_binlog_read_from_disk_comes_in_2_mb_folios(tmp_path):
    """Each segment read opens its file anew. Mapping that descriptor, every mapping started with
    a new read-ahead state, and the read ahead its faults set off went on in small folios after
    the first 16 MB or so (whatever MADV_HUGEPAGE asked); and the checks of a segment's start read
    the file with read ahead first. Now the mappings share one description and the checks read
    without read ahead: the whole file but its first regions (its format, read before any
    mapping) comes in 2 MB folios."""
    why = _read_as_huge_folios_here(tmp_path)
    if why is not None:
        pytest.skip(why)
    directory = tmp_path / "binlog"
    directory.mkdir()
    path = _closed_binlog(directory, 24)
    assert path.stat().st_size > 32 * REGION
    _evict(path)
    got = {}
    for huge in (False, True):
        _evict(path)
        _read_through(directory, path, huge)
        got[huge] = _regions_in_one_folio(path)[2:]  # (the first: read before any mapping)
    assert sum(got[True]) >= 0.9 * len(got[True]), "".join("P" if r else "." for r in got[True])
    assert sum(got[False]) < sum(got[True])  # the option decides it: off, the kernel's own folios


def _read_through(directory: Path, path: Path, huge_pages: bool) -> None:
    """Every segment of the binlog `path`, read through a segment cache."""
    cache = SegmentCache(directory)
    cache.mappings.huge_pages = huge_pages
    pos = (path.name, 4)
    while True:
        seg = cache.get(pos)
        if seg.at_end or not seg.units:
            break
        pos = seg.end
    assert seg.error is None and seg.end == (path.name, path.stat().st_size)


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads the master's /proc/PID/smaps (Linux)")
@pytest.mark.parametrize("huge", [False, True])
def test_master_serve_maps_with_huge_pages_only_when_asked(tmp_path, huge):
    """`master serve --binlog-huge-pages` reaches the mappings: after a slave has read the binlog,
    the master's mappings of it carry the huge-page advice (smaps' VmFlags `hg`) with the option
    and not without it."""
    directory = tmp_path / "binlog"
    directory.mkdir()
    path = _closed_binlog(directory, 4)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(directory),
                             "--listen", f"127.0.0.1:{port}", *(["--binlog-huge-pages"] if huge else [])],
                            stderr=subprocess.PIPE, text=True)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
        slave = run_slave(f"127.0.0.1:{port}", tmp_path / "relay", 7)
        assert slave.caught_up and slave.counters.events_relayed > 0
        flags = []
        vma = None
        for line in Path(f"/proc/{proc.pid}/smaps").read_text().splitlines():
            if line[:1] in "0123456789abcdef" and "-" in line.split()[0]:
                vma = line.endswith(str(path))
            elif vma and line.startswith("VmFlags:"):
                flags.append(line.split()[1:])
        assert flags, "the master maps none of the binlog"
        assert all(("hg" in f) == huge for f in flags), flags
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
