"""Stretches on the gRPC wire (DumpRequest.skip_stretches): a slave under the placeholder or the
empty-transaction policy that asks for them is sent skipped MariaDB transactions in a row as one
event holding their GTIDs and XIDs, or their GTIDs alone (it makes each COMMIT again), and ends with the same relay log, position, GTID
state and counts as a slave sent each transaction apart; only its wire differs. The master's
Stats stay what a replica is sent. A stretch the slave cannot relay whole is an error."""

from __future__ import annotations

import struct
import zlib

import pytest

from dumpfilter.errors import DumpFilterError
from dumpfilter.master.model import ChannelSpec, Registration
from dumpfilter.master.service import DumpService
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.slave.config import SlaveConfig
from dumpfilter.slave.node import Slave
from dumpfilter.v1 import dump_pb2
from dumpfilter.workload.generator import WorkloadSpec, generate

from tests.support.dump_helpers import relay_units, run_slave

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(180)]

# Row units, statement units with DDL among them (a skipped DDL under the placeholder policy is a
# GTID and one placeholder: no framing pair, so it ends a stretch), and MySQL's (never stretched).
WORKLOADS = {
    "mariadb-row": dict(seed=17, transactions=900, max_binlog_size=120_000),
    "mariadb-mixed": dict(seed=18, transactions=900, binlog_format="mixed", ddl_share=0.05, max_binlog_size=120_000),
    "mysql-row": dict(seed=19, transactions=600, flavor="mysql", ddl_share=0.05, max_binlog_size=120_000),
}
RULES = [RuleSet(do_db=("db1",)), RuleSet(ignore_table=("db2.t1",), wild_ignore_table=("db3.%",))]
COUNTS = ("events_received", "bytes_received", "placeholders", "heartbeats", "events_relayed", "bytes_relayed")
STRETCHES = (0x100, 0x101)  # a stretch's second seed (types::PLACEHOLDER_STRETCH, EMPTY_STRETCH)


@pytest.fixture(scope="module", params=sorted(WORKLOADS))
def binlogs(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    generate(WorkloadSpec(**WORKLOADS[request.param]), directory)
    return request.param, directory


def _stretches(blob: bytes) -> int:
    """The stretches among a batch's events."""
    found, off = 0, 0
    while off < len(blob):
        (size,) = struct.unpack_from("<I", blob, off + 9)
        if blob[off + 4] == 13 and struct.unpack_from("<I", blob, off + 5)[0] == 0 and size > 39:
            found += struct.unpack_from("<Q", blob, off + 27)[0] in STRETCHES
        off += size
    return found


@pytest.mark.parametrize("policy", ["placeholder", "empty-transaction"])
@pytest.mark.parametrize("rules", RULES, ids=["do-db", "ignore-tables"])
def test_a_slave_sent_stretches_ends_as_one_sent_each_transaction(binlogs, master_factory, tmp_path, rules, policy,
                                                                 monkeypatch):
    name, directory = binlogs
    master, address = master_factory(directory)
    seen = {True: 0, False: 0}
    batch = Slave._batch

    def counting(self, message):
        seen[self.config.skip_stretches] += _stretches(message.events)
        return batch(self, message)

    monkeypatch.setattr(Slave, "_batch", counting)
    slaves = {}
    for server_id, stretches in ((41, False), (42, True)):
        slaves[stretches] = run_slave(address, tmp_path / str(stretches), server_id, rules=rules, skip_policy=policy,
                                      skip_stretches=stretches, relay_log_size=200_000)
    apart, stretched = slaves[False], slaves[True]
    assert relay_units(tmp_path / "True") == relay_units(tmp_path / "False")
    assert {c: getattr(stretched.counters, c) for c in COUNTS} == {c: getattr(apart.counters, c) for c in COUNTS}
    assert (stretched.info.master_file, stretched.info.master_pos) == (apart.info.master_file, apart.info.master_pos)
    assert stretched.info.gtid_state == apart.info.gtid_state
    assert seen[False] == 0
    if name.startswith("mariadb"):
        assert seen[True] > 0
    else:
        assert seen[True] == 0  # (MySQL units are sent as their forms)
    if name.startswith("mariadb"):
        assert stretched.counters.wire_bytes < apart.counters.wire_bytes
    stats = master.service.slaves
    assert stats[42].stats.bytes_sent == stats[41].stats.bytes_sent == apart.counters.bytes_received
    assert stats[42].stats.events_sent == stats[41].stats.events_sent
    assert stats[42].stats.placeholders == stats[41].stats.placeholders == apart.counters.placeholders


def _first_stretch(directory, policy: str) -> tuple[list[bytes], int]:
    """The batches of a stretched do-db stream from the start, and the offset of the first stretch
    in the first batch that holds one (moved there: the batches before it are kept)."""
    svc = DumpService(directory)
    svc.register(Registration(server_id=5, skip_policy=policy, filters=(ChannelSpec(None, RuleSet(do_db=("db1",))),)))
    batches = []
    for batch in svc.stream(5, placeholder_runs=True, skip_stretches=True):
        blob = b"".join(bytes(p) for p in batch.parts)
        batches.append(blob)
        off = 0
        while off < len(blob):
            (size,) = struct.unpack_from("<I", blob, off + 9)
            if _stretches(blob[off : off + size]):
                return batches, off
            off += size
        if batch.caught_up:
            break
    raise AssertionError("no stretch in the stream")


@pytest.mark.parametrize("policy", ["placeholder", "empty-transaction"])
def test_a_stretch_the_slave_cannot_relay_whole_is_an_error(tmp_path, policy):
    directory = tmp_path / "binlogs"
    generate(WorkloadSpec(**WORKLOADS["mariadb-row"]), directory)
    batches, at = _first_stretch(directory, policy)
    blob = bytearray(batches[-1])
    (size,) = struct.unpack_from("<I", blob, at + 9)
    # The first inner event (a GTID) made a Rotate, its CRC and the stretch's sealed again: a
    # well-formed event that holds something no skipped transaction is.
    first = at + 35
    (first_size,) = struct.unpack_from("<I", blob, first + 9)
    blob[first + 4] = 4
    struct.pack_into("<I", blob, first + first_size - 4, zlib.crc32(blob[first : first + first_size - 4]))
    struct.pack_into("<I", blob, at + size - 4, zlib.crc32(blob[at : at + size - 4]))
    slave = Slave(SlaveConfig(master="-", server_id=11, relay_dir=tmp_path / "relay", rules=RuleSet(do_db=("db1",)),
                              skip_policy=policy))
    for earlier in batches[:-1]:
        slave._batch(dump_pb2.DumpBatch(events=earlier, position=dump_pb2.Position(file="f", pos=4)))
    with pytest.raises(DumpFilterError, match="stretch of skipped transactions"):
        slave._batch(dump_pb2.DumpBatch(events=bytes(blob), position=dump_pb2.Position(file="f", pos=4)))
    # Its CRC not sealed again: the scanner's check refuses it first, with its offset.
    blob[at + size - 1] ^= 0xFF
    with pytest.raises(DumpFilterError, match="CRC32 mismatch in RAND"):
        slave._batch(dump_pb2.DumpBatch(events=bytes(blob), position=dump_pb2.Position(file="f", pos=4)))
