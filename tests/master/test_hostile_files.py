"""Hostile files in the binlog directory (issue #27): a FIFO, device, socket or directory the
index names, a missing file, a symlink to a secret or to itself, a file without the binlog magic,
index lines that are not UTF-8, hold a NUL or lead outside the directory. Each one is met by
real slaves over real gRPC after every healthy file before it: one line naming the file (and the
byte offset), a typed status, no thread, file descriptor or stream slot left behind."""

from __future__ import annotations

import gc
import os
import re
import socket
import threading
import time

import grpc
import pytest

from dumpfilter.errors import BinlogError, DumpFilterError, PositionError
from dumpfilter.slave.node import Slave
from dumpfilter.slave.config import SlaveConfig
from dumpfilter.v1 import dump_pb2, dump_pb2_grpc
from tests.support.dump_helpers import relay_units, run_slave
from tests.support.master_command import serve_master, stop_master
from tests.support.waiting import wait_for
import collections
import contextlib

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]

# The slave's error for each status (slave.node._master_error mirrors the master's mapping).
DATA_LOSS, OUT_OF_RANGE = BinlogError, PositionError
NEXT = "master-bin.000009"  # reached only across a rotation: after every file of the workload


def _name_next(directory, line: bytes = b"./" + NEXT.encode()) -> None:
    with open(directory / "master-bin.index", "ab") as f:
        f.write(line + b"\n")


def _fifo(d):
    os.mkfifo(d / NEXT)
    _name_next(d)


def _directory(d):
    (d / NEXT).mkdir()
    _name_next(d)


def _socket(d):
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / NEXT))
    sock.close()  # the socket file stays
    _name_next(d)


def _device(d):
    os.symlink("/dev/zero", d / NEXT)  # a symlink is followed, but only to a regular file
    _name_next(d)


def _missing(d):
    _name_next(d)


def _secret(d):
    secret = d.parent / "secret"
    secret.write_text("root:$6$hash:0:0\n")
    os.symlink(secret, d / NEXT)
    _name_next(d)


def _loop(d):
    os.symlink(NEXT, d / NEXT)
    _name_next(d)


def _no_magic(d):
    (d / NEXT).write_bytes(b"root:x:0:0:root:/root:/bin/bash\n" * 4)
    _name_next(d)


def _not_utf8(d):
    _name_next(d, b"./master-bin.\xff\xfe0009")


def _nul(d):
    _name_next(d, b"./master-bin.00\x000009")


def _outside(d):
    _name_next(d, b"../../../../etc/passwd")


# (setup, the slave's error for the status, what the one line says)
CASES = {
    "fifo": (_fifo, DATA_LOSS, f"{NEXT}: is a FIFO (named pipe), not a binlog file"),
    "directory": (_directory, DATA_LOSS, f"{NEXT}: is a directory, not a binlog file"),
    "socket": (_socket, DATA_LOSS, f"{NEXT}: is a socket, not a binlog file"),
    "device": (_device, DATA_LOSS, f"{NEXT}: is a character device, not a binlog file"),
    "missing": (_missing, OUT_OF_RANGE,
                f"'{NEXT}' is named by the binlog index of"),
    "symlink-to-a-secret": (_secret, DATA_LOSS, f"{NEXT} at byte 0: bad magic: not a binlog file"),
    "symlink-loop": (_loop, DATA_LOSS, f"{NEXT}: too many levels of symbolic links"),
    "no-magic": (_no_magic, DATA_LOSS, f"{NEXT} at byte 0: bad magic: not a binlog file"),
    "index-not-utf8": (_not_utf8, DATA_LOSS,
                       "master-bin.index at byte 173: line 9 of the binlog index is not UTF-8"),
    "index-nul": (_nul, DATA_LOSS, "master-bin.index at byte 160: line 9 of the binlog index names "
                                                   "no binlog file"),
    "index-outside": (_outside, OUT_OF_RANGE,
                      "binlog file 'passwd' is named by the binlog index of"),
}


@pytest.fixture(scope="module")
def healthy_units(workload_dir, tmp_path_factory):
    """What a slave relays of the whole workload, from a master over the untouched directory."""
    from dumpfilter.master.serve.grpc_server import create_server

    master, port = create_server(workload_dir, "127.0.0.1:0")
    try:
        relay = tmp_path_factory.mktemp("clean")
        run_slave(f"127.0.0.1:{port}", relay, 3)
        return relay_units(relay)
    finally:
        master.stop(1.0)


def _failing_slave(address, relay, server_id) -> tuple[type, str]:
    """The error a real slave stops with, as (class, its line). The slave and its relay log are
    let go (the fd counts below are the master's)."""
    slave = Slave(SlaveConfig(master=address, server_id=server_id, relay_dir=relay, until_caught_up=True,
                              connect_retry=0, rpc_timeout=30))
    try:
        slave.run()
    except DumpFilterError as exc:
        return type(exc), str(exc)
    finally:
        del slave
        gc.collect()
    raise AssertionError("the slave did not stop with an error")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fd_targets() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
    return out


