"""Issue #82: a closed binlog file truncated inside an event (a newer file follows it). Every new
slave failed with "the master's batch ended inside a transaction" and the master logged nothing:
the master sent the cut transaction's whole events, then the error behind them, which the slave
never reached. Now the stream gets every whole transaction before the cut, then DATA_LOSS (1236)
naming the file and the offset of the cut event; the master logs that line; a real slave stops
on it (exit 2, the same line). A cut at an event boundary is a crash's cut, served as before."""

from __future__ import annotations

import logging

import grpc
import pytest

from dumpfilter.cli.app import main
from dumpfilter.binlogs import BinlogFile
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(180)]

CUT_FILE = "master-bin.000002"  # closed: master-bin.000003 follows it


def _events(path):
    """(offset, size) of each event of a binlog file past its FDE."""
    return [(e.pos, e.size) for e in BinlogFile(path) if e.pos > 4][1:]


@pytest.mark.parametrize("where", ["header", "body", "last-byte"])
def test_a_closed_file_cut_inside_an_event_is_data_loss_at_its_offset(where, binlog_copy, master_factory, tmp_path,
                                                                      caplog, capsys):
    target = binlog_copy / CUT_FILE
    events = _events(target)
    start, size = events[len(events) // 2]
    cut = start + {"header": 5, "body": 19 + (size - 19) // 2, "last-byte": size - 1}[where]
    with open(target, "r+b") as f:
        f.truncate(cut)
    caplog.set_level(logging.WARNING, logger="dumpfilter.master")
    _master, address = master_factory(binlog_copy)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=71), timeout=10)
        batches = []
        with pytest.raises(grpc.RpcError) as info:
            for batch in stub.Dump(dump_pb2.DumpRequest(server_id=71), timeout=60):
                batches.append(batch)
    line = f"{binlog_copy / CUT_FILE} at byte {start}: a closed binlog file ends inside an event"
    assert info.value.code() == grpc.StatusCode.DATA_LOSS
    assert info.value.details().startswith(f"(1236) {line}"), info.value.details()
    assert batches and batches[-1].position.file == CUT_FILE and batches[-1].position.pos < start
    logged = [r.getMessage() for r in caplog.records if "Dump ended" in r.getMessage()]
    assert logged == [f"server_id 71: Dump ended: DATA_LOSS (1236) {line} ({cut - start} bytes of it left; "
                      f"the file was truncated, and master-bin.000003 follows it)"], logged
    # A real slave: whole transactions relayed up to the cut, then the master's line, exit 2.
    capsys.readouterr()
    code = main(["slave", "run", "--master", address, "--server-id", "72", "--relay-log-dir", str(tmp_path / "relay"),
                 "--until-caught-up", "--connect-retry", "0"])
    err = capsys.readouterr().err
    assert code == 2 and f"(1236) {line}" in err and "inside a transaction" not in err, err
    assert "Traceback" not in err


def test_a_cut_at_an_event_boundary_is_served_as_a_crash(binlog_copy, master_factory, tmp_path, capsys):
    """The whole events of the cut transaction go out as an incomplete unit, and the stream goes on
    into the next file, as a server's dump thread reads a crashed server's file."""
    target = binlog_copy / CUT_FILE
    events = _events(target)
    start, _size = events[len(events) // 2]
    with open(target, "r+b") as f:
        f.truncate(start)
    _master, address = master_factory(binlog_copy)
    code = main(["slave", "run", "--master", address, "--server-id", "73", "--relay-log-dir", str(tmp_path / "relay"),
                 "--until-caught-up", "--connect-retry", "0"])
    assert code == 0, capsys.readouterr().err
