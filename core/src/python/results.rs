//! The calls' named results: frozen classes with a getter per field, read by name.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

/// Frozen pyclasses, each `$name` (Python name `$py`) with a getter per field and a repr naming
/// them; and `add_records`, which adds them all to the module. A field's stub type is its Rust
/// type's, or the one after `as` (a list's items: `Vec<T>`). A record Python makes (a call's
/// typed configuration) says `new(signature)`: its constructor takes each field by that pyo3
/// signature.
macro_rules! records {
    (@new $name:ident [] $($field:ident: $ty:ty),*) => {};
    (@new $name:ident [$sig:tt] $($field:ident: $ty:ty),*) => {
        #[::dumpfilter_stub_attrs::stub]
        #[pymethods]
        impl $name {
            #[new]
            #[pyo3(signature = $sig)]
            #[allow(clippy::too_many_arguments)] // (keyword-only in Python: the one typed value it makes)
            fn new($($field: $ty),*) -> Self {
                $name { $($field),* }
            }
        }
    };
    ($($(#[doc = $doc:literal])* $name:ident = $py:literal $(new $sig:tt)? {
        $($(#[doc = $fdoc:literal])* $field:ident: $ty:ty $(as $stub:ty)?,)*
    })*) => {
        $(
        $(#[doc = $doc])*
        #[pyclass(frozen, get_all, module = "dumpfilter._core", name = $py)]
        pub(super) struct $name {
            $($(#[doc = $fdoc])* pub(super) $field: $ty,)*
        }

        records!(@new $name [$($sig)?] $($field: $ty),*);

        #[cfg(feature = "stubs")]
        super::stubs::record!($name = $py, [$($doc),*] { $($field: $ty $(as $stub)?, [$($fdoc),*];)* });

        #[pymethods]
        impl $name {
            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let parts = [$(format!(
                    concat!(stringify!($field), "={}"),
                    ::pyo3::IntoPyObjectExt::into_bound_py_any(&self.$field, py)?.repr()?
                )),*];
                Ok(format!("{}({})", $py, parts.join(", ")))
            }
        }
        )*

        /// Adds the record classes to the module (for isinstance checks and the stub's names).
        pub(super) fn add_records(m: &Bound<'_, PyModule>) -> PyResult<()> {
            $(m.add_class::<$name>()?;)*
            Ok(())
        }
    };
}

pub(super) use records;

records! {
    /// `Scanner.units`: the units of buf[off:] and where the scan stopped.
    UnitsResult = "UnitsResult" {
        /// UNIT_WORDS little-endian u64 per unit (see scan::Unit::pack).
        packed: Py<PyBytes>,
        /// The fast units' Table_map name ids, u32 little-endian.
        tables: Py<PyBytes>,
        /// The names (TableName) interned since the last call (ids continue from before).
        new_names: Py<PyList> as Vec<TableName>,
        /// Buffer offset after the last unit handed out.
        stop: usize,
        /// Events in the units handed out.
        events: u64,
        /// Buffer offset of the last real Rotate, -1 for none.
        last_rotate: i64,
        /// None, or the malformed event that stopped the scan.
        error: Option<Py<ScanFault>>,
        /// Events and bytes their placeholder runs and stretches stand for beyond themselves, and
        /// the placeholders among them (scan::RunCount).
        run_events: u64,
        run_bytes: i64,
        run_placeholders: u64,
    }

    /// `UnitList.scan_finish`: what `Scanner.units` says, the units kept in the UnitList.
    ScanResult = "ScanResult" {
        new_names: Py<PyList> as Vec<TableName>,
        stop: usize,
        events: u64,
        last_rotate: i64,
        error: Option<Py<ScanFault>>,
        /// Units appended to the UnitList.
        added: usize,
    }

    /// What the compiled assembly wrote (see assemble::Counts), per outcome.
    AssembleCounts = "AssembleCounts" {
        kept: u64,
        kept_events: u64,
        kept_bytes: u64,
        partial: u64,
        partial_events_in: u64,
        partial_bytes_in: u64,
        partial_events_out: u64,
        partial_bytes_out: u64,
        /// Emptied units: a MariaDB group as its GTID and a COMMIT, a MySQL one as its GTID,
        /// BEGIN and XID or COMMIT.
        emptied: u64,
        emptied_events_in: u64,
        emptied_bytes_in: u64,
        emptied_events_out: u64,
        emptied_bytes_out: u64,
        skipped: u64,
        skipped_events_in: u64,
        skipped_bytes_in: u64,
    }

    /// `Scanner.assemble`: the bytes a filter keeps of a run of units.
    AssembleResult = "AssembleResult" {
        out: Py<PyBytes>,
        /// The first unit not handled (Python takes it).
        next: usize,
        /// The output offset after `out`.
        out_pos: u64,
        counts: Py<AssembleCounts>,
        /// What the statement keys answered.
        by_keys: Py<KeysUsed>,
        /// Stopped at `limit`: start the next file and call again.
        full: bool,
        /// Offsets in `out` of the GTID events a series' next GTID state needs, packed u64.
        gtids: Py<PyBytes>,
        /// The last non-zero timestamp of `out`'s events (0: none), which a Rotate after it takes.
        last_timestamp: u32,
    }

    /// `UnitList.unit(k)`: a unit's record, offsets in its part's buffer.
    UnitEntry = "UnitEntry" {
        part: u32,
        start: usize,
        end: usize,
        events: u32,
        /// 0 control, 1 transaction, 2 statement.
        kind: u8,
        flags: u32,
        /// Size of the opening GTID event (0 without one).
        gtid_size: u32,
        /// Offset of the unit's last event.
        last: usize,
        /// MariaDB seq_no, or MySQL gno.
        gtid_seq: u64,
        gtid_domain: u32,
        gtid_server: u32,
    }

    /// `UnitList.send`: what one stream sends of a run of units (see send::walk).
    SendResult = "SendResult" {
        /// What it sends (see SentBytes): `len()` its size.
        out: Py<super::sent_bytes::SentBytes>,
        /// The first unit not handled.
        next: usize,
        kept: u64,
        partial: u64,
        skipped: u64,
        /// Master event bytes and events sent (kept units and the kept part of partial ones).
        sent_bytes: u64,
        sent_events: u64,
        /// Bytes and events of the units handled.
        read_bytes: u64,
        read_events: u64,
        heartbeats: u64,
        heartbeat_bytes: u64,
        /// Skipped units sent in their skip policy's form (placeholders, empty transactions), the
        /// events and bytes of those forms, and of those events the RAND placeholders.
        skip_units: u64,
        skip_events: u64,
        skip_bytes: u64,
        placeholders: u64,
        /// The unit whose end a Heartbeat is still owed for, -1 for none.
        pending_unit: i64,
        /// Whether the caller's pending Heartbeat was sent or replaced.
        pending_done: bool,
    }

    /// `relay_run`: the slave's relay run (see relay::relay_ranges).
    RelayResult = "RelayResult" {
        /// The bytes to relay: the buffer given (all of it relayed), a memoryview of one
        /// stretch of it, or bytes.
        out: Py<PyAny> as super::stubs::BytesOrView,
        /// The first unit not handled.
        next: usize,
        /// Units relayed (heartbeats not counted), their events and bytes.
        units: u64,
        events: u64,
        bytes: u64,
        /// Lone Heartbeats passed over.
        heartbeats: u64,
        /// The lone statements copied whose text the slave's check reads (LoneText).
        lone: Py<PyList> as Vec<LoneText>,
        /// Placeholders dropped from the units relayed.
        placeholders: u64,
        /// What the statement keys answered (the statement units relayed).
        by_keys: Py<KeysUsed>,
        /// Events whose database replicate-rewrite-db renamed (`renames`).
        renamed: u64,
    }

    /// `relayed`'s answer: per skip policy asked for, the bytes its relay log holds for the
    /// run and the units that left them; `next`, the first unit not answered.
    Relayed = "Relayed" {
        data: Py<PyList> as Vec<Py<PyBytes>>,
        units: Vec<u64>,
        next: usize,
    }

    /// `statement_pieces`' answer, packed little-endian arrays.
    StatementPieces = "StatementPieces" {
        /// u32 per unit and one more: unit k's statements are [bounds[k], bounds[k + 1]).
        bounds: Py<PyBytes>,
        /// u32 per statement: its key id (`StatementUnits.keys`).
        keys: Py<PyBytes>,
        /// u64 per statement: its Query event's offset in its unit's part's buffer.
        queries: Py<PyBytes>,
    }

    /// The malformed event that stopped a scan: kind "binlog" or "checksum", the message, and
    /// its file offset.
    ScanFault = "ScanFault" {
        kind: &'static str,
        message: String,
        offset: u64,
    }

    /// `Scanner.walk`: the events of a buffer whose type was asked for (`schema_candidates`: the
    /// Queries split's first pass hands Python).
    WalkResult = "WalkResult" {
        /// Packed u64 buffer offsets of the events asked for, and of every FDE.
        offsets: Py<PyBytes>,
        /// Buffer offset where the walk stopped.
        stop: usize,
        error: Option<Py<ScanFault>>,
    }

    /// A table name a scanner interned: its database and table, as the binlog spells them.
    TableName = "TableName" {
        db: Py<PyBytes>,
        table: Py<PyBytes>,
    }

    /// A statement key used by a walk, and the statements it answered.
    KeyUse = "KeyUse" {
        id: u32,
        statements: u64,
    }

    /// What a walk answered by statement keys (stmt_units::ByKeys): KeyUse per key used, the
    /// statement units and the statements.
    KeysUsed = "KeysUsed" {
        uses: Py<PyList> as Vec<KeyUse>,
        units: u64,
        statements: u64,
    }

    /// A lone statement the slave's relay run copied: its default database and SQL.
    LoneText = "LoneText" {
        /// The unit's index in the scan.
        unit: usize,
        db: Py<PyString>,
        sql: Py<PyString>,
    }

    /// `UnitList.end(k)`: where unit k ends, its part and file offset.
    UnitEnd = "UnitEnd" {
        part: u32,
        pos: u64,
    }

    /// `UnitList.mysql_gtids`: the gnos first..last (both in) of one source uuid.
    GtidRun = "GtidRun" {
        source: Py<PyString>,
        first: i64,
        last: i64,
    }

    /// `UnitList.mysql_gtids`: a range of units' MySQL GTIDs as runs, and the units whose
    /// (tagged) GTID the caller decodes.
    MysqlGtids = "MysqlGtids" {
        runs: Py<PyList> as Vec<GtidRun>,
        tagged: Vec<usize>,
    }

    /// `UnitList.lone_queries`: the units of plain SQL of one default database.
    LoneGroup = "LoneGroup" {
        db: Py<PyString>,
        /// Unit indices, u32 little-endian.
        units: Py<PyBytes>,
    }

    /// `UnitList.lone_queries`: a unit whose SQL is not plain (False), or Python must tell (None),
    /// or (asked for every unit) is plain (True).
    LoneQuery = "LoneQuery" {
        unit: usize,
        /// Its GTID event's size (0: none): where the QUERY event starts.
        gtid_size: usize,
        /// The unit's size in bytes.
        size: usize,
        db: Py<PyString>,
        plain: Option<bool>,
        sql: Py<PyString>,
        /// Its number (`lone_queries`' `classes`): its class's, or its text's where its class is
        /// declined; -1: not numbered, or not asked.
        class_id: i64,
    }

    /// `UnitList.lone_queries`: the lone-statement units of a segment.
    LoneQueries = "LoneQueries" {
        /// LoneGroup per default database, the units whose SQL is plain.
        plain: Py<PyList> as Vec<LoneGroup>,
        /// LoneQuery per other unit (or per unit), in order: with `resolved`, those of a number
        /// not answered, or without one.
        others: Py<PyList> as Vec<LoneQuery>,
        /// With `resolved`: the units of an answered number that replays (REPLAY or DEFER), in
        /// order, each as its index and its number (u32 little-endian each).
        replays: Py<PyBytes>,
        /// The text of each of those, in order, where its number is DEFER's (else None).
        texts: Py<PyList> as Vec<Option<String>>,
    }

    /// `UnitList.lone_sums`: the units left to Python (see lone_sums::lone_sums), in order,
    /// whether each one's bytes were summed (its key met first this chunk), and each one's
    /// LoneQuery where it is a lone unit (its class_id -1), else None.
    LoneSums = "LoneSums" {
        units: Vec<u32>,
        summed: Vec<bool>,
        queries: Py<PyList> as Vec<Option<LoneQuery>>,
    }

    /// A statement key met for the first time (by a scanner's walk, or in a segment's statement
    /// units): its id, its bytes (what the key is, across scanners and segments), the default
    /// database and the first statement met with it.
    StatementKey = "StatementKey" {
        id: u32,
        key: Py<PyBytes>,
        db: Py<PyBytes>,
        sql: Py<PyBytes>,
    }

    /// `UnitList.statement_units`: the keys (StatementKey), and the units they decide.
    StatementUnits = "StatementUnits" {
        keys: Py<PyList> as Vec<StatementKey>,
        units: usize,
    }

    /// `UnitList.count_many`: one job's count of the segment (see count_walk::count_many), and
    /// per time bucket the bytes it read and was sent (Heartbeats and skip forms included).
    CountResult = "CountResult" {
        walk: Py<SendResult>,
        read_by_bucket: Vec<u64>,
        sent_by_bucket: Vec<u64>,
    }

    /// `TableBytes.cuts`: the first unit of a run whose events' time falls in one bucket.
    TimeCut = "TimeCut" {
        unit: usize,
        bucket: u32,
    }

    /// `UnitList.table_bytes`: bytes by table name id and the rest (see tally::TableBytes).
    TableBytes = "TableBytes" {
        /// Bytes of each name id's Table_map and Rows events.
        by_name: Vec<u64>,
        /// Each name id's share of the envelopes of the fast units that write it.
        envelope: Vec<u64>,
        /// The fast units' other bytes, and of those the envelopes shared out (`envelope`).
        framing: u64,
        shared: u64,
        /// The bytes of the units that are not fast.
        other: u64,
        cuts: Py<PyList> as Vec<TimeCut>,
    }

    /// `UnitList.statement_tables`: the statement units' bytes by the caller's groups of keys
    /// (see tally::statement_groups).
    StatementTables = "StatementTables" {
        /// The groups met (the caller's), in the order first met, and for each its statements'
        /// bytes (with their context events), its share of the envelopes of the units it first
        /// wrote its table in, and the key id whose statement it was first met in.
        groups: Vec<u32>,
        payloads: Vec<u64>,
        envelopes: Vec<u64>,
        keys: Vec<u32>,
        /// The envelopes of units that write no table.
        framing: u64,
        /// The control units' bytes.
        other: u64,
        /// The units not fast, not control, not decided by keys.
        left: Vec<u32>,
    }

    /// `KeyIndex.number`: each key's number, and the keys numbered first by the call.
    KeyNumbers = "KeyNumbers" {
        /// Each key's number (u32 little-endian, in the keys' order).
        numbers: Py<PyBytes>,
        /// The positions among the keys of those numbered by this call, in order (their
        /// numbers the index's length before it, and up).
        new: Vec<usize>,
    }

    /// A GTID domain and its highest seq_no in a batch (`ReplicaFrames.gtids`).
    DomainSeq = "DomainSeq" {
        domain: u32,
        seq_no: u64,
    }

    /// `replica_frames`: a batch's events framed for a real replica.
    ReplicaFrames = "ReplicaFrames" {
        packets: Py<PyBytes>,
        /// The next sequence id.
        seq: u8,
        /// The replica's moved position, None when it did not move.
        moved: Option<u64>,
        /// DomainSeq per GTID domain.
        gtids: Py<PyList> as Vec<DomainSeq>,
        master_pos: u64,
        counted: u64,
    }

    /// `statements`: a statement of a fast unit's body.
    StatementEnd = "StatementEnd" {
        /// Offset after the statement.
        end: usize,
        events: u32,
        /// Table_maps so far.
        tables: u32,
    }

    /// `renumber`: what the renumbered events leave to the caller.
    Renumbered = "Renumbered" {
        /// The last non-zero timestamp.
        last_timestamp: u32,
        /// Offsets of the FDEs left to the caller.
        fdes: Vec<usize>,
    }

    /// `statement_key`: a statement's key shape (KIND_*, qualifier or None, table).
    StatementShape = "StatementShape" {
        kind: u8,
        db: Option<Py<PyBytes>>,
        table: Py<PyBytes>,
    }

    /// `hop`: the events hopped and where the hop stopped.
    HopResult = "HopResult" {
        events: u64,
        stop: usize,
    }

    /// One output of `split_route`.
    RouteOutput = "RouteOutput" {
        /// Its copies back to back.
        out: Py<pyo3::types::PyByteArray>,
        /// Packed u64 unit ends, offset by its base.
        ends: Py<PyBytes>,
        /// Packed u64 offsets of the GTID events a series' next GTID state needs.
        gtid_marks: Py<PyBytes>,
    }

    /// `split_route`: split's routing walk (see split::route).
    SplitRoute = "SplitRoute" {
        /// The first unit not handled.
        next: usize,
        /// RouteOutput per output.
        outputs: Py<PyList> as Vec<RouteOutput>,
        /// Units no output keeps.
        none: u64,
    }
}

/// Keys as StatementKey records (their ids, bytes, and the statement each was first met in).
pub(super) fn statement_keys(
    py: Python<'_>,
    keys: &[crate::stmt_keys::NewKey],
) -> PyResult<Py<PyList>> {
    let keys = keys.iter().map(|k| StatementKey {
        id: k.id,
        key: PyBytes::new(py, &k.key).unbind(),
        db: PyBytes::new(py, &k.db).unbind(),
        sql: PyBytes::new(py, &k.sql).unbind(),
    });
    Ok(PyList::new(py, keys)?.unbind())
}

/// What a walk answered by key, as a KeysUsed record (all zero without keys).
pub(super) fn by_keys(
    py: Python<'_>,
    keys: Option<&crate::stmt_units::ByKeys>,
) -> PyResult<Py<KeysUsed>> {
    let uses = keys.map_or_else(Vec::new, |k| k.key_uses()).into_iter();
    let uses = uses.map(|(id, statements)| KeyUse { id, statements });
    let (units, statements) = keys.map_or((0, 0), |k| (k.units_done, k.statements));
    Py::new(
        py,
        KeysUsed {
            uses: PyList::new(py, uses)?.unbind(), // (PyList_New(0) without keys: most calls)
            units,
            statements,
        },
    )
}

impl TableBytes {
    pub(super) fn new(py: Python<'_>, t: crate::tally::TableBytes) -> PyResult<Self> {
        let cuts = t.cuts.into_iter();
        let cuts = cuts.map(|(unit, bucket)| TimeCut { unit, bucket });
        Ok(TableBytes {
            by_name: t.by_name,
            envelope: t.envelope,
            framing: t.framing,
            shared: t.shared,
            other: t.other,
            cuts: PyList::new(py, cuts)?.unbind(),
        })
    }
}
