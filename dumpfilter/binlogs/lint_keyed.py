"""What `binlogs.lint_scan` reads of the statement units by keys (a GTID, single-table DML Queries the
core keys, their context events, framing Queries, an XID: core/src/stmt_units.rs), beside its safe bits:
their INSERT heads, read once per buffer for every Linter (`Heads`), and their statements answered by
key (`KeyVerdicts`).

A unit the safe bits cannot rule out (a key whose table the replica lacks, a write that may silently
diverge) was fed to the Linter whole: decoded, filtered, each statement parsed and decided, about 25 us
a statement, where the statements of a MIXED binlog come in a handful of keys. Each key's verdict
(`Linter.key_verdict`: the rules' decision, the replica's error, whether the divergence check counts
it) is asked once, of the key's first statement, and kept while the Linter's state holds; a unit all
of whose keys have one is answered from them: the Linter acts (`Linter.act`) on the statements whose
verdict leaves something (a break, a divergence counted), each read off its Query event, in order,
up to the unit's first break; the others, and those after the break (not applied), leave nothing
(`key_verdict` answers only statements that change no state). A unit with a key that has no verdict
(a temporary table, an INSERT's columns to check, a statement that is not a plain write) is fed whole.
A lone keyed statement (a GTID and one keyed DML Query, no BEGIN nor XID: an autocommit write to a
non-transactional table, `lint_scan._lone_dml`) is answered so too, its verdict kept by its default
database and `statement_key` shape (`answer_lone`).

The verdicts are forgotten as the safe bits are (`binlogs.lint_scan`): those of the tables a DDL unit
fed touched (`Linter.touched`), or all of them when it may have changed more.
"""

from __future__ import annotations

from bisect import bisect_right
import re

from dumpfilter import _core
from dumpfilter.codec.constants import HEADER_LEN
from dumpfilter.codec.event import Buffer, decode_text, query_text
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.gtid import GtidInfo
from dumpfilter.codec.scanner import UnitList, unit_events
from dumpfilter.rules.lint import Linter
from dumpfilter.rules.lint_records import Verdict
from dumpfilter.rules.lint_sql import insert_column_list

# An INSERT/REPLACE word up to the first `)` anywhere in a buffer, lower-cased (a literal start): a
# superset of the keyed INSERTs' heads (`_Lint._listed`); a head that does not check out sends its units alone.
_HEADS = (re.compile(rb"insert\b[^)]{0,4096}\)?"), re.compile(rb"replace\b[^)]{0,4096}\)?"))
# A key's first byte: its kind. INSERT/REPLACE ... SELECT keys stand for statements reading other tables.
_SELECT_KINDS = frozenset({_core.KIND_INSERT_SELECT, _core.KIND_REPLACE_SELECT})


def head_passes(head: bytes, allowed: set[str], count_ok: bool) -> bool:
    listed = None if not head.endswith(b")") or any(q in head for q in (b"`", b"'", b'"')) \
        else insert_column_list(decode_text(head))
    return listed is not None and (all(column.lower() in allowed for column in listed) if listed else count_ok)


class Heads:
    """The INSERT/REPLACE heads (`_HEADS`) of one buffer by text, read once for every Linter."""

    def __init__(self, units: UnitList, n: int, buf: Buffer):
        self.units, self.n, self.buf = units, n, buf
        self._found: dict[bytes, list[int]] | None = None
        self._starts: list[int] | None = None

    def positions(self) -> dict[bytes, list[int]]:
        if self._found is None:
            low, self._found = bytes(self.buf).lower(), {}
            for match in (m for pattern in _HEADS for m in pattern.finditer(low)):
                self._found.setdefault(match.group(), []).append(match.start())
        return self._found

    def units_holding(self, heads: list[bytes]) -> set[int]:
        starts = self._starts = self._starts or ([self.units.unit(k).start for k in range(self.n)] if heads else [])
        found = self.positions()
        return {bisect_right(starts, at) - 1 for head in heads for at in found[head]}


class Pieces:
    """The keyed statements of one buffer's units (`_core.statement_pieces`), read once for every
    Linter, on the first unit one asks about."""

    def __init__(self, units: UnitList, n: int, keys: list[_core.StatementKey]):
        found = _core.statement_pieces(units, n)
        self.keys = sorted(keys, key=lambda key: key.id)  # by key id (0, 1, ...)
        self.key_bytes = [key.key for key in self.keys]
        self.bounds = memoryview(found.bounds).cast("I")
        self.ids = memoryview(found.keys).cast("I")
        self.queries = memoryview(found.queries).cast("Q")


