"""Diagnostic (not in `make bench`, no test asserts it): one in-process stream (DumpService, the
master's compiled send walk) per skip policy on a generated MySQL-flavour ROW binlog (8.0 GTIDs
with transaction_length, 8 schemas, 1% DDL), replicate-do-db=db1: 7/8 of the units skipped. Prints
each stream's wall and CPU seconds beside the heartbeat stream's, and how many skipped units the
policy's per-unit way (`SkipPolicy.skipped`) made (issue #57 goal 3: core/src/skip_forms/mysql.rs
makes them in the walk). `--per-unit` sets each policy's walk_skip to SKIP_STOP: every skipped
unit then goes the per-unit way, as every skipped MySQL unit did before skip_forms/mysql.rs.

    python -m bench.diag_mysql_skip_forms /tmp/mysql-diag [--transactions 530000] [--per-unit]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from dumpfilter import _core, skip_policy
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.workload.generator import WorkloadSpec, generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--transactions", type=int, default=530_000)  # about 200 MB
    parser.add_argument("--per-unit", action="store_true")
    args = parser.parse_args()
    if not args.directory.is_dir():
        generate(WorkloadSpec(seed=57, schemas=8, tables_per_schema=4, transactions=args.transactions,
                              binlog_format="row", flavor="mysql", cross_db_share=0.0, ddl_share=0.01,
                              max_binlog_size=1 << 30), args.directory)
    per_unit: Counter[str] = Counter()
    for cls in (skip_policy.SkipPolicy, skip_policy.Placeholder, skip_policy.EmptyTransaction):
        original = cls.__dict__["skipped"]

        def spy(policy, events, result, _original=original):  # type: ignore[no-untyped-def]
            per_unit[policy.name] += 1
            return _original(policy, events, result)

        cls.skipped = spy  # type: ignore[method-assign]
        if args.per_unit and cls is not skip_policy.SkipPolicy:
            cls.walk_skip = _core.SKIP_STOP
    for policy in skip_policy.NAMES:
        svc = DumpService(args.directory)
        svc.register(Registration(server_id=1, skip_policy=policy,
                                  filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)))
        wall, cpu, sent = time.perf_counter(), time.process_time(), 0
        for batch in svc.stream(1):
            sent += len(batch.events)
            if batch.caught_up:
                break
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        stats = svc.slaves[1].stats
        print(f"{policy:18s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  read {stats.bytes_read / 1e6:6.1f} MB  "
              f"sent {sent / 1e6:6.1f} MB  skipped units {stats.transactions_skipped}  "
              f"made per unit {per_unit[policy]}", flush=True)


if __name__ == "__main__":
    main()
