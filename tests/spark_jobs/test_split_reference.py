"""The output bytes of `split` (in this process and on Spark) and of `filter --out DIR` are pinned:
every output file's name and sha256, for real binlogs and seeded generated ones, recorded in
data/split_reference.json by the code before the binlog series writers became one (issue #46).
A changed byte anywhere fails the test.

Regenerate (only for a change meant to alter the output, and say so in the commit):
    python -m tests.spark_jobs.test_split_reference
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
from pathlib import Path

import pytest

from dumpfilter.cli.app import build_parser, main
from dumpfilter.workload import WorkloadSpec, generate

REFERENCE = Path(__file__).parent / "data" / "split_reference.json"

# Seeded workloads (and "gen-incidents": test_split_segments' DDL units of three schemas with
# INCIDENT events between them) (several input files each): their bytes are a function of the spec.
WORKLOADS = {
    "gen-row-mariadb": WorkloadSpec(seed=46, schemas=4, tables_per_schema=2, transactions=700,
                                    binlog_format="row", flavor="mariadb", max_binlog_size=50_000),
    "gen-mixed-mysql": WorkloadSpec(seed=47, schemas=4, tables_per_schema=2, transactions=700,
                                    binlog_format="mixed", flavor="mysql", max_binlog_size=50_000),
    # Issue #40: ROW transactions over several schemas (copies cut per schema, partly kept units).
    "gen-row-mariadb-cross": WorkloadSpec(seed=48, schemas=3, tables_per_schema=2, transactions=600,
                                          binlog_format="row", flavor="mariadb", max_binlog_size=40_000,
                                          cross_db_share=0.5, statements_per_transaction=3),
    # Issue #40: MariaDB's default MIXED format and STATEMENT, statement units routed by their keys.
    "gen-mixed-mariadb": WorkloadSpec(seed=49, schemas=3, tables_per_schema=2, transactions=600,
                                      binlog_format="mixed", flavor="mariadb", max_binlog_size=40_000,
                                      cross_db_share=0.4, statements_per_transaction=3),
    "gen-statement-mariadb": WorkloadSpec(seed=50, schemas=3, tables_per_schema=2, transactions=500,
                                          binlog_format="statement", flavor="mariadb", max_binlog_size=30_000,
                                          cross_db_share=0.3, statements_per_transaction=2),
}
SCHEMA_FILE = Path(__file__).parent / "data" / "split_schema.sql"

# name -> (command, inputs, options). Inputs are paths under the real fixtures, or a workload name.
CASES = {
    "split-real-mariadb-statement": ("split", ["mariadb-operator-mariadb-poc/domain_id_0"],
                                     ["--max-binlog-size", "20000"]),
    "split-real-mariadb-statement-map": ("split", ["mariadb-operator-mariadb-poc/domain_id_0"],
                                         ["--map", "repl=sbtest%", "--max-binlog-size", "50000",
                                          "--chunk-bytes", "30000"]),
    "split-real-mysql-row": ("split", ["osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32"],
                             ["--max-binlog-size", "3000"]),
    "split-real-mysql-sakila": ("split", ["osheroff-mysql-binlog-connector-java/mysql-bin.sakila.gz"],
                                ["--max-binlog-size", "200000"]),
    "split-real-mysql-mixed-effective": ("split", ["blackbeam-rust_mysql_common/ver_trunk_row_v2.001"],
                                         ["--filter-semantics", "effective", "--max-binlog-size", "40000"]),
    "split-real-mariadb-row": ("split", ["blackbeam-rust_mysql_common/mariadb-bin.000001"], []),
    "split-real-mysql-map-no-unassigned": ("split", ["osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32"],
                                           ["--map", "a=auth", "--map", "m=menkor%.%", "--unassigned", "",
                                            "--max-binlog-size", "2500"]),
    "split-gen-incidents": ("split", ["gen-incidents"], ["--max-binlog-size", "600", "--chunk-bytes", "300"]),
    "split-gen-row-mariadb": ("split", ["gen-row-mariadb"], ["--max-binlog-size", "25000",
                                                             "--chunk-bytes", "20000"]),
    "split-gen-mixed-mysql-map": ("split", ["gen-mixed-mysql"],
                                  ["--map", "low=db1%", "--map", "low=db2%",
                                   "--map", "high=replicate-wild-do-table=db3.%", "--max-binlog-size", "20000"]),
    "split-gen-row-mariadb-cross": ("split", ["gen-row-mariadb-cross"], ["--max-binlog-size", "9000",
                                                                         "--chunk-bytes", "15000"]),
    "split-gen-row-mariadb-cross-map": ("split", ["gen-row-mariadb-cross"],
                                        ["--map", "a=db1%", "--map", "b=replicate-wild-ignore-table=db1.%",
                                         "--map", "b=replicate-ignore-table=db2.t2", "--schema", str(SCHEMA_FILE),
                                         "--max-binlog-size", "12000", "--chunk-bytes", "25000"]),
    "split-gen-row-mariadb-cross-map-drop": ("split", ["gen-row-mariadb-cross"],
                                             ["--map", "x=db2%", "--unassigned", "", "--chunk-bytes", "0"]),
    "split-gen-mixed-mariadb": ("split", ["gen-mixed-mariadb"], ["--max-binlog-size", "15000",
                                                                 "--chunk-bytes", "20000"]),
    "split-gen-mixed-mariadb-effective": ("split", ["gen-mixed-mariadb"], ["--filter-semantics", "effective"]),
    "split-gen-mixed-mariadb-map": ("split", ["gen-mixed-mariadb"],
                                    ["--map", "a=db1%", "--map", "b=replicate-wild-ignore-table=db1.%",
                                     "--map", "b=replicate-ignore-table=db2.t2", "--max-binlog-size", "12000"]),
    "split-gen-mixed-mariadb-map-do-db": ("split", ["gen-mixed-mariadb"],
                                          ["--map", "d=replicate-do-db=db2", "--map", "t=db3.t1",
                                           "--unassigned", "", "--flavor", "mariadb"]),
    "split-gen-statement-mariadb": ("split", ["gen-statement-mariadb"], ["--chunk-bytes", "10000"]),
    "split-gen-statement-mariadb-map": ("split", ["gen-statement-mariadb"],
                                        ["--map", "x=replicate-ignore-db=db1", "--map", "y=db2.%"]),
    "filter-real-mariadb-statement": ("filter", ["mariadb-operator-mariadb-poc/domain_id_0"],
                                      ["--replicate-wild-do-table", "sbtest%.%", "--max-binlog-size", "30000"]),
    "filter-real-mysql-row": ("filter", ["osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32"],
                              ["--replicate-ignore-db", "auth", "--max-binlog-size", "4000"]),
    "filter-real-format-change": ("filter", ["rust-us-mysql-cdc-rs/5.7_14_user_var/log.bin",
                                             "rust-us-mysql-cdc-rs/binlog.000733"],
                                  ["--basename", "mixed-bin", "--replicate-ignore-db", "nothing",
                                   "--max-binlog-size", "2000"]),
    "filter-real-relay-log": ("filter", ["blackbeam-rust_mysql_common/rpl_unfiltered_hidden_gcol.000001"], []),
    "filter-gen-row-mariadb": ("filter", ["gen-row-mariadb"],
                               ["--replicate-wild-do-table", "db1.%", "--max-binlog-size", "20000"]),
    "filter-gen-mixed-mysql": ("filter", ["gen-mixed-mysql"],
                               ["--replicate-do-db", "db2", "--replicate-wild-ignore-table", "db1.t1",
                                "--max-binlog-size", "15000"]),
}
SPARK_CASES = [name for name, (command, _, _) in CASES.items() if command == "split"]


def digests(directory: Path) -> dict[str, str]:
    """Every file under `directory` (relative name -> sha256)."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _inputs(names: list[str], fixtures: Path, generated: Path) -> list[str]:
    out = []
    for name in names:
        if name in WORKLOADS:
            directory = generated / name
            if not directory.exists():
                generate(WORKLOADS[name], directory, "master-bin")
            out.append(str(directory))
        elif name == "gen-incidents":
            directory = generated / name
            if not directory.exists():
                from tests.spark_jobs.test_split_segments import _incident_binlogs
                _incident_binlogs(directory)
            out.append(str(directory))
        else:
            out.append(str(fixtures / name))
    return out


