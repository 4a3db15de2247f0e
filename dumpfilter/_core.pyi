"""The compiled core (core/, Rust + PyO3): the per-event byte work behind one extension module.
Calls are made per buffer, never per event; unit records come back packed (little-endian u64
words) for memoryview, and the calls' results as named, frozen records that also unpack as the
tuples they replaced. tests/test_layout.py checks that this stub names everything the module
exports; `make lint`'s stubtest, that each name, parameter (name, kind, default) and class
(final at run time) is the binding's."""

from collections.abc import Callable, Iterator
from typing import Any, Final, Self, final, type_check_only

from typing_extensions import Buffer

# PyO3 lists every name the module adds in its `__all__`; `make lint`'s stubtest checks that this
# list and the names the stub makes public are exactly those (constants, classes, functions).
__all__ = [
    "BODY_EVENT", "BODY_ROUTINE", "BODY_TRIGGER", "F_ANONYMOUS_GTID", "F_COMPLETE", "F_FAST",
    "F_HAS_FDE", "F_MARIADB_GTID", "F_MYSQL_GTID", "F_PAYLOAD", "F_ROTATE_END", "F_TAGGED_GTID",
    "F_UNKNOWN_NON_IGNORABLE", "KEEP_ASK", "KEEP_DROP", "KEEP_KEEP", "KIND_DELETE", "KIND_INSERT",
    "KIND_INSERT_SELECT", "KIND_REPLACE", "KIND_REPLACE_SELECT", "KIND_UPDATE", "ROW_KEEP",
    "ROW_PARTIAL", "ROW_SKIP", "ROW_SLOW", "SKIP_EMPTY", "SKIP_HEARTBEAT", "SKIP_PLACEHOLDER",
    "SKIP_STOP", "UNIT_WORDS", "AssembleConfig", "AssembleCounts", "AssembleResult", "BodyReach",
    "CountJob", "CountResult", "DomainSeq", "FlagWords", "GtidRun", "HopResult", "KeyUse", "KeysUsed", "LoneGroup",
    "LoneQueries", "LoneQuery", "LoneText", "MysqlGtids", "ObjectTarget", "QualifiedName",
    "RelayResult", "Relayed", "Rename", "Renumbered", "ReplicaFrames", "RouteOutput", "ScanFault",
    "ScanResult", "Scanner", "SendConfig", "SendResult", "SetColumn", "SplitRoute", "StatementEnd",
    "StatementFacts", "StatementKey", "StatementPieces", "StatementShape", "StatementTables",
    "StatementUnits", "TableBytes", "TableName", "TableReference", "TimeCut", "TriggerDefinition",
    "TriggerWrite", "UnitEnd", "UnitEntry", "UnitList", "UnitsResult", "WalkResult", "body_reach",
    "class_sums", "foreign_log_pos", "gtid_marks", "heartbeat", "held_bytes", "hop", "last_timestamp", "mark_slow",
    "mysql_gtids_at",
    "parens_close", "payload_bytes", "plain_statement", "reaches_key_alone", "relay_run", "relayed", "rename_event",
    "renumber", "replica_frames", "schema_candidates", "split_route", "statement_facts",
    "statement_key", "statement_pieces", "statements",
]

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
# The keep vocabulary (keep.rs): the byte every compiled walk reads per table name id, per statement
# key id, and per unit answered beforehand (`Scanner.assemble`'s `answers`): drop, keep, ask (not
# the walk's to decide: it stops at the unit and Python decides it). Every walk takes its answers
# up front: the statement units of its buffer are read first (`Scanner.statement_units`,
# `UnitList.statement_units`), their keys answered, then walked.
KEEP_DROP: Final[int]
KEEP_KEEP: Final[int]
KEEP_ASK: Final[int]
# `statement_key`'s kinds (stmt.rs): INSERT, REPLACE, UPDATE, DELETE, and INSERT/REPLACE ... SELECT.
KIND_INSERT: Final[int]
KIND_REPLACE: Final[int]
KIND_UPDATE: Final[int]
KIND_DELETE: Final[int]
KIND_INSERT_SELECT: Final[int]
KIND_REPLACE_SELECT: Final[int]
# `body_reach`'s forms (body_reach.rs): where a trigger's, an event's, a routine's body starts.
BODY_TRIGGER: Final[int]
BODY_EVENT: Final[int]
BODY_ROUTINE: Final[int]
ROW_SKIP: Final[int]
ROW_PARTIAL: Final[int]
ROW_KEEP: Final[int]
ROW_SLOW: Final[int]

