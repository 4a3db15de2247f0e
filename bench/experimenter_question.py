"""A new user's question answered end to end (issue #60's closing note): which replicate-* rule set
keeps crm (or drops logs) for the fewest bytes, without silently losing writes? A real MariaDB
primary in MIXED format (lab.sandbox) runs sysbench's `oltp_write_only` on shop, crm, analytics and
logs (bench.mixed_binlog's clients) and, beside it, the statements real applications write
(tests/spark_jobs/test_experiment_statement_tables.py's workload): `USE logs; INSERT INTO ev ...
UUID()` (row-logged under MIXED), `USE logs; UPDATE crm.sbtestN ...` (another database's table),
`USE analytics; UPDATE ... RAND()`, and the same oltp transactions under `USE shop` etc. The binlog
series (rotated every 64 MB) is written once, cached under bench/data/ as mixed-question-MBmb.
Then the real CLI, `dumpfilter experiment --candidates FILE`, ranks the candidate rule sets; this
prints the commands, the ranked candidates table (a candidate that silently diverges shows
"diverges: N writes" and ranks after every one that does not) and the bytes by schema.table (top
10 of bandwidth_by_table.csv), and writes bench/results/experimenter_question.json.

    .venv/bin/python -m bench.experimenter_question [MB]     (default DUMPFILTER_QUESTION_MB, else 100)
"""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.common import DATA_DIR, RESULTS_DIR, env_int, write_result
from bench.mixed_binlog import _client as sysbench_client

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the workload's statements come from the tests' helper
    sys.path.insert(0, str(ROOT))

from tests.spark_jobs.test_experiment_statement_tables import DBS, _workload  # noqa: E402

# A candidate: (name, rules). Each "keep crm" or "drop logs" question in its database form (which
# rpl_filter.cc decides by the default database for a statement) and its table form.
CANDIDATES = (
    ("crm-db", ["replicate-do-db=crm"]),
    ("crm-wild", ["replicate-wild-do-table=crm.%"]),
    ("shop+crm-db", ["replicate-do-db=shop", "replicate-do-db=crm"]),
    ("shop+crm-wild", ["replicate-wild-do-table=shop.%", "replicate-wild-do-table=crm.%"]),
    ("no-logs-db", ["replicate-ignore-db=logs"]),
    ("no-logs-wild", ["replicate-wild-ignore-table=logs.%"]),
)
TOPOLOGY = '[[slaves]]\nname = "all"\nserver_id = 2\nrules = []\n'  # the binlog's own bytes by table
BYTES_PER_TRANSACTION = 830  # MIXED, measured: GTID, BEGIN, four Queries, XID (mixed_binlog: 820)
APP_SHARE = 4  # one transaction in 4 comes with the application's shapes (30% of them add a statement)
BATCH = 64  # statements per round trip of an application client
TABLES = 4  # sbtest1..4 in each database (the application's statements write sbtest1..2)


def target_mb() -> int:
    return env_int("DUMPFILTER_QUESTION_MB", 100)


def _units(statements: list[str]) -> list[list[str]]:
    """The workload's statements cut where each unit begins (every unit opens with its `USE db`)."""
    units: list[list[str]] = []
    for stmt in statements:
        if stmt.startswith("USE ") or not units:
            units.append([])
        units[-1].append(stmt)
    return units


def _app_client(port: int, units: list[list[str]]) -> None:
    import pymysql
    from pymysql.constants import CLIENT

    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", autocommit=True,
                           client_flag=CLIENT.MULTI_STATEMENTS)
    statements = [s for unit in units for s in unit]
    with conn, conn.cursor() as cur:
        for at in range(0, len(statements), BATCH):
            cur.execute("; ".join(statements[at:at + BATCH]))
            while cur.nextset():
                pass


def _prepare(rows: int) -> list[str]:
    """The workload's schemas (shop, crm, analytics, logs; sbtest1..2 of `rows` rows; logs.ev), each
    database's tables made and filled under `USE db`, as `sysbench --mysql-db=db prepare` does (the
    CREATE DATABASEs from a session without one)."""
    out: list[str] = []
    for stmt in _workload(0, rows):
        out.append(stmt)
        if stmt.startswith("CREATE DATABASE "):
            out.append("USE " + stmt.removeprefix("CREATE DATABASE "))
        elif ".sbtest2 " in stmt:  # sbtest3.. made and filled as sbtest2 is
            out += [stmt.replace(".sbtest2 ", f".sbtest{t} ").replace("KEY k_2 ", f"KEY k_{t} ")
                    for t in range(3, TABLES + 1)]
    return out


