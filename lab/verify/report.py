"""The verdict of `dumpfilter verify`: a rich table per binlog format, the differences of every pair
that is not identical, and the JSON document --json writes (as_json)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

from dumpfilter.lab.verify.against_replicas import DIFFERENT, IDENTICAL, NO_REFERENCE, RunResult

_STYLE = {IDENTICAL: "green", DIFFERENT: "bold red"}


def overall_passed(runs: Sequence[RunResult]) -> bool:
    return bool(runs) and all(run.passed for run in runs)


def as_json(runs: Sequence[RunResult]) -> dict[str, Any]:
    return {"passed": overall_passed(runs), "pairs": verdict_counts(runs), "runs": [run.as_dict() for run in runs]}


def print_report(runs: Sequence[RunResult], console: Console | None = None, *, max_lines: int = 40) -> None:
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
            console = Console(width=200)
    for run in runs:
        table = Table(title=f"dumpfilter verify: binlog_format={run.binlog_format}, {run.statements} statements, "
                            f"primary at {run.primary_position[0]}:{run.primary_position[1]} ({run.seconds:.1f} s)")
        for column in ("slave", "rules", "reference replica", "lint predicted", "dumpfilter", "tables", "rows ref/df",
                       "verdict"):
            table.add_column(column, overflow="fold")
        for pair in run.pairs:
            ref_rows = sum(t.reference_rows or 0 for t in pair.tables)
            df_rows = sum(t.dumpfilter_rows or 0 for t in pair.tables)
            rows = f"{ref_rows}/{df_rows}" if pair.tables else "-"
            verdict = pair.verdict if not pair.reason else f"{pair.verdict}: {pair.reason}"
            rules = "\n".join(r.removeprefix("replicate-") for r in pair.rules)
            table.add_row(pair.slave, rules or "(none)",
                          pair.reference.describe() if pair.reference else "-",
                          pair.lint.describe() if pair.lint else "-",
                          (pair.dumpfilter.describe() if pair.dumpfilter else "-")
                          + (f"; real replica: {pair.real_replica.describe()}" if pair.real_replica else ""),
                          str(len(pair.tables)) if pair.tables else "-", rows,
                          f"[{_STYLE.get(pair.verdict, 'yellow')}]{verdict}[/]")
        console.print(table)
        for pair in run.pairs:
            for note in pair.notes:
                console.print(f"[dim]{pair.slave}: {note}[/]")
            # A side that stopped on an error: its message, not only its number.
            for side, outcome in (("reference replica", pair.reference), ("dumpfilter", pair.dumpfilter),
                                  ("real replica on the MySQL endpoint", pair.real_replica)):
                if outcome is not None and not outcome.caught_up and outcome.error:
                    console.print(f"  {pair.slave} ({run.binlog_format}): {side} {outcome.said()}", markup=False,
                                  highlight=False, style="red" if pair.verdict == DIFFERENT else None)
            if pair.verdict != DIFFERENT:
                continue
            console.print(f"[bold red]{pair.slave} ({run.binlog_format}) differs:[/]")
            if pair.master_rules != pair.rules and pair.master_rules:
                console.print(f"  master-side rules: {', '.join(pair.master_rules)}")
            lines = "\n".join(pair.differences).splitlines()
            for line in lines[:max_lines]:
                console.print("  " + line, markup=False, highlight=False)
            if len(lines) > max_lines:
                console.print(f"  ... {len(lines) - max_lines} more lines (see --json)")
        for kept in run.kept:
            console.print(f"[dim]kept {kept}[/]")
    console.print(verdict_line(runs))


def verdict_counts(runs: Sequence[RunResult]) -> dict[str, int]:
    """Pairs compared (identical or not) and pairs without a reference, over every run."""
    pairs = [pair for run in runs for pair in run.pairs]
    return {"compared": sum(p.verdict != NO_REFERENCE for p in pairs),
            "identical": sum(p.verdict == IDENTICAL for p in pairs),
            "different": sum(p.verdict == DIFFERENT for p in pairs),
            "without_reference": sum(p.verdict == NO_REFERENCE for p in pairs)}


def verdict_line(runs: Sequence[RunResult]) -> str:
    """PASS/FAIL with the pairs it covers; pairs without a reference are counted apart, so a PASS
    never hides that some slaves could not be compared with a real replica."""
    counts = verdict_counts(runs)
    unchecked = counts["without_reference"]
    tail = (f"; {unchecked} pair(s) without reference, not compared (see the notes)" if unchecked else "")
    if overall_passed(runs):
        return f"[bold green]PASS[/]: {counts['identical']} of {counts['compared']} compared pair(s) identical{tail}"
    if counts["compared"] == 0:
        return f"[bold red]FAIL[/]: no pair could be compared{tail}"
    return (f"[bold red]FAIL[/]: {counts['different']} of {counts['compared']} compared pair(s) differ, "
            f"{counts['identical']} identical{tail}")