# The records' common face in the stub only: each record class defines it at run time.
@type_check_only
class _Record:
    """A named result (frozen; its fields by name) that still reads as the tuple it replaced:
    len(), indexing, unpacking, equality with that tuple, hashing, pickling as that tuple."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> Any: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __hash__(self) -> int: ...


@final
class ScanFault(_Record):
    """The malformed event that stopped a scan."""

    @property
    def kind(self) -> str:
        """"binlog" or "checksum"."""
    @property
    def message(self) -> str: ...
    @property
    def offset(self) -> int:
        """Its file offset."""


@final
class TableName(_Record):
    """A table name a scanner interned, as the binlog spells it."""

    @property
    def db(self) -> bytes: ...
    @property
    def table(self) -> bytes: ...


@final
class KeyUse(_Record):
    """A statement key a walk used, and the statements it answered."""

    @property
    def id(self) -> int: ...
    @property
    def statements(self) -> int: ...


@final
class KeysUsed(_Record):
    """What a walk answered by statement keys (stmt_units::ByKeys)."""

    @property
    def uses(self) -> list[KeyUse]:
        """Each key used, and the statements it answered."""
    @property
    def units(self) -> int:
        """Statement units answered by their keys."""
    @property
    def statements(self) -> int:
        """Statements answered by their keys."""


@final
class LoneText(_Record):
    """A lone statement the slave's relay run copied whose text the slave's check reads."""

    @property
    def unit(self) -> int:
        """The unit's index in the scan."""
    @property
    def db(self) -> str: ...
    @property
    def sql(self) -> str: ...


@final
class WalkResult(_Record):
    """`Scanner.walk`: the events of a buffer whose type was asked for (`schema_candidates`: the
    Queries split's first pass hands Python)."""

    @property
    def offsets(self) -> bytes:
        """Packed u64 buffer offsets of the events asked for, and of every FDE."""
    @property
    def stop(self) -> int: ...
    @property
    def error(self) -> ScanFault | None: ...


@final
class UnitEnd(_Record):
    """`UnitList.end(k)`: where unit k ends."""

    @property
    def part(self) -> int: ...
    @property
    def pos(self) -> int:
        """File offset."""


@final
class GtidRun(_Record):
    """`UnitList.mysql_gtids`: the gnos `first`..`last` (both in) of one source uuid."""

    @property
    def source(self) -> str: ...
    @property
    def first(self) -> int: ...
    @property
    def last(self) -> int: ...


@final
class MysqlGtids(_Record):
    """`UnitList.mysql_gtids`: a range of units' MySQL GTIDs."""

    @property
    def runs(self) -> list[GtidRun]:
        """Consecutive gnos of one source, in the units' order."""
    @property
    def tagged(self) -> list[int]:
        """The units whose GTID the caller decodes (a tagged GTID)."""


@final
class LoneGroup(_Record):
    """`UnitList.lone_queries`: the units of plain SQL of one default database."""

    @property
    def db(self) -> str: ...
    @property
    def units(self) -> bytes:
        """Unit indices, u32 little-endian."""


@final
class LoneQuery(_Record):
    """`UnitList.lone_queries`: a unit whose SQL is not plain (False), or Python must tell (None)."""

    @property
    def unit(self) -> int: ...
    @property
    def db(self) -> str: ...
    @property
    def plain(self) -> bool | None: ...
    @property
    def sql(self) -> str: ...


@final
class LoneQueries(_Record):
    """`UnitList.lone_queries`: the lone-statement units of a segment."""

    @property
    def plain(self) -> list[LoneGroup]: ...
    @property
    def others(self) -> list[LoneQuery]: ...


@final
class StatementKey(_Record):
    """A statement key met for the first time (by a scanner's walk, or in a segment's statement
    units): its id, its bytes (what the key is, across scanners and segments, whose ids differ),
    the default database and the first statement met with it."""

    @property
    def id(self) -> int: ...
    @property
    def key(self) -> bytes: ...
    @property
    def db(self) -> bytes: ...
    @property
    def sql(self) -> bytes: ...


@final
class StatementUnits(_Record):
    """`UnitList.statement_units`: the keys, and the units they decide."""

    @property
    def keys(self) -> list[StatementKey]: ...
    @property
    def units(self) -> int: ...


@final
class StatementPieces:
    """`statement_pieces`: the keyed statements of a UnitList's statement units, as packed
    little-endian arrays."""

    @property
    def bounds(self) -> bytes:
        """u32 per unit and one more: unit k's statements are [bounds[k], bounds[k + 1])."""
    @property
    def keys(self) -> bytes:
        """u32 per statement: its key id (`StatementUnits.keys`)."""
    @property
    def queries(self) -> bytes:
        """u64 per statement: its Query event's offset in its unit's part's buffer."""


@final
class CountJob:
    """One stream for `UnitList.count_many`: its answers per unit (`UnitList.rows`), keep bytes
    per name id, walk configuration, the size of a Heartbeat it still owes (0: none), its keep
    byte per statement key id (None: statement units not cut by key)."""

    def __new__(cls, row: bytes, keep: bytes, config: SendConfig, owed: int = 0,
                stmt_keep: bytes | None = None) -> Self: ...
    @property
    def row(self) -> bytes: ...
    @property
    def keep(self) -> bytes: ...
    @property
    def config(self) -> SendConfig: ...
    @property
    def owed(self) -> int: ...
    @property
    def stmt_keep(self) -> bytes | None: ...


@final
class CountResult(_Record):
    """`UnitList.count_many`: one job's count (`walk`), and per time bucket the bytes it read and
    was sent (Heartbeats and skip forms included)."""

    @property
    def walk(self) -> SendResult: ...
    @property
    def read_by_bucket(self) -> list[int]: ...
    @property
    def sent_by_bucket(self) -> list[int]: ...


@final
class TimeCut(_Record):
    """`UnitList.time_cuts`: the first unit of a run whose events' time falls in one bucket."""

    @property
    def unit(self) -> int: ...
    @property
    def bucket(self) -> int: ...


