"""The master's binlog for a simulation: an existing directory, a list of files (linked into a
directory of their own with an index, since the dump service serves one directory), the built-in
generator, or a real MariaDB server started here and driven with a multi-schema SQL workload."""

from __future__ import annotations

import itertools
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dumpfilter.errors import BinlogError, DumpFilterError
from dumpfilter.binlogs import binlog_paths, write_index
from dumpfilter.workload.generator import WorkloadSpec, generate
from dumpfilter.topology import MasterSource

# The default when a topology names no source: ~4 MB of MariaDB ROW binlog over 6 schemas.
DEFAULT_WORKLOAD = {"seed": 1, "schemas": 6, "tables_per_schema": 4, "transactions": 8000,
                    "binlog_format": "row", "max_binlog_size": 1 << 20}


class SourceError(DumpFilterError):
    """The binlog source cannot be prepared (missing files, no MariaDB binary, ...)."""


@dataclass
class PreparedSource:
    directory: Path
    description: str
    files: list[Path] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files)

    def offsets(self) -> dict[str, int]:
        """Absolute stream offset of each file's start, for progress: (file, pos) -> base + pos."""
        starts = itertools.accumulate((p.stat().st_size for p in self.files), initial=0)
        return dict(zip((p.name for p in self.files), starts))


def _at(source: MasterSource) -> str:
    return f"{source.where}: " if source.where else ""


def prepare_source(source: MasterSource | None, work: Path, *, log: Callable[[str], None] = print) -> PreparedSource:
    source = source or MasterSource("workload", options=dict(DEFAULT_WORKLOAD))
    if source.kind == "directory":
        assert source.directory is not None  # (the topology names the directory of such a source)
        directory = Path(source.directory)
        if not directory.is_dir():
            raise SourceError(f"{_at(source)}master.binlogs: {directory} is not a directory")
        return _prepared(directory, f"directory {directory}")
    if source.kind == "files":
        directory = _fresh(work / "binlog")
        for path in source.files:
            if not Path(path).is_file():
                raise SourceError(f"{_at(source)}master.files: {path} is not a file")
            os.symlink(Path(path).resolve(), directory / Path(path).name)
        names = [Path(p).name for p in source.files]
        write_index(directory / f"{_series_base(names[0])}.index", names)
        # The master serves the links; everything else reads the files by the paths the topology
        # gives, and names them so in its errors (not this run's temporary directory).
        return PreparedSource(directory, f"{len(names)} file(s) from the topology", list(source.files))
    if source.kind == "workload":
        spec = WorkloadSpec(**source.options)
        directory = _fresh(work / "binlog")
        generate(spec, directory)
        return _prepared(directory, f"built-in workload: {spec.schemas} schemas x {spec.tables_per_schema} tables, "
                                    f"{spec.transactions} transactions, {spec.binlog_format}, {spec.flavor}, "
                                    f"seed {spec.seed}")
    if source.kind == "mariadb":
        return _from_mariadb(source.options, work, log)
    raise SourceError(f"unknown binlog source kind {source.kind!r}")


def _prepared(directory: Path, description: str) -> PreparedSource:
    try:
        files = binlog_paths(directory)
    except BinlogError as exc:
        raise SourceError(str(exc)) from None
    if not files:
        raise SourceError(f"no binlog files in {directory}")
    return PreparedSource(directory, description, files)


def _fresh(directory: Path) -> Path:
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    return directory


def _series_base(name: str) -> str:
    base, dot, number = name.rpartition(".")
    return base if dot and number.isdigit() else name


# ---------------------------------------------------------------------------------------------
# a real MariaDB


