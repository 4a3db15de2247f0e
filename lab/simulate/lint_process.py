"""`dumpfilter lint`'s prediction for each slave of a simulation, computed once per distinct rule
set in a child process while the streams run (lint reads the whole binlog: in the simulation's own
process it would take the GIL from the streams). The master's own Register-time lint is off in a
simulation, so each rule set is linted exactly once.

The child is a fresh Python running `_main` of this module (not a fork of a process that runs gRPC): the job pickled on
its stdin, the predictions pickled on its stdout. It has a session of its own, so a Ctrl-C on the
terminal reaches only the simulation, which kills it; and it dies with the simulation however that
ends (`dumpfilter.children`: a simulation killed outright left it linting a large binlog, orphaned)."""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dumpfilter.errors import DumpFilterError
from dumpfilter.children import dies_with_parent

if TYPE_CHECKING:
    from dumpfilter.rules.ruleset import RuleSet, Settings

    # One rule set to lint: a slave's rules, settings and replica_schema (the topology's source, or None).
    LintKey = tuple[RuleSet, Settings, str | None]


def _lint(files: list[str], jobs: list[LintKey]) -> list[dict[str, Any]]:
    from dumpfilter.binlogs.lint import new_linter
    from dumpfilter.binlogs.lint_scan import lint_scan
    from dumpfilter.rules.lint_rules import rule_warnings
    from dumpfilter.rules.schema import load_schema

    # One compiled scan for every rule set (binlogs.lint_scan): each unit some Linter needs decoded once.
    found = lint_scan([Path(f) for f in files], [new_linter(rules, settings, replica_schema=load_schema(
        replica, "replica_schema") if replica is not None else None) for rules, settings, replica in jobs])
    return [{"breaks": len(breaks), "first": breaks[0].to_json() if breaks else None,
             "warnings": rule_warnings(rules),  # a rule that keeps no table (`db.`)
             # the writes a replica with these rules silently gets wrong (rules.lint_divergence)
             "diverges": breaks.divergence.writes, "divergence": breaks.divergence.to_json()}
            for (rules, _, _), breaks in zip(jobs, found)]


class LintProcess:
    """Started at once; `results()` waits for it: one {"breaks", "first", "warnings", "diverges", "divergence"} per (rules, settings, replica_schema)."""

    def __init__(self, files: list[Path], rule_sets: list[LintKey]) -> None:
        self.keys = list(dict.fromkeys(rule_sets))
        self.proc = subprocess.Popen([sys.executable, "-c", f"import {__name__} as m; m._main({os.getpid()})"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
                                     preexec_fn=dies_with_parent())
        stdin = self.proc.stdin
        assert stdin is not None  # (stdin=PIPE)
        try:
            pickle.dump(([str(f) for f in files], self.keys), stdin)
            stdin.close()
        except OSError:
            pass  # the child died at once: results() says so

    def results(self) -> dict[LintKey, dict[str, Any]]:
        assert self.proc.stdout is not None  # (stdout=PIPE)
        try:
            state, value = pickle.load(self.proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            state, value = "error", f"the lint process ended with status {self.proc.wait()}"
        self.close()
        if state != "ok":
            raise DumpFilterError(f"lint: {value}")
        return dict(zip(self.keys, value))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        with contextlib.suppress(OSError):
            if self.proc.stdout is not None:  # (stdout=PIPE)
                self.proc.stdout.close()


def _main(parent: int) -> None:
    if os.getppid() != parent:  # the simulation died before the child could ask to die with it
        return
    files, jobs = pickle.load(sys.stdin.buffer)
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the result pipe
    reply: tuple[str, object]
    try:
        reply = ("ok", _lint(files, jobs))
    except DumpFilterError as exc:
        reply = ("error", str(exc))
    pickle.dump(reply, out)
    out.flush()