@final
class StatementTables(_Record):
    """`UnitList.statement_tables`: the statement units' bytes by group of keys."""

    @property
    def payload(self) -> list[int]:
        """Per group: its statements' bytes, with their context events."""
    @property
    def envelope(self) -> list[int]:
        """Per group: its share of the envelopes of the units it first wrote its table in."""
    @property
    def framing(self) -> int:
        """The envelopes of units that write no table."""
    @property
    def other(self) -> int:
        """The control units' bytes."""
    @property
    def first(self) -> list[int]:
        """Per key id: its first piece's index (units and statements in order); 2**64-1: not met."""
    @property
    def left(self) -> list[int]:
        """The units not fast, not control, not decided by keys."""


@final
class TableBytes(_Record):
    """`UnitList.table_bytes`."""

    @property
    def by_name(self) -> list[int]:
        """Bytes of each name id's Table_map and Rows events."""
    @property
    def envelope(self) -> list[int]:
        """Each name id's share of the envelopes of the fast units that write it (a unit's
        events but its Table_maps and Rows, split evenly between the tables it names, the bytes
        a division leaves to the first: `share_envelope`)."""
    @property
    def framing(self) -> int:
        """The fast units' other bytes."""
    @property
    def shared(self) -> int:
        """The part of `framing` shared out in `envelope`."""
    @property
    def other(self) -> int:
        """The bytes of the units that are not fast."""


@final
class SendConfig:
    """A stream's walk configuration for `UnitList.send` and `UnitList.count`: what a skipped unit
    becomes (SKIP_*), whether units kept in part may be sent as kept statements, the master's
    server id and the Heartbeats' checksum; for `send`, the bytes already in the batch, the
    size at which it is full, whether placeholders in a row are written as one that counts them
    (`placeholder_runs`) and skipped units in a row as one stretch (`skip_stretches`): a gRPC
    slave that asked; the counts are a replica's still."""

    def __new__(cls, *, skip: int, partial_ok: bool, server_id: int, heartbeat_crc: bool,
                batch_bytes: int = 0, limit: int = ..., placeholder_runs: bool = False,
                skip_stretches: bool = False) -> Self: ...
    @property
    def skip(self) -> int: ...
    @property
    def partial_ok(self) -> bool: ...
    @property
    def server_id(self) -> int: ...
    @property
    def heartbeat_crc(self) -> bool: ...
    @property
    def batch_bytes(self) -> int: ...
    @property
    def limit(self) -> int: ...
    @property
    def placeholder_runs(self) -> bool: ...
    @property
    def skip_stretches(self) -> bool: ...


@final
class AssembleConfig:
    """An output's configuration for `Scanner.assemble` (assemble::Options): whether positions
    are renumbered, whether events carry CRC32, whether an emptied group is written (GTID +
    COMMIT, `commit_body`), whether only units kept whole are taken, whether the GTID events
    written are reported."""

    def __new__(cls, *, renumber: bool, crc: bool, empty_keep: bool, commit_body: bytes,
                whole_only: bool = False, gtids: bool = False, renames: dict[bytes, bytes] | None = None,
                query_post: int = 0, load_post: int = 0, table_map_post: int = 0) -> Self: ...
    @property
    def renumber(self) -> bool: ...
    @property
    def crc(self) -> bool: ...
    @property
    def empty_keep(self) -> bool: ...
    @property
    def commit_body(self) -> bytes: ...
    @property
    def whole_only(self) -> bool: ...
    @property
    def gtids(self) -> bool: ...
    @property
    def renames(self) -> dict[bytes, bytes] | None:
        """replicate-rewrite-db's names written into the units kept whole (read at each call)."""
    @property
    def query_post(self) -> int:
        """With `renames`: QUERY's post-header length (EXECUTE_LOAD_QUERY's and TABLE_MAP's next)."""
    @property
    def load_post(self) -> int: ...
    @property
    def table_map_post(self) -> int: ...


@final
class DomainSeq(_Record):
    """A GTID domain and its highest seq_no in a batch."""

    @property
    def domain(self) -> int: ...
    @property
    def seq_no(self) -> int: ...


@final
class ReplicaFrames(_Record):
    """`replica_frames`: a batch's events framed for a real replica."""

    @property
    def packets(self) -> bytes: ...
    @property
    def seq(self) -> int:
        """The next sequence id."""
    @property
    def moved(self) -> int | None:
        """The replica's moved position, None when it did not move."""
    @property
    def gtids(self) -> list[DomainSeq]: ...
    @property
    def master_pos(self) -> int: ...
    @property
    def counted(self) -> int: ...


@final
class StatementEnd(_Record):
    """`statements`: a statement of a fast unit's body."""

    @property
    def end(self) -> int:
        """Offset after the statement."""
    @property
    def events(self) -> int: ...
    @property
    def tables(self) -> int:
        """Table_maps so far."""


@final
class Renumbered(_Record):
    """`renumber`: what the renumbered events leave to the caller."""

    @property
    def last_timestamp(self) -> int:
        """The last non-zero timestamp."""
    @property
    def fdes(self) -> list[int]:
        """Offsets of the FDEs left to the caller."""


