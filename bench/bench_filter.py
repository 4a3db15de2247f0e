"""Filter benchmark (`python -m bench filter`). Every figure is a ratio against a baseline timed in the
same process on the same input, never an absolute threshold:

(a) ROW, replicate-do-db over a >= DUMPFILTER_BENCH_MB (default 500) MB multi-schema binlog:
    `dumpfilter filter`'s loop (writing the filtered binlog) vs a minimal Python
    header + names + decision loop over the same file (target >= 0.5x), and vs
    `mariadb-binlog --database=X FILE > /dev/null` (target: at least as fast).
    mariadb-binlog does not verify CRCs by default, so the like-for-like figure is ours with
    --no-verify-checksums; both verifying (ours by default, its --verify-binlog-checksum) is
    reported too.
(b) 10 000 wild-do/wild-ignore rules vs 1 rule, same file slice (target >= 0.8x).
(c) STATEMENT format with table rules: statements per second through the whole filter
    (target >= 20 000/s), next to the same run with no rules.
(d) `dumpfilter filter` as a whole command (a process: interpreter start and imports included) vs
    the compiled header hop with every event's CRC32 checked, over the same file (issue #30 goal
    4, target >= 0.8x).
(e) MIXED (issue #43): a sysbench-like binlog a sandbox MariaDB writes with binlog_format=MIXED
    (bench/mixed_binlog.py), at each size of DUMPFILTER_MIXED_MB (default "250,500": issue #59
    asks for about 250 MB and over 500 MB; under 500 MB is a diagnostic), one schema of eight kept:
    `filter FILE -o` and `filter DIR --out` as commands vs `mariadb-binlog --database` (target
    >= 3x), run in turn in the same rounds.
(f) ROW `filter DIR --out OUTDIR` vs `filter FILE -o OUT` as commands over the same bytes
    (issue #43 goal 4: within 10%, ratio >= 0.9x).
Results: a table on stdout and bench/results/filter.json.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import DATA_DIR, BenchSettingError, row_binlog, target_mb, write_result
from dumpfilter.codec import BinlogReader
from dumpfilter.errors import DumpFilterError
from dumpfilter.workload import WorkloadSpec, generate
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import Settings
from dumpfilter.binlogs.sinks import FileSink
from dumpfilter._core import renumber
from dumpfilter.binlogs.filtering import filter_files
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.transaction_filter import TransactionFilter
from dumpfilter.rules.statement_facts import core_info
from dumpfilter.rules.statement_info import Kind
from dumpfilter import _core

HEADER = struct.Struct("<IBIIIH")
TABLE_MAP = 19


def parser_reads(sql: str, default: str) -> bool:
    """Whether sqlglot reads part of `sql` (neither the statement key nor the core's facts read it
    all), or the schema model may parse its text: a CREATE TABLE whose column list the core did not
    read (LIKE copies its source's). Issue #43's share, in `bench filter` and the tests
    (a measurement: no command asks it)."""
    raw = sql.encode("utf-8", "surrogateescape")
    if _core.statement_key(raw) is not None:
        return False
    facts = _core.statement_facts(raw)
    if facts is None or facts.read_text is not None or facts.refs_text is not None:
        return True
    info = core_info(sql, default)
    return info is None or (info.kind is Kind.CREATE_TABLE and info.columns is None and not info.temporary
                            and " LIKE " not in f" {sql.upper()} ".replace("(", " "))


def cached_binlog(name: str, spec: WorkloadSpec) -> Path:
    """Generate a workload once into bench/data/<name>/ (a DONE marker makes it reusable)."""
    directory = DATA_DIR / name
    done = directory / "DONE"
    if not done.exists():
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        started = time.perf_counter()
        paths = generate(spec, directory, "bench-bin")
        done.write_text(json.dumps({"files": [p.name for p in paths], "seconds": round(time.perf_counter() - started, 1)}))
    return sorted(directory.glob("bench-bin.0*"))[0]


def row_file(mb: int) -> Path:
    """A >= `mb` MB multi-schema ROW binlog: bench.common's shared file when it is already
    there, else one tiled from bench.common's 60 MB file (generating 500 MB event by event takes
    tens of minutes on a loaded machine; tiling takes seconds)."""
    if (DATA_DIR / f"row-mariadb-8s-{mb}mb" / "DONE").exists() or mb <= 60:
        return row_binlog(mb)
    return tiled_row_file(mb)


def tiled_row_file(mb: int, base_mb: int = 60) -> Path:
    """The base workload's transactions repeated until the file reaches `mb` MB: every copy's
    MariaDB GTIDs get new sequence numbers, and every event its real end offset as log_pos and
    a fresh CRC, so the result is a valid binlog (mariadb-binlog reads it)."""
    directory = DATA_DIR / f"filter-row-tiled-{mb}mb"
    path = directory / "bench-bin.000001"
    if (directory / "DONE").exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    data = row_binlog(base_mb).read_bytes()
    gtid_offsets, off = [], 4
    while off < len(data):
        if data[off + 4] == 162:  # MARIADB_GTID
            gtid_offsets.append(off)
        off += struct.unpack_from("<I", data, off + 9)[0]
    first = gtid_offsets[0]
    head, body = data[:first], data[first:]
    rel = [o - first for o in gtid_offsets]
    base_seq = struct.unpack_from("<Q", body, rel[-1] + 19)[0]
    out_pos = len(head)
    with open(path, "wb") as out:
        out.write(head)
        copy = 0
        while out_pos < mb * 1e6:
            chunk = bytearray(body)
            if copy:
                for at in rel:
                    seq = struct.unpack_from("<Q", chunk, at + 19)[0]
                    struct.pack_into("<Q", chunk, at + 19, seq + copy * base_seq)
            renumber(chunk, 0, len(chunk), out_pos, True)
            out.write(chunk)
            out_pos += len(chunk)
            copy += 1
    (directory / "bench-bin.index").write_text("./bench-bin.000001\n")
    (directory / "DONE").write_text(json.dumps({"base_mb": base_mb, "copies": copy}))
    return path


def statement_file() -> Path:
    spec = WorkloadSpec(seed=40, schemas=8, tables_per_schema=4, binlog_format="statement", flavor="mariadb",
                        transactions=40_000, cross_db_share=0.2, max_binlog_size=1 << 40)
    return cached_binlog("filter-statement-mariadb-40k", spec)


def engine(options: list[tuple[str, str]]) -> RuleEngine:
    return RuleEngine(StartupFilters.from_options(options).for_channel(""), Settings(flavor="mariadb"))


def baseline_loop(path: Path, decide) -> tuple[int, int]:
    """The minimal loop: hop from header to header, decode db/table of each Table_map and
    decide it (cached per name). No grouping, no writing, no CRC checks."""
    events = kept = 0
    decisions: dict[bytes, bool] = {}
    with open(path, "rb") as f:
        f.read(4)
        buf, off = b"", 0
        unpack = HEADER.unpack_from
        while chunk := f.read(4 << 20):
            buf, off = buf[off:] + chunk, 0
            end = len(buf)
            while off + 19 <= end:
                size = unpack(buf, off)[3]
                if off + size > end:
                    break
                if buf[off + 4] == TABLE_MAP:
                    at = off + 27
                    tbl = at + 2 + buf[at]
                    key = buf[at : tbl + 1 + buf[tbl]]
                    d = decisions.get(key)
                    if d is None:
                        db = buf[at + 1 : at + 1 + buf[at]].decode()
                        table = buf[tbl + 1 : tbl + 1 + buf[tbl]].decode()
                        d = decisions[key] = decide(db, table)
                    kept += d
                off += size
                events += 1
    return events, kept


def run_filter(path: Path, eng: RuleEngine, out: Path, *, verify: bool, empty: str = "keep"):
    return filter_files([path], TransactionFilter(eng, empty_transactions=empty), FileSink(out),
                        verify_checksums=verify)


def interleaved(fns: dict, rounds: int = 3) -> dict:
    """Best wall time (and last result) of each callable, run in turn round after round, so that
    a ratio compares runs made under the same machine load (other jobs share the machine)."""
    best = {name: (float("inf"), None) for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            started = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - started
            best[name] = (min(best[name][0], elapsed), result)
    return best


def bench_row(tmp: Path) -> dict:
    mb = target_mb()
    path = row_file(mb)
    size = path.stat().st_size
    do_db = [("replicate-do-db", "db3")]
    eng = engine(do_db)
    out = tmp / "row.out"
    tool = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")

    def tool_run(verify: bool):
        extra = ["--verify-binlog-checksum"] if verify else []
        with open(os.devnull, "wb") as null:
            subprocess.run([tool, "--no-defaults", *extra, "--database=db3", str(path)], stdout=null, check=True)

    runs = {
        "baseline": lambda: baseline_loop(path, lambda db, t: eng.table_kept(db, t)),
        "filter": lambda: run_filter(path, eng, out, verify=False),
        "filter_verify": lambda: run_filter(path, eng, out, verify=True),
    }
    if tool:
        runs["tool"] = lambda: tool_run(False)
        runs["tool_verify"] = lambda: tool_run(True)
    best = interleaved(runs)
    base_s, (events, _) = best["baseline"]
    ours_s, stats = best["filter"]
    ours_verify_s = best["filter_verify"][0]
    tool_s = best["tool"][0] if tool else None
    tool_verify_s = best["tool_verify"][0] if tool else None
    result = {
        "file_mb": round(size / 1e6, 1), "events": events, "baseline_s": round(base_s, 3),
        "filter_s": round(ours_s, 3), "filter_verify_crc_s": round(ours_verify_s, 3),
        "filter_mb_per_s": round(size / 1e6 / ours_s, 1),
        "vs_baseline": round(base_s / ours_s, 3), "vs_baseline_verify_crc": round(base_s / ours_verify_s, 3),
        "mariadb_binlog_s": round(tool_s, 3) if tool_s else None,
        "vs_mariadb_binlog": round(tool_s / ours_s, 3) if tool_s else None,
        "mariadb_binlog_verify_crc_s": round(tool_verify_s, 3) if tool_verify_s else None,
        "vs_mariadb_binlog_verify_crc": round(tool_verify_s / ours_verify_s, 3) if tool_verify_s else None,
        "output_mb": round(out.stat().st_size / 1e6, 1),
        "transactions": stats.transactions_in, "kept": stats.kept, "partial": stats.partial, "emptied": stats.emptied,
    }
    return result


def wild_rules(count: int) -> list[tuple[str, str]]:
    """`count - 1` wild-do patterns like the workload's names (`db<i>_%.t_<k>`, with `_` and `%`)
    that match none of its tables, then `db3.%`, which decides."""
    rules = [("replicate-wild-do-table", f"db{i}_%.t_{i % 97}") for i in range(count - 1)]
    return rules + [("replicate-wild-do-table", "db3.%")]


def bench_wild(tmp: Path) -> dict:
    """Steady state, as the issue puts it ("once warm"): engines are compiled before timing; each
    run still starts with cold decision caches (the file's FDE invalidates them), so every
    distinct table (DDL makes thousands) is decided against the whole rule list once."""
    path = row_file(target_mb())
    out = tmp / "wild.out"
    compile_started = time.perf_counter()
    many_engine = engine(wild_rules(10_000))
    compile_s = time.perf_counter() - compile_started
    one_engine = engine(wild_rules(1))
    best = interleaved({"one": lambda: run_filter(path, one_engine, out, verify=False),
                        "many": lambda: run_filter(path, many_engine, out, verify=False)})
    (one_s, one), (many_s, many) = best["one"], best["many"]
    assert (one.kept, one.partial, one.emptied) == (many.kept, many.partial, many.emptied)
    return {"one_rule_s": round(one_s, 3), "ten_thousand_rules_s": round(many_s, 3),
            "ratio": round(one_s / many_s, 3), "compile_10k_rules_s": round(compile_s, 3)}


def bench_statement(tmp: Path) -> dict:
    path = statement_file()
    out = tmp / "stmt.out"
    rules = [("replicate-do-table", "db1.t1"), ("replicate-ignore-table", "db2.t2"),
             ("replicate-wild-do-table", "db3.%"), ("replicate-wild-ignore-table", "db4.t_%")]
    best = interleaved({"none": lambda: run_filter(path, engine([]), out, verify=True),
                        "rules": lambda: run_filter(path, engine(rules), out, verify=True)}, rounds=4)
    (none_s, _), (rules_s, stats) = best["none"], best["rules"]
    with open(path, "rb") as f:  # the DML/DDL Query events (not BEGIN/COMMIT)
        statements = sum(1 for e in BinlogReader(f) if e.is_query and e.sql not in ("BEGIN", "COMMIT"))
    return {"statements": statements, "no_rules_s": round(none_s, 3), "table_rules_s": round(rules_s, 3),
            "statements_per_s": round(statements / rules_s), "no_rules_statements_per_s": round(statements / none_s),
            "kept": stats.kept, "partial": stats.partial, "emptied": stats.emptied}


def bench_command(tmp: Path, path: Path | None = None) -> dict:
    """(d) Issue #30 goal 4: `dumpfilter filter FILE -o OUT --replicate-do-db=db3` timed as a whole
    command (a process of its own: interpreter start, imports, the run, the output renamed into
    place) against the compiled header hop with every event's CRC32 checked (the core's walk, one
    CRC per event) over the same file, read into memory within the timing. Target >= 0.8x."""
    import sys

    from dumpfilter.codec.scanner import Scanner, type_mask

    path = path or row_file(target_mb())
    size = path.stat().st_size
    out = tmp / "command.out"
    cli = [sys.executable, "-m", "dumpfilter", "filter", str(path), "-o", str(out), "--replicate-do-db=db3",
           "--summary", "none"]

    def walk() -> int:
        data = path.read_bytes()  # the file read too, as any program over it must
        scanner = Scanner("bench", verify_checksums=True)
        scanner.core.batch_crc = False  # one event's CRC32 at a time, as a plain header hop would
        _, stop, error = scanner.walk(data, 4, 0, type_mask(()))
        assert error is None and stop == len(data)
        return scanner.core.events_walked

    root = Path(__file__).resolve().parents[1]
    # As installed (pip compiles every module at install): the checkout's bytecode brought up to
    # date first, else under PYTHONDONTWRITEBYTECODE each edited module is compiled again in
    # every timed run (`make bytecode` does the same).
    subprocess.run([sys.executable, "-m", "compileall", "-q", "dumpfilter", "cli"], check=True, cwd=root,
                   stdout=subprocess.DEVNULL)
    best = interleaved({"hop_crc": walk, "command": lambda: subprocess.run(cli, check=True, cwd=root)})
    hop_s, command_s = best["hop_crc"][0], best["command"][0]
    return {"file": str(path), "file_mb": round(size / 1e6, 1), "hop_crc_s": round(hop_s, 3),
            "command_s": round(command_s, 3), "ratio": round(hop_s / command_s, 3)}


def _commands(tmp: Path, path: Path, keep: str) -> dict:
    """`filter FILE -o` and `filter DIR --out` (DIR holding only `path`) as argument lists."""
    import sys

    directory = tmp / f"in-{path.stem}"
    if not directory.exists():
        directory.mkdir()
        os.symlink(path, directory / path.name)
    base = [sys.executable, "-m", "dumpfilter", "filter"]
    rules = [f"--replicate-do-db={keep}", "--summary", "none"]
    return {"file": [*base, str(path), "-o", str(tmp / "cmd.out"), *rules],
            "dir": [*base, str(directory), "--out", str(tmp / "cmd-out-dir"), *rules]}


def _run_command(argv: list[str]) -> None:
    root = Path(__file__).resolve().parents[1]
    out_dir = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    if out_dir is not None and out_dir.exists():
        shutil.rmtree(out_dir)
    subprocess.run(argv, check=True, cwd=root)


def mixed_sizes() -> list[int]:
    """The MIXED binlogs' sizes in MB (DUMPFILTER_MIXED_MB, comma-separated)."""
    text = os.environ.get("DUMPFILTER_MIXED_MB", "250,500")
    sizes = [mb.strip() for mb in text.split(",") if mb.strip()]
    if not sizes or not all(mb.isdigit() and int(mb) > 0 for mb in sizes):
        raise BenchSettingError(f"DUMPFILTER_MIXED_MB={text!r}: expected sizes in MB, comma-separated, each above 0")
    return [int(mb) for mb in sizes]


