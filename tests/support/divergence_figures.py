"""Issue #81's closing figures: per statement shape of the generated workload's grammar, the divergent
writes (and stops) real MariaDB 10.11 replicas show beside those lint names, over one pinned workload
(every shape under each of three (default database, databases) choices and each operation it takes)
and a pinned list of rule sets, in STATEMENT, MIXED and ROW. Run by hand (it starts its own servers):
`.venv/bin/python -m tests.support.divergence_figures`; the tests hold the same agreement
(tests/rules/test_lint_generated_workload.py, tests/large/)."""

from __future__ import annotations

from collections import Counter

from dumpfilter.lab.sandbox import MariaDBServer, stop_servers
from dumpfilter.rules.ruleset import RuleSet
from tests.support.divergence_grammar import DBS, FIXED_OP, OPS, SHAPES, TWO_DBS, Item
from tests.support.divergence_oracle import FORMATS, check_all

RULE_SETS = [RuleSet(do_db=("crm",)), RuleSet(ignore_db=("logs",)), RuleSet(do_table=("crm.t1", "crm.t2", "logs.tlog")),
             RuleSet(ignore_table=("shop.t1", "shop.t2")), RuleSet(wild_do_table=("crm.%",)),
             RuleSet(wild_ignore_table=("logs.t%",)), RuleSet(rewrite_db=(("crm", "crm_rw"),)),
             RuleSet(do_db=("crm", "shop"), rewrite_db=(("shop", "shop_rw"),)),
             RuleSet(wild_do_table=("crm.%", "shop.t_"), ignore_table=("crm.tlog",))]


_STOPPING = ("procedure-new-db", "view-new-db", "temporary")


def workload() -> list[Item]:
    """Each shape under three rotations of the databases, with each operation it takes; the shapes
    that may stop a replica last (a replica's writes are compared up to its stop)."""
    items: list[Item] = []
    for shape in sorted(SHAPES, key=lambda shape: shape in _STOPPING):
        for turn in range(3):
            x, y, u = DBS[turn], DBS[(turn + 1) % 3], DBS[(turn + 2) % 3]
            use = None if shape in ("single-no-db", "procedure-new-db", "view-new-db") else \
                x if shape == "single-same-db" else u
            dbs = (x, y) if shape in TWO_DBS or shape.startswith("multi-") else (x,)
            for op in (FIXED_OP[shape],) if shape in FIXED_OP else OPS:
                items.append(Item(len(items) + 1, shape, op, use, dbs))
    return items


def main() -> None:
    primaries = {fmt: MariaDBServer(f"fig-{fmt.lower()}", server_id=700 + i, binlog_format=fmt).start()
                 for i, fmt in enumerate(FORMATS)}
    replica = MariaDBServer("fig-replica", server_id=799, log_bin=False).start()
    items = workload()
    truth: Counter[tuple[str, str]] = Counter()
    lint: Counter[tuple[str, str]] = Counter()
    wrong: Counter[tuple[str, str]] = Counter()
    stops = []
    try:
        for run, verdicts in check_all(primaries, replica, items, RULE_SETS):
            for v in verdicts:
                stops.append((v.fmt, v.rules.option_lines(), v.replica_stop, v.lint_stop))
                for keys, counter in ((v.truth, truth), (v.lint, lint), (v.truth ^ v.lint, wrong)):
                    for sid, _, _ in keys:
                        counter[(run.item(sid).shape, v.fmt)] += 1
    finally:
        stop_servers([*primaries.values(), replica])
    print(f"{len(items)} statements x {len(RULE_SETS)} rule sets x {len(FORMATS)} formats")
    print("shape              " + "  ".join(f"{fmt:>22}" for fmt in FORMATS) + "   (replica / lint / differ)")
    for shape in SHAPES:
        cells = "  ".join(f"{truth[(shape, f)]:>8} / {lint[(shape, f)]:>5} / {wrong[(shape, f)]:>3}" for f in FORMATS)
        print(f"{shape:<18} {cells}")
    for fmt, rules, replica_stop, lint_stop in stops:
        if replica_stop or lint_stop:
            print(f"stop [{fmt}] {rules}: replica {replica_stop}, lint {lint_stop}")


if __name__ == "__main__":
    main()
