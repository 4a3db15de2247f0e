"""Lint the slow way: every unit of every file read by the codec's reader and grouping and fed to
the Linter (`feed_all`), where `binlogs.lint.lint_files` feeds it only the units the
compiled scan cannot rule out (binlogs/lint_scan.py). The lint tests hold the scan to it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dumpfilter.binlogs.lint import new_linter, units
from dumpfilter.codec import Transaction
from dumpfilter.rules.lint import Break, Linter
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel


def feed_all(linter: Linter, units: Iterable[tuple[str, Transaction]]) -> list[Break]:
    """Every (file, unit) of `units` fed to `linter`, in order: its breaks."""
    for file, txn in units:
        linter.feed(file, txn)
    return linter.breaks


def reference_feed(paths: Iterable[Path], linter: Linter, verify_checksums: bool = True) -> list[Break]:
    """Every unit of `paths` fed to `linter`, in order."""
    return feed_all(linter, units(paths, verify_checksums))


def reference_lint(paths: Iterable[Path], rules: RuleSet, settings: Settings, schema: SchemaModel | None = None, *,
                   replica_schema: SchemaModel | None = None, verify_checksums: bool = True) -> list[Break]:
    """`lint_files`' answer, every unit through the Linter."""
    return reference_feed(paths, new_linter(rules, settings, schema, replica_schema), verify_checksums)