def _opened_since(before: list[str]) -> list[str]:
    """What this process holds open now that it did not before (`_fd_targets`, by target): what a
    failed count names, not every descriptor pytest and grpc hold."""
    return list((collections.Counter(_fd_targets()) - collections.Counter(before)).elements())


def _threads() -> int:
    """This process's Python threads but the grpc server's pool ("dump_N"), which its max_workers
    bounds and which adds a worker whenever a call comes while none is idle (a loaded machine does
    that); grpc's C threads likewise grow with load. A thread per stream shows here."""
    return sum(1 for t in threading.enumerate() if not re.fullmatch(r"dump_\d+", t.name))


def _streams_ended(master) -> bool:
    for _ in range(500):
        if all(s.stream is None for s in master.service.slaves.values()):
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_file_past_the_healthy_ones_is_one_line_to_each_stream(case, binlog_copy, master_factory,
                                                                          healthy_units, tmp_path):
    setup, error, line = CASES[case]
    setup(binlog_copy)
    # Two stream slots: a stream that left its slot behind would refuse the later slaves.
    master, address = master_factory(binlog_copy, max_streams=2)
    kind, first = _failing_slave(address, tmp_path / "r0", 10)
    assert kind is error, first
    assert line in first and "\n" not in first
    assert "root:" not in first and "726f6f74" not in first  # no byte of a file shows
    assert relay_units(tmp_path / "r0") == healthy_units  # every healthy file first
    assert _streams_ended(master)
    fds, threads, targets = _open_fds(), _threads(), _fd_targets()
    for server_id in range(11, 15):  # more slaves than slots, one after another
        kind, again = _failing_slave(address, tmp_path / f"r{server_id}", server_id)
        assert kind is error and line in again
    assert _streams_ended(master)
    # Each stream closed what it opened. The lint worker reads the files a new slave's rules meet
    # on its own thread and closes them when its look ends, so the count is awaited, not sampled.
    assert wait_for(lambda: _open_fds() <= fds), _opened_since(targets)
    assert wait_for(lambda: _threads() <= threads + 1), [t.name for t in threading.enumerate()]  # none per stream
    # Meanwhile another slave, reading a healthy file, is served as ever.
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=20), timeout=5)
        call = stub.Dump(dump_pb2.DumpRequest(server_id=20, position=dump_pb2.Position(file="master-bin.000004",
                                                                                          pos=4)), timeout=30)
        assert next(call).events
        call.cancel()


def test_index_lines_in_every_form_a_server_or_a_copy_writes(binlog_copy, master_factory, healthy_units, tmp_path):
    """CRLF line ends, blank lines, `./name`, a bare name, and absolute paths naming the directory
    the binlog was copied from: each line stands for the file of that name here."""
    names = [f"master-bin.{n:06d}" for n in range(1, 9)]
    forms = [f"./{names[0]}", names[1], f"/var/lib/mysql/{names[2]}", f"{binlog_copy}/{names[3]}", "",
             f"  ./{names[4]}  ", f"/var/lib/mysql/{names[5]}", f"./{names[6]}", f"/elsewhere/{names[7]}", ""]
    (binlog_copy / "master-bin.index").write_bytes("".join(f"{line}\r\n" for line in forms).encode())
    _, address = master_factory(binlog_copy)
    run_slave(address, tmp_path / "relay", 5)
    assert relay_units(tmp_path / "relay") == healthy_units


def test_a_fifo_as_the_start_file_of_a_gtid_start_does_not_block(binlog_copy, master_factory, tmp_path):
    """A start by GTID reads each file's head, newest first: a FIFO there must not block it."""
    _fifo(binlog_copy)
    _, address = master_factory(binlog_copy)
    done = {}

    def slave():
        try:
            run_slave(address, tmp_path / "relay", 6, start_gtid="0-1-1")
        except BinlogError as exc:
            done["error"] = exc
    thread = threading.Thread(target=slave, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert NEXT in str(done["error"]) and "FIFO" in str(done["error"])


# -- real `master serve` processes ---------------------------------------------------------------


def _counts(pid: int) -> tuple[int, int]:
    """(threads, open file descriptors) of a process."""
    return len(os.listdir(f"/proc/{pid}/task")), len(os.listdir(f"/proc/{pid}/fd"))


def _first_events(address: str, server_id: int, file: str):
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=server_id), timeout=10)
        call = stub.Dump(dump_pb2.DumpRequest(server_id=server_id, position=dump_pb2.Position(file=file, pos=4)),
                         timeout=30)
        try:
            return next(call).events
        finally:
            call.cancel()