@final
class StatementShape(_Record):
    """`statement_key`: a statement's key shape."""

    @property
    def kind(self) -> int:
        """KIND_*."""
    @property
    def db(self) -> bytes | None:
        """The table's qualifier, None without one."""
    @property
    def table(self) -> bytes: ...


@final
class HopResult(_Record):
    """`hop`: the events hopped and where the hop stopped."""

    @property
    def events(self) -> int: ...
    @property
    def stop(self) -> int: ...


@final
class RouteOutput(_Record):
    """One output of `split_route`."""

    @property
    def out(self) -> bytearray:
        """Its copies back to back."""
    @property
    def ends(self) -> bytes:
        """Packed u64 unit ends, offset by its base."""
    @property
    def gtid_marks(self) -> bytes:
        """Packed u64 offsets of the GTID events a series' next GTID state needs."""


@final
class SplitRoute(_Record):
    """`split_route`: split's routing walk (see split::route)."""

    @property
    def next(self) -> int:
        """The first unit not handled."""
    @property
    def outputs(self) -> list[RouteOutput]: ...
    @property
    def multi(self) -> int:
        """Units written to two counted outputs or more."""
    @property
    def none(self) -> int:
        """Units written to no counted output (by --map without an unassigned output: dropped)."""


@final
class QualifiedName(_Record):
    """A name as a statement gives it."""

    @property
    def db(self) -> bytes | None:
        """Its database, None where the text gives none."""
    @property
    def name(self) -> bytes: ...


@final
class TableReference(_Record):
    """A table reference of a multi-table statement, and its alias."""

    @property
    def table(self) -> QualifiedName: ...
    @property
    def alias(self) -> bytes | None: ...


@final
class Rename(_Record):
    """RENAME TABLE's pair."""

    @property
    def old(self) -> QualifiedName: ...
    @property
    def new(self) -> QualifiedName: ...


@final
class SetColumn(_Record):
    """A SET column of a multi-table UPDATE."""

    @property
    def qualifier(self) -> list[bytes] | None:
        """Its qualifier's parts, None without one."""
    @property
    def column(self) -> bytes: ...


@final
class TriggerWrite(_Record):
    """A table a trigger's body writes, and the event (no database: the trigger's)."""

    @property
    def table(self) -> QualifiedName: ...
    @property
    def event(self) -> str: ...


@final
class TriggerDefinition(_Record):
    """A trigger's definition as the schema model keeps it."""

    @property
    def timing(self) -> str: ...
    @property
    def event(self) -> str: ...
    @property
    def writes(self) -> list[TriggerWrite] | None:
        """In body order; None: a CALL or dynamic SQL could write more."""


@final
class ObjectTarget(_Record):
    """The object a statement without a table list changes."""

    @property
    def object(self) -> str: ...
    @property
    def name(self) -> QualifiedName: ...


@final
class BodyReach(_Record):
    """`body_reach`: what the core reads of a trigger's, routine's or event's body."""

    @property
    def tables(self) -> list[QualifiedName]:
        """The tables of the body statements it clears (each reaches its table alone), each once;
        a database None: the body's."""
    @property
    def starts(self) -> list[int]:
        """The pieces the general path reads: text[starts[k]:ends[k]] (byte offsets)."""
    @property
    def ends(self) -> list[int]: ...


@final
class StatementFacts(_Record):
    """`statement_facts`: what the rule engine reads of a DDL or multi-table statement."""

    @property
    def kind(self) -> str:
        """The `rules.statement_info.Kind` value."""
    @property
    def updated(self) -> list[QualifiedName]: ...
    @property
    def read(self) -> list[QualifiedName]:
        """In order (Python drops the updated ones, repeats, aliases)."""
    @property
    def temporary(self) -> bool: ...
    @property
    def if_exists(self) -> bool: ...
    @property
    def db_name(self) -> bytes | None: ...
    @property
    def renames(self) -> list[Rename]: ...
    @property
    def trigger(self) -> QualifiedName | None: ...
    @property
    def refs(self) -> list[TableReference]: ...
    @property
    def set_columns(self) -> list[SetColumn]: ...
    @property
    def targets(self) -> list[list[bytes]]:
        """DELETE's targets, each as its name's parts."""
    @property
    def columns(self) -> list[bytes] | None:
        """CREATE TABLE's column names (lower-cased), where the core reads them all."""
    @property
    def trigger_def(self) -> TriggerDefinition | None: ...
    @property
    def target(self) -> ObjectTarget | None: ...


@final
class UnitsResult(_Record):
    """`Scanner.units`: the units of buf[off:] and where the scan stopped."""

    @property
    def packed(self) -> bytes:
        """UNIT_WORDS little-endian u64 per unit (see scan::Unit::pack)."""
    @property
    def tables(self) -> bytes:
        """The fast units' Table_map name ids, u32 little-endian."""
    @property
    def new_names(self) -> list[TableName]:
        """The names interned since the last call (ids continue from before)."""
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
    def error(self) -> ScanFault | None:
        """None, or the malformed event that stopped the scan."""
    @property
    def run_events(self) -> int:
        """Events the placeholder runs and stretches among them stand for beyond themselves (scan::RunCount)."""
    @property
    def run_bytes(self) -> int:
        """Bytes they stand for beyond themselves (negative for stretches of empty transactions)."""
    @property
    def run_placeholders(self) -> int:
        """The placeholders among `run_events`."""