def write_binlogs(directory: Path, mb: float, *, rows: int = 2000) -> dict:
    """Run the workload on a fresh MariaDB primary (binlog_format=MIXED) until about `mb` MB of
    binlog, and copy its closed binlog files into `directory`: {files, bytes, seconds, ...}. First
    sysbench's clients, one per database (their transactions never wait on one another), then the
    application's statements on one connection (beside the sysbench clients they deadlock)."""
    from dumpfilter.lab.sandbox.server import MariaDBServer

    directory.mkdir(parents=True, exist_ok=True)
    transactions = int(mb * 1e6 / BYTES_PER_TRANSACTION) + 1
    app = max(1, transactions // APP_SHARE)
    per_thread = (transactions - app) // len(DBS) + 1
    units = _units(_workload(app, rows)[len(_workload(0, rows)):])
    started = time.perf_counter()
    with MariaDBServer("question", server_id=1, binlog_format="MIXED",
                       options=["--max-binlog-size=67108864", "--sync-binlog=0",
                                "--innodb-flush-log-at-trx-commit=0"]) as server:
        server.execute(_prepare(rows))
        workers = [threading.Thread(target=sysbench_client, args=(server.port, db, TABLES, rows, per_thread, k))
                   for k, db in enumerate(DBS)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        _app_client(server.port, units)
        server.flush_logs()
        files = server.binlog_files()[:-1]  # the last one is the empty file FLUSH opened
        for path in files:
            shutil.copy(path, directory / path.name)
    seconds = time.perf_counter() - started
    shapes = [u for u in units if u[1] != "BEGIN"]  # the statements beside the oltp transactions
    return {"files": [p.name for p in files], "bytes": sum((directory / p.name).stat().st_size for p in files),
            "seconds": round(seconds, 1), "rows": rows,
            "sysbench_transactions": per_thread * len(DBS), "application_transactions": app,
            "cross_database_updates": sum(1 for u in shapes if u[0] == "USE logs" and u[1].startswith("UPDATE crm.")),
            "uuid_inserts": sum(1 for u in shapes if "UUID()" in u[-1]),
            "rand_updates": sum(1 for u in shapes if "RAND()" in u[-1])}


def question_binlogs(mb: int | None = None) -> tuple[Path, dict]:
    """The cached binlog series of about `mb` MB (written once): (its directory, how it was made)."""
    mb = target_mb() if mb is None else mb
    directory = DATA_DIR / f"mixed-question-{mb}mb"
    done = directory / "DONE"
    if done.exists():
        return directory, json.loads(done.read_text())
    if directory.exists():
        shutil.rmtree(directory)  # an interrupted run's leftovers
    made = write_binlogs(directory, mb)
    done.write_text(json.dumps(made))
    return directory, made


def candidates_toml() -> str:
    return "".join(f'[[slaves]]\nname = "{name}"\nserver_id = {10 + n}\nrules = {json.dumps(rules)}\n\n'
                   for n, (name, rules) in enumerate(CANDIDATES))


def experiment_command(binlogs: Path, topology: Path, candidates: Path, out: Path) -> list[str]:
    return ["dumpfilter", "experiment", "--binlogs", str(binlogs), "--topology", str(topology),
            "--candidates", str(candidates), "--out", str(out), "--no-spark", "--no-charts",
            "--json", str(out / "experiment.json")]


def ask(binlogs: Path, work: Path) -> dict:
    """Write the topology and the candidates under `work`, run `dumpfilter experiment --candidates`
    as a process of its own (its own output printed as it comes), and read its answer back."""
    work.mkdir(parents=True, exist_ok=True)
    topology, candidates, out = work / "topology.toml", work / "candidates.toml", work / "experiment"
    topology.write_text(TOPOLOGY)
    candidates.write_text(candidates_toml())
    command = experiment_command(binlogs, topology, candidates, out)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dumpfilter", *command[1:]], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} exited {proc.returncode}: {proc.stderr.strip()}")
    with open(out / "bandwidth_by_table.csv", newline="") as f:
        by_table = [{k: int(v) if k.startswith("bytes") else v for k, v in row.items()} for row in csv.DictReader(f)]
    report = json.loads((out / "experiment.json").read_text())
    return {"command": command, "stdout": proc.stdout, "seconds": round(seconds, 1), "candidates": report["candidates"],
            "by_table": by_table, "out": str(out)}


def ranked_lines(ranking: list[dict]) -> list[str]:
    """The ranked candidates, as the experimenter reads them: lint's verdict with the divergence."""
    width = max(len(r["candidate"]) for r in ranking)
    lines = [f"{'rank':>4}  {'candidate':<{width}}  {'rules':<62} {'MB sent':>8} {'saved':>6}  lint"]
    for r in ranking:
        lines.append(f"{r['rank']:>4}  {r['candidate']:<{width}}  {r['rules']:<62} {r['bytes_sent'] / 1e6:>8.2f} "
                     f"{r['saving_pct']:>5.1f}%  {r['lint']}")
    return lines


def top_tables(by_table: list[dict], slave: str = "all", n: int = 10) -> tuple[list[dict], dict]:
    """(the `n` tables of the most bytes, the framing and control row) for `slave`, each with its
    share of the binlog."""
    from dumpfilter.spark_jobs.bandwidth_experiment import REST

    mine = [r for r in by_table if r["slave"] == slave]
    total = sum(r["bytes_all"] for r in mine)
    rest = next(r for r in mine if r["table"] == REST)
    tables = sorted((r for r in mine if r["table"] != REST), key=lambda r: (-r["bytes_all"], r["table"]))[:n]
    share = lambda r: {**r, "share_pct": round(100 * r["bytes_all"] / total, 2)}  # noqa: E731
    return [share(r) for r in tables], share(rest)


def table_lines(top: list[dict], rest: dict) -> list[str]:
    lines = [f"{'table':<28} {'bytes':>11} {'MB':>7} {'share':>7} {'payload MB':>11} {'envelope MB':>12}"]
    for r in [*top, rest]:
        name = "(framing, control)" if r is rest else r["table"]
        lines.append(f"{name:<28} {r['bytes_all']:>11} {r['bytes_all'] / 1e6:>7.2f} {r['share_pct']:>6.2f}% "
                     f"{r['bytes_payload'] / 1e6:>11.2f} {r['bytes_envelope'] / 1e6:>12.2f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.experimenter_question [MB]`; `python -m bench` calls it with no arguments."""
    mb = int(argv[0]) if argv else target_mb()
    print(f"$ .venv/bin/python -m bench.experimenter_question {mb}    # the binlog is written once, then cached")
    binlogs, made = question_binlogs(mb)
    print(f"binlogs: {binlogs} ({len(made['files'])} files, {made['bytes'] / 1e6:.1f} MB, MIXED, written by MariaDB in "
          f"{made['seconds']:.0f} s: {made['sysbench_transactions']} sysbench transactions + "
          f"{made['application_transactions']} with {made['cross_database_updates']} `USE logs; UPDATE crm.sbtestN`, "
          f"{made['uuid_inserts']} UUID() inserts, {made['rand_updates']} RAND() updates)")
    work = RESULTS_DIR / "experimenter_question"
    answer = ask(binlogs, work)
    print(f"\n$ cat {work / 'topology.toml'}\n{TOPOLOGY.rstrip()}")
    print(f"$ cat {work / 'candidates.toml'}\n{candidates_toml().rstrip()}")
    print("$ " + shlex.join(answer["command"]) + f"    # {answer['seconds']:.1f} s")
    print(answer["stdout"].rstrip())
    ranked = ranked_lines(answer["candidates"])
    top, rest = top_tables(answer["by_table"])
    print("\nRanked candidates (experiment --json's `candidates`):")
    print("\n".join(ranked))
    print("\nBytes by schema.table (bandwidth_by_table.csv, slave `all`: the binlog's bytes), top 10, and the row "
          "of framing and control events:")
    print("\n".join(table_lines(top, rest)))
    path = write_result("experimenter_question", {
        "binlog": {**made, "directory": str(binlogs), "mb": round(made["bytes"] / 1e6, 1)},
        "commands": [f"python -m bench.experimenter_question {mb}", shlex.join(answer["command"])],
        "candidates_toml": candidates_toml(), "experiment_seconds": answer["seconds"],
        "candidates": answer["candidates"], "ranked_table": ranked,
        "by_table_top10": top, "by_table_rest": rest, "by_table_text": table_lines(top, rest)})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
