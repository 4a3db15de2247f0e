"""One schema model per binlog stream, versioned by position: `model_at(P)` is the starting schema
plus every schema statement logged before P. Readers at different positions (the master's slaves)
share it; each DDL statement is parsed and logged once, whatever the number of readers.

MySQL's replicas each apply the DDL they receive, in order, so a decision at position P must see
the schema as the master had it just before P: a slave far behind must not see a column the slave
ahead of it has already seen added. A per-reader copy would cost one model per slave; this keeps one
log of schema statements and materialises a model for a position only when a decision asks for one
(multi-table UPDATE, triggers), which a ROW binlog never does.

The log is filled by pulling from a `feed` (the master walks its segment cache): `model_at(P)`
first reads every Query statement before P that it has not read yet, so a slave that starts late
in the binlog, or by GTID, still gets the DDL written before its start.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from dumpfilter.rules.schema import SCHEMA_KINDS, SchemaModel, is_schema_statement, strip_version_comments
from dumpfilter.rules.statement_info import StatementInfo
from dumpfilter.rules.statements import statement_tables

# feed(resume, until) -> (position key, sql, default db, resume_after) per Query statement, in
# binlog order, from `resume` (None: the start of the series) to the key `until`; a yield whose key
# is None only moves `resume_after` on.
Feed = Callable[[Any, Any], Iterator[tuple[Any, str | None, str | None, Any]]]

_CHECKPOINT_EVERY = 256   # schema statements between kept full copies of the model
_MAX_CHECKPOINTS = 32     # more than that: every other one is dropped and the spacing doubles
_MATERIALISED = 4         # models kept for positions behind the head (slaves that lag)


class SchemaTimeline:
    """The stream's schema log and the models it gives for positions. Thread-safe."""

    def __init__(self, start: SchemaModel | None, feed: Feed):
        self.start = start if start is not None else SchemaModel()
        self._feed = feed
        self._keys: list[Any] = []                 # position key of each logged schema statement
        self._entries: list[tuple[str, str | None, StatementInfo]] = []
        self._head = self.start.copy()             # the model after the whole log
        self._read_until: Any = None               # every statement before this key is logged
        self._resume: Any = None                   # where the feed resumes
        self._checkpoints: dict[int, SchemaModel] = {0: self.start.copy()}
        self._spacing = _CHECKPOINT_EVERY
        self._models: OrderedDict[int, SchemaModel] = OrderedDict()
        self._lock = threading.RLock()
        self.statements_read = 0                   # Query statements the feed gave (each once)

    # ------------------------------------------------------------------ the log
    def entries_before(self, key: Any, start: int = 0) -> list[tuple[Any, str, str | None, StatementInfo]]:
        """Logged schema statements from index `start` with a key before `key` (read up to it first)."""
        with self._lock:
            self._read_to(key)
            end = bisect.bisect_left(self._keys, key)
            return [(self._keys[i], *self._entries[i]) for i in range(start, end)]

    def _read_to(self, key: Any) -> None:
        if self._read_until is not None and key <= self._read_until:
            return
        for at, sql, db, resume in self._feed(self._resume, key):
            self._resume = resume
            if at is None:
                continue  # progress only: nothing to log before `resume`
            assert sql is not None  # a yield with a key carries its statement (Feed)
            self.statements_read += 1
            if self._keys and at <= self._keys[-1]:
                continue  # already logged (a feed never goes back, but be safe)
            if not is_schema_statement(sql):
                continue
            info = statement_tables(strip_version_comments(sql), db or "")
            if info.kind not in SCHEMA_KINDS or not info.parse_ok:
                continue
            self._keys.append(at)
            self._entries.append((sql, db, info))
            self._head.observe(sql, db, info)
            if len(self._keys) % self._spacing == 0:
                self._checkpoint(len(self._keys), self._head.copy())
        self._read_until = key if self._read_until is None else max(self._read_until, key)

    def _checkpoint(self, index: int, model: SchemaModel) -> None:
        self._checkpoints[index] = model
        if len(self._checkpoints) > _MAX_CHECKPOINTS:
            self._spacing *= 2
            self._checkpoints = {i: m for i, m in self._checkpoints.items() if i % self._spacing == 0}

    # ------------------------------------------------------------------ models
    def model_at(self, key: Any) -> SchemaModel:
        """The model a decision at `key` sees: every schema statement before it applied."""
        with self._lock:
            self._read_to(key)
            index = bisect.bisect_left(self._keys, key)
            model = self._models.get(index)
            if model is not None:
                self._models.move_to_end(index)
                return model
            if index == len(self._keys):
                # The head changes as the log grows: a reader gets its own copy, made once per index.
                model = self._head.copy()
            else:
                base = max((i for i in (*self._checkpoints, *self._models) if i <= index), default=0)
                source = self._models[base] if base in self._models else self._checkpoints[base]
                model = source.copy()
                for sql, db, info in self._entries[base:index]:
                    model.observe(sql, db, info)
            self._models[index] = model
            while len(self._models) > _MATERIALISED:
                self._models.popitem(last=False)
            return model

    @property
    def logged(self) -> int:
        return len(self._keys)
