"""What this process holds resident of a file's mappings (/proc/self/smaps, Linux): the tests that
check a mapping's pages are handed back behind a reader read it here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Applied by the tests that read it: they need Linux's /proc/self/smaps.
needs_smaps = pytest.mark.skipif(not sys.platform.startswith("linux") or not Path("/proc/self/smaps").is_file(),
                                 reason="reads /proc/self/smaps (Linux)")


def resident(path: Path) -> int:
    """Rss bytes of every mapping of `path` in this process."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):  # a mapping's header line
                inside = line.rstrip("\n").endswith(str(path))
            elif inside and first == "Rss:":
                total += int(line.split()[1]) * 1024
    return total
