"""Legitimate slaves' streams during a login flood from their own address (`python -m bench flood`,
issues #62 goal 1 and #82 item 1): `dumpfilter master serve` as a process of its own (a policy whose
identity's password is a PBKDF2 hash at `master hash-password`'s 600,000 iterations; lint off), and
real `dumpfilter slave run --until-caught-up` processes over gRPC from 127.0.0.1, one after another:
alone (DUMPFILTER_FLOOD_RUNS runs, default 4), then while a flood process sends wrong-password
Registers for the slaves' identity from the same 127.0.0.1 on 8 threads without pause, each
thread on a connection of its own (DUMPFILTER_FLOOD_RECONNECT=1: a new connection for every
attempt, the attacker the reserved turns cannot tell from a slave) for DUMPFILTER_FLOOD_SECONDS
(default 75; the legitimate runs go on one after another until it ends, at least
DUMPFILTER_FLOOD_RUNS of them). Each run's master is fresh, so the first slave of the flooded run
logs in while the flood has its pair blocked. Prints the slaves' median MB/s alone and during
the flood, their ratio (goal: >= 0.8), the slowest flooded run, and what the master's login
guard did (checks run, logins checked in a reserved turn, refused unchecked and how many of those
were held, from /metrics), with the load average. The binlog is bench/common's ROW binlog of
DUMPFILTER_FLOOD_MB (default DUMPFILTER_BENCH_MB, 500) MB; under 500 MB the figures are a
diagnostic. DUMPFILTER_FLOOD_HOLD sets the policy's [login] hold_seconds. Results go to
bench/results/flood.json."""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench.common import BENCH_DIR, env_float, env_int, free_port, row_binlog, stop_process, target_mb, write_result

ROOT = BENCH_DIR.parent
THREADS = 8
TOKEN = "bench-flood-metrics-token"
RUNS = env_int("DUMPFILTER_FLOOD_RUNS", 4)
FLOOD_SECONDS = env_float("DUMPFILTER_FLOOD_SECONDS", 75)
RECONNECT = os.environ.get("DUMPFILTER_FLOOD_RECONNECT", "") == "1"
OWN = [("grpc.use_local_subchannel_pool", 1)]   # a connection per channel (gRPC shares one per process)


def flood(address: str, stop_file: str) -> None:
    """The attacker (a process of its own): THREADS threads of wrong-password Registers for the
    identity `app` until `stop_file` exists, each on a connection of its own (RECONNECT: a new
    one for every attempt); prints how many were sent and how each was answered."""
    import grpc

    from dumpfilter.wire import PASSWORD_KEY, USER_KEY
    from dumpfilter.v1 import dump_pb2, dump_pb2_grpc

    answers: dict[str, int] = {}
    lock = threading.Lock()

    def attempt(stub: dump_pb2_grpc.DumpFilterStub, n: int, i: int) -> None:
        try:
            stub.Register(dump_pb2.RegisterRequest(server_id=900 + n),
                          metadata=((USER_KEY, "app"), (PASSWORD_KEY, f"guess-{n}-{i}")), timeout=30)
            code = "OK"
        except grpc.RpcError as exc:
            code = exc.code().name
        with lock:
            answers[code] = answers.get(code, 0) + 1

    def one(n: int) -> None:
        i = 0
        with grpc.insecure_channel(address, OWN) as channel:
            stub = dump_pb2_grpc.DumpFilterStub(channel)
            while not os.path.exists(stop_file):
                i += 1
                if RECONNECT:
                    with grpc.insecure_channel(address, OWN) as fresh:
                        attempt(dump_pb2_grpc.DumpFilterStub(fresh), n, i)
                else:
                    attempt(stub, n, i)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(" ".join(f"{k}={v}" for k, v in sorted(answers.items())), flush=True)


def _serve(binlog_dir: Path, policy: Path, token: Path, log: Path) -> tuple[subprocess.Popen, int, str]:
    grpc_port, metrics_port = free_port(), free_port()
    with open(log, "ab") as err:
        proc = subprocess.Popen([sys.executable, "-m", "dumpfilter", "master", "serve", "--binlog-dir", str(binlog_dir),
                                 "--listen", f"[::]:{grpc_port}", "--policy", str(policy), "--lint-max-mb", "0",
                                 "--metrics-listen", f"127.0.0.1:{metrics_port}", "--metrics-token-file", str(token)],
                                cwd=ROOT, stderr=err)
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dumpfilter master exited: {log.read_text()[-2000:]}")
        try:
            _scrape(url)
            return proc, grpc_port, url
        except OSError:
            time.sleep(0.2)
    stop_process(proc)
    raise RuntimeError("dumpfilter master did not start")


def _scrape(url: str) -> dict[str, float]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        text = reply.read().decode()
    return {m[0]: float(m[1]) for m in re.findall(r"^(dumpfilter_\w*login\w*(?:\{[^}]*\})?) (\S+)$", text, re.M)}


