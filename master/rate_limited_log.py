"""Log lines a client can cause by the thousand (failed logins, refused sockets), rate-limited so
a flood can neither fill the log nor go unseen. Any face of the master may use it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

# This many lines at once, then one more every LOG_EVERY seconds.
LOG_BURST, LOG_EVERY = 20, 3.0


class ProblemLog:
    """One kind of problem (failed logins; refused or broken connections) at WARNING,
    rate-limited: a burst of LOG_BURST lines, then one every LOG_EVERY seconds; the lines left
    out are counted in the next one written, so a flood cannot fill the log and is still seen.
    Each kind has its own allowance: a flood of one does not hide the other."""

    def __init__(self, logger: logging.Logger, what: str, burst: int = LOG_BURST, every: float = LOG_EVERY,
                 clock: Callable[[], float] = time.monotonic):
        self.logger, self.what, self.burst, self.every, self.clock = logger, what, burst, every, clock
        self._tokens = float(burst)
        self._last = clock()
        self._suppressed = 0
        self._lock = threading.Lock()
        self.count = 0

    def warning(self, message: str, *args: object) -> None:
        with self._lock:
            self.count += 1
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) / self.every)
            self._last = now
            if self._tokens < 1:
                self._suppressed += 1
                return
            self._tokens -= 1
            suppressed, self._suppressed = self._suppressed, 0
        if suppressed:
            message += " (%d more %s not logged before this one)"
            args = (*args, suppressed, self.what)
        self.logger.warning(message, *args)


def shown_user(user: str) -> str:
    """A client-chosen user name as a log line may show it: at most 64 characters, quoted, with
    control characters escaped (repr), so it cannot forge a line of its own."""
    return repr(user[:64])
