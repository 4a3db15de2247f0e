"""MySQL units skipped under the placeholder and empty-transaction policies are sent by the core's
send walk (core/src/skip_forms/mysql.rs: the GTID's transaction_length rewritten), not unit by unit
in Python (issue #57 goal 3): through a real gRPC master and slave, the slave receives the bytes
the per-unit path sends (a master reading through the reference reader), and no skipped unit goes
to the policy's per-unit `skipped` but those the core cannot answer at all (as many as under the
heartbeat policy). On MySQL binlogs, generated (ROW and MIXED with DDL, with and without CRC32s,
8.0 GTIDs with transaction_length) and written by real servers (5.7 GTIDs, 8.0 Anonymous_GTIDs)."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from dumpfilter import skip_policy
from dumpfilter.codec import BinlogWriter, group_transactions, read_events
from dumpfilter.codec.encode import build_event
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.slave.node import Slave
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.oracles.master import ReferenceSegmentCache
from tests.support.dump_helpers import relay_units, run_slave

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

POLICIES = ("placeholder", "empty-transaction")
# Real MySQL binlogs (MANIFEST.md): 8.0.31 Anonymous_GTIDs with transaction_length (ROW and DDL),
# 5.7 Anonymous_GTIDs (no transaction_length), 5.7 GTIDs of a STATEMENT binlog with context events.
FIXTURES = {
    "binlog.000693": (RuleSet(wild_ignore_table=("hdb_meta.%o%",)), RuleSet(do_db=("nosuchdb",))),
    "binlog.000733": (RuleSet(wild_ignore_table=("test.Demo",)), RuleSet(do_db=("nosuchdb",))),
    "mysql-bin.checksum-crc32": (RuleSet(do_db=("auth", "menkor_dev")), RuleSet(do_db=("nosuchdb",))),
    "log.bin": (RuleSet(do_db=("nosuchdb",)),),
}


def _without_checksums(src: Path, dst: Path) -> None:
    """The binlog files of `src` written again with binlog_checksum=NONE (positions and
    transaction_length made right by the writer)."""
    dst.mkdir()
    for path in sorted(src.glob("master-bin.0*")):
        events = read_events(path.read_bytes())
        fde = events[0]
        body = bytearray(fde.body)
        body[-1] = 0  # the checksum algorithm byte: OFF
        raw = fde.raw[:19] + bytes(body)
        fmt = FormatDescription.parse(raw + b"\0" * 4)
        plain = build_event(fde.type_code, bytes(body), fmt=fmt, server_id=fde.server_id, timestamp=fde.timestamp,
                            log_pos=4 + 19 + len(body) + 4)
        with open(dst / path.name, "wb") as out:
            writer = BinlogWriter(out, plain)
            for txn in group_transactions(events[1:]):
                writer.write_transaction([build_event(e.type_code, e.body, fmt=fmt, server_id=e.server_id,
                                                      timestamp=e.timestamp, log_pos=e.log_pos, flags=e.flags)
                                          for e in txn.events])
    shutil.copy(src / "master-bin.index", dst / "master-bin.index")


@pytest.fixture(scope="module")
def mysql_binlogs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mysql-skip-forms")
    out = {}
    for name, spec in {"row": WorkloadSpec(seed=21, schemas=4, tables_per_schema=2, transactions=500, flavor="mysql",
                                           binlog_format="row", cross_db_share=0.2, ddl_share=0.05,
                                           max_binlog_size=60_000),
                       "mixed": WorkloadSpec(seed=22, schemas=4, tables_per_schema=2, transactions=500,
                                             flavor="mysql", binlog_format="mixed", ddl_share=0.1,
                                             insert_select_share=0.25, max_binlog_size=60_000)}.items():
        generate(spec, root / name)
        out[name] = root / name
    _without_checksums(out["row"], root / "row-nocrc")
    out["row-nocrc"] = root / "row-nocrc"
    return out


class _PerUnit:
    """Counts the skipped units each policy's per-unit way (`SkipPolicy.skipped`) made."""

    def __init__(self, monkeypatch) -> None:
        self.calls: Counter[str] = Counter()
        for cls in (skip_policy.SkipPolicy, skip_policy.Placeholder, skip_policy.EmptyTransaction):
            original = cls.__dict__["skipped"]

            def spy(policy, events, result, _original=original):
                self.calls[policy.name] += 1
                return _original(policy, events, result)

            monkeypatch.setattr(cls, "skipped", spy)


def _stream(directory: Path, tmp_path: Path, tag: str, rules: RuleSet, policy: str, reference: bool,
            monkeypatch) -> tuple[bytes, list]:
    """What a slave of `rules` under `policy` received from a gRPC master of `directory` (through
    the reference reader: every unit by the per-unit way), and its relay log's units."""
    options = {"segments": ReferenceSegmentCache(directory)} if reference else {}
    master, port = create_server(directory, "127.0.0.1:0", **options)
    received: list[bytes] = []
    real = Slave._batch
    monkeypatch.setattr(Slave, "_batch", lambda self, batch: received.append(bytes(batch.events)) or real(self, batch))
    relay = tmp_path / f"relay-{tag}-{'ref' if reference else 'core'}"
    try:
        # (every placeholder on the wire, as a replica gets them: the bytes the per-unit way makes;
        # runs of them are tests/master/test_placeholder_runs.py's)
        run_slave(f"127.0.0.1:{port}", relay, 40, rules=rules, skip_policy=policy, on_disagreement="warn",
                  placeholder_runs=False)
    finally:
        master.stop(grace=1.0)
        monkeypatch.setattr(Slave, "_batch", real)
    return b"".join(received), relay_units(relay)