def bench_mixed(tmp: Path, fmt: str = "MIXED", mb: int | None = None) -> dict:
    """(e) Issue #43: the statement path on a real MariaDB MIXED binlog, as whole commands; (g) the
    same on the STATEMENT binlog of the same workload (`fmt`)."""
    from bench.mixed_binlog import mixed_binlog
    from dumpfilter.lab.sandbox.server import mariadb_available

    tool = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if not mariadb_available() or tool is None:
        return {"skipped": "needs mariadbd and mariadb-binlog"}
    path = mixed_binlog(mb or mixed_sizes()[0], fmt=fmt)
    size = path.stat().st_size
    argv = _commands(tmp, path, "sbtest1")

    def tool_run():
        with open(os.devnull, "wb") as null:
            subprocess.run([tool, "--no-defaults", "--database=sbtest1", str(path)], stdout=null, check=True)

    best = interleaved({"file": lambda: _run_command(argv["file"]), "dir": lambda: _run_command(argv["dir"]),
                        "tool": tool_run})
    file_s, dir_s, tool_s = best["file"][0], best["dir"][0], best["tool"][0]
    # Where the statements were decided: by key in the core, or by the Python parser (a diagnostic run).
    eng = engine([("replicate-do-db", "sbtest1")])
    stats = run_filter(path, eng, tmp / f"{fmt.lower()}.out", verify=True)
    # The statements no key covers: read by the core's facts (DDL, multi-table), else by the parser.
    statements = python = 0
    with open(path, "rb") as f:
        for e in BinlogReader(f):
            if e.is_query and e.sql not in ("BEGIN", "COMMIT"):
                statements += 1
                python += parser_reads(e.sql, e.db or "")
    return {"file_mb": round(size / 1e6, 1), "diagnostic": size < 500e6, "statements": statements,
            "by_key": stats.statements_by_key, "keys_decided": stats.statement_keys, "to_python": python,
            "python_share": round(python / statements, 5) if statements else None,
            "filter_o_s": round(file_s, 3), "filter_out_s": round(dir_s, 3), "mariadb_binlog_s": round(tool_s, 3),
            "o_vs_mariadb_binlog": round(tool_s / file_s, 2), "out_vs_mariadb_binlog": round(tool_s / dir_s, 2)}


