"""`run_streams` stopped by a signal while it is still starting its streams: the streams already
started are stopped and joined before the signal goes on, so none writes into a work directory its
caller is removing (a SIGTERM once left `relay-log.info.tmp` behind a `simulate` that exited 143)."""

from __future__ import annotations

import threading

import pytest

from dumpfilter.lab.simulate import streams
from dumpfilter.lab.simulate.streams import EVERYTHING, StreamJob, run_streams
from dumpfilter.skip_policy import DEFAULT as DEFAULT_SKIP_POLICY
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(120)]


def test_a_signal_between_two_stream_starts_joins_the_stream_started(tmp_path, monkeypatch, dumpfilter_binlog,
                                                                      dumpfilter_master):
    master = dumpfilter_master(dumpfilter_binlog(transactions=20000, schemas=2))
    plans = [StreamJob(f"s{n}", EVERYTHING, 10 + n, DEFAULT_SKIP_POLICY, tmp_path / f"relay-{n}") for n in range(2)]
    real_thread = threading.Thread
    started: list[threading.Thread] = []

    class SignalledAtSecondStart(real_thread):
        def start(self) -> None:
            if self.name.startswith("simulate-streams") and started:
                # The first stream writes its relay log: the signal comes before the second starts.
                assert wait_for(lambda: (plans[0].relay_dir / "relay-log.info").exists(), 60)
                raise KeyboardInterrupt
            if self.name.startswith("simulate-streams"):
                started.append(self)
            super().start()

    monkeypatch.setattr(streams.threading, "Thread", SignalledAtSecondStart)
    with pytest.raises(KeyboardInterrupt):
        run_streams(master.address, plans, concurrency=2)
    monkeypatch.undo()
    assert len(started) == 1
    assert not started[0].is_alive(), "a stream started before the signal runs on after it"
