"""Soak (`python -m bench soak`, issue #32 part 4): `dumpfilter master serve --source` left running as
a binlog server. A sandbox MariaDB primary takes a live write load and rotates its binlog every
DUMPFILTER_SOAK_BINLOG_MB; the master (its own process) replicates it into a local series with
retention on (--expire-logs-seconds, --max-series-bytes) and serves DUMPFILTER_SOAK_SLAVES `slave
run` processes (bench_load's eight rule shapes: do-db, wild-do-table, ignore-db, do-table,
wild-ignore-table, none, rewrite-db, two do-dbs; started one after another over the first quarter
of the run) and one real MariaDB replica (ignore-db + wild-ignore-table, given by --replicas) on
--mysql-listen.

It samples the master's RSS (and its anonymous and file-backed parts), the series' size on disk and
each slave's bytes behind the series' end (p50/p99 over every sample since the slave started, and
over those after it first came within 64 KB of the end), and gives four verdicts, exiting non-zero
when one fails:
  rss flat        over the second half of the run (every slave streaming by then), the RSS
                  samples' Theil-Sen slope (the median of the slopes between every two samples:
                  a burst of a few samples, a segment read or a batch, moves it little, where it
                  tilts a least-squares line) times the half's length is at most
                  max(8 MB, 5% of the half's median RSS); the least-squares slope, the RSS per
                  minute (min / median / max) and the load average are reported beside it;
  series bounded  the series never held more than --max-series-bytes (and retention purged);
  slaves          after the load stops and every slave caught up, each relay log holds exactly the
                  offline filter's answer (bench_load.filtered_units) for its rules over the
                  primary's binlog from the file the slave started in; a difference is named;
  replica         the real replica's tables equal (row checksums, lab.sandbox.snapshot) the
                  primary's tables its rules keep.

The load is sysbench oltp_write_only when installed (`make bench` installs it), else bench_load's
pymysql writer. Settings (environment): DUMPFILTER_SOAK_SECONDS (600), _SLAVES (32), _RATE
(transactions/s per database, 20), _DBS (4), _SAMPLE (seconds, 5), _BINLOG_MB (2), _EXPIRE
(--expire-logs-seconds, 30), _CAP_MB (--max-series-bytes in MB, 24); DUMPFILTER_LOAD_KEEP keeps
the work directory.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.bench_load import (Offsets, SlaveProc, SysbenchLoad, WriterLoad, filtered_units, kill_all, percentile,
                              proc_cpu_rss, relay_units, rule_sets, start_slave, stop)
from bench.common import env_float, env_int, serve_master, write_result
from dumpfilter.lab.sandbox import MariaDBServer, diff_snapshots, replica_status, snapshot
from dumpfilter.lab.sandbox.snapshot import Snapshot
from dumpfilter.master.upstream.binlog_mirror import BinlogMirror
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import RuleSet, Settings

REPLICA_ID = 900
CAUGHT_UP_BYTES = 64 << 10  # a slave this close to the series' end has read its backlog


@dataclass(frozen=True)
class Soak:
    seconds: float = 600
    slaves: int = 32
    rate: float = 20
    dbs: int = 4
    sample: float = 5
    binlog_mb: float = 2
    expire: float = 30
    cap_mb: float = 24
    stagger: float = 0.25  # the slaves start one after another over this part of the run (the
    # second half, where the RSS slope is fitted, then has every slave streaming)

    @classmethod
    def from_env(cls) -> Soak:
        defaults = cls()
        whole = ("slaves", "dbs")  # (the rest: seconds, rates, sizes)
        return cls(**{name: (env_int if name in whole else env_float)(f"DUMPFILTER_SOAK_{name.upper()}", getattr(defaults, name))
                      for name in ("seconds", "slaves", "rate", "dbs", "sample", "binlog_mb", "expire", "cap_mb")})

    @property
    def cap(self) -> int:
        return int(self.cap_mb * 1e6)


def replica_rules(dbs: int) -> tuple[list[str], RuleSet]:
    """The real replica's rules: the topology's lines and the same as a RuleSet."""
    return ([f"replicate-ignore-db=sb{dbs}", "replicate-wild-ignore-table=%.sbtest4"],
            RuleSet(ignore_db=(f"sb{dbs}",), wild_ignore_table=("%.sbtest4",)))


def rss_parts(pid: int) -> tuple[float, float]:
    """(anonymous, file-backed) resident MB of a process: the series files the master maps count in
    the second, its heap in the first."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if line.startswith("Rss"))
    return int(fields["RssAnon"].split()[0]) / 1e3, int(fields["RssFile"].split()[0]) / 1e3


