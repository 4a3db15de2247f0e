"""A master that stops lets go of its mappings of the closed binlog files (`MasterServer.stop`,
`SegmentCache.close`): the shared whole-file mappings (`windows.MappingFiles`) would otherwise stay in
the process's address space and RSS after the master is gone, under whatever the process does next
(`simulate --verify` reads every relay log after `master.stop`: the 250 MB binlog's mapping was
half of its peak RSS). Checked in /proc/self/maps, with the garbage collector off: the mappings go
when the master stops, not whenever a collection runs."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

from dumpfilter.master.read import windows
from dumpfilter.master.serve.grpc_server import create_server
from dumpfilter.workload.generator import WorkloadSpec, generate
from tests.support.dump_helpers import run_slave

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not Path("/proc/self/maps").is_file(),
                                reason="reads /proc/self/maps (Linux)")


def _mapped(directory: Path) -> list[str]:
    with open("/proc/self/maps") as f:
        return [line for line in f if str(directory) in line]


def test_a_stopped_master_maps_no_binlog_file(tmp_path, monkeypatch):
    binlogs = tmp_path / "binlogs"
    generate(WorkloadSpec(seed=7, schemas=3, transactions=400, flavor="mariadb", max_binlog_size=60_000), binlogs)
    monkeypatch.setattr(windows.Window, "MAP_MIN", 0)  # every closed file mapped, however small
    master, port = create_server(binlogs, "127.0.0.1:0")
    enabled = gc.isenabled()
    gc.disable()
    try:
        run_slave(f"127.0.0.1:{port}", tmp_path / "relay", 3)
        assert _mapped(binlogs), "the master mapped none of the closed files: nothing to let go"
        assert master.service.segments.mappings.whole_mappings()
    finally:
        master.stop(1.0)
    try:
        assert master.service.segments.mappings.whole_mappings() == {}
        assert _mapped(binlogs) == []
    finally:
        if enabled:
            gc.enable()
