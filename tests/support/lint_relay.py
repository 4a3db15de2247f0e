"""A relay in front of the master's real lint worker, to end it mid-result (issue #62): run as
`python lint_relay.py HOLD_DIR -m dumpfilter.master.lint_jobs`, it starts the real worker with the
arguments after HOLD_DIR and copies the master's messages to it and its replies back, byte for byte.
While HOLD_DIR/hold exists, the next reply is cut: the relay hands the master only the first half
of the bytes it read, removes `hold` (unless it says `always`), writes HOLD_DIR/held (its pid) and
waits to be killed. The
master has then read part of a reply from its worker process, which dies as the test kills it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def main() -> None:
    hold_dir = Path(sys.argv[1])
    child = subprocess.Popen([sys.executable, *sys.argv[2:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
    assert child.stdin is not None and child.stdout is not None

    def messages() -> None:  # master -> worker
        stdin = child.stdin
        while data := os.read(0, 1 << 16):
            stdin.write(data)
            stdin.flush()
        stdin.close()

    threading.Thread(target=messages, daemon=True).start()
    out = child.stdout.fileno()
    while data := os.read(out, 1 << 16):  # worker -> master
        hold = hold_dir / "hold"
        if hold.exists():
            os.write(1, data[:max(1, len(data) // 2)])
            if hold.read_text() != "always":
                hold.unlink()
            # (written whole, then named: a test that sees `held` reads the pid, never an empty file)
            (hold_dir / f"held.{os.getpid()}").write_text(str(os.getpid()))
            os.replace(hold_dir / f"held.{os.getpid()}", hold_dir / "held")
            while True:
                time.sleep(60)
        os.write(1, data)


if __name__ == "__main__":
    main()
