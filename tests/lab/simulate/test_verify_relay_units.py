"""--verify reads the relay logs with the compiled scanner (`equivalence.relay_units` for those
received, `scanned_transactions` for the full stream), handing the Python reader
(`relay_transactions`) only what the scanner cannot hand out whole:
over real relay logs of every skip policy, flavour and format (a file ending inside a placeholder's
GTID group among them), split over many files or cut inside a transaction, both give the same
units (kinds, keys, bytes, master positions), in the same order."""

from __future__ import annotations

import shutil

import pytest

from dumpfilter.binlogs.files import binlog_listing
from dumpfilter.codec.scanner import Scanner
from dumpfilter.codec.transactions import CONTROL
from dumpfilter.lab.simulate import run_simulation, streams
from dumpfilter.slave.config import SlaveConfig
from dumpfilter.lab.simulate.equivalence import _key, relay_transactions, relay_units, scanned_transactions
from dumpfilter.topology import parse_topology
from tests.lab.simulate.test_simulate_verify import _toml

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

SLAVES = [{"rules": ["replicate-do-db=db2"], "policy": "heartbeat", "semantics": "mysql"},
          {"rules": ["replicate-wild-ignore-table=db3.%", "replicate-rewrite-db=db1->dbx"], "policy": "placeholder",
           "semantics": "mysql"}]


@pytest.mark.parametrize(("fmt", "flavor", "seed"), [("mixed", "mariadb", 2909), ("mixed", "mysql", 2909),
                                                     ("row", "mysql", 17), ("statement", "mariadb", 5)])
@pytest.mark.parametrize("relay_log_size", [64 << 20, 6_000])
def test_relay_units_are_the_python_readers(tmp_path, monkeypatch, fmt, flavor, seed, relay_log_size):
    monkeypatch.setattr(streams, "SlaveConfig", lambda **kw: SlaveConfig(relay_log_size=relay_log_size, **kw))
    topology = parse_topology(_toml(fmt, flavor, seed, SLAVES))
    result = run_simulation(topology, None, verify=True, progress=False, keep_work=tmp_path / "work")
    assert result.ok
    scanned, files = 0, 0
    for stream in result.streams:
        relay = stream.plan.relay_dir
        files = max(files, len(binlog_listing(relay)))
        assert _units(relay) == _transactions(relay), relay
        assert _grouped(scanned_transactions(relay)) == _grouped(relay_transactions(relay)), relay
        scanned += sum(u.raw is not None for u in relay_units(relay))
    assert scanned  # the scanner's path was taken
    assert files > 1 or relay_log_size == 64 << 20
    if files > 1:
        return
    # A relay log cut at an event boundary inside its last transaction: the Python reader from there.
    relay = result.streams[0].plan.relay_dir
    cut = tmp_path / "cut"
    shutil.copytree(relay, cut)
    last = cut / binlog_listing(cut)[-1]
    data = last.read_bytes()
    units = Scanner(str(last)).units(data[4:], 0, 4, at_eof=True).units
    body = [u for u in units if u.kind != CONTROL][-1]
    last.write_bytes(data[:4 + body.last])
    assert _units(cut) == _transactions(cut)
    assert _grouped(scanned_transactions(cut)) == _grouped(relay_transactions(cut))
    assert list(relay_units(cut))[-1].raw is None


def _units(relay) -> list[tuple[str, bytes]]:
    return [(u.key, b"".join(e.raw for e in u.events)) for u in relay_units(relay)]


def _transactions(relay) -> list[tuple[str, bytes]]:
    return [(_key(t), b"".join(e.raw for e in t.events)) for t in relay_transactions(relay) if t.kind != CONTROL]


def _grouped(transactions) -> list[tuple[str, bool, list[tuple[bytes, int]]]]:
    return [(t.kind, t.complete, [(e.raw, e.pos) for e in t.events]) for t in transactions]