def _check(directory: Path, tmp_path: Path, rules_sets, monkeypatch) -> dict:
    per_unit = _PerUnit(monkeypatch)
    made = {}
    for n, rules in enumerate(rules_sets):
        per_unit.calls.clear()
        _stream(directory, tmp_path, f"{n}-hb", rules, "heartbeat", False, monkeypatch)
        unanswered = per_unit.calls["heartbeat"]  # skipped units the core does not answer at all
        for policy in POLICIES:
            per_unit.calls.clear()
            sent, relayed = _stream(directory, tmp_path, f"{n}-{policy}", rules, policy, False, monkeypatch)
            by_walk = per_unit.calls[policy]
            per_unit.calls.clear()
            expected, expected_relay = _stream(directory, tmp_path, f"{n}-{policy}", rules, policy, True,
                                               monkeypatch)
            skipped = per_unit.calls[policy]
            assert sent == expected, f"{directory.name} {rules} {policy}: the stream differs from the per-unit path's"
            assert relayed == expected_relay
            assert skipped > 0, "no skipped unit to make a form of"
            assert by_walk == unanswered, (
                f"{directory.name} {rules} {policy}: {by_walk} skipped units made per unit "
                f"({unanswered} under heartbeat, {skipped} by the per-unit path)")
            made[(n, policy)] = (skipped, by_walk)
    return made


@pytest.mark.parametrize("workload", ["row", "mixed", "row-nocrc"])
def test_generated_mysql_units_are_skipped_by_the_walk(mysql_binlogs, tmp_path, monkeypatch, workload):
    """8.0 GTIDs (transaction_length), ROW units, statement units by key and DDL: every skipped
    unit's placeholders or empty transaction is made by the core, byte for byte the per-unit
    path's (before: each went to Placeholder.skipped / EmptyTransaction.skipped)."""
    rules = (RuleSet(do_db=("db1",)), RuleSet(ignore_db=("db2", "db3"), wild_ignore_table=("db4.t1",)))
    made = _check(mysql_binlogs[workload], tmp_path, rules, monkeypatch)
    assert all(by_walk == 0 for _, by_walk in made.values()), made


@pytest.mark.fixtures
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_real_mysql_binlogs_are_skipped_by_the_walk(shared_fixtures, tmp_path, monkeypatch, name):
    """The real MySQL binlogs stream the same bytes from the walk as from the per-unit path, and
    the walk makes the form of every skipped unit it answers."""
    path = next(p for p in shared_fixtures.rglob(name) if p.is_file())
    directory = tmp_path / "binlog"
    directory.mkdir()
    (directory / "a.000001").write_bytes(path.read_bytes())
    made = _check(directory, tmp_path, FIXTURES[name], monkeypatch)
    assert all(by_walk == 0 for _, by_walk in made.values()), made


@pytest.mark.parametrize("workload", ["row", "row-nocrc"])
@pytest.mark.parametrize("policy", ["heartbeat", "empty-transaction", "placeholder"])
def test_mysql_units_kept_in_part_are_cut_by_the_walk(mysql_binlogs, tmp_path, monkeypatch, workload, policy):
    """A MySQL row unit kept in part (cross-database transactions; one table of a database
    ignored) is cut by the core's send walk, its BEGIN kept with its GTID and the GTID's
    transaction_length counting what is sent (under the placeholder policy, a placeholder for each
    event dropped), byte for byte what the per-unit path sends: no
    transaction reaches the stream's per-unit `_unit` (before: every such unit, on every pass)."""
    from dumpfilter.master.stream.slave_stream import SlaveStream

    directory = mysql_binlogs[workload]
    per_unit: Counter[bool] = Counter()
    original = SlaveStream._unit

    def spy(self, unit, *args, **kwargs):
        per_unit[unit.txn.kind != "control"] += 1
        return original(self, unit, *args, **kwargs)

    monkeypatch.setattr(SlaveStream, "_unit", spy)
    for n, rules in enumerate((RuleSet(do_db=("db1",)), RuleSet(wild_ignore_table=("db2.t1",)))):
        sent, relayed = _stream(directory, tmp_path, f"cut-{n}-{policy}", rules, policy, False, monkeypatch)
        by_walk = per_unit[True]
        per_unit.clear()
        expected, expected_relay = _stream(directory, tmp_path, f"cut-{n}-{policy}", rules, policy, True, monkeypatch)
        assert per_unit[True] > 0
        per_unit.clear()
        assert sent == expected, f"{workload} {rules} {policy}: the stream differs from the per-unit path's"
        assert relayed == expected_relay
        assert by_walk == 0, f"{workload} {rules} {policy}: {by_walk} transactions sent per unit"
