"""`dumpfilter lint` over binlog files on disk: reads them in order through the codec's reader and
grouping, and hands each transaction to dumpfilter.rules.lint (used by `lint`, `verify` and `simulate`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from dumpfilter.codec import BinlogReader, Transaction, group_transactions
from dumpfilter.binlogs.files import open_binlog
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.lint import Break, Linter
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel


def units(paths: Iterable[Path], verify_checksums: bool = True) -> Iterator[tuple[str, Transaction]]:
    """(file name, transaction) of each file in order."""
    for path in paths:
        path = Path(path)
        with open_binlog(path) as stream:
            reader = BinlogReader(stream, str(path), verify_checksums=verify_checksums)
            for txn in group_transactions(reader):
                yield path.name, txn


def lint_files(paths: Iterable[Path], rules: RuleSet, settings: Settings, schema: SchemaModel | None = None, *,
               verify_checksums: bool = True) -> list[Break]:
    """Every break a replica with `rules` would meet in `paths`; `schema` is its starting schema (complete:
    what it lacks is absent). Without one, tables the binlog never created are taken to exist."""
    engine = RuleEngine(rules, settings, schema=schema.copy() if schema is not None else None)
    linter = Linter(engine, schema, flavor=settings.flavor, schema_complete=schema is not None)
    return linter.feed_all(units(paths, verify_checksums))