def bench_out_dir(tmp: Path) -> dict:
    """(f) Issue #43 goal 4: `--out DIR` on the compiled path, against `-o FILE`, on ROW."""
    path = row_file(target_mb())
    argv = _commands(tmp, path, "db3")
    best = interleaved({"file": lambda: _run_command(argv["file"]), "dir": lambda: _run_command(argv["dir"])})
    file_s, dir_s = best["file"][0], best["dir"][0]
    return {"file_mb": round(path.stat().st_size / 1e6, 1), "filter_o_s": round(file_s, 3),
            "filter_out_s": round(dir_s, 3), "ratio": round(file_s / dir_s, 3)}


def verify_workload_keys() -> dict:
    """(h) Issue #43 goal 1 on `verify`'s built-in workloads (lab/verify/data: the sharp-edge script
    the primary runs, and the seed every server loads, which no binlog holds): of their statements
    (USE, BEGIN, COMMIT and SET aside), how many the Python parser reads, read as a
    statement-logged binlog holds them: neither the core's statement key (single-table DML) nor
    its statement facts (DDL, triggers, multi-table UPDATE and DELETE) read them, or the schema
    model may parse their text (`parser_reads`)."""
    from dumpfilter.lab.verify import builtin_paths
    from dumpfilter.lab.verify.against_replicas import split_statements

    _topology, workload, seed = builtin_paths()
    out = {}
    for name, path in (("sharp_edges", workload), ("seed", seed)):
        texts = [st.sql for st in split_statements(path.read_text())]
        texts = [t for t in texts if t.split() and t.split()[0].upper() not in ("USE", "BEGIN", "COMMIT", "SET")]
        python = [t for t in texts if parser_reads(t, "a")]
        out[name] = {"statements": len(texts), "to_python": len(python),
                     "python_share": round(len(python) / len(texts), 4) if texts else None,
                     "left_to_python": [t[:80] for t in python]}
    out["real_binlogs"] = _fixture_statements(parser_reads)
    return out


