"""What each statement reader costs per byte on real binlogs (issue #57 goal 5, a diagnostic: in
process, one reader at a time; `python -m bench readers`). For each statement of a binlog (BEGIN,
COMMIT and framing aside), the reader that reads it in production, and the time to read it:

- `key`: single-table DML the core's statement key reads in the walk (`_core.statement_key`);
- `facts`: what the core's statement facts read (DDL, triggers, multi-table UPDATE/DELETE,
  INSERT ... SELECT, sqlglot listing what a subquery reads: `rules.statement_facts.core_info`);
- `parser`: what both decline (no statement: `rules.statements` answers it unparsed).

For the last input it also times the master policy's bound (`rules.policy_bound.statement_reach`, whose classifier is the same reader).
Inputs: the MIXED sysbench binlog `make bench` writes (bench.mixed_binlog), a DDL-heavy
tenant-per-schema binlog (bench.ddl_binlog), the 15 real servers' binlogs in
../shared/fixtures/real_binlogs, and a 1.2 MB CREATE TRIGGER with 50,000 body statements."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from bench.common import write_result

_SAMPLE = 20_000  # statements timed per input and reader (the whole count is still counted)


def _statements(path: Path, limit: int | None = None):
    """(sql, default db) of each statement Query of one binlog file."""
    from dumpfilter.codec.reader import BinlogReader
    from dumpfilter.errors import DumpFilterError

    out = []
    with open(path, "rb") as f:
        try:
            for e in BinlogReader(f):
                if e.is_query and e.sql is not None and e.sql not in ("BEGIN", "COMMIT"):
                    out.append((e.sql, e.db or ""))
                    if limit is not None and len(out) >= limit:
                        break
        except DumpFilterError:
            pass  # (a fixture cut short on purpose: its statements up to there count)
    return out


def _reader(sql: str, db: str) -> str:
    from dumpfilter import _core
    from dumpfilter.rules.statement_facts import core_info

    raw = sql.encode("utf-8", "surrogateescape")
    if _core.statement_key(raw) is not None:
        return "key"
    return "facts" if core_info(sql, db) is not None else "parser"


def _timed(read, texts) -> float:
    """Seconds to read every text once (best of 3)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for sql, db in texts:
            read(sql, db)
        best = min(best, time.perf_counter() - start)
    return best


def measure(name: str, statements: list[tuple[str, str]], *, policy: bool = False) -> dict:
    from dumpfilter import _core
    from dumpfilter.rules.statement_facts import core_info
    from dumpfilter.rules.statements import _statement_tables

    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for sql, db in statements:
        groups[_reader(sql, db)].append((sql, db))
    out: dict = {"statements": len(statements)}
    for reader, texts in sorted(groups.items()):
        sample = texts[:_SAMPLE]
        sample_bytes = sum(len(s) for s, _ in sample)
        row = {"statements": len(texts), "bytes": sum(len(s) for s, _ in texts)}
        if reader == "key":
            prod = _timed(lambda s, d: _core.statement_key(s.encode("utf-8", "surrogateescape")), sample)
        elif reader == "facts":
            prod = _timed(core_info, sample)
        else:
            prod = _timed(_statement_tables, sample)
        row["production_us_per_kb"] = round(prod / sample_bytes * 1e9, 1) if sample_bytes else None
        row["production_s_whole"] = round(prod * len(texts) / len(sample), 3)
        if policy:
            from dumpfilter.rules.policy_bound import _reach
            row["policy_bound_s"] = round(_timed(_reach, sample), 3)
        out[reader] = row
    print(f"{name}: {out}")
    return out


def big_trigger(statements: int = 50_000) -> str:
    body = "; ".join(f"UPDATE t.b{i % 7} SET c = c + 1 WHERE id = {i}" for i in range(statements))
    return f"CREATE TRIGGER t.trg AFTER INSERT ON t.a FOR EACH ROW BEGIN {body}; END"


def main() -> dict:
    from bench.bench_filter import mixed_sizes
    from bench.ddl_binlog import ddl_binlog
    from bench.mixed_binlog import mixed_binlog

    result: dict = {"diagnostic": "in process, one reader at a time (statement texts, not the walk)"}
    result["sysbench_mixed"] = measure("sysbench MIXED", _statements(mixed_binlog(mixed_sizes()[0]), 200_000))
    result["ddl_tenants"] = measure("DDL tenants", _statements(ddl_binlog(1000)))
    fixtures = next((p / "shared" / "fixtures" / "real_binlogs" for p in Path(__file__).resolve().parents
                     if (p / "shared" / "fixtures" / "real_binlogs").is_dir()), None)
    if fixtures is not None:
        texts = [t for p in sorted(fixtures.rglob("*")) if p.is_file() and p.suffix not in (".md", ".json", ".index",
                                                                                             ".txt")
                 for t in _statements(p)]
        result["real_fixtures"] = measure("real fixtures", texts)
    result["trigger_1mb"] = measure("1.2 MB trigger", [(big_trigger(), "t")], policy=True)
    write_result("readers", result)
    return result


if __name__ == "__main__":
    main()
