"""The lint worker at the master's exit (a CI run printed "Exception in thread lint-dispatch" and a
traceback as a master shut down): the exit's `close` kills the worker process while the dispatch
thread may be in an exchange with it. Whatever the moment, the exchange fails as a worker that
ended does (FAILED, one line), and no worker is started again after `close`."""

from __future__ import annotations

import subprocess
import sys

from dumpfilter.master import lint_jobs


def test_an_exchange_with_a_worker_whose_pipe_is_gone_fails_without_raising():
    worker = lint_jobs._Worker()
    try:
        assert worker._run(([], []), 0) == []  # a worker started, answering a message with nothing to do
        assert worker.proc is not None and worker.proc.poll() is None
        proc = worker.proc
        assert proc is not None and proc.stdin is not None
        proc.stdin.close()  # as the exit's kill leaves it mid-exchange: writing raises ValueError
        [(state, why)] = worker._run(([], []), 1)
        # (issue #62) not failed: the look is queued again by its owner, and a worker runs again
        assert state == lint_jobs.ENDED and "ended" in why
        assert worker.restarts == 1 and worker.proc is not proc and worker.proc.poll() is None
    finally:
        worker.close()


def test_after_close_no_worker_is_started_again():
    worker = lint_jobs._Worker()
    worker.close()
    [(state, why)] = worker._run(([], []), 1)
    assert state == lint_jobs.FAILED and "shutting down" in why
    assert worker.proc is None


def test_a_close_between_the_idle_check_and_the_restart_fails_without_raising():
    """The window a CI run hit (AttributeError in `_restart`, a traceback as the master shut down):
    the worker process ended while idle, and the exit's `close` took it away after `_run` saw it
    had ended. The exchange fails in one line, and no worker is started after the close."""
    worker = lint_jobs._Worker()

    class ClosingPoll(subprocess.Popen[bytes]):  # a real process; its poll lets the exit's close in
        def poll(self) -> int | None:
            code = super().poll()
            worker.close()
            return code

    try:
        worker.stop()
        ended = ClosingPoll([sys.executable, "-c", "pass"])
        ended.wait()
        worker.proc = ended
        [(state, why)] = worker._run(([], []), 1)
        assert state == lint_jobs.FAILED and "shutting down" in why
        assert worker.proc is None
    finally:
        worker.close()
