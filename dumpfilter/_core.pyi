"""The compiled core (core/, Rust + PyO3): the per-event byte work behind one extension module.
Calls are made per buffer, never per event; unit records come back packed (little-endian u64
words) for memoryview, and the calls' results as named, frozen records that also unpack as the
tuples they replaced. tests/test_layout.py checks that this stub names everything the module
exports."""

from collections.abc import Callable, Iterator
from typing import Any, Final

from typing_extensions import Buffer

# Words per unit record in `UnitsResult.packed` (see scan::Unit::pack).
UNIT_WORDS: Final[int]
# Unit flags (see scan.rs).
F_FAST: Final[int]
F_COMPLETE: Final[int]
F_ROTATE_END: Final[int]
SKIP_STOP: Final[int]
SKIP_HEARTBEAT: Final[int]
SKIP_PLACEHOLDER: Final[int]
SKIP_EMPTY: Final[int]
F_HAS_FDE: Final[int]
F_MARIADB_GTID: Final[int]
F_MYSQL_GTID: Final[int]
F_TAGGED_GTID: Final[int]
F_ANONYMOUS_GTID: Final[int]
F_UNKNOWN_NON_IGNORABLE: Final[int]
F_PAYLOAD: Final[int]
F_STANDALONE: Final[int]
# The keep vocabulary (keep.rs): the byte every compiled walk reads per table name id, per statement
# key id, and per unit answered beforehand (`Scanner.assemble`'s `answers`). Not kept; kept; not
# answered yet (a walk reading statement keys stops with `need_keys`: answer its new keys, call
# again); not the walk's to decide (it stops at the unit, Python decides it).
KEEP_DROP: Final[int]
KEEP_KEEP: Final[int]
KEEP_ASK: Final[int]
KEEP_PYTHON: Final[int]
# `statement_key`'s kinds (stmt.rs): INSERT, REPLACE, UPDATE, DELETE, and INSERT/REPLACE ... SELECT.
KIND_INSERT: Final[int]
KIND_REPLACE: Final[int]
KIND_UPDATE: Final[int]
KIND_DELETE: Final[int]
KIND_INSERT_SELECT: Final[int]
KIND_REPLACE_SELECT: Final[int]
ROW_SKIP: Final[int]
ROW_PARTIAL: Final[int]
ROW_KEEP: Final[int]
ROW_SLOW: Final[int]

# A scan's error: (kind, message, file offset), kind "binlog" or "checksum".
_ScanError = tuple[str, str, int]


class _Record:
    """A named result that still reads as the tuple it replaced: len(), indexing, unpacking."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Any: ...
    def __iter__(self) -> Iterator[Any]: ...


class UnitsResult(_Record):
    """`Scanner.units`: the units of buf[off:] and where the scan stopped."""

    @property
    def packed(self) -> bytes:
        """UNIT_WORDS little-endian u64 per unit (see scan::Unit::pack)."""
    @property
    def tables(self) -> bytes:
        """The fast units' Table_map name ids, u32 little-endian."""
    @property
    def new_names(self) -> list[tuple[bytes, bytes]]:
        """The (db, table) byte pairs interned since the last call (ids continue from before)."""
    @property
    def stop(self) -> int:
        """Buffer offset after the last unit handed out."""
    @property
    def events(self) -> int:
        """Events in the units handed out."""
    @property
    def last_rotate(self) -> int:
        """Buffer offset of the last real Rotate, -1 for none."""
    @property
    def error(self) -> _ScanError | None:
        """None, or (kind, message, offset) of the malformed event that stopped the scan."""


class ScanResult(_Record):
    """`UnitList.scan` and `UnitList.scan_finish`: what `Scanner.units` says, the units kept in the list."""

    @property
    def new_names(self) -> list[tuple[bytes, bytes]]: ...
    @property
    def stop(self) -> int: ...
    @property
    def events(self) -> int: ...
    @property
    def last_rotate(self) -> int: ...
    @property
    def error(self) -> _ScanError | None: ...
    @property
    def added(self) -> int:
        """Units appended to the UnitList."""


