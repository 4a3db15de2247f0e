"""Where one Python function's time goes, by sampling (a diagnostic's tool, no figure of `make
bench`): a command run under py-spy (`record`, its raw stacks), and the samples taken
inside `root` summed by each function below it, inclusive and own. Sampling adds no work to each call, where a wrapper that reads a call's thread CPU before
and after it (two system calls) adds its own cost to every short call it times, and a function's
own share takes in the core calls it makes (the process is sampled without its native frames:
see `record`), so a step's Python and its C work are told apart by what it calls, not by this.

    python -m bench.diag_shadow_count DIR --schema sbtest --split 30
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# A native frame's Rust hash (`::h0123456789abcdef`), where a raw file has native frames: dropped,
# so that builds name it alike.
_HASH = re.compile(r"::h[0-9a-f]{16}$")


@dataclass
class Split:
    """The samples taken inside `root` (`samples`), and per function below `root` the samples it was
    on the stack in (`inclusive`) and on top of it (`own`). (A sample of a thread waiting for the
    GIL counts to the line that waits: without native frames py-spy cannot tell it.)"""

    root: str
    samples: int = 0
    inclusive: Counter[str] = field(default_factory=Counter)
    own: Counter[str] = field(default_factory=Counter)

    def lines(self, top: int) -> list[str]:
        """The report: the samples, then the `top` functions by inclusive share, then by own share."""
        if not self.samples:
            return [f"no sample inside {self.root}: the run was too short for the sampling rate"]
        share = 100 / self.samples
        out = [f"{self.samples} samples inside {self.root}", "inclusive (on the stack):"]
        out += [f"  {n * share:5.1f}%  {name}" for name, n in self.inclusive.most_common(top)]
        out.append("own (on top of the stack):")
        out += [f"  {n * share:5.1f}%  {name}" for name, n in self.own.most_common(top)]
        return out


def record(py_spy: str, command: list[str], raw: Path, rate: int = 1000) -> int:
    """`command` run under py-spy, its stacks written to `raw`: the command's exit code (py-spy's
    own where it could not run the command). The process is never paused (`--nonblocking`) and its
    native frames are not read: a sample that stops the process for longer than its interval (a
    native unwind of a deep stack) takes more samples where stacks are deep, which doubled a
    count's decisions' share. A call into the core shows as its Python caller's own time."""
    return subprocess.run([py_spy, "record", "--nonblocking", "--rate", str(rate), "--format", "raw", "--output",
                           str(raw), "--", *command], stderr=subprocess.DEVNULL).returncode


def split(raw: Path, root: str) -> Split:
    """The samples of py-spy's raw output `raw` (a stack of `name (where)` frames, outermost first,
    and its count, per line) taken inside the innermost frame named `root`, summed by function."""
    found = Split(root)
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = [_HASH.sub("", frame.split(" (", 1)[0]) for frame in stack.split(";")]
        inside = [k for k, name in enumerate(frames) if name == root]
        if not inside:
            continue
        n, below = int(count), frames[inside[-1] + 1:]
        found.samples += n
        for name in set(below):
            found.inclusive[name] += n
        found.own[below[-1] if below else root] += n
    return found