@final
class ScanResult(_Record):
    """`UnitList.scan` and `UnitList.scan_finish`: what `Scanner.units` says, the units kept in the list."""

    @property
    def new_names(self) -> list[TableName]: ...
    @property
    def stop(self) -> int: ...
    @property
    def events(self) -> int: ...
    @property
    def last_rotate(self) -> int: ...
    @property
    def error(self) -> ScanFault | None: ...
    @property
    def added(self) -> int:
        """Units appended to the UnitList."""


@final
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
        """Emptied units: a MariaDB group as its GTID and a COMMIT, a MySQL one as its GTID,
        BEGIN and XID or COMMIT."""
    @property
    def emptied_events_in(self) -> int: ...
    @property
    def emptied_bytes_in(self) -> int: ...
    @property
    def emptied_events_out(self) -> int: ...
    @property
    def emptied_bytes_out(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def skipped_events_in(self) -> int: ...
    @property
    def skipped_bytes_in(self) -> int: ...


@final
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
    def by_keys(self) -> KeysUsed:
        """What the statement keys answered."""
    @property
    def full(self) -> bool:
        """Stopped at `limit`: start the next file and call again."""
    @property
    def last_timestamp(self) -> int:
        """The last non-zero timestamp of `out`'s events (0: none), which a Rotate after it takes."""
    @property
    def gtids(self) -> bytes:
        """Offsets in `out` of the GTID events a series' next GTID state needs, packed u64."""


@final
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


@final
class SendResult(_Record):
    """`UnitList.send`: what one stream sends of a run of units (see send::walk)."""

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


@final
class RelayResult(_Record):
    """`relay_run`: the slave's relay run (see relay::relay_ranges)."""

    @property
    def out(self) -> bytes | memoryview:
        """The bytes to relay: the buffer given (all of it relayed), a view of one stretch of
        it, or bytes (the stretches copied)."""
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
    def lone(self) -> list[LoneText]:
        """The lone statements copied whose text the slave's check reads (framing words are not)."""
    @property
    def placeholders(self) -> int:
        """Placeholders dropped from the placeholder policy's units relayed as their framing."""
    @property
    def by_keys(self) -> KeysUsed:
        """What the statement keys answered (the statement units relayed)."""
    @property
    def renamed(self) -> int:
        """Events whose database replicate-rewrite-db renamed (`renames`)."""


@final
class Relayed:
    """`relayed`: what a slave's relay logs hold of a run of the full stream's units (see
    send::relayed)."""

    @property
    def data(self) -> list[bytes]:
        """Per skip policy asked for, the bytes its relay log holds for the run, back to back."""
    @property
    def units(self) -> list[int]:
        """Per skip policy, the units of the run that left something in its relay log."""
    @property
    def next(self) -> int:
        """The first unit not answered (`stop` when every one was)."""


@final
class Scanner:
    """Scanner state across the buffers of one stream: the format in force and interned names."""

    def __new__(cls, verify: bool = True) -> Self: ...
    def load_fde(self, event: bytes, offset: int) -> ScanFault | None:
        """Adopts the format of the Format_description event `event` (read at file offset
        `offset`); returns None, or the error."""
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
    @property
    def holes(self) -> bool:
        """A slave's scanner: the master's placeholders inside a fast unit keep its shape, the
        unit flagged F_HOLES for the relay run (see scan::F_HOLES), never F_FAST."""
    @holes.setter
    def holes(self, on: bool) -> None: ...
    def units(self, buf: Buffer, off: int, base: int, limit: int = ..., at_eof: bool = False) -> UnitsResult:
        """Groups buf[off..] into units (see scan::Scanner::units): the packed unit records, the
        fast units' Table_map name ids, the names interned meanwhile, where the scan stopped and
        the error that stopped it, if any."""
    def assemble(self, buf: Buffer, start: int, keep: bytes, out_pos: int, base: int, config: AssembleConfig, *,
                 answers: bytes | None = None, limit: int | None = None, fresh: bool = False,
                 stmt_keep: bytes | None = None) -> AssembleResult:
        """What a filter keeps of the last `units` call's units from index `start` on, for a sink
        that writes at output offset `out_pos` (see assemble::assemble); `buf` must be the buffer
        that call scanned. `keep` holds one keep byte (KEEP_*) per name id.
        `limit`: stop before writing a unit once the output offset reaches it (a series' file
        size; `fresh`: the file has no unit yet, its first is written anyway); `gtids`: report
        the GTID events written; `stmt_keep`: decide the statement units `statement_units` read
        by their keys, one keep byte per key id (KEEP_DROP, KEEP_KEEP; else Python's). Returns the
        bytes, the next unit index, the output offset after them, the counts, and what the
        statement keys answered."""
    def statement_units(self, buf: Buffer, start: int, query_post: int, crc_len: int) -> StatementUnits:
        """Reads the statement units of the last `units` call's units from index `start` on
        (`buf` the buffer it scanned; `query_post`, `crc_len`: the format in force), for the walks
        that decide them by key (`assemble`, `relay_run`, `split_route`): their keys, ids from 0
        for this scan, to be answered up front (`rules.keep_table.KeepTable.rows`)."""
    def slow_units(self) -> bytes:
        """The indices of the last `units` call's units that are not fast, as packed u32: what
        Python decides itself (statements, DDL, control events) before handing the rest to
        `assemble`."""
    def walk(self, buf: Buffer, off: int, base: int, types: bytes) -> WalkResult:
        """Walks buf[off..]: the offsets of the events whose type's byte in `types` (256 bytes)
        is non-zero and of every FDE, where the walk stopped, and the error that stopped it."""


@final
class UnitList:
    """A segment of the master's binlog as every stream walks it (see send::UnitList): the units of
    one or more scans, with the read buffers they lie in."""

    def __new__(cls) -> Self: ...
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
                   at_eof: bool = False, statements: bool = False, unit_statements: bool = False,
                   annotations: bool = False) -> None:
        """`scan`, started on a thread of its own: the call returns at once, the GIL free, while
        the scan runs (the master scans the next segment while its stream sends this one). The
        scanner's state goes with the thread: the scanner refuses calls until `scan_finish`,
        which waits for the scan and returns what `scan` returns. One scan at a time per UnitList.
        A buffer of at most 128 KB from `off` is scanned at once instead, without the GIL
        (`scans_inline`): a thread's start and join cost as much as its scan. `statements`: when
        this is the list's first part, the thread then reads its statement units too (what
        `statement_units` would read; taken there, see `statements_ahead`). `unit_statements`: it
        also reads the statements of the units with two or more Table_maps (those a slave's table
        rules may keep in part), which `send` and `count` then cut without reading them.
        `annotations`: it also reads what the units' Annotate_rows / Rows_query texts need of a
        gated stream, which `annotations_unshown` then finds read."""
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
    def end(self, k: int) -> UnitEnd | None:
        """Unit k's end (part, file offset), None when it ends with a real Rotate."""
    def gtid(self, k: int) -> tuple[tuple[int, int], int] | None:
        """Unit k's MariaDB GTID as a GTID state's item ((domain, server_id), seq_no), None
        without one: a pair on purpose, the (key, value) a state's dict is updated with."""
    def gtids(self, start: int, stop: int) -> list[tuple[tuple[int, int], int] | None]:
        """`gtid(k)` for k in start..stop (clipped to the units)."""
    def mysql_gtids(self, start: int, stop: int) -> MysqlGtids:
        """The MySQL GTIDs of the complete units among units[start..stop], as runs of consecutive
        gnos per source, and the units whose tagged GTID the caller decodes."""
    def gtid_sources(self) -> int:
        """How many distinct (domain, server_id) the MariaDB GTIDs have."""
    def with_flags(self, mask: int, start: int = 0) -> list[int]:
        """The indexes of the units from `start` on with any flag of `mask`."""
    def lone_queries(self, formats: list[tuple[int, int, int]]) -> LoneQueries:
        """The units that are a complete GTID and one plain QUERY event (see
        unit_list::UnitList::lone_query), in order: what the master's statement flag words
        answer, read for a whole segment in one call. `plain`: a LoneGroup per default database
        of the units whose SQL is plain (`plain_statement`). `others`: a LoneQuery per other
        unit, plain False, or None where Python must tell. `formats` gives per part (its format's QUERY post-header
        length, its checksum length, the first unit the format is in force for)."""
    def rows(self, keep: bytes) -> bytes:
        """One stream's answer byte per unit (ROW_SKIP, ROW_PARTIAL, ROW_KEEP, ROW_SLOW: not fast)
        from its keep byte per name id (any byte but KEEP_DROP: kept)."""
    def rows_many(self, keeps: list[bytes]) -> list[bytes]:
        """`rows` for many slaves (their keep bytes), in order, over one read of the units."""
    def statement_units(self, formats: list[tuple[int, int, int]]) -> StatementUnits:
        """The statement units by key (stmt_units::StmtUnits), read once for every stream: a
        StatementKey per key, and the units the keys decide. The scan
        thread's build (`scan_start(statements=True)`) is taken when the list is that one part
        and `formats` the format it read under; otherwise they are read now."""
    @property
    def statements_ahead(self) -> bool:
        """Whether `statement_units` took the statement units its scan thread built."""
    def statement_rows(self, row: bytes, keep: bytes, gated: bytes | None = None,
                       formats: list[tuple[int, int, int]] | None = None) -> bytes:
        """`row` with its ROW_SLOW statement units answered from a keep byte per key id; under a
        policy gate (`gated`: 1 per key whose KEEP_KEEP holds only for statements reaching its
        table alone) a unit with another statement of such a key stays ROW_SLOW."""
    def annotations_unshown(self, row: bytes, keep: bytes, names: list[tuple[str, str]],
                            formats: list[tuple[int, int, int]]) -> list[int]:
        """The units `row` keeps (whole or in part) whose Annotate_rows / Rows_query texts the core
        cannot show reach only tables `keep` keeps: the ones the policy check reads."""
    @property
    def annotations_read_here(self) -> int:
        """Units whose annotations `annotations_unshown` read itself, not found read ahead by a
        scan thread (`scan_start(annotations=True)`)."""
    def tally_names(self, ranges: list[tuple[int, int]], counts: bytearray) -> None:
        """Adds the Table_maps of units[i:j] for each (i, j) of `ranges` (ascending, disjoint) to
        `counts`, a u32 per name id, in place: the rule hits a stream's walks ran."""
    def send(self, row: bytes, keep: bytes, start: int, config: SendConfig, pending: bytes | None,
             stmt_keep: bytes | None = None, stmt_counts: bytearray | None = None) -> SendResult:
        """What a stream with answers `row` (from `rows`) and keep bytes sends of units[start..]
        until a unit it cannot handle or the batch is full (see send::walk), walked as `config`
        says; `pending`: the Heartbeat still owed, if any (the units' Table_maps: `tally_names`);
        with `stmt_keep` (a keep byte per statement key id) statement units kept in part are cut
        at statements, and their statements tallied per key id into `stmt_counts`."""
    def time_cuts(self, seconds: int) -> list[TimeCut]:
        """A TimeCut for each run of units whose first event's timestamp // `seconds` is the
        same bucket."""
    def table_bytes(self, names: int) -> TableBytes:
        """Bytes of each name id's Table_map and Rows events, the fast units' other bytes, the
        bytes of the units that are not fast."""
    def max_timestamp(self) -> int:
        """The latest timestamp of the units' events, as their scans read each header (0: none)."""
    def statement_tables(self, group_of: list[int], table_of: list[int], n: int) -> StatementTables:
        """The bytes of the statement units decided by keys among units[:n] by table, after
        `statement_units`: `group_of` a group per key id, `table_of` a table id per group."""
    def count(self, row: bytes, keep: bytes, start: int, config: SendConfig, pending: int = 0,
              stmt_keep: bytes | None = None) -> SendResult:
        """`send`'s walk to the end of the list, counted, never assembled (`out` is empty;
        `config`'s batch bytes and limit not read); `pending`: the size of a Heartbeat still owed
        (0: none). Skipped units' forms are made once per policy for every later call (see
        count_walk.rs)."""
    def count_many(self, jobs: list[CountJob], starts: list[int], carry: int) -> list[CountResult]:
        """Every job's `count` from unit `starts[0]` to the end of the list in one call, cut into
        time buckets at `starts` (a Heartbeat owed at a cut owed into the next bucket as one of
        `carry` bytes), after `statement_units` (see count_walk::count_many)."""


