"""Fixtures for the gRPC dump service tests: generated multi-schema binlogs, masters on
127.0.0.1 ephemeral ports, and a slave runner."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dumpfilter.workload.generator import WorkloadSpec, generate
from dumpfilter.master.serve.grpc_server import create_server


@pytest.fixture(scope="session")
def workload_dir(tmp_path_factory) -> Path:
    """~1.5 MB of MariaDB ROW binlog over 6 schemas (db1..db6) in 8 files."""
    directory = tmp_path_factory.mktemp("binlog")
    generate(WorkloadSpec(seed=7, transactions=3000, max_binlog_size=200_000), directory)
    return directory


@pytest.fixture
def binlog_copy(workload_dir, tmp_path) -> Path:
    target = tmp_path / "binlog"
    shutil.copytree(workload_dir, target)
    return target


@pytest.fixture
def master_factory():
    servers = []

    def make(binlog_dir, **kwargs):
        master, port = create_server(binlog_dir, "127.0.0.1:0", **kwargs)
        servers.append(master)
        return master, f"127.0.0.1:{port}"

    yield make
    for master in servers:
        master.stop(grace=1.0)
