"""What `binlogs.lint_scan` reads of the statement units by keys (a GTID, single-table DML Queries the
core keys, their context events, framing Queries, an XID: core/src/stmt_units.rs), beside its safe bits:
the INSERT heads of the units a Linter checks, each read off its Query event once for every Linter
(`Heads`), and their statements answered by key (`KeyVerdicts`).

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
from functools import cached_property
import re
import struct

from dumpfilter import _core
from dumpfilter.codec.constants import HEADER_LEN, EventType
from dumpfilter.codec.event import Buffer, decode_text, query_text
from dumpfilter.codec.format_description import FormatDescription
from dumpfilter.codec.gtid import GtidInfo
from dumpfilter.codec.scanner import UnitList, unit_events
from dumpfilter.rules.lint import Linter
from dumpfilter.rules.lint_records import Verdict
from dumpfilter.rules.lint_sql import insert_column_list
from dumpfilter.rules.statements import statement_tables

# An INSERT/REPLACE statement's head: its verb up to its first `)` (`insert_passes`), matched at the
# start of its text (a keyed statement holds no comment).
_HEAD = re.compile(rb"(?:insert|replace)\b[^)]{0,4096}\)?", re.IGNORECASE)
# A key's first byte: its kind. INSERT/REPLACE ... SELECT keys stand for statements reading other tables.
_SELECT_KINDS = frozenset({_core.KIND_INSERT_SELECT, _core.KIND_REPLACE_SELECT})
_QUERY = int(EventType.QUERY)
_U32 = struct.Struct("<I")
_QUERY_LENS = struct.Struct("<BHH")  # a Query's post-header from its db_len: db_len, error_code, status_vars_len
_QUOTES = ("`", "'", '"')
# A key's class for one Linter (`KeyVerdicts.key_class`): safe, unsafe (its units are fed), or an
# INSERT/REPLACE whose column list or count `_insert_shape` checks against the replica's columns
# (each statement looked at).
SAFE, UNSAFE, COLUMNS = 0, 1, 2


def head_list(head: str | None) -> list[str] | None:
    """An INSERT/REPLACE's column list read off its head (its text up to its first `)`: a keyed
    statement holds no comment); None where the head does not tell (quoted, cut, no list in it)."""
    if not head or not head.endswith(")") or any(q in head for q in _QUOTES):
        return None
    return insert_column_list(head)


def insert_passes(sql: str, columns: tuple[str, ...], count_ok: bool, listed: list[str] | None = None) -> bool:
    """Whether `_insert_shape` finds nothing wrong with an INSERT/REPLACE against the replica's
    `columns` (`count_ok`: whether a list-less INSERT's count matches): its column list `listed`
    (read off its head), else read off the whole of `sql`."""
    if listed is None:
        listed = insert_column_list(sql)
        if listed is None:
            return True  # INSERT ... SET, or text `_insert_shape` does not follow
    return all(column.lower() in columns for column in listed) if listed else count_ok


class Pieces:
    """The keyed statements of one buffer's units (`_core.statement_pieces`), read once for every
    Linter, on the first unit one asks about."""

    def __init__(self, units: UnitList, n: int, keys: list[_core.StatementKey]):
        found = _core.statement_pieces(units, n)
        self.keys = sorted(keys, key=lambda key: key.id)  # by key id (0, 1, ...)
        self.key_bytes = [key.key for key in self.keys]
        self.id_bytes = found.keys
        self.bounds = memoryview(found.bounds).cast("I")
        self.ids = memoryview(found.keys).cast("I")
        self.queries = memoryview(found.queries).cast("Q")


class Heads:
    """The INSERT/REPLACE heads (`_HEAD`, lower case) of one buffer's keyed statements, each read
    off its Query event once for every Linter, and only those of the units a Linter checks: where
    the whole buffer was searched for them (0.56 s of a 1.37 s lint of the 340 MB MIXED question
    binlog, whose other databases' INSERTs no rule set checks)."""

    def __init__(self, units: UnitList, n: int, buf: Buffer, keys: list[_core.StatementKey],
                 fmt: FormatDescription | None):
        self.units, self.n, self.buf, self.keys, self.fmt = units, n, buf, keys, fmt
        self._heads: dict[int, bytes | None] = {}  # by Query offset: its head (None: none read)
        self._format = (fmt.post_header_len(_QUERY), fmt.checksum_len) if fmt is not None else (0, 0)

    @cached_property
    def pieces(self) -> Pieces:
        return Pieces(self.units, self.n, self.keys)

    def _head(self, at: int) -> bytes | None:
        """The head of the Query event at `at`, lower case; None when its text does not open with one."""
        found = self._heads.get(at, b"")
        if found != b"":
            return found
        buf, (post_len, crc) = self.buf, self._format
        size, = _U32.unpack_from(buf, at + 9)
        db_len, _, status_len = _QUERY_LENS.unpack_from(buf, at + HEADER_LEN + 8)
        text = at + HEADER_LEN + post_len + status_len + db_len + 1
        match = _HEAD.match(buf, text, max(text, min(at + size - crc, len(buf))))
        head = self._heads[at] = match.group().lower() if match is not None else None
        return head

    def failing(self, check: bytes, shapes: dict[int, tuple[tuple[str, ...], bool]]) -> set[int]:
        """The units of `check` (a byte per unit) with a statement of a key of `shapes` (by key id: the
        replica's columns, whether a list-less INSERT's count matches) that `insert_passes` does not
        pass, each head read once, and any whose statements are not read here."""
        found: set[int] = set()
        if self.fmt is None:
            return {k for k in range(len(check)) if check[k]}
        fmt, buf = self.fmt, self.buf
        pieces = self.pieces
        bounds, queries, id_bytes = pieces.bounds, pieces.queries, pieces.id_bytes
        listed_of: dict[bytes | None, list[str] | None] = {}  # a head's column list (None: it does not tell)

        def fails(at: int, columns: tuple[str, ...], count_ok: bool, memo: dict[bytes | None, bool]) -> bool:
            head = self._head(at)
            ok = memo.get(head)
            if ok is None:
                if head not in listed_of:
                    listed_of[head] = head_list(decode_text(head)) if head is not None else None
                listed = listed_of[head]
                if listed is None:  # the head does not tell: read off the whole text
                    text = query_text(buf, at, at + _U32.unpack_from(buf, at + 9)[0], fmt)
                    return text is None or not insert_passes(text[1], columns, count_ok)
                ok = memo[head] = insert_passes("", columns, count_ok, listed)
            return not ok

        k = check.find(1)
        while 0 <= k < min(len(check), self.n):
            if bounds[k] == bounds[k + 1]:  # (none read: every unit of `check` is a statement unit by keys)
                found.add(k)
            k = check.find(1, k + 1)
        # The statements of the keys in `columns`: their key ids' words found in the statements' key ids.
        for key_id, (columns, count_ok) in shapes.items():
            memo: dict[bytes | None, bool] = {}  # by head: whether it passes this key's columns
            word = key_id.to_bytes(4, "little")
            at = id_bytes.find(word)
            while at >= 0:
                if at % 4:
                    at = id_bytes.find(word, at + 1)
                    continue
                j = at >> 2
                k = bisect_right(bounds, j) - 1
                if k < len(check) and check[k] and k not in found and fails(queries[j], columns, count_ok, memo):
                    found.add(k)
                at = id_bytes.find(word, at + 4)
        return found


Key = bytes | tuple[str, _core.StatementShape]  # a keyed statement's key bytes, or a lone one's (db, shape)


class KeyVerdicts:
    """One Linter's verdicts by statement key (its bytes, across buffers and files, or a lone
    statement's (default database, shape)), each asked once while the state holds (what
    `binlogs.lint_scan`'s safe bits read too), forgotten by the tables they read (`forget`); and the
    units answered from them (`answered`)."""

    def __init__(self, linter: Linter):
        self.linter = linter
        self.verdicts: dict[Key, Verdict | None] = {}
        # The keys by the tables (lower case) their answers read; under None, the keys read from no
        # table alone (forgotten after any change).
        self.by_table: dict[str | None, set[Key]] = {}
        self.answered = 0
        self.quiet = False  # past its first break (`lint_scan`'s first_break): row units and safe keys not fed

    def forget(self, tables: set[str] | None = None) -> None:
        """The answers of `tables` forgotten (and the keys read from no table alone), or all of
        them (None): after a unit fed that changed the Linter's state (`Linter.touched`)."""
        if tables is None:
            self.verdicts.clear()
            self.by_table.clear()
            return
        for table in (*tables, None):
            for key in self.by_table.pop(table, ()):
                self.verdicts.pop(key, None)

    def verdict(self, key: Key, kind: int, db: str, sql: str) -> Verdict | None:
        """The verdict of `key` (of kind `kind`: KIND_*), asked of its first statement (`sql` under
        `db`) once while the state holds; None: its statements are fed. INSERT/REPLACE ... SELECT
        keys have none: their statements read tables of their own, which the key does not name."""
        if key in self.verdicts:
            return self.verdicts[key]
        verdict = None if kind in _SELECT_KINDS else self.linter.key_verdict(db, sql)
        self.verdicts[key] = verdict
        if verdict is not None:  # filed by the tables it read (`forget`)
            tables: set[str] | None = {table.lower() for _, table in (*verdict.primary.updated,
                                                                     *verdict.replica.updated)}
        else:  # by the tables its text names: a temporary table or a function made forgets all
            info = statement_tables(sql, db)
            tables = {table.lower() for _, table in (*info.updated, *info.read)} \
                if info.parse_ok and not self.linter.primary.temps else None
        for table in (None,) if tables is None else tables:
            self.by_table.setdefault(table, set()).add(key)
        return verdict

    def key_class(self, verdict: Verdict | None) -> int:
        """The class of a statement key, read off its verdict (`verdict`)."""
        if verdict is None:
            return UNSAFE
        if self.quiet:  # past the first break only divergence is counted: a DML statement changes no state
            return UNSAFE if verdict.notes else SAFE
        if verdict.columns is not None and not verdict.notes:
            return COLUMNS
        return SAFE if verdict.quiet else UNSAFE

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
            if verdict is None or verdict.columns is not None:
                return False  # (a statement whose columns are held to the replica's: fed, `Heads.failing`)
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
        verdict, as `answer` does a statement unit's: True, nothing done, where it neither breaks
        nor changes state (its class safe, or its INSERT's columns pass); False (nothing done) when
        it has none: it is fed."""
        db, sql, shape = lone
        verdict = self.verdict((db, shape), shape.kind, db, sql)
        cls = self.key_class(verdict)
        if cls == COLUMNS:
            assert verdict is not None and verdict.columns is not None  # (COLUMNS)
            return insert_passes(sql, *verdict.columns, head_list(sql[:sql.find(")") + 1]))
        if cls == SAFE:
            return True
        if verdict is None or verdict.columns is not None:
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