@final
class FlagWords:
    """The master's flag words (see flags.rs): `compute(db, table)` (the Python rule engines)
    gives a missing word as little-endian bytes, once per table and generation."""

    def __new__(cls, compute: Callable[[str, str], bytes]) -> Self: ...
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


def class_sums(counts: bytearray, classes: bytes) -> dict[int, int]:
    """The u32 counts per key id of `counts` summed by each key's class byte in `classes`: the
    classes with a nonzero sum."""
def mark_slow(row: bytearray, units: bytes, code: int) -> bytes | None:
    """`code` for each unit of `units` (u32 indices) whose byte in `row` is ROW_SLOW; None when
    that was every one of them, else the indices it set (u32 bytes)."""
def heartbeat(file: str, pos: int, server_id: int, crc: bool) -> bytes:
    """A Heartbeat event for (file, pos), as the master sends one (see send::heartbeat)."""
def replica_frames(events: bytes, seq: int, annotate: bool, master_pos: int, counted: int) -> ReplicaFrames | None:
    """A batch's events framed for a real replica (replica::frame): None where the batch needs the
    per-event way."""


def payload_bytes(body: Buffer, max_out: int = 1 << 30) -> bytes:
    """The inner events' bytes of a Transaction_payload event body; ValueError when malformed."""