def _slave(port: int, relay: Path, server_id: int) -> float:
    """Seconds `slave run --until-caught-up` took, from its start to its exit."""
    shutil.rmtree(relay, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dumpfilter", "slave", "run", "--master", f"127.0.0.1:{port}",
                           "--user", "app", "--password", "app-pw", "--server-id", str(server_id),
                           "--relay-log-dir", str(relay), "--until-caught-up"], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"slave run failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def _run(binlog_dir: Path, tmp: Path, flooded: bool) -> dict:
    from dumpfilter.rules.policy_gates import hash_password

    policy, token = tmp / "policy.toml", tmp / "token"
    hold = os.environ.get("DUMPFILTER_FLOOD_HOLD")   # [login] hold_seconds, for an A/B (default: the master's)
    policy.write_text(f'[slave.app]\npassword_hash = "{hash_password("app-pw")}"\nallow = ["%.%"]\n'
                      + (f"[login]\nhold_seconds = {float(hold)}\n" if hold else ""))
    policy.chmod(0o600)
    token.write_text(TOKEN + "\n")
    proc, port, url = _serve(binlog_dir, policy, token, tmp / "master.log")
    attacker, stop_file = None, tmp / "stop-flood"
    stop_file.unlink(missing_ok=True)
    runs: list[float] = []
    try:
        if flooded:
            attacker = subprocess.Popen([sys.executable, "-m", "bench.bench_flood", "--flood", f"127.0.0.1:{port}",
                                         str(stop_file)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                        env={**os.environ, "DUMPFILTER_FLOOD_RECONNECT": "1" if RECONNECT else ""})
            deadline = time.monotonic() + 60   # until the flood has the pair backing off
            while not any(v and "pairs" in k for k, v in _scrape(url).items()
                          if k.startswith("dumpfilter_login_backoff_keys")):
                if time.monotonic() > deadline:
                    raise RuntimeError("the flood did not start")
                time.sleep(0.1)
        ends = time.monotonic() + FLOOD_SECONDS
        while len(runs) < RUNS or flooded and time.monotonic() < ends:
            runs.append(_slave(port, tmp / "relay", 7))
        counts = _scrape(url)
    finally:
        stop_file.touch()
        answers = attacker.communicate(timeout=120)[0].strip() if attacker is not None else ""
        stop_process(proc)
    return {"runs": [round(r, 3) for r in runs], "median": round(statistics.median(runs), 3), "flood_answers": answers,
            "checks_in_pool": counts.get('dumpfilter_login_checks_total{where="pool"}', 0),
            "checked_in_turn": counts.get("dumpfilter_logins_checked_in_turn_total", 0),
            "refused_unchecked": sum(v for k, v in counts.items() if k.startswith("dumpfilter_logins_refused_unchecked")),
            "refusals_held": counts.get("dumpfilter_logins_refused_held_total", 0),
            "failed_logins": sum(v for k, v in counts.items()
                                 if k.startswith("dumpfilter_failed_logins_by_identity"))}


def main() -> None:
    mb = env_int("DUMPFILTER_FLOOD_MB", target_mb())
    binlog = row_binlog(mb)
    size = sum(p.stat().st_size for p in binlog.parent.glob("bench-bin.0*"))
    with tempfile.TemporaryDirectory(prefix="bench-flood-") as tmp_name:
        tmp = Path(tmp_name)
        _run(binlog.parent, tmp, flooded=False)             # warm-up: the binlog into the page cache
        alone = _run(binlog.parent, tmp, flooded=False)
        during = _run(binlog.parent, tmp, flooded=True)
    mb_s_alone, mb_s_flood = size / 1e6 / alone["median"], size / 1e6 / during["median"]
    ratio = mb_s_flood / mb_s_alone
    worst = size / 1e6 / max(during["runs"]) / mb_s_alone
    label = "" if size >= 500e6 else f"  (DIAGNOSTIC: a {size / 1e6:.0f} MB binlog, under 500 MB)"
    how = "a new connection per attempt" if RECONNECT else "a connection per thread"
    print(f"binlog {size / 1e6:.0f} MB; slave run --until-caught-up from 127.0.0.1, process start to exit{label}")
    print(f"  alone:        median {alone['median']:.2f} s  {mb_s_alone:.0f} MB/s  (runs {alone['runs']})")
    print(f"  during flood: median {during['median']:.2f} s  {mb_s_flood:.0f} MB/s   ratio {ratio:.2f} (goal >= 0.8); "
          f"slowest run {worst:.2f}  (runs {during['runs']})")
    print(f"  flood (>= {FLOOD_SECONDS:g} s, {THREADS} threads from the slaves' own 127.0.0.1, {how}, wrong passwords "
          f"for 'app', PBKDF2 600000): {during['flood_answers']}; master ran {during['checks_in_pool']:.0f} checks "
          f"({during['checked_in_turn']:.0f} in a reserved turn), refused {during['refused_unchecked']:.0f} unchecked "
          f"({during['refusals_held']:.0f} of them held)")
    print(f"  load average at the end: {os.getloadavg()[0]:.1f} (2 cores; the figure needs a quiet machine)")
    write_result("flood", {"binlog_bytes": size, "diagnostic": size < 500e6, "flood_seconds": FLOOD_SECONDS,
                           "reconnect": RECONNECT, "alone": alone, "during_flood": during,
                           "mb_s_alone": round(mb_s_alone, 1), "mb_s_flood": round(mb_s_flood, 1),
                           "ratio": round(ratio, 3), "slowest_ratio": round(worst, 3),
                           "load_average": round(os.getloadavg()[0], 1)})


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--flood":
        flood(sys.argv[2], sys.argv[3])
    else:
        main()
