//! The calls' named results: frozen classes with a getter per field. Each still reads as the
//! tuple it replaced (`len()`, indexing, unpacking give the fields in order), so a caller may
//! unpack it; new code reads the fields by name.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyIterator, PyList, PyTuple};
use pyo3::IntoPyObjectExt;

/// A frozen pyclass `$name` (Python name `$py`) with a getter per field, and the tuple
/// protocol over its fields in order.
macro_rules! record {
    ($(#[$doc:meta])* $name:ident = $py:literal { $($(#[$fdoc:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[pyclass(frozen, get_all, module = "dumpfilter._core", name = $py)]
        pub(super) struct $name {
            $($(#[$fdoc])* pub(super) $field: $ty,)*
        }

        impl $name {
            /// The fields in order, as a tuple.
            fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                PyTuple::new(py, [$((&self.$field).into_bound_py_any(py)?),*])
            }
        }

        #[pymethods]
        impl $name {
            fn __len__(&self) -> usize {
                [$(stringify!($field)),*].len()
            }

            /// An index or a slice, as of the tuple.
            fn __getitem__<'py>(
                &self,
                py: Python<'py>,
                index: &Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, PyAny>> {
                self.fields(py)?.as_any().get_item(index)
            }

            fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
                self.fields(py)?.try_iter()
            }

            /// Equal to a record of its class, or to a tuple, with the same fields.
            fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
                match other.cast::<Self>() {
                    Ok(record) => self.fields(py)?.eq(record.get().fields(py)?),
                    Err(_) => self.fields(py)?.eq(other),
                }
            }

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let values = self.fields(py)?;
                let mut parts = Vec::new();
                for (name, value) in [$(stringify!($field)),*].iter().zip(values.iter()) {
                    parts.push(format!("{name}={}", value.repr()?));
                }
                Ok(format!("{}({})", $py, parts.join(", ")))
            }
        }
    };
}

record! {
    /// `Scanner.units`: the units of buf[off:] and where the scan stopped.
    UnitsResult = "UnitsResult" {
        /// UNIT_WORDS little-endian u64 per unit (see scan::Unit::pack).
        packed: Py<PyBytes>,
        /// The fast units' Table_map name ids, u32 little-endian.
        tables: Py<PyBytes>,
        /// The (db, table) byte pairs interned since the last call (ids continue from before).
        new_names: Py<PyList>,
        /// Buffer offset after the last unit handed out.
        stop: usize,
        /// Events in the units handed out.
        events: u64,
        /// Buffer offset of the last real Rotate, -1 for none.
        last_rotate: i64,
        /// None, or (kind, message, offset) of the malformed event that stopped the scan.
        error: Option<Py<PyTuple>>,
    }
}

record! {
    /// `UnitList.scan` and `UnitList.scan_finish`: what `Scanner.units` says, the units kept in the UnitList.
    ScanResult = "ScanResult" {
        new_names: Py<PyList>,
        stop: usize,
        events: u64,
        last_rotate: i64,
        error: Option<Py<PyTuple>>,
        /// Units appended to the UnitList.
        added: usize,
    }
}

record! {
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
        /// Emptied units: two events out each (GTID and COMMIT).
        emptied: u64,
        emptied_events_in: u64,
        emptied_bytes_in: u64,
        emptied_bytes_out: u64,
        skipped: u64,
        skipped_events_in: u64,
        skipped_bytes_in: u64,
    }
}

record! {
    /// `Scanner.assemble`: the bytes a filter keeps of a run of units.
    AssembleResult = "AssembleResult" {
        out: Py<PyBytes>,
        /// The first unit not handled (Python takes it).
        next: usize,
        /// The output offset after `out`.
        out_pos: u64,
        counts: Py<AssembleCounts>,
        /// Stopped at a statement unit with a key whose answer is not given: decide the keys
        /// (`new_keys`, and any other not answered yet) and call again.
        need_keys: bool,
        /// The statement keys met for the first time: (key id, default database, statement).
        new_keys: Py<PyList>,
        /// (key id, statements answered by it) for the keys used.
        key_uses: Py<PyList>,
        /// Statement units and statements decided by their keys.
        statement_units: u64,
        statements: u64,
        /// Stopped at `limit`: start the next file and call again.
        full: bool,
        /// Offsets in `out` of the GTID events a series' next GTID state needs, packed u64.
        gtids: Py<PyBytes>,
    }
}

record! {
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
}

record! {
    /// `UnitList.send`: what one stream sends of a run of units (see send::send).
    SendResult = "SendResult" {
        out: Py<PyBytes>,
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
}

record! {
    /// `relay_run`: the slave's relay run (see relay::relay_ranges).
    RelayResult = "RelayResult" {
        out: Py<PyBytes>,
        /// The first unit not handled.
        next: usize,
        /// Units relayed (heartbeats not counted), their events and bytes.
        units: u64,
        events: u64,
        bytes: u64,
        /// Lone Heartbeats passed over.
        heartbeats: u64,
        /// [(default database, SQL)] of the lone statements copied.
        lone: Py<PyList>,
        /// Placeholders dropped from the units relayed.
        placeholders: u64,
    }
}

/// Adds the result classes to the module (for isinstance checks and the stub's names).
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<UnitsResult>()?;
    m.add_class::<ScanResult>()?;
    m.add_class::<AssembleCounts>()?;
    m.add_class::<AssembleResult>()?;
    m.add_class::<UnitEntry>()?;
    m.add_class::<SendResult>()?;
    m.add_class::<RelayResult>()?;
    Ok(())
}
