"""`simulate`'s in-process master keeps its own, smaller budget of binlog pages behind its streams
(issue #60, goal 4: peak memory under 500 MB). The master's default (master.read.segments'
TRAIL_BYTES, 256 MB) keeps a segment's pages mapped until the last stream behind it is done, for
slaves in separate processes that drift apart; those pages are the binlog's page-cache pages, and
RSS counts them while mapped. In `simulate` every stream runs in its one process: on a 342 MB
MariaDB MIXED binlog (bench.experimenter_question, 13 streams) they were half of its peak RSS,
537 MB (351-370 MB with the simulate budget: `python -m bench simulate` with
DUMPFILTER_SIMULATE_SLAVES=question). What the trail budget holds is checked by
tests/master's segment tests; here, that the simulation's master is made with it."""

from __future__ import annotations

import pytest

from dumpfilter.lab.simulate import orchestration, run_simulation
from dumpfilter.master.read.segments import TRAIL_BYTES
from dumpfilter.master.serve import grpc_server
from dumpfilter.topology import parse_topology
from dumpfilter.workload.generator import WorkloadSpec, generate

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(240)]


def test_simulates_master_keeps_fewer_pages_behind_its_streams(tmp_path, monkeypatch):
    binlogs = tmp_path / "binlogs"
    generate(WorkloadSpec(seed=11, schemas=3, transactions=400, flavor="mariadb", max_binlog_size=60_000), binlogs)
    made = []
    real = grpc_server.create_server

    def create_server(*args, **kwargs):  # the real server, its service kept to look at
        server, port = real(*args, **kwargs)
        made.append(server.service)
        return server, port

    monkeypatch.setattr(grpc_server, "create_server", create_server)
    topology = parse_topology(
        f'[master]\nbinlogs = "{binlogs}"\n\n[experiment]\nskip_policies = ["heartbeat"]\n\n'
        '[[slaves]]\nname = "one"\nserver_id = 2\nrules = ["replicate-do-db=db1"]\n')
    result = run_simulation(topology, None, progress=False, keep_work=tmp_path / "work")
    assert result.streams and all(s.error is None for s in result.streams)
    [service] = made
    assert service.segments.trail_bytes == orchestration.SIMULATE_TRAIL_BYTES < TRAIL_BYTES
