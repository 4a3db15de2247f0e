"""Waiting for a state, never for a time: `wait_for` polls a predicate until it holds. Its
`give_up` only ends a wait that would otherwise never end (a broken product); it asserts no speed,
so a loaded machine makes a test slower, never red."""

from __future__ import annotations

import time
from collections.abc import Callable

GIVE_UP = 60.0


def wait_for(predicate: Callable[[], object], give_up: float = GIVE_UP, every: float = 0.02) -> bool:
    """True once `predicate()` holds; False if it still does not after `give_up` seconds."""
    deadline = time.monotonic() + give_up
    while not predicate():
        if time.monotonic() >= deadline:
            return bool(predicate())
        time.sleep(every)
    return True
