"""Codec benchmark: reading a large ROW binlog event by event with its table names, as a ratio of a
minimal header-only struct.unpack_from loop over the same file, and RSS while streaming it."""

from __future__ import annotations

import struct
import subprocess
import sys

from bench.bench_filter import row_file
from bench.common import best_of, target_mb, write_result
from dumpfilter.codec import BinlogReader, EventType

HEADER = struct.Struct("<IBIIIH")
CHUNK = 1 << 20


def header_only_loop(path) -> int:
    """The baseline: read the file in 1 MiB chunks and hop from header to header."""
    count = 0
    with open(path, "rb") as f:
        f.read(4)
        buf, off = b"", 0
        unpack = HEADER.unpack_from
        while chunk := f.read(CHUNK):
            buf, off = buf[off:] + chunk, 0
            end = len(buf)
            while off + 19 <= end:
                size = unpack(buf, off)[3]
                if off + size > end:
                    break
                off += size
                count += 1
    return count


def events_with_names(path) -> int:
    """The object-per-event iterator (what transaction grouping uses)."""
    count = 0
    with open(path, "rb") as f:
        for event in BinlogReader(f, verify_checksums=False):
            if event.type_code == EventType.TABLE_MAP:
                event.table_map
            count += 1
    return count


RSS_PROBE = """
import sys
from dumpfilter.codec import BinlogReader, group_transactions
n = 0
with open(sys.argv[1], 'rb') as f:
    for txn in group_transactions(BinlogReader(f)):
        n += len(txn.events)
# VmHWM, not ru_maxrss: after exec, ru_maxrss still holds the parent's peak.
hwm = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))
print(n, hwm)
"""


def main() -> dict:
    path = row_file(target_mb())
    size = path.stat().st_size
    mb = size / 1e6
    base_t, base_n = best_of(lambda: header_only_loop(path))
    rows = [("header-only struct loop (baseline)", base_t, base_n)]
    for label, fn in (("Event per event + table names", lambda: events_with_names(path)),):
        t, n = best_of(fn)
        assert n == base_n, (label, n, base_n)
        rows.append((label, t, n))
    probe = subprocess.run([sys.executable, "-c", RSS_PROBE, str(path)], capture_output=True, text=True, check=True)
    events, max_rss_kb = map(int, probe.stdout.split())
    result = {
        "file": str(path), "size_mb": round(mb, 1), "events": base_n,
        "runs": [{"what": label, "seconds": round(t, 3), "mb_per_s": round(mb / t, 1),
                  "ratio_to_baseline": round(base_t / t, 3)} for label, t, _ in rows],
        "streaming_group_transactions_max_rss_mb": round(max_rss_kb / 1024, 1),
        "targets": {"max RSS": "< 100 MB"},
    }
    print(f"codec: {mb:.0f} MB ROW binlog, {base_n} events (DUMPFILTER_BENCH_MB={target_mb()})")
    for run in result["runs"]:
        print(f"  {run['what']:<46} {run['seconds']:>7.3f} s  {run['mb_per_s']:>7.1f} MB/s  x{run['ratio_to_baseline']}")
    print(f"  streaming + transaction grouping, max RSS: {result['streaming_group_transactions_max_rss_mb']} MB")
    write_result("codec", result)
    return result


if __name__ == "__main__":
    main()
