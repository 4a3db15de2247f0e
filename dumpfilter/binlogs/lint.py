"""`dumpfilter lint` over binlog files on disk: reads them in order through the codec's reader and
grouping, and hands each transaction to dumpfilter.rules.lint. `new_linter` is the one way every
lint is set up (`lint`, `verify`, `simulate`'s lint column, the master's lint at Register)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from dumpfilter.codec import BinlogReader, Transaction, group_transactions
from dumpfilter.binlogs.files import open_binlog
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.lint import Break, Linter
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel


def new_linter(rules: RuleSet, settings: Settings, schema: SchemaModel | None = None,
               replica_schema: SchemaModel | None = None) -> Linter:
    """A Linter for a replica with `rules`. `schema`: the master's schema before the binlog (the
    rule engine decides with it, as the master's filter does; the primary's replay starts from it);
    `replica_schema`: the replica's own starting schema when it differs (objects created outside
    replication), else the master's. A schema given is complete: what it lacks is absent."""
    engine = RuleEngine(rules, settings, schema=schema.copy() if schema is not None else None)
    return Linter(engine, schema, flavor=settings.flavor, schema_complete=schema is not None,
                  replica_schema=replica_schema)


def units(paths: Iterable[Path], verify_checksums: bool = True) -> Iterator[tuple[str, Transaction]]:
    """(file name, transaction) of each file in order."""
    for path in paths:
        path = Path(path)
        with open_binlog(path) as stream:
            reader = BinlogReader(stream, str(path), verify_checksums=verify_checksums)
            for txn in group_transactions(reader):
                yield path.name, txn


def lint_files(paths: Iterable[Path], rules: RuleSet, settings: Settings, schema: SchemaModel | None = None, *,
               replica_schema: SchemaModel | None = None, verify_checksums: bool = True) -> list[Break]:
    """Every break a replica with `rules` would meet in `paths` (schemas: see `new_linter`). Without
    either schema, tables the binlog never created are taken to exist."""
    return new_linter(rules, settings, schema, replica_schema).feed_all(units(paths, verify_checksums))