class AssembleCounts(_Record):
    """What the compiled assembly wrote (see assemble::Counts), per outcome."""

    @property
    def kept(self) -> int: ...
    @property
    def kept_events(self) -> int: ...
    @property
    def kept_bytes(self) -> int: ...
    @property
    def partial(self) -> int: ...
    @property
    def partial_events_in(self) -> int: ...
    @property
    def partial_bytes_in(self) -> int: ...
    @property
    def partial_events_out(self) -> int: ...
    @property
    def partial_bytes_out(self) -> int: ...
    @property
    def emptied(self) -> int:
        """Emptied units: two events out each (GTID and COMMIT)."""
    @property
    def emptied_events_in(self) -> int: ...
    @property
    def emptied_bytes_in(self) -> int: ...
    @property
    def emptied_bytes_out(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def skipped_events_in(self) -> int: ...
    @property
    def skipped_bytes_in(self) -> int: ...


class AssembleResult(_Record):
    """`Scanner.assemble`: the bytes a filter keeps of a run of units."""

    @property
    def out(self) -> bytes: ...
    @property
    def next(self) -> int:
        """The first unit not handled (Python takes it)."""
    @property
    def out_pos(self) -> int:
        """The output offset after `out`."""
    @property
    def counts(self) -> AssembleCounts: ...
    @property
    def need_keys(self) -> bool:
        """Stopped at a statement unit with a key whose answer is not given: decide the keys
        (`new_keys`, and any other not answered yet) and call again."""
    @property
    def new_keys(self) -> list[tuple[int, bytes, bytes]]:
        """The statement keys met for the first time: (key id, default database, statement)."""
    @property
    def key_uses(self) -> list[tuple[int, int]]:
        """(key id, statements answered by it) for the keys used."""
    @property
    def statement_units(self) -> int:
        """Statement units decided by their keys."""
    @property
    def statements(self) -> int:
        """Statements decided by their keys."""
    @property
    def full(self) -> bool:
        """Stopped at `limit`: start the next file and call again."""
    @property
    def gtids(self) -> bytes:
        """Offsets in `out` of the GTID events a series' next GTID state needs, packed u64."""


class UnitEntry(_Record):
    """`UnitList.unit(k)`: a unit's record, offsets in its part's buffer."""

    @property
    def part(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def events(self) -> int: ...
    @property
    def kind(self) -> int:
        """0 control, 1 transaction, 2 statement."""
    @property
    def flags(self) -> int: ...
    @property
    def gtid_size(self) -> int:
        """Size of the opening GTID event (0 without one)."""
    @property
    def last(self) -> int:
        """Offset of the unit's last event."""
    @property
    def gtid_seq(self) -> int:
        """MariaDB seq_no, or MySQL gno."""
    @property
    def gtid_domain(self) -> int: ...
    @property
    def gtid_server(self) -> int: ...


class SendResult(_Record):
    """`UnitList.send`: what one stream sends of a run of units (see send::send)."""

    @property
    def out(self) -> bytes: ...
    @property
    def next(self) -> int:
        """The first unit not handled."""
    @property
    def kept(self) -> int: ...
    @property
    def partial(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def sent_bytes(self) -> int:
        """Master event bytes sent (kept units and the kept part of partial ones)."""
    @property
    def sent_events(self) -> int: ...
    @property
    def read_bytes(self) -> int:
        """Bytes of the units handled."""
    @property
    def read_events(self) -> int: ...
    @property
    def heartbeats(self) -> int: ...
    @property
    def heartbeat_bytes(self) -> int: ...
    @property
    def skip_units(self) -> int:
        """Skipped units sent in their skip policy's form (placeholders, empty transactions)."""
    @property
    def skip_events(self) -> int: ...
    @property
    def skip_bytes(self) -> int: ...
    @property
    def placeholders(self) -> int:
        """Of `skip_events`, the RAND placeholders."""
    @property
    def pending_unit(self) -> int:
        """The unit whose end a Heartbeat is still owed for, -1 for none."""
    @property
    def pending_done(self) -> bool:
        """Whether the caller's pending Heartbeat was sent or replaced."""


class RelayResult(_Record):
    """`relay_run`: the slave's relay run (see relay::relay_ranges)."""

    @property
    def out(self) -> bytes: ...
    @property
    def next(self) -> int:
        """The first unit not handled."""
    @property
    def units(self) -> int:
        """Units relayed (heartbeats not counted)."""
    @property
    def events(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def heartbeats(self) -> int:
        """Lone Heartbeats passed over."""
    @property
    def lone(self) -> list[tuple[str, str]]:
        """[(default database, SQL)] of the lone statements copied."""
    @property
    def placeholders(self) -> int:
        """Placeholders dropped from the placeholder policy's units relayed as their framing."""


class Scanner:
    """Scanner state across the buffers of one stream: the format in force and interned names."""

    def __init__(self, verify: bool = True) -> None: ...
    def load_fde(self, event: bytes, offset: int) -> _ScanError | None:
        """Adopts the format of the Format_description event `event` (read at file offset
        `offset`); returns None, or an error tuple (kind, message, offset)."""
    @property
    def has_format(self) -> bool: ...
    @property
    def checksum_len(self) -> int: ...
    @property
    def events_walked(self) -> int: ...
    @property
    def pipeline_min(self) -> int | None:
        """The smallest buffer whose CRC runs are checked on a second thread while the walk goes
        on (see scan::Scanner::batched); None: never."""
    @pipeline_min.setter
    def pipeline_min(self, bytes: int | None) -> None: ...
    @property
    def batch_crc(self) -> bool:
        """Whether CRCs are checked a run of events at a time (see crc::Run), else one by one."""
    @batch_crc.setter
    def batch_crc(self, on: bool) -> None: ...
    def units(self, buf: Buffer, off: int, base: int, limit: int = ..., at_eof: bool = False) -> UnitsResult:
        """Groups buf[off..] into units (see scan::Scanner::units): the packed unit records, the
        fast units' Table_map name ids, the names interned meanwhile, where the scan stopped and
        the error that stopped it, if any."""
    def assemble(self, buf: Buffer, start: int, keep: bytes, out_pos: int, base: int, renumber: bool, crc: bool,
                 empty_keep: bool, commit_body: bytes, whole_only: bool = False,
                 answers: bytes | None = None, limit: int | None = None, fresh: bool = False,
                 gtids: bool = False, query_post: int | None = None,
                 stmt_keep: bytes | None = None) -> AssembleResult:
        """What a filter keeps of the last `units` call's units from index `start` on, for a sink
        that writes at output offset `out_pos` (see assemble::assemble); `buf` must be the buffer
        that call scanned. `keep` holds one keep byte (KEEP_*) per name id.
        `limit`: stop before writing a unit once the output offset reaches it (a series' file
        size; `fresh`: the file has no unit yet, its first is written anyway); `gtids`: report
        the GTID events written; `query_post` (the QUERY post-header length): decide statement
        units by their statements' keys, `stmt_keep` holding one keep byte per key id (KEEP_DROP,
        KEEP_KEEP, else not answered: `need_keys`). Returns the bytes, the next unit index, the output offset after
        them, the counts, and what the statement keys did."""
    def slow_units(self) -> bytes:
        """The indices of the last `units` call's units that are not fast, as packed u32: what
        Python decides itself (statements, DDL, control events) before handing the rest to
        `assemble`."""
    def walk(self, buf: Buffer, off: int, base: int, types: bytes) -> tuple[bytes, int, _ScanError | None]:
        """Walks buf[off..]: returns (offsets, stop, error), `offsets` packing u64 buffer offsets
        of the events whose type's byte in `types` (256 bytes) is non-zero, and of every FDE."""


class UnitList:
    """A segment of the master's binlog as every stream walks it (see send::UnitList): the units of
    one or more scans, with the read buffers they lie in."""

    def __init__(self) -> None: ...
    @property
    def scans_inline(self) -> int:
        """Scans `scan_start` ran at once on the calling thread (a buffer of at most 128 KB)."""
    def scan(self, scanner: Scanner, buf: Buffer, off: int, base: int, file: str, limit: int = ...,
             at_eof: bool = False) -> ScanResult:
        """Groups buf[off..] with `scanner` (see scan::Scanner::units) and appends the units to
        the list, as one part read from the binlog file `file` at file offset `base` of buf[0],
        without handing the records to Python: what `Scanner.units` says of them, and how many
        were added; the records are read back with `unit(k)`. `buf`: bytes or a read-only
        contiguous buffer (a mapping opened PROT_READ)."""
    def scan_start(self, scanner: Scanner, buf: Buffer, off: int, base: int, file: str, limit: int = ...,
                   at_eof: bool = False, statements: bool = False, unit_statements: bool = False) -> None:
        """`scan`, started on a thread of its own: the call returns at once, the GIL free, while
        the scan runs (the master scans the next segment while its stream sends this one). The
        scanner's state goes with the thread: the scanner refuses calls until `scan_finish`,
        which waits for the scan and returns what `scan` returns. One scan at a time per UnitList.
        A buffer of at most 128 KB from `off` is scanned at once instead, without the GIL
        (`scans_inline`): a thread's start and join cost as much as its scan. `statements`: when
        this is the list's first part, the thread then reads its statement units too (what
        `statement_units` would read; taken there, see `statements_ahead`). `unit_statements`: it
        also reads the statements of the units with two or more Table_maps (those a slave's table
        rules may keep in part), which `send` and `count` then cut without reading them."""
    unit_statements_ahead: int
    """Units whose statements a scan's thread read (`scan_start(unit_statements=True)`)."""
    def scan_finish(self) -> ScanResult:
        """Waits for the scan `scan_start` began and adds its units: returns what `scan` returns."""
    def __len__(self) -> int: ...
    @property
    def size(self) -> int:
        """Bytes of all units."""
    @property
    def flags_any(self) -> int:
        """The OR of every unit's flags."""
    def unit(self, k: int) -> UnitEntry:
        """Unit k's record, offsets in its part's buffer; IndexError out of range."""
    def tables(self, k: int) -> list[int]:
        """The name ids of unit k's Table_maps (fast units; empty for the others)."""
    def end(self, k: int) -> tuple[int, int] | None:
        """Unit k's end as (part, file offset), None when it ends with a real Rotate."""
    def gtid(self, k: int) -> tuple[tuple[int, int], int] | None:
        """Unit k's MariaDB GTID ((domain, server_id), seq_no), None without one."""
    def gtids(self, start: int, stop: int) -> list[tuple[tuple[int, int], int] | None]:
        """`gtid(k)` for k in start..stop (clipped to the units)."""
    def gtid_sources(self) -> int:
        """How many distinct (domain, server_id) the MariaDB GTIDs have."""
    def with_flags(self, mask: int, start: int = 0) -> list[int]:
        """The indexes of the units from `start` on with any flag of `mask`."""
    def lone_queries(self, formats: list[tuple[int, int, int]]
                     ) -> tuple[list[tuple[str, bytes]], list[tuple[int, str, bool | None, str]]]:
        """The units that are a complete GTID and one plain QUERY event (see
        send::UnitList::lone_query), in order: what the master's statement flag words answer, read
        for a whole segment in one call, as (plain, others). `plain`: [(default database, unit
        indices as u32 LE bytes)], the units whose SQL is plain (`plain_statement`), grouped by
        their default database. `others`: [(k, default database, plain, SQL)], plain False, or
        None where Python must tell. `formats` gives per part (its format's QUERY post-header
        length, its checksum length, the first unit the format is in force for)."""
    def rows(self, keep: bytes) -> bytes:
        """One stream's answer byte per unit (ROW_SKIP, ROW_PARTIAL, ROW_KEEP, ROW_SLOW: not fast)
        from its keep byte per name id (any byte but KEEP_DROP: kept)."""
    def rows_many(self, keeps: list[bytes]) -> list[bytes]:
        """`rows` for many slaves (their keep bytes), in order, over one read of the units."""
    def statement_units(self, formats: list[tuple[int, int, int]]) -> tuple[list[tuple[int, bytes, bytes, bytes]], int]:
        """The statement units by key (stmt_units::StmtUnits), read once for every stream: ([(key
        id, key bytes, default database, first statement)], the units the keys decide). The scan
        thread's build (`scan_start(statements=True)`) is taken when the list is that one part
        and `formats` the format it read under; otherwise they are read now."""
    @property
    def statements_ahead(self) -> bool:
        """Whether `statement_units` took the statement units its scan thread built."""
    def statement_rows(self, row: bytes, keep: bytes) -> bytes:
        """`row` with its ROW_SLOW statement units answered from a keep byte per key id."""
    def send(self, row: bytes, keep: bytes, start: int, batch_bytes: int, limit: int, skip: int,
             partial_ok: bool, pending: bytes | None, server_id: int, heartbeat_crc: bool,
             counts: bytearray, stmt_keep: bytes | None = None, stmt_counts: bytearray | None = None) -> SendResult:
        """What a stream with answers `row` (from `rows`) and keep bytes sends of units[start..]
        until a unit it cannot handle or the batch is full (see send::send); `skip` (SKIP_*) says
        what a skipped unit becomes (a skip policy's `walk_skip`). The units' Table_maps are tallied per name id into `counts` (a bytearray of u32, added to in place);
        with `stmt_keep` (a keep byte per statement key id) statement units kept in part are cut
        at statements, and their statements tallied per key id into `stmt_counts`."""
    def time_cuts(self, seconds: int) -> list[tuple[int, int]]:
        """(first unit, bucket) for each run of units whose first event's timestamp // `seconds`
        is the same bucket."""
    def table_bytes(self, names: int) -> tuple[list[int], int, int]:
        """(bytes of each name id's Table_map and Rows events, the fast units' other bytes, the
        bytes of the units that are not fast)."""
    def count(self, row: bytes, keep: bytes, start: int, skip: int, partial_ok: bool, pending: int,
              server_id: int, heartbeat_crc: bool, stmt_keep: bytes | None = None) -> SendResult:
        """`send`'s walk to the end of the list, counted, never assembled (`out` is empty);
        `pending`: the size of a Heartbeat still owed (0: none)."""


class FlagWords:
    """The master's flag words (see flags.rs): `compute(db, table)` (the Python rule engines)
    gives a missing word as little-endian bytes, once per table and generation."""

    def __init__(self, compute: Callable[[str, str], bytes]) -> None: ...
    def kept(self, db: str, table: str, bit: int) -> bool:
        """Whether slave bit `bit` keeps (db, table)."""
    def keep(self, names: list[tuple[str, str]], bit: int) -> bytes:
        """One byte per (db, table) of `names` (1: slave bit `bit` keeps it): a segment's keep
        bytes for `UnitList.rows`."""
    def word(self, db: str, table: str) -> bytes:
        """The whole word of (db, table) as little-endian bytes (the reference path's masks)."""
    def invalidate(self) -> None:
        """Forgets every word (slaves or their rules changed)."""
    @property
    def generation(self) -> int: ...
    @property
    def computed(self) -> int: ...
    def __len__(self) -> int: ...


def heartbeat(file: str, pos: int, server_id: int, crc: bool) -> bytes:
    """A Heartbeat event for (file, pos), as the master sends one (see send::heartbeat)."""
def replica_frames(events: bytes, seq: int, annotate: bool, master_pos: int, counted: int
                   ) -> tuple[bytes, int, int | None, list[tuple[int, int]], int, int] | None:
    """A batch's events framed for a real replica (replica::frame): None where the batch needs the
    per-event way, else (packets, next sequence id, the replica's moved position or None,
    [(GTID domain, highest seq_no)], master position, counted position)."""


def crc32(data: Buffer) -> int:
    """CRC-32 (zlib's polynomial) of `data`, SIMD-accelerated."""


def payload_bytes(body: Buffer, max_out: int = 1 << 30) -> bytes:
    """The inner events' bytes of a Transaction_payload event body; ValueError when malformed."""


def statements(buf: Buffer, body: int, end: int) -> list[tuple[int, int, int]] | None:
    """The statements of a fast unit's body buf[body:end] (see hops::statements): a list of
    (end offset, events, Table_maps so far), or None for the reference path."""


def renumber(buf: bytearray, start: int, stop: int, base: int, crc: bool) -> tuple[int, list[int]]:
    """Renumbers the whole events of buf[start:stop] in place for output offset `base` (see
    assemble::renumber); returns (last non-zero timestamp, offsets of FDEs left to the caller)."""


def plain_statement(sql: bytes) -> bool | None:
    """`rules.statements.plain_statement` for a statement's UTF-8 bytes, None where Python must
    answer (text with non-ASCII bytes or a leading comment; see sql::plain_statement)."""
def statement_key(sql: bytes) -> tuple[int, bytes | None, bytes] | None:
    """The key shape of a statement's UTF-8 bytes, as the compiled assembly reads it (see
    stmt::dml_shape): (kind, qualifier or None, table), or None where Python's parser decides."""


def statement_facts(sql: bytes) -> tuple[Any, ...] | None:
    """What the rule engine reads of a DDL or multi-table statement (see facts::facts): (kind,
    updated, read, temporary, if_exists, db_name, renames, trigger, refs as ((db, table), alias),
    set_columns, targets, columns, trigger_def as (timing, event, writes), target as (object,
    db, name)); names are bytes, a name's database None where the text gives none. None where
    Python's parser reads it."""


def foreign_log_pos(buf: Buffer, off: int) -> bool:
    """Whether buf[off:] (a file's first bytes) holds another server's log_pos values: a relay log."""


def hop(buf: Buffer, off: int) -> tuple[int, int]:
    """The benchmarks' compiled baseline: a bare header hop over buf[off:], (events, stop)."""


def relay_run(scanner: Scanner, buf: Buffer, start: int, keep: bytes,
              lone: tuple[int, int] | None = None) -> RelayResult:
    """The slave's relay run over the last `units` call of `scanner` (see relay::relay_ranges):
    the bytes to relay, the next unit index, the counts, and the lone statements copied. `lone`:
    (QUERY post-header length, checksum length) of the format in force, to copy lone statements
    too; None, to stop at them."""


_StatementRelay = tuple[bytes, int, int, int, int, int, bool, list[tuple[int, bytes, bytes]], list[tuple[int, int]], int]


def relay_statements(scanner: Scanner, buf: Buffer, start: int, formats: tuple[int, int],
                     stmt_keep: bytes) -> _StatementRelay:
    """The slave's relay run over the statement units of the last `units` call of `scanner` from
    `start` on (see relay_stmt::relay_statements): (bytes, next unit, units, events, bytes,
    heartbeats, need_keys, new keys [(id, db, sql)], key uses [(id, times)], statements)."""


def split_route(scanner: Scanner, buf: Buffer, start: int, keeps: list[bytes], counted: list[bool],
                bases: list[int], stmt_keeps: list[bytes] | None = None, stmt_known: int = 0,
                query_post: int = 0, crc_len: int = 0, framing: bool = False
                ) -> tuple[int, list[tuple[bytearray, bytes, bytes]], int, int, bool, list[tuple[int, bytes, bytes]]]:
    """Split's routing walk over the last `units` call of `scanner` (see split::route): the next
    unit index, per output (its copies back to back, packed u64 unit ends offset by its base),
    units written to two counted outputs or more, units no output keeps; each output's packed
    u64 GTID marks (see gtid_marks) come third. With `stmt_keeps` (a keep byte per statement key
    id for each output; ids from `stmt_known` on not answered yet) statement units are routed by
    their keys too: then whether the walk stopped at a key not answered yet, and the keys new
    since the last call [(id, default database, statement)]."""

def gtid_marks(buf: bytearray, start: int, stop: int) -> bytes:
    """Offsets (packed u64) of the GTID events of buf[start:stop] a series' next GTID state
    needs (see split::gtid_marks)."""