def statements(buf: Buffer, body: int, end: int) -> list[StatementEnd] | None:
    """The statements of a fast unit's body buf[body:end] (see hops::statements), or None for the
    reference path."""


def last_timestamp(buf: bytes | bytearray | memoryview) -> int:
    """The last non-zero timestamp of the whole events in `buf` (0: none): what a writer dates a
    Rotate with after writing them."""


def renumber(buf: bytearray, start: int, stop: int, base: int, crc: bool) -> Renumbered:
    """Renumbers the whole events of buf[start:stop] in place for output offset `base` (see
    assemble::renumber)."""


def plain_statement(sql: bytes) -> bool | None:
    """`rules.statements.plain_statement` for a statement's UTF-8 bytes, None where Python must
    answer (text with non-ASCII bytes or a leading comment; see sql::plain_statement)."""
def schema_candidates(scanner: Scanner, buf: Buffer, off: int, base: int) -> WalkResult:
    """Split's first pass over buf[off:] (`base`: the file offset of buf[0]) with the stream's
    scanner: `Scanner.walk` over the Query and Query_compressed events, handing out of them only
    those Python must see (sql::query_for_python: the text may be a schema statement, or Python's
    decoding may refuse the event), and every FDE."""
def statement_key(sql: bytes, escaped: bool = False) -> StatementShape | None:
    """The key shape of a statement's UTF-8 bytes, as the compiled assembly reads it (see
    stmt::dml_shape), or None where Python's parser decides. `escaped`: as the walk reads a Query
    whose status variables say backslash escapes and a client character set in which a backslash
    byte is always one."""