def test_a_fifo_named_by_the_index_wedges_nothing_and_the_master_stops_at_sigterm(binlog_copy, healthy_units,
                                                                                   tmp_path):
    """Issue #27 item 5, against a real `master serve`: every stream gets the healthy files and
    then one line, its thread, descriptors and stream slot are let go, and SIGTERM stops it."""
    _fifo(binlog_copy)
    proc, address = serve_master(binlog_copy, "--max-streams", "2")
    try:
        kind, line = _failing_slave(address, tmp_path / "r0", 30)
        assert kind is BinlogError and f"{NEXT}: is a FIFO (named pipe), not a binlog file" in line
        assert relay_units(tmp_path / "r0") == healthy_units
        time.sleep(0.5)  # the master ends the stream's handler a moment after the slave saw its end
        threads, fds = _counts(proc.pid)
        for server_id in range(31, 35):
            kind, line = _failing_slave(address, tmp_path / f"r{server_id}", server_id)
            assert kind is BinlogError and "FIFO" in line
        time.sleep(0.5)
        after = _counts(proc.pid)
        assert after[0] <= threads + 1 and after[1] <= fds, (threads, fds, after)
        assert _first_events(address, 40, "master-bin.000004")  # a slot is free, a healthy file served
    finally:
        stderr = stop_master(proc)
    assert "Traceback" not in stderr


# Root reads every file whatever its mode: a root master runs without the two capabilities that
# let it (util-linux's setpriv), so that file modes apply to it as to any other user.
WITHOUT_DAC = ("setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search")


def _refused(address: str, server_id: int, file: str = "") -> grpc.RpcError:
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=server_id), timeout=10)
        with pytest.raises(grpc.RpcError) as info:
            list(stub.Dump(dump_pb2.DumpRequest(server_id=server_id, position=dump_pb2.Position(file=file, pos=4)),
                           timeout=30))
        return info.value


def test_unreadable_files_and_directory_are_one_line_and_healthy_files_still_served(binlog_copy, tmp_path):
    """Issue #27 item 8: a binlog file without read permission, reached across a rotation or
    started in, and then the whole directory without permission: one line each (DATA_LOSS,
    MySQL's 1236), no traceback, and a slave on the files after it is served to the end."""
    os.chmod(binlog_copy / "master-bin.000005", 0)
    proc, address = serve_master(binlog_copy, prefix=WITHOUT_DAC if os.geteuid() == 0 else ())
    try:
        kind, line = _failing_slave(address, tmp_path / "r1", 50)
        assert kind is BinlogError and "master-bin.000005: permission denied" in line and "\n" not in line
        assert relay_units(tmp_path / "r1")  # files 1 to 4 first
        error = _refused(address, 51, "master-bin.000005")
        assert error.code() == grpc.StatusCode.DATA_LOSS
        assert "master-bin.000005: permission denied" in error.details()
        later = tmp_path / "r2"
        later.mkdir()
        (later / "relay-log.info").write_text('{"master_file": "master-bin.000006", "master_pos": 4}')
        assert run_slave(address, later, 52, start_gtid=None).caught_up
        os.chmod(binlog_copy, 0)  # the directory itself: neither listed nor searched
        error = _refused(address, 53)
        assert error.code() == grpc.StatusCode.DATA_LOSS
        assert f"{binlog_copy}: permission denied" in error.details()
    finally:
        os.chmod(binlog_copy, 0o755)
        stderr = stop_master(proc)
    assert "Traceback" not in stderr and "internal error" not in stderr


def test_a_file_that_shrinks_under_a_caught_up_stream_is_one_line(binlog_copy, master_factory):
    """The active file truncated below a stream's position (not a server's doing): MySQL's 1236
    naming the file, its new size and the position, not a wait for bytes that never come."""
    _, address = master_factory(binlog_copy)
    last = binlog_copy / "master-bin.000008"
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=60), timeout=5)
        call = stub.Dump(dump_pb2.DumpRequest(server_id=60, heartbeat_period=0.1), timeout=30)
        with pytest.raises(grpc.RpcError) as info:
            for batch in call:
                if batch.caught_up and last.stat().st_size == batch.position.pos:
                    os.truncate(last, 1000)
    assert info.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert info.value.details().startswith("(1236) position ") and "'master-bin.000008' (1000 bytes)" in \
        info.value.details()


def test_an_empty_index_is_error_1236_and_register_still_answers(binlog_copy, master_factory):
    (binlog_copy / "master-bin.index").write_bytes(b"\r\n\n")
    _, address = master_factory(binlog_copy)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        stub.Register(dump_pb2.RegisterRequest(server_id=70), timeout=5)
        with pytest.raises(grpc.RpcError) as info:
            list(stub.Dump(dump_pb2.DumpRequest(server_id=70), timeout=10))
    assert info.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert info.value.details() == f"(1236) no binlog files in {binlog_copy}"