class KeyVerdicts:
    """One Linter's verdicts by statement key (its bytes, across buffers and files), and the units
    it answered from them (`answered`)."""

    def __init__(self, linter: Linter):
        self.linter = linter
        # By a keyed statement's key bytes, or a lone statement's (default database, shape).
        self.verdicts: dict[bytes | tuple[str, _core.StatementShape], Verdict | None] = {}
        # The keys by the tables (lower case) their verdicts read; under None, the keys without one.
        self.by_table: dict[str | None, set[bytes | tuple[str, _core.StatementShape]]] = {}
        self.answered = 0

    def forget(self, tables: set[str] | None = None) -> None:
        """The verdicts of `tables` forgotten (and the keys that had none), or all of them (None):
        after a unit fed that changed the Linter's state (`Linter.touched`)."""
        if tables is None:
            self.verdicts.clear()
            self.by_table.clear()
            return
        for table in (*tables, None):
            for key in self.by_table.pop(table, ()):
                self.verdicts.pop(key, None)

    def verdict(self, key: bytes | tuple[str, _core.StatementShape], kind: int, db: str, sql: str) -> Verdict | None:
        """The verdict of `key` (a `_core.StatementKey`'s bytes, or a lone statement's (default
        database, `statement_key` shape), of kind `kind`: KIND_*), asked of its first statement
        (`sql` under `db`) once while the state holds; None: its statements are fed. INSERT/REPLACE
        ... SELECT keys have none: their statements read tables of their own, which the key does
        not name."""
        if key in self.verdicts:
            return self.verdicts[key]
        verdict = None if kind in _SELECT_KINDS else self.linter.key_verdict(db, sql)
        self.verdicts[key] = verdict
        tables = (None,) if verdict is None else \
            {table.lower() for _, table in (*verdict.primary.updated, *verdict.replica.updated)}
        for table in tables:
            self.by_table.setdefault(table, set()).add(key)
        return verdict

    def answer(self, k: int, units: UnitList, pieces: Pieces, buf: Buffer, base: int, u: _core.UnitEntry,
               name: str, fmt: FormatDescription | None) -> bool:
        """Unit k (`u`, in `buf` at file offset `base`, of file `name`) answered from its keys'
        verdicts, as `Linter.feed` would have it: False (nothing done) when it is not a statement
        unit by keys or a key has no verdict: it is fed."""
        lo, hi = pieces.bounds[k], pieces.bounds[k + 1]
        if lo == hi or fmt is None:
            return False
        # Each statement acted on, read before any is: a text `query_text` cannot read sends the unit whole.
        acts: list[tuple[Verdict, int, tuple[str, str]]] = []
        known, ids, key_bytes = self.verdicts, pieces.ids, pieces.key_bytes
        for j in range(lo, hi):
            key = key_bytes[ids[j]]
            if key in known:
                verdict = known[key]
            else:
                first = pieces.keys[ids[j]]
                verdict = self.verdict(key, key[0], decode_text(first.db), decode_text(first.sql))
            if verdict is None:
                return False
            if not verdict.quiet:
                at = pieces.queries[j]
                text = query_text(buf, at, at + int.from_bytes(buf[at + 9:at + 13], "little"), fmt)
                if text is None:
                    return False
                acts.append((verdict, at, text))
                if verdict.problem is not None:
                    break  # the replica stops there: the unit's later statements are not applied (nothing)
        self.answered += 1
        if acts:
            self._act(k, units, buf, base, u, name, fmt, acts)
        return True

    def answer_lone(self, k: int, units: UnitList, buf: Buffer, base: int, u: _core.UnitEntry, name: str,
                    fmt: FormatDescription, lone: tuple[str, str, _core.StatementShape]) -> bool:
        """A lone keyed statement's unit k (a GTID and one keyed DML Query, `lone` its (default
        database, text, `statement_key` shape): `lint_scan._lone_dml`) answered from its shape's
        verdict, as `answer` does a statement unit's: False (nothing done) when it has none."""
        db, sql, shape = lone
        verdict = self.verdict((db, shape), shape.kind, db, sql)
        if verdict is None:
            return False
        self.answered += 1
        if not verdict.quiet:
            self._act(k, units, buf, base, u, name, fmt, [(verdict, u.start + u.gtid_size, (db, sql))])
        return True

    def _act(self, k: int, units: UnitList, buf: Buffer, base: int, u: _core.UnitEntry, name: str,
             fmt: FormatDescription, acts: list[tuple[Verdict, int, tuple[str, str]]]) -> None:
        """The Linter acts on unit k's statements `acts` (each its verdict, its Query event's offset
        in `buf`, its (default database, text)), in order, as `Linter.feed` would."""
        mariadb = units.gtid(k)
        gtid = GtidInfo("mariadb", gno=mariadb[1], domain=mariadb[0][0], server_id=mariadb[0][1]).text \
            if mariadb is not None else unit_events(bytes(buf[u.start:u.start + u.gtid_size]), base + u.start, fmt)[0][0].gtid
        for verdict, at, (db, sql) in acts:
            thread = int.from_bytes(buf[at + HEADER_LEN:at + HEADER_LEN + 4], "little")
            self.linter.act(verdict, name, base + u.start, gtid, base + at, sql, db, thread)
