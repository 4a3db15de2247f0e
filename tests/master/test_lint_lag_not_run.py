"""Issue #82: a rule set lint does not run (its binlog past --lint-max-mb, or lint failed) counted as
behind by the whole binlog in Stats (`Lint_behind_bytes`) and /metrics (`dumpfilter_lint_*`), and
the hidden rule sets' lags were summed: 709 MB of lag for a 31 MB binlog, never shrinking, so a lag
alert fired for good. Now a rule set lint does not read has no lag (its state says why), and the
lag of the rule sets a scraper may not see is the furthest behind of them: never more than the
binlog."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import grpc
import pytest

from dumpfilter.binlogs import binlog_paths
from dumpfilter.master.serve.metrics import registry_for
from dumpfilter.v1 import dump_pb2_grpc
from tests.master.test_lint_worker_restart import _pid, _register, _stats, fresh_worker  # noqa: F401 (a fixture)
from tests.master.test_metrics_auth import ROOT, samples, scrape, serving
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(300)]

SCHEMAS = ("db1", "db2", "db3", "db4")  # a rule set each


def test_rule_sets_lint_does_not_run_report_no_lag(workload_dir):
    # 1.5 MB of binlog over a bound of 0.5 MiB: no rule set is linted at Register ("not run")
    with serving(workload_dir, "--metrics-port", "0", "--lint-max-mb", "0.5") as (address, url):
        with grpc.insecure_channel(address) as channel:
            stub = dump_pb2_grpc.DumpFilterStub(channel)
            for server_id, schema in enumerate(SCHEMAS, 2):
                _register(stub, server_id, f"{schema}.%")
            states = [_stats(stub, server_id) for server_id in range(2, 2 + len(SCHEMAS))]
        assert {(s.lint_state, s.lint_behind_bytes, s.lint_behind_files) for s in states} == {("not run", 0, 0)}
        status, text = scrape(url)
        assert status == 200
        assert samples(text, "dumpfilter_lint_behind_bytes") == {}  # no lag at all, rather than 4 x 1.5 MB
        assert samples(text, "dumpfilter_lint_behind_files") == {}
        not_run = {k: v for k, v in samples(text, "dumpfilter_lint_state").items() if 'state="not run"' in k}
        assert len(not_run) == len(SCHEMAS) and set(not_run.values()) == {1.0}, not_run
        run = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "status", "--master", address, "--json"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        rows = json.loads(run.stdout)
        assert [(r["Lint"], r["Lint_behind_bytes"], r["Lint_behind_files"]) for r in rows] == \
            [("not run", None, None)] * len(SCHEMAS)
        run = subprocess.run([sys.executable, "-m", "dumpfilter", "master", "status", "--master", address],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and "not run" in run.stdout, run.stdout
        assert not re.search(r"; [\d.]+ (bytes|MiB).* behind", run.stdout), run.stdout  # the Lint cell's lag


def test_hidden_rule_sets_lag_is_the_furthest_behind_never_more_than_the_binlog(workload_dir, master_factory,
                                                                               fresh_worker):  # noqa: F811
    size = sum(p.stat().st_size for p in binlog_paths(workload_dir))
    files = len(binlog_paths(workload_dir))
    master, address = master_factory(workload_dir)
    with grpc.insecure_channel(address) as channel:
        stub = dump_pb2_grpc.DumpFilterStub(channel)
        _register(stub, 2, "db1.%")
        assert wait_for(lambda: _stats(stub, 2).lint_state == "done", give_up=120), _stats(stub, 2)
        pid = _pid()
        os.kill(pid, signal.SIGSTOP)  # lint held back: the rule sets registered now stay pending, unread
        try:
            for server_id, schema in enumerate(SCHEMAS[1:], 3):
                _register(stub, server_id, f"{schema}.%")
            pending = [_stats(stub, server_id) for server_id in range(3, 2 + len(SCHEMAS))]
            assert {(s.lint_state, s.lint_behind_bytes) for s in pending} == {("pending", size)}
            hidden = registry_for(master.service, None)  # a scraper that may see no slave: every rule set hidden
            assert hidden.get_sample_value("dumpfilter_lint_behind_bytes", {"rule_set": ""}) == size
            assert hidden.get_sample_value("dumpfilter_lint_behind_files", {"rule_set": ""}) == files
            assert hidden.get_sample_value("dumpfilter_lint_state", {"rule_set": "", "state": "pending"}) == 3
        finally:
            os.kill(pid, signal.SIGCONT)