def _fixture_statements(parser_reads) -> dict:
    """The same count over the 15 real servers' binlogs in ../shared/fixtures/real_binlogs
    (MySQL 5.6-9.x, MariaDB 10.x-11.x), where they are beside the checkout."""
    root = next((p / "shared" / "fixtures" / "real_binlogs" for p in Path(__file__).resolve().parents
                 if (p / "shared" / "fixtures" / "real_binlogs").is_dir()), None)
    if root is None:
        return {"skipped": "no ../shared/fixtures/real_binlogs"}
    statements, python = 0, []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix not in (".md", ".json", ".index",
                                                                                         ".txt")):
        with open(path, "rb") as f:
            try:
                for e in BinlogReader(f):
                    if e.is_query and e.sql is not None and e.sql not in ("BEGIN", "COMMIT"):
                        statements += 1
                        if parser_reads(e.sql, e.db or ""):
                            python.append(e.sql[:80])
            except DumpFilterError:
                continue  # (a fixture cut short on purpose: its statements up to there count)
    return {"statements": statements, "to_python": len(python),
            "python_share": round(len(python) / statements, 4) if statements else None, "left_to_python": python}


def main() -> dict:
    mixed_sizes()  # (a setting that cannot be used: said before any binlog is written or read)
    with tempfile.TemporaryDirectory(prefix="bench-filter-") as tmp:
        tmp = Path(tmp)
        results = {"row_do_db": bench_row(tmp), "wild_rules": bench_wild(tmp), "statement": bench_statement(tmp),
                   "command_vs_hop_crc": bench_command(tmp), "mixed": bench_mixed(tmp),
                   **{f"mixed_{mb}": bench_mixed(tmp, mb=mb) for mb in mixed_sizes()[1:]}, "out_dir": bench_out_dir(tmp),
                   "statement_format": bench_mixed(tmp, "STATEMENT"), "verify_workloads": verify_workload_keys()}
    r, w, s, c = results["row_do_db"], results["wild_rules"], results["statement"], results["command_vs_hop_crc"]
    fx = results["verify_workloads"]["real_binlogs"]
    m, o = results["mixed"], results["out_dir"]

    def by_statements(label: str, m: dict) -> tuple[str, str, str, str]:
        return (label, "skipped" if "skipped" in m else
                f"-o {m['o_vs_mariadb_binlog']:.2f}x, --out {m['out_vs_mariadb_binlog']:.2f}x", ">= 3x",
                m.get("skipped") or f"{m['file_mb']} MB{' (diagnostic: < 500 MB)' if m['diagnostic'] else ''}: "
                f"-o {m['filter_o_s']} s, --out {m['filter_out_s']} s, mariadb-binlog {m['mariadb_binlog_s']} s; "
                f"{m['python_share']:.2%} of {m['statements']} statements to Python")

    rows = [
        ("(a) ROW do-db vs minimal loop", f"{r['vs_baseline']:.2f}x (CRC verified: {r['vs_baseline_verify_crc']:.2f}x)",
         ">= 0.5x", f"{r['file_mb']} MB, {r['filter_mb_per_s']} MB/s"),
        ("(a) ROW do-db vs mariadb-binlog --database", "n/a" if r["vs_mariadb_binlog"] is None else
         f"{r['vs_mariadb_binlog']:.2f}x (both CRC verified: {r['vs_mariadb_binlog_verify_crc']:.2f}x)", ">= 1.0x",
         f"mariadb-binlog {r['mariadb_binlog_s']} s, dumpfilter {r['filter_s']} s"),
        ("(b) 10 000 wild rules vs 1", f"{w['ratio']:.2f}x", ">= 0.8x", f"{w['ten_thousand_rules_s']} s vs {w['one_rule_s']} s"),
        ("(c) STATEMENT + table rules", f"{s['statements_per_s']:,}/s", ">= 20,000/s",
         f"{s['statements']} statements; no rules {s['no_rules_statements_per_s']:,}/s"),
        ("(d) `dumpfilter filter` command vs hop + CRC32", f"{c['ratio']:.2f}x", ">= 0.8x",
         f"{c['file_mb']} MB: command {c['command_s']} s, compiled hop with per-event CRC32 {c['hop_crc_s']} s"),
        by_statements("(e) MIXED do-db vs mariadb-binlog --database", m),
        *[by_statements("(e) MIXED do-db vs mariadb-binlog --database", results[f"mixed_{mb}"])
          for mb in mixed_sizes()[1:]],
        ("(f) ROW --out DIR vs -o FILE", f"{o['ratio']:.2f}x", ">= 0.9x",
         f"{o['file_mb']} MB: -o {o['filter_o_s']} s, --out {o['filter_out_s']} s"),
        by_statements("(g) STATEMENT do-db vs mariadb-binlog --database", results["statement_format"]),
        *[(f"(h) verify's {name} statements to Python", f"{v['python_share']:.1%}", "<= 1%",
           f"{v['to_python']} of {v['statements']} (DDL, triggers and multi-table statements read by the "
           "core's statement facts)" + (" (the seed is loaded on every server: no binlog holds it)"
                                        if name == "seed" else ""))
          for name, v in results["verify_workloads"].items() if name in ("sharp_edges", "seed")],
        ("(h) real servers' binlogs (fixtures) statements to Python",
         "skipped" if "skipped" in fx else f"{fx['python_share']:.1%}", "<= 1%",
         fx.get("skipped") or f"{fx['to_python']} of {fx['statements']} Query statements (BEGIN/COMMIT aside)"),
    ]
    width = max(len(a) for a, *_ in rows)
    print(f"{'benchmark':<{width}}  {'result':<34}  {'target':<12}  detail")
    for name, value, target, detail in rows:
        print(f"{name:<{width}}  {value:<34}  {target:<12}  {detail}")
    print(f"written {write_result('filter', results)}")
    return results


if __name__ == "__main__":
    main()