def argv_of(name: str, fixtures: Path, generated: Path, out: Path) -> list[str]:
    command, inputs, options = CASES[name]
    extra = ["--no-spark"] if command == "split" else []
    return [command, *_inputs(inputs, fixtures, generated), "--out", str(out), *options, *extra]


def run_case(name: str, fixtures: Path, generated: Path, out: Path) -> dict[str, str]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv_of(name, fixtures, generated, out))
    assert code == 0, name
    return digests(out)


def run_spark_case(spark, name: str, fixtures: Path, generated: Path, out: Path) -> dict[str, str]:
    from dumpfilter.spark_jobs.split_by_schema import config_from_args, split_spark

    argv = argv_of(name, fixtures, generated, out)[:-1]  # without --no-spark
    args = build_parser(argv).parse_args(argv)
    split_spark(spark, args.inputs, args.out, config_from_args(args), max_size=args.max_binlog_size,
                chunk_bytes=args.chunk_bytes or None, verify_checksums=args.verify_checksums)
    return digests(out)


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, str]]:
    return json.loads(REFERENCE.read_text())


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("generated")


def test_the_reference_covers_every_case(reference):
    assert set(reference) == set(CASES)
    assert all(reference[name] for name in CASES)  # every case wrote files


@pytest.mark.parametrize("name", list(CASES))
def test_output_bytes_match_the_reference(shared_fixtures, generated, tmp_path, reference, name):
    assert run_case(name, shared_fixtures, generated, tmp_path / "out") == reference[name]


@pytest.mark.spark
@pytest.mark.parametrize("name", SPARK_CASES)
def test_spark_split_bytes_match_the_reference(spark, shared_fixtures, generated, tmp_path, reference, name):
    assert run_spark_case(spark, name, shared_fixtures, generated, tmp_path / "out") == reference[name]


def test_a_changed_byte_fails_the_comparison(shared_fixtures, generated, tmp_path, reference):
    """The comparison can fail: one flipped byte in one output file is a different digest."""
    name = "split-real-mysql-row"
    out = tmp_path / "out"
    assert run_case(name, shared_fixtures, generated, out) == reference[name]
    victim = out / sorted(reference[name])[-1]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    assert digests(out) != reference[name]


if __name__ == "__main__":  # regenerate data/split_reference.json
    import tempfile

    from tests.conftest import SHARED_FIXTURES

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result = {name: run_case(name, SHARED_FIXTURES, root / "generated", root / name) for name in CASES}
    REFERENCE.parent.mkdir(exist_ok=True)
    REFERENCE.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"{REFERENCE}: {sum(map(len, result.values()))} files in {len(result)} cases", file=sys.stderr)
