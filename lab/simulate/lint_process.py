"""`dumpfilter lint`'s prediction for each slave of a simulation, computed once per distinct rule
set while the streams run (lint reads the whole binlog: in the simulation's own process it would take
the GIL from the streams), by the master's lint worker program (binlogs.lint_worker) run as a child of
this process: every rule set's first look reads the whole binlog together, one read and one compiled
scan for all of them. The master's own Register-time lint is off in a simulation, so each rule set is
linted exactly once.

The child is a fresh Python (not a fork of a process that runs gRPC): the looks pickled on its stdin,
its replies pickled on its stdout. It has a session of its own, so a Ctrl-C on the terminal reaches
only the simulation, which kills it; and it dies with the simulation however that ends
(`dumpfilter.children`: a simulation killed outright left it linting a large binlog, orphaned)."""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dumpfilter.binlogs import lint_worker
from dumpfilter.binlogs.lint import Look
from dumpfilter.children import dies_with_parent
from dumpfilter.errors import DumpFilterError
from dumpfilter.rules.lint_rules import rule_warnings

if TYPE_CHECKING:
    from dumpfilter.rules.ruleset import RuleSet, Settings

    # One rule set to lint: a slave's rules, settings and replica_schema (the topology's source, or None).
    LintKey = tuple[RuleSet, Settings, str | None]


class LintProcess:
    """Started at once; `results()` waits for it: one {"breaks", "first", "warnings", "diverges",
    "divergence"} per (rules, settings, replica_schema)."""

    def __init__(self, files: list[Path], rule_sets: list[LintKey]) -> None:
        self.keys = list(dict.fromkeys(rule_sets))
        self.proc = subprocess.Popen([sys.executable, "-m", lint_worker.__name__, str(os.getpid())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
                                     preexec_fn=dies_with_parent())
        stdin = self.proc.stdin
        assert stdin is not None  # (stdin=PIPE)
        # Each rule set's first (and only) look: the whole binlog, its breaks beyond the first counted.
        sized = [(str(f), Path(f).stat().st_size) for f in files]
        looks = [(n, (rules, settings, None, replica, True), sized, 1 << 62, None, 0)
                 for n, (rules, settings, replica) in enumerate(self.keys)]
        with contextlib.suppress(OSError):  # the child died at once: results() says so
            pickle.dump(([], looks), stdin)
            stdin.close()

    def results(self) -> dict[LintKey, dict[str, Any]]:
        assert self.proc.stdout is not None  # (stdout=PIPE)
        try:
            replies = pickle.load(self.proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            replies = [("error", f"the lint process ended with status {self.proc.wait()}")] * len(self.keys)
        self.close()
        out = {}
        for key, (state, look) in zip(self.keys, replies):
            if state != lint_worker.DONE or not isinstance(look, Look):
                raise DumpFilterError(f"lint: {look}")
            out[key] = {"breaks": look.found, "first": look.breaks[0].to_json() if look.breaks else None,
                        "warnings": rule_warnings(key[0]),  # a rule that keeps no table (`db.`)
                        # the writes a replica with these rules silently gets wrong (rules.lint_divergence)
                        "diverges": look.diverges, "divergence": look.divergence}
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        with contextlib.suppress(OSError):
            if self.proc.stdout is not None:  # (stdout=PIPE)
                self.proc.stdout.close()
