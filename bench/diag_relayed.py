"""Diagnostic (issue #80 goal 5, session 49): what `_core.relayed` predicts a slave's relay logs
hold, unit by unit and run by run, over a binlog directory, as digests, so that two builds of the
core (the old walk of verify_forms.rs, the send walk's relay mode) can be compared.

    python -m bench.diag_relayed DIR OUT [--mb N]     # with each build's interpreter
    python -m bench.diag_relayed --compare OLD NEW

Each unit of the full stream is asked alone under every skip policy at once (heartbeat,
placeholder, empty-transaction), for each rule set of RULES, as `simulate --verify` asks (the
slave's keep bytes per table name and per statement key, the format's checksum); a unit is
`answered` where `next` moved past it, with a digest of each policy's bytes. Runs are asked too
(from each unit the last run did not take, to the cut), and a run's bytes must be its units'. A unit kept in part must be what the slave's Python
reference filter keeps of it (whatever the policy)."""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from dumpfilter import _core, skip_policy
from dumpfilter.codec.scanner import Scanner
from dumpfilter.lab.simulate.verify_compiled import _FullChunk, _relay_chunks
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.keep_table import KeepTable
from dumpfilter.rules.transaction_filter import KEEP, PARTIAL, TransactionFilter
from dumpfilter.topology import parse_topology

RULES = {
    "do-db": ["replicate-do-db=sbtest1", "replicate-do-db=db1"],
    "wild": ["replicate-wild-do-table=sbtest2.%", "replicate-wild-do-table=db2.%",
             "replicate-wild-ignore-table=sbtest2.sbtest1", "replicate-wild-ignore-table=db2.t1"],
    "ignore": ["replicate-ignore-db=sbtest3", "replicate-ignore-db=db3"],
    "tables": ["replicate-wild-ignore-table=%.counters", "replicate-wild-ignore-table=%.events"],
}
POLICIES = ("heartbeat", "placeholder", "empty-transaction")
NEW = "keep" in inspect.signature(_core.relayed).parameters


def _ask(units: _core.UnitList, made: tuple[bytes, bytes, bytes | None], start: int, stop: int,
         skips: bytes, crc: bool) -> _core.Relayed:
    row, keep, stmt_keep = made
    if NEW:
        return _core.relayed(units, row, keep, start, stop, skips, crc, stmt_keep)
    return _core.relayed(units, row, start, stop, skips, crc)  # type: ignore[call-arg,arg-type]


def _digest(data: list[bytes]) -> str:
    return hashlib.sha1(b"|".join(hashlib.sha1(d).digest() for d in data)).hexdigest()[:16]


def collect(directory: Path, mb: int, lines: TextIO) -> dict[str, int]:
    """Per rule set, per unit answered, a line of `lines`: the chunk, the rule set, the unit's
    file offset and the digest of what each policy relays of it. Returns the units answered."""
    topology = parse_topology("[master]\nbinlogs = \".\"\n" + "".join(
        f'\n[[slaves]]\nname = "{name}"\nserver_id = {k + 2}\nrules = {json.dumps(rules)}\n'
        for k, (name, rules) in enumerate(RULES.items())))
    keeps = {spec.name: KeepTable(RuleEngine(spec.rules, spec.settings)) for spec in topology.slaves}
    skips = bytes(skip_policy.named(p).walk_skip for p in POLICIES)
    references = {spec.name: TransactionFilter(RuleEngine(spec.rules, spec.settings), empty_transactions=KEEP)
                  for spec in topology.slaves}
    partial = dict.fromkeys(keeps, 0)
    out = dict.fromkeys(keeps, 0)
    scanner, fmt, seen = Scanner(str(directory)), None, 0
    for n, chunk in enumerate(_relay_chunks(directory)):
        if chunk.new_file:
            scanner = Scanner(str(directory / chunk.name))
        full = _FullChunk(scanner, chunk, fmt, True)
        units = full.units
        for name, table in keeps.items():
            keep = table.tables(full.names)
            row = units.rows_many([keep])[0]
            rows = table.rows(full.keys) if full.keys else None
            made = (row, keep, None) if rows is None else (units.rows_many([keep], [rows.keep])[0], keep, rows.keep)
            cuts = [k + 1 for k, _ in full.fdes] + [full.n]
            start = 0
            for stop in cuts:
                f = full.fmt_at(start)
                crc = f is not None and f.checksum_len > 0
                run_skips = skips if f is not None else bytes(
                    s if s == _core.SKIP_HEARTBEAT else _core.SKIP_STOP for s in skips)
                alone: dict[int, list[bytes]] = {}
                for k in range(start, stop):
                    r = _ask(units, made, k, k + 1, run_skips, crc)
                    if r.next > k:
                        alone[k] = list(r.data)
                        if made[0][k] == _core.ROW_PARTIAL:  # (the Python reference filter's)
                            reference = references[name].filter(full.transactions(k)[0])
                            want = b"".join(e.raw for e in reference.events)
                            assert reference.outcome == PARTIAL and all(d == want for d in r.data), (name, k)
                            partial[name] += 1
                        out[name] += 1
                        unit = f"{n} {name} {chunk.base + units.unit(k).start}"
                        lines.write(f"{unit} {_digest(r.data)} {','.join(map(str, r.units))}\n")
                k = start
                while k < stop:  # runs: a run's bytes are its units'
                    r = _ask(units, made, k, stop, run_skips, crc)
                    if r.next <= k:
                        k += 1
                        continue
                    for p in range(len(POLICIES)):
                        joined = b"".join(alone[j][p] for j in range(k, r.next))
                        assert r.data[p] == joined, (name, chunk.base, k, r.next, POLICIES[p])
                    k = r.next
                start = stop
        fmt, chunk.stop, chunk.rotated_to = full.fmt_out, full.stop, full.rotated_to
        seen += chunk.stop
        if seen >= mb << 20:
            break
    print("units kept in part, each as the reference filter keeps it:", partial)
    return out


def _records(path: str) -> Iterator[tuple[tuple[int, str, int], str]]:
    with open(path) as f:
        for line in f:
            n, name, at, rest = line.split(" ", 3)
            yield (int(n), name, int(at)), rest


def compare(old: str, new: str) -> int:
    """The two files' units merged in order: per rule set, those both answered (and how many
    differ), and those only one of them did."""
    counts: dict[str, list[int]] = {}
    a, b = _records(old), _records(new)
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x[0] < y[0]):
            counts.setdefault(x[0][1], [0, 0, 0, 0])[2] += 1  # type: ignore[index]
            x = next(a, None)
        elif x is None or y[0] < x[0]:
            counts.setdefault(y[0][1], [0, 0, 0, 0])[3] += 1
            y = next(b, None)
        else:
            c = counts.setdefault(x[0][1], [0, 0, 0, 0])
            c[0] += 1
            c[1] += x[1] != y[1]
            x, y = next(a, None), next(b, None)
    for name, (both, differ, only_old, only_new) in counts.items():
        print(f"{name}: {both} units answered by both, {differ} differ; "
              f"{only_old} only by the old, {only_new} only by the new")
    return 1 if any(c[1] or c[2] for c in counts.values()) else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs=2)
    ap.add_argument("--mb", type=int, default=1 << 20)
    ap.add_argument("--compare", action="store_true")
    args = ap.parse_args()
    if args.compare:
        return compare(*args.paths)
    with open(args.paths[1], "w") as lines:
        print("units answered:", collect(Path(args.paths[0]), args.mb, lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