def mariadb_workload(seed: int = 1, schemas: int = 6, transactions: int = 1500) -> list[str]:
    """A deterministic multi-schema SQL workload with the statements that make replication
    filters disagree: statements whose default database is not the database they change (the
    classic replicate-do-db trap in STATEMENT format), multi-table UPDATEs across databases,
    statements with no default database, CREATE TABLE ... LIKE from another schema, RENAME
    TABLE across schemas, and DDL. Row and statement formats are interleaved per session."""
    rng, tables = random.Random(seed), ("t1", "t2", "t3")
    dbs = [f"db{i}" for i in range(1, schemas + 1)]
    sql = [f"CREATE DATABASE {db}" for db in dbs]
    sql += [f"CREATE TABLE {db}.{t} (id INT NOT NULL PRIMARY KEY, v INT) ENGINE=InnoDB" for db in dbs for t in tables]
    next_id = {(db, t): 1 for db in dbs for t in tables}
    for n in range(transactions):
        # Session format: mostly ROW, some STATEMENT (where the default database decides).
        sql.append("SET SESSION binlog_format = " + ("'STATEMENT'" if rng.random() < 0.35 else "'ROW'"))
        current = rng.choice(dbs)
        sql.append(f"USE {current}")
        roll = rng.random()
        if roll < 0.03:
            other = rng.choice(dbs)
            sql.append(f"CREATE TABLE IF NOT EXISTS scratch_{n % 7} LIKE {other}.t1")
        elif roll < 0.05:
            sql.append(f"DROP TABLE IF EXISTS {current}.scratch_{n % 7}")
        elif roll < 0.06:
            # RENAME across schemas: one statement, two databases (MySQL checks the default db).
            target = rng.choice(dbs)
            sql.append(f"CREATE TABLE ren_{n} (id INT PRIMARY KEY)")
            sql.append(f"RENAME TABLE {current}.ren_{n} TO {target}.renamed_{n}")
        else:
            sql.append("BEGIN")
            for _ in range(rng.randrange(1, 4)):
                cross = rng.random() < 0.25
                db = rng.choice([d for d in dbs if d != current]) if cross else current
                table = rng.choice(tables)
                name = f"{db}.{table}" if cross else table
                kind = rng.random()
                if kind < 0.6:
                    first = next_id[(db, table)]
                    next_id[(db, table)] += 3
                    values = ", ".join(f"({first + k}, {rng.randrange(1000)})" for k in range(3))
                    sql.append(f"INSERT INTO {name} (id, v) VALUES {values}")
                elif kind < 0.85:
                    sql.append(f"UPDATE {name} SET v = v + 1 WHERE id % 5 = {rng.randrange(5)}")
                elif kind < 0.95:
                    other = rng.choice(dbs)
                    # multi-table UPDATE across databases: the tables, not the default db, differ
                    sql.append(f"UPDATE {name} a JOIN {other}.t2 b ON a.id = b.id SET a.v = b.v")
                else:
                    sql.append(f"DELETE FROM {name} WHERE id % 11 = {rng.randrange(11)}")
            sql.append("COMMIT")
    return sql


def _from_mariadb(options: dict[str, Any], work: Path, log: Callable[[str], None]) -> PreparedSource:
    from dumpfilter.lab.sandbox import MariaDBServer, SandboxError, mariadb_available

    if not mariadb_available():
        raise SourceError("--mariadb needs mariadbd and mariadb-install-db on PATH (apt install mariadb-server)")
    statements = mariadb_workload(**options)
    directory = _fresh(work / "binlog")
    # Its own temp datadir and a free loopback port (never 3306); stopped by process id below.
    server = MariaDBServer("simulate", server_id=1, binlog_format="MIXED",
                           options=["--binlog-annotate-row-events=ON"])
    try:
        server.start()
        log(f"MariaDB started on 127.0.0.1:{server.port} (datadir {server.datadir})")
        server.execute(statements)
        server.flush_logs()  # closes the last file the workload wrote: a complete binlog to copy
        files = server.binlog_files()[:-1]
        for path in files:
            shutil.copy2(path, directory / path.name)
        write_index(directory / f"{_series_base(files[0].name)}.index", [p.name for p in files])
    except SandboxError as exc:
        raise SourceError(f"MariaDB: {exc}") from None
    finally:
        server.stop()
    return _prepared(directory, f"real MariaDB workload: {options.get('schemas', 6)} schemas, "
                                f"{options.get('transactions', 1500)} transactions (mixed ROW/STATEMENT)")