def statement_facts(sql: bytes) -> StatementFacts | None:
    """What the rule engine reads of a DDL or multi-table statement (see facts::facts); names are
    bytes, a name's database None where the text gives none. None where Python's parser reads it."""


def parens_close(sql: bytes) -> bool | None:
    """Whether every parenthesis outside strings, names and comments closes, in order; None where
    the core's lexer does not read the text (Python's lexer then does)."""


def body_reach(sql: bytes, form: int) -> BodyReach | None:
    """The master policy's reading of a CREATE/ALTER TRIGGER's, routine's or event's body with the
    statement facts' lexer (see body_reach::body_reach; `form`: BODY_*): the tables of the
    statements that reach their table alone, the spans of the other pieces (byte offsets). None
    where the general path (`rules.policy_bound`) reads the whole text."""


def foreign_log_pos(buf: Buffer, off: int) -> bool:
    """Whether buf[off:] (a file's first bytes) holds another server's log_pos values: a relay log."""


def hop(buf: Buffer, off: int) -> HopResult:
    """A bare header hop over buf[off:] (bytes, a bytearray or a memoryview of a mapping): the
    events and the end of the last whole one (the benchmarks' compiled baseline too)."""


def rename_event(event: bytes, db: bytes, table: bytes | None, post: int, crc_len: int) -> bytes | None:
    """One event with its database renamed `db` and, a Table_map's, its table `table` (None: kept;
    see rename_db::rename_event; `post`: its kind's post-header length): the renamed event, None
    where it names no database or a name is longer than 255 bytes; ValueError where it cannot be
    read."""


def relay_run(scanner: Scanner, buf: bytes, start: int, keep: bytes, lone: tuple[int, int] | None = None,
              stmt_keep: bytes | None = None, renames: tuple[dict[bytes, bytes], int, int] | None = None) -> RelayResult:
    """The slave's relay run over the last `units` call of `scanner` (see relay::relay_ranges):
    the bytes to relay, the next unit index, the counts, the lone statements copied whose text the
    slave's check reads, and what the statement keys answered. `lone`: (QUERY post-header length,
    checksum length) of the format in force, to copy lone statements too; None, to stop at them.
    `stmt_keep` (with `lone`): a keep byte per key id of the scanner's `statement_units`, to copy
    the statement units whose every statement its keys keep."""


def held_bytes(list: UnitList) -> int:
    """The heap bytes `list` holds: its unit records, name ids and bounds, what is read of it once for
    every stream (unit statements, statement units, those a scan thread built ahead): what the
    master's segment cache counts for a segment it keeps by its scan."""


def reaches_key_alone(sql: bytes) -> bool:
    """Whether a statement reaches only its key's table (gate_reach::reaches_key_alone): what a
    gated stream's key answers stand on."""


def split_route(scanner: Scanner, buf: Buffer, start: int, keeps: list[bytes], counted: list[bool],
                bases: list[int], stmt_keeps: list[bytes] | None = None, framing: bool = False,
                schemas: list[bytes] | None = None) -> SplitRoute:
    """Split's routing walk over the last `units` call of `scanner` (see split::route): `keeps`, a
    keep byte per name id for each output; `counted`, the outputs counted for `multi` and `none`;
    `bases`, each output's offset added to its unit ends. With `stmt_keeps` (a keep byte per key id
    of the scanner's `statement_units` for each output, in the keep vocabulary), statement units
    are routed by their keys too; `framing`: a framing Query may be copied as it is. `schemas` (by
    schema: each output's schema, utf-8) gives a fast MySQL unit's copy its output's schema as
    its BEGIN's default database where Router._retarget does (see split_mysql)."""


def gtid_marks(buf: bytearray, start: int, stop: int) -> bytes:
    """Offsets (packed u64) of the GTID events of buf[start:stop] a series' next GTID state
    needs (see split::gtid_marks)."""
def mysql_gtids_at(buf: bytes | bytearray, marks: bytes) -> MysqlGtids:
    """The GTIDs of the events at `marks` (packed u64 offsets) of a series writer's block: the
    untagged MySQL ones as runs; `tagged` names (by index) the marks of every other event."""


def statement_pieces(units: UnitList, n: int) -> StatementPieces:
    """The keyed statements of units[:n], after `UnitList.statement_units` (see
    stmt_units::StmtUnits::statements_into): per statement unit by keys, its keyed Queries in
    order, each its key id and its Query event's offset; a unit that is not one has none."""


def relayed(units: UnitList, row: bytes, keep: bytes, start: int, stop: int, skips: bytes, crc: bool,
            stmt_keep: bytes | None = None) -> Relayed:
    """`simulate --verify`'s expectation of a slave's relay logs, the send walk in relay mode (see
    send::relayed): what a slave with answers `row` (`UnitList.rows`, `statement_rows`), keep
    bytes `keep` per name id and `stmt_keep` per statement key id relays of units[start:stop]
    under each skip policy of `skips` (SKIP_HEARTBEAT, SKIP_PLACEHOLDER, SKIP_EMPTY; `crc`:
    checksummed events): kept units as they are, units kept in part as their kept events,
    skipped ones as the policy's form the slave relays, until the first unit it cannot answer
    under all of them."""
