"""A diagnostic, not the production figure (that is `bench fanout_procs`: separate processes, real
gRPC, a binlog larger than the cache, staggered starts). Fan-out of the dump service, in process
(`python -m bench fanout`): master CPU for 8 slaves
with distinct rules that together keep every schema once (do-db = one schema each) against 1
slave whose rules keep every schema (wild-do-table db%.%), the same bytes sent in total, so the
difference is the per-slave cost. Threads stream concurrently from one DumpService (one shared
read of the binlog); CPU is the process's. Best of DUMPFILTER_BENCH_REPEAT (default 2) each,
interleaved. Input: bench.common's 60 MB ROW binlog of 8 schemas (DUMPFILTER_FANOUT_MB)."""

from __future__ import annotations

import threading
import time

from bench.common import env_int, row_binlog, write_result
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService


def master_cpu(directory, rule_sets: list[RuleSet]) -> float:
    svc = DumpService(directory, cache_bytes=64 << 20)
    regs = [Registration(server_id=i + 1, filters=(ChannelSpec(None, rules),), settings=Settings(flavor="mariadb"))
            for i, rules in enumerate(rule_sets)]
    for reg in regs:
        svc.register(reg)

    def stream(reg: Registration) -> None:
        for batch in svc.stream(reg.server_id):
            if batch.caught_up:
                break

    threads = [threading.Thread(target=stream, args=(reg,)) for reg in regs]
    started = time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.process_time() - started


def main() -> dict:
    path = row_binlog(env_int("DUMPFILTER_FANOUT_MB", 60))
    repeat = env_int("DUMPFILTER_BENCH_REPEAT", 2)
    one_rules = [RuleSet(wild_do_table=("db%.%",))]
    eight_rules = [RuleSet(do_db=(f"db{i}",)) for i in range(1, 9)]
    one = eight = float("inf")
    for _ in range(repeat):
        one = min(one, master_cpu(path.parent, one_rules))
        eight = min(eight, master_cpu(path.parent, eight_rules))
    mb = path.stat().st_size / 1e6
    result = {"diagnostic": True, "binlog_mb": round(mb, 1), "master_cpu_1_slave_s": round(one, 2), "master_cpu_8_slaves_s": round(eight, 2),
              "ratio_8_vs_1": round(eight / one, 2), "master_mb_per_cpu_s_1_slave": round(mb / one, 1)}
    print("diagnostic: in process, streams in lock step over a binlog inside the cache (see fanout_procs)")
    for key, value in result.items():
        print(f"{key:30} {value}")
    write_result("fanout", result)
    return result


if __name__ == "__main__":
    main()
