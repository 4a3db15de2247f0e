"""Diagnostic (in process; issue #80 goal 5, session 50): the compiled walks the core's folds of
session 50 reach outside the matrix, over the first MB of a binlog, so that two builds of the core
can be compared (run it with each build's interpreter; under callgrind for instruction counts):
filter's assembly keeping one schema of a multi-schema binlog (every other unit written as an
emptied group, filter's default), and split's routing walk by schema (one output per schema).

    python bench/diag_core_folds.py BINLOG [--mb 20] [--reps 3] [--walk assemble|split]

Prints per walk a digest of what it wrote (equal across builds: the same bytes), the bytes, and
the process CPU seconds of its calls. Units a walk leaves to Python are passed over."""

from __future__ import annotations

import argparse
import hashlib
import time

from dumpfilter import _core


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binlog")
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--walk", choices=("assemble", "split"), action="append")
    args = parser.parse_args()
    with open(args.binlog, "rb") as f:
        data = f.read(args.mb << 20)
    scanner = _core.Scanner(True)
    scanned = scanner.units(data, 4, 0)
    names = [(n.db, n.table) for n in scanned.new_names]
    schemas = sorted({db for db, _ in names})
    keeps = [bytes(_core.KEEP_KEEP if db == s else _core.KEEP_DROP for db, _ in names) for s in schemas]
    units = len(scanned.packed) // (8 * _core.UNIT_WORDS)
    crc = scanner.checksum_len > 0
    try:
        config = _core.AssembleConfig(renumber=True, crc=crc, empty_keep=True)
    except TypeError:  # a build before session 50 (its COMMIT body passed in)
        config = _core.AssembleConfig(renumber=True, crc=crc, empty_keep=True,  # type: ignore[call-arg]
                                      commit_body=b"\x01" + bytes(13) + b"COMMIT")
    for walk in args.walk or ["assemble", "split"]:
        digest, written, started = hashlib.sha256(), 0, time.process_time()
        for _ in range(args.reps):
            start, out_pos = 0, 4
            while start < units:
                if walk == "assemble":
                    done = scanner.core.assemble(data, start, keeps[0], out_pos, 0, config)
                    outs, out_pos, start = [done.out], done.out_pos, done.next + 1
                else:
                    routed = _core.split_route(scanner, data, start, keeps, [True] * len(keeps), [0] * len(keeps))
                    outs, start = [o.out for o in routed.outputs], routed.next + 1
                for out in outs:
                    digest.update(out)
                    written += len(out)
        print(f"{walk}: {digest.hexdigest()[:16]} {written} bytes {time.process_time() - started:.3f} s")


if __name__ == "__main__":
    main()