def rss_slope(samples: list[tuple[float, float]]) -> float:
    """MB per minute of the least-squares line through the second half of (seconds, RSS MB)."""
    half = samples[len(samples) // 2:]
    if len(half) < 2:
        return 0.0
    return statistics.linear_regression([t for t, _ in half], [r for _, r in half]).slope * 60


def theil_sen(points: list[tuple[float, float]]) -> float:
    """The median of the slopes between every two points of different times (per second)."""
    slopes = [(b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(points) for b in points[i + 1:] if b[0] != a[0]]
    return statistics.median(slopes) if slopes else 0.0


FLAT_MIN_MB, FLAT_SHARE = 8.0, 0.05  # the rss verdict's bound: max(8 MB, 5% of the RSS)


def rss_verdict(samples: list[tuple[float, float]]) -> dict:
    """The rss-flat verdict over the second half of (seconds, RSS MB) samples (see the module's
    docstring): its robust and least-squares slopes (MB/min), the rise the robust one gives over
    the half, the bound, and whether the rise stays within it."""
    half = samples[len(samples) // 2:]
    span = half[-1][0] - half[0][0] if len(half) > 1 else 0.0
    slope = theil_sen(half) * 60
    rise = slope * span / 60
    bound = max(FLAT_MIN_MB, FLAT_SHARE * statistics.median(r for _, r in half)) if half else FLAT_MIN_MB
    return {"from_s": half[0][0] if half else 0.0, "span_s": round(span, 1),
            "slope_mb_per_min": round(slope, 2), "least_squares_mb_per_min": round(rss_slope(samples), 2),
            "rise_mb": round(rise, 1), "bound_mb": round(bound, 1), "flat": rise <= bound}


def rss_by_minute(samples: list[tuple[float, float]]) -> list[dict]:
    """RSS over time: per minute of the run, the samples' min, median and max (MB)."""
    minutes: dict[int, list[float]] = {}
    for t, rss in samples:
        minutes.setdefault(int(t // 60), []).append(rss)
    return [{"minute": m, "min": min(v), "median": round(statistics.median(v), 1), "max": max(v)}
            for m, v in sorted(minutes.items())]


def where(unit: tuple[bytes, ...], file: str | None) -> str:
    """file:end position of a transaction (its last event's log_pos)."""
    return f"{file or '(not in the binlog)'}:{int.from_bytes(unit[-1][13:17], 'little')}"


def compare_relay(got: list[tuple[bytes, ...]], by_file: list[tuple[str, tuple[bytes, ...]]],
                  order: dict[str, int], start_file: str) -> tuple[str, str | None]:
    """(the file the slave's relay log starts in, None when it holds exactly the filter's answer
    from the start of that file on, else the first difference)."""
    file_of = {unit: name for name, unit in by_file}
    first = file_of.get(got[0], start_file) if got else start_file
    want = [unit for name, unit in by_file if order[name] >= order[first]]
    if got == want:
        return first, None
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return first, (f"transaction {i}: the relay log has {where(a, file_of.get(a))} where the filter "
                           f"gives {where(b, file_of[b])}")
    if len(got) > len(want):
        return first, f"{len(got) - len(want)} transactions past the filter's answer, from {where(got[len(want)], file_of.get(got[len(want)]))}"
    return first, f"{len(want) - len(got)} transactions missing, from {where(want[len(got)], file_of[want[len(got)]])}"


def replica_differences(primary: MariaDBServer, replica: MariaDBServer, dbs: list[str], rules: RuleSet,
                        timeout: float = 180) -> list[str]:
    """The replica's tables against the primary's tables its rules keep (row checksums); [] when
    equal. Schemas are left out: an ignore-db replica still runs CREATE DATABASE issued with no
    default database (ignore-db judges statements by the default database, rpl_filter.cc)."""
    engine = RuleEngine(rules, Settings(flavor="mariadb"))
    whole = snapshot(primary, schemas=dbs)
    deadline = time.monotonic() + timeout
    while True:
        status = replica_status(replica)
        if status.get("Last_SQL_Errno") or status.get("Last_IO_Errno"):
            return [f"replica stopped: SQL {status.get('Last_SQL_Error')!r} IO {status.get('Last_IO_Error')!r}"]
        got = snapshot(replica, schemas=dbs)
        kept = Snapshot(label=primary.name, schemas=got.schemas,
                        tables={key: t for key, t in whole.tables.items() if engine.table_kept(*key)})
        differences = diff_snapshots(kept, got)
        if not differences or time.monotonic() > deadline:
            return differences
        time.sleep(1)


def point_replica(replica: MariaDBServer, port: int, start_file: str) -> None:
    replica.execute([f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='repl', "
                     f"MASTER_PASSWORD='x', MASTER_LOG_FILE='{start_file}', MASTER_LOG_POS=4, MASTER_USE_GTID=no, "
                     "MASTER_CONNECT_RETRY=1", "START SLAVE"])


def run(soak: Soak) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="dumpfilter-soak-"))
    series = workdir / "series"
    series.mkdir()
    dbs = [f"sb{i}" for i in range(1, soak.dbs + 1)]
    shapes = rule_sets(soak.dbs)
    slaves = [SlaveProc(100 + i, *shapes[i % len(shapes)], workdir / f"relay-{i}") for i in range(soak.slaves)]
    topology_lines, r_rules = replica_rules(soak.dbs)
    topology = workdir / "replicas.toml"
    quoted = ", ".join(f'"{line}"' for line in topology_lines)
    topology.write_text(f'[[slaves]]\nname = "soak-replica"\nserver_id = {REPLICA_ID}\nflavor = "mariadb"\n'
                        f"rules = [{quoted}]\n")
    primary = MariaDBServer("soak-primary", server_id=1,
                            options=[f"--max-binlog-size={int(soak.binlog_mb * (1 << 20))}", "--max-connections=100"])
    replica = MariaDBServer("soak-replica", server_id=REPLICA_ID, log_bin=False)
    master = None
    try:
        primary.start()
        replica.start()
        primary.flush_logs()
        start_file = primary.master_position()[0]
        url = f"mysql://{primary.repl_user}:{primary.repl_password}@127.0.0.1:{primary.port}"
        master, address, mysql_port = serve_master(
            series, "--source", url, "--source-file", start_file, "--replicas", str(topology),
            "--expire-logs-seconds", f"{soak.expire:g}", "--max-series-bytes", str(soak.cap), log=workdir / "master.log")
        point_replica(replica, mysql_port, start_file)
        for db in dbs:
            primary.execute(f"CREATE DATABASE {db}")
        load = (SysbenchLoad if shutil.which("sysbench") else WriterLoad)(primary, dbs, soak.rate, soak.seconds, workdir)
        load.prepare()
        mirror, offset = BinlogMirror(series), Offsets(primary)
        started = time.monotonic()
        load.start()
        starts = {s.server_id: started + soak.stagger * soak.seconds * i / max(1, soak.slaves) for i, s in enumerate(slaves)}
        exited: dict[int, str] = {}       # server_id -> how a slave that stopped by itself ended
        first_file: dict[int, str] = {}   # the series' first file when each slave started
        behind_all: dict[int, list[int]] = {s.server_id: [] for s in slaves}  # bytes behind the series' end
        steady: dict[int, list[int]] = {s.server_id: [] for s in slaves}      # the same, once it caught up
        samples, seen = [], set()  # every file the series held
        cpu0, _ = proc_cpu_rss(master.pid)
        while True:
            now = time.monotonic()
            for slave in slaves:
                if slave.proc is None and now >= starts[slave.server_id]:
                    first_file[slave.server_id] = (mirror.files() or [start_file])[0]
                    start_slave(slave, address, workdir)
            files = mirror.files()
            seen |= set(files)
            end = offset(files[-1], (series / files[-1]).stat().st_size) if files else 0
            cpu, rss = proc_cpu_rss(master.pid)
            anon, mapped = rss_parts(master.pid)
            behind = []
            for slave in (s for s in slaves if s.proc is not None):
                if slave.proc.poll() is not None:  # a failed verdict, named at the end; the soak goes on
                    if slave.server_id not in exited:
                        last = slave.log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
                        exited[slave.server_id] = f"exited with {slave.proc.returncode} at t={now - started:.0f}s: {last[0]}"
                        print(f"  slave {slave.server_id} {exited[slave.server_id]}", flush=True)
                    continue
                pos = slave.position()
                lag = max(0, end - offset(*(pos or (first_file[slave.server_id], 0))))
                behind.append(lag)
                behind_all[slave.server_id].append(lag)
                if steady[slave.server_id] or lag <= CAUGHT_UP_BYTES:
                    steady[slave.server_id].append(lag)
            series_bytes = mirror.series_bytes()
            samples.append({"t": round(now - started, 1), "master_rss_mb": round(rss, 1),
                            "master_rss_anon_mb": round(anon, 1), "master_rss_file_mb": round(mapped, 1),
                            "master_cpu_s": round(cpu - cpu0, 2), "series_mb": round(series_bytes / 1e6, 2),
                            "series_files": len(files), "primary_mb": round(offset(*primary.master_position()) / 1e6, 2),
                            "slaves_running": len(behind), "max_behind_bytes": max(behind, default=0),
                            "loadavg_1m": round(os.getloadavg()[0], 1)})
            print(f"  t={now - started:6.0f}s primary={samples[-1]['primary_mb']:7.2f} MB series={series_bytes / 1e6:6.2f} MB"
                  f" in {len(files):2} files  master rss={rss:6.1f} MB (anon {anon:5.1f}) cpu={cpu - cpu0:6.1f}s  slaves={len(behind):2}"
                  f" max behind={max(behind, default=0):>9} B  load={os.getloadavg()[0]:.1f}", flush=True)
            if now >= started + soak.seconds:
                break
            time.sleep(max(0.0, min(soak.sample, started + soak.seconds - time.monotonic())))
        load.wait()
        final = offset(*primary.master_position())
        drain_started = time.monotonic()
        while [s for s in slaves if s.server_id not in exited and (offset(*s.position()) if s.position() else 0) < final]:
            if time.monotonic() - drain_started > 300:
                raise RuntimeError("slaves did not catch up within 300 s of the load's end")
            time.sleep(0.5)
        drain = time.monotonic() - drain_started
        _, rss_end = proc_cpu_rss(master.pid)
        differences = replica_differences(primary, replica, dbs, r_rules)
        for slave in slaves:
            stop(slave.proc)  # SIGTERM, taken as Ctrl-C: a bench run with `&` has SIGINT ignored
        stop(master)
        paths = primary.binlog_files()
        purged = seen - set(mirror.files())
        order = {p.name: i for i, p in enumerate(paths)}
        answers: dict[RuleSet, list] = {}
        per_slave = []
        for slave in slaves:
            if slave.rules not in answers:
                answers[slave.rules] = filtered_units(paths, slave.rules)
            got = relay_units(slave.relay_dir)
            began, difference = compare_relay(got, answers[slave.rules], order, first_file[slave.server_id])
            difference = exited.get(slave.server_id, difference)
            lags, once = behind_all[slave.server_id], steady[slave.server_id]
            per_slave.append({"server_id": slave.server_id, "rules": " ".join(slave.args) or "(none)",
                              "series_began": first_file[slave.server_id], "relay_began": began,
                              "transactions": len(got), "behind_p50_bytes": percentile(lags, 0.5),
                              "behind_p99_bytes": percentile(lags, 0.99),
                              "caught_up_p50_bytes": percentile(once, 0.5) if once else None,
                              "caught_up_p99_bytes": percentile(once, 0.99) if once else None,
                              "difference": difference})
        rss_t = [(s["t"], s["master_rss_mb"]) for s in samples]
        flat = rss_verdict(rss_t)
        series_max = max(s["series_mb"] for s in samples)
        all_lags = [lag for lags in behind_all.values() for lag in lags]
        caught_up = [lag for lags in steady.values() for lag in lags]
        anon_t = [(s["t"], s["master_rss_anon_mb"]) for s in samples]
        result = {
            "load": load.name, "seconds": soak.seconds, "slaves": soak.slaves, "databases": soak.dbs,
            "transactions": load.transactions, "tps": round(load.transactions / soak.seconds, 1),
            "primary_binlog_mb": round(final / 1e6, 1), "primary_binlog_files": len(paths),
            "max_binlog_size_mb": soak.binlog_mb, "expire_logs_seconds": soak.expire, "max_series_mb": soak.cap / 1e6,
            "series_mb_max": series_max, "series_mb_end": samples[-1]["series_mb"], "files_purged": len(purged),
            "master_rss_mb_start": rss_t[0][1], "master_rss_mb_max": max(r for _, r in rss_t),
            "master_rss_mb_end": round(rss_end, 1), "master_rss_slope_mb_per_min_second_half": flat["slope_mb_per_min"],
            "master_rss_least_squares_mb_per_min_second_half": flat["least_squares_mb_per_min"],
            "master_rss_rise_second_half_mb": flat["rise_mb"], "master_rss_flat_bound_mb": flat["bound_mb"],
            "master_rss_by_minute": rss_by_minute(rss_t),
            "master_rss_anon_mb_start": anon_t[0][1], "master_rss_anon_mb_max": max(r for _, r in anon_t),
            "master_rss_anon_mb_end": anon_t[-1][1], "master_rss_anon_slope_mb_per_min_second_half": rss_verdict(anon_t)["slope_mb_per_min"],
            "master_rss_file_mb_max": max(s["master_rss_file_mb"] for s in samples),
            "master_cpu_s": samples[-1]["master_cpu_s"],
            "behind_bytes_p50": percentile(all_lags, 0.5), "behind_bytes_p99": percentile(all_lags, 0.99),
            "behind_bytes_max": max(all_lags, default=0), "caught_up_behind_bytes_p50": percentile(caught_up, 0.5),
            "caught_up_behind_bytes_p99": percentile(caught_up, 0.99),
            "slaves_never_caught_up_during_load": sum(1 for lags in steady.values() if not lags),
            "drain_s": round(drain, 1),
            "loadavg_1m_end": round(os.getloadavg()[0], 1), "cpus": os.cpu_count(),
            "loadavg_1m_min": min(s["loadavg_1m"] for s in samples), "loadavg_1m_max": max(s["loadavg_1m"] for s in samples),
            "slaves_identical": sum(1 for s in per_slave if s["difference"] is None),
            "replica_rules": " ".join(topology_lines), "replica_differences": differences[:20],
            "per_slave": per_slave, "samples": samples,
        }
        result["verdicts"] = {
            "rss_flat": flat["flat"],
            "series_bounded": series_max * 1e6 <= soak.cap and (len(purged) > 0 or final <= soak.cap),
            "slaves_identical": result["slaves_identical"] == soak.slaves,
            "replica_identical": not differences,
        }
        return result
    finally:
        kill_all(slaves, master)
        replica.stop()
        primary.stop()
        if os.environ.get("DUMPFILTER_LOAD_KEEP"):
            print(f"  kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def report(result: dict) -> None:
    for key, value in result.items():
        if key not in ("samples", "per_slave", "verdicts", "master_rss_by_minute"):
            print(f"{key:42} {value}")
    print("master RSS by minute (MB, min / median / max):")
    for m in result["master_rss_by_minute"]:
        print(f"  minute {m['minute']:3}: {m['min']:7.1f} {m['median']:7.1f} {m['max']:7.1f}")
    for s in result["per_slave"]:
        print(f"  slave {s['server_id']} [{s['rules']}] relay from {s['relay_began']} (series began at "
              f"{s['series_began']}), {s['transactions']} txns, behind p50 {s['behind_p50_bytes']} B p99 "
              f"{s['behind_p99_bytes']} B (once caught up: {s['caught_up_p50_bytes']} / {s['caught_up_p99_bytes']}): "
              f"{s['difference'] or 'identical'}")
    v = result["verdicts"]
    print(f"verdict rss:      {'flat' if v['rss_flat'] else 'GROWING'} (second half: Theil-Sen slope "
          f"{result['master_rss_slope_mb_per_min_second_half']} MB/min, a rise of {result['master_rss_rise_second_half_mb']}"
          f" MB, bound {result['master_rss_flat_bound_mb']} MB; least squares "
          f"{result['master_rss_least_squares_mb_per_min_second_half']} MB/min; load average "
          f"{result['loadavg_1m_min']}-{result['loadavg_1m_max']} on {result['cpus']} CPUs)")
    print(f"verdict series:   {'bounded' if v['series_bounded'] else 'UNBOUNDED'} (max {result['series_mb_max']} MB, "
          f"cap {result['max_series_mb']} MB, {result['files_purged']} files purged)")
    print(f"verdict slaves:   {result['slaves_identical']}/{result['slaves']} relay logs identical to the offline filter")
    print(f"verdict replica:  {'identical' if v['replica_identical'] else 'DIFFERENT'} "
          f"({result['replica_rules']}){''.join(chr(10) + '  ' + d for d in result['replica_differences'])}")


def main() -> dict:
    result = run(Soak.from_env())
    report(result)
    write_result("soak", result)
    failed = [name for name, ok in result["verdicts"].items() if not ok]
    if failed:
        raise AssertionError(f"soak verdicts failed: {', '.join(failed)}")
    return result


if __name__ == "__main__":
    main()
