//! `_core.Scanner`: the scanner's state across the buffers of one stream, and the calls that
//! walk a buffer with it (units, walk) or build output from its last units (assemble).

use dumpfilter_stub_attrs::stub;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::collections::HashMap;

use super::results::{
    records, statement_keys, AssembleCounts, AssembleResult, ScanFault, StatementUnits, TableName,
    UnitsResult, WalkResult,
};
use super::{check_off, error_field, packed, scan_fault};
use crate::assemble;
use crate::rename_db::DbRenames;
use crate::scan::{self, Scanner, UNIT_WORDS};
use crate::stmt_units::{ByKeys, StmtUnits};

records! {
    /// An output's assembly configuration for `Scanner.assemble`, one typed value (see
    /// assemble::Options): whether positions are renumbered (a relay log's are not), whether events
    /// carry CRC32, whether an emptied group is written (its GTID and a COMMIT), and whether the
    /// GTID events written are reported (a series).
    AssembleConfig = "AssembleConfig" new(*, renumber, crc, empty_keep, gtids = false, renames = None, query_post = 0, load_post = 0, table_map_post = 0) {
        renumber: bool,
        crc: bool,
        empty_keep: bool,
        gtids: bool,
        /// replicate-rewrite-db's names written into the units kept whole (the master's database ->
        /// the one applied; read at each call: it grows as Python meets names), and QUERY's,
        /// EXECUTE_LOAD_QUERY's and TABLE_MAP's post-header lengths to read them with.
        renames: Option<Py<PyDict>> as Option<HashMap<Py<PyBytes>, Py<PyBytes>>>,
        query_post: usize,
        load_post: usize,
        table_map_post: usize,
    }
}

/// Scanner state across the buffers of one stream: the format in force and interned names.
#[stub]
#[pyclass(module = "dumpfilter._core", name = "Scanner")]
pub(super) struct PyScanner {
    pub(super) inner: Scanner,
    /// Its state is on a scan thread (`UnitList.scan_start`) until `UnitList.scan_finish`.
    pub(super) away: bool,
    pub(super) names_sent: usize,
    /// The last `units` call's units and tables, for `assemble`.
    pub(super) last_units: Vec<scan::Unit>,
    pub(super) last_tables: Vec<u32>,
    /// The last `units` call's statement units (`statement_units`), for the walks that decide
    /// them by key: `assemble`, `relay_run`, `split_route`.
    pub(super) last_stmt: Option<StmtUnits>,
}

impl PyScanner {
    /// Refuses a call while the scanner's state is on a scan thread (`UnitList.scan_start`).
    pub(super) fn here(&self) -> PyResult<()> {
        if self.away {
            return Err(PyRuntimeError::new_err(
                "the scanner is busy: a UnitList.scan_start has no scan_finish yet",
            ));
        }
        Ok(())
    }

    /// The (db, table) byte pairs interned since the last call.
    pub(super) fn new_names<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let names = self.inner.names[self.names_sent..]
            .iter()
            .map(|(db, table)| TableName {
                db: PyBytes::new(py, db).unbind(),
                table: PyBytes::new(py, table).unbind(),
            });
        let names = PyList::new(py, names)?;
        self.names_sent = self.inner.names.len();
        Ok(names)
    }
}

#[stub]
#[pymethods]
impl PyScanner {
    #[new]
    #[pyo3(signature = (verify = true))]
    pub(super) fn new(verify: bool) -> Self {
        PyScanner {
            inner: Scanner::new(verify),
            away: false,
            names_sent: 0,
            last_units: Vec::new(),
            last_tables: Vec::new(),
            last_stmt: None,
        }
    }

    /// Adopts the format of the Format_description event `event` (read at file offset `offset`);
    /// returns None, or the error (a ScanFault).
    fn load_fde(&mut self, event: &[u8], offset: u64) -> PyResult<Option<ScanFault>> {
        self.here()?;
        Ok(scan_fault(
            self.inner.load_fde(event, offset).err().as_ref(),
        ))
    }

    #[getter]
    fn has_format(&self) -> bool {
        self.inner.fmt.is_some()
    }

    #[getter]
    fn checksum_len(&self) -> usize {
        self.inner.fmt.as_ref().map_or(0, |f| f.checksum_len)
    }

    #[getter]
    fn events_walked(&self) -> u64 {
        self.inner.events_walked
    }

    /// The smallest buffer whose CRC runs are checked on a second thread while the walk goes on
    /// (see scan::Scanner::batched); None: never.
    #[getter]
    fn pipeline_min(&self) -> Option<usize> {
        (self.inner.pipeline_min != usize::MAX).then_some(self.inner.pipeline_min)
    }

    #[setter]
    fn set_pipeline_min(&mut self, bytes: Option<usize>) {
        self.inner.pipeline_min = bytes.unwrap_or(usize::MAX);
    }

    /// Whether CRCs are checked a run of events at a time (see crc::Run), else one by one.
    #[getter]
    fn batch_crc(&self) -> bool {
        self.inner.batch_crc
    }

    #[setter]
    fn set_batch_crc(&mut self, on: bool) {
        self.inner.batch_crc = on && crate::crc::batch_available();
    }

    /// A slave's scanner: the master's placeholders inside a fast unit keep its shape, the unit
    /// flagged F_HOLES for the relay run (see scan::F_HOLES), never F_FAST.
    #[getter]
    fn holes(&self) -> bool {
        self.inner.holes
    }

    #[setter]
    fn set_holes(&mut self, on: bool) {
        self.inner.holes = on;
    }

    /// Groups buf[off..] into units (see scan::Scanner::units): the packed unit records, the
    /// fast units' Table_map name ids, the names interned meanwhile, where the scan stopped and
    /// the error that stopped it, if any.
    #[pyo3(signature = (buf, off, base, limit = usize::MAX, at_eof = false))]
    fn units(
        &mut self,
        py: Python<'_>,
        buf: &[u8],
        off: usize,
        base: u64,
        limit: usize,
        at_eof: bool,
    ) -> PyResult<UnitsResult> {
        self.here()?;
        check_off(off, buf.len())?;
        let inner = &mut self.inner;
        let out = py.detach(|| inner.units(buf, off, base, limit, at_eof));
        // Packed straight into the bytes handed to Python (no buffer copied in between).
        let records = PyBytes::new_with(py, out.units.len() * UNIT_WORDS * 8, |b| {
            for (place, u) in b.chunks_exact_mut(UNIT_WORDS * 8).zip(&out.units) {
                u.pack_into(place);
            }
            Ok(())
        })?;
        let tables = packed(py, &out.tables, u32::to_le_bytes)?;
        let result = UnitsResult {
            packed: records.unbind(),
            tables: tables.unbind(),
            new_names: self.new_names(py)?.unbind(),
            stop: out.stop,
            events: out.events,
            last_rotate: out.last_rotate.map_or(-1i64, |r| r as i64),
            error: error_field(py, out.error.as_ref())?,
            run_events: out.runs.events,
            run_bytes: out.runs.bytes,
            run_placeholders: out.runs.placeholders,
        };
        self.last_units = out.units;
        self.last_tables = out.tables;
        self.last_stmt = None;
        Ok(result)
    }

    /// Reads the statement units of the last `units` call's units from index `start` on (`buf`
    /// the buffer it scanned; `query_post`, `crc_len`: the format in force), for the walks that
    /// decide them by key (see stmt_units::StmtUnits::build_part): their keys (StatementKey, ids
    /// from 0 for this scan), to be answered up front and handed to the walk as a keep byte per
    /// key id.
    fn statement_units(
        &mut self,
        py: Python<'_>,
        buf: &[u8],
        start: usize,
        query_post: usize,
        crc_len: usize,
    ) -> PyResult<StatementUnits> {
        self.here()?;
        let units = &self.last_units;
        let st = py.detach(|| StmtUnits::build_part(units, buf, (query_post, crc_len, start)));
        let result = StatementUnits {
            keys: statement_keys(py, &st.keys)?,
            units: st.units,
        };
        self.last_stmt = Some(st);
        Ok(result)
    }

    /// What a filter keeps of the last `units` call's units from index `start` on, for a sink
    /// that writes at output offset `out_pos` (see assemble::assemble); `buf` must be the
    /// buffer that call scanned. `keep` holds one keep byte per name id (keep.rs).
    /// `limit`: stop before writing a unit once the output offset reaches it (a series' file
    /// size; `fresh`: the file has no unit yet, its first is written anyway); `gtids`: report
    /// the GTID events written; `stmt_keep`: decide the statement units `statement_units` read
    /// by their keys, one keep byte per key id (KEEP_DROP, KEEP_KEEP; else Python's). Returns the
    /// bytes, the next unit index, the output offset after them, the counts, and the statements
    /// answered by key.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (buf, start, keep, out_pos, base, config, *, answers = None, limit = None, fresh = false, stmt_keep = None))]
    fn assemble(
        &mut self,
        py: Python<'_>,
        buf: &[u8],
        start: usize,
        keep: &[u8],
        out_pos: u64,
        base: u64,
        config: PyRef<'_, AssembleConfig>,
        answers: Option<&[u8]>,
        limit: Option<u64>,
        fresh: bool,
        stmt_keep: Option<&[u8]>,
    ) -> PyResult<AssembleResult> {
        let answers = answers.unwrap_or(&[]);
        let renames = match &config.renames {
            None => None,
            Some(map) => Some(DbRenames {
                map: map.bind(py).extract::<HashMap<Vec<u8>, Vec<u8>>>()?,
                query_post: config.query_post,
                load_post: config.load_post,
                table_map_post: config.table_map_post,
                crc_len: if config.crc { 4 } else { 0 },
            }),
        };
        let opt = assemble::Options {
            base,
            renumber: config.renumber,
            crc: config.crc,
            empty_keep: config.empty_keep,
            limit: limit.unwrap_or(u64::MAX),
            fresh,
            gtids: config.gtids,
            renames: renames.as_ref(),
        };
        let (units, tables) = (&self.last_units, &self.last_tables);
        let mut stmt = stmt_keep
            .zip(self.last_stmt.as_ref())
            .map(|(k, st)| ByKeys::new(st, k));
        let a = py.detach(|| {
            assemble::assemble(
                buf,
                units,
                tables,
                keep,
                answers,
                start,
                out_pos,
                &opt,
                stmt.as_mut(),
            )
        });
        // Each outcome's array of assemble::Counts, as the record's fields in its order.
        macro_rules! counts {
            ($($outcome:ident: $($field:ident)*;)*) => {{
                $(let [$($field),*] = a.counts.$outcome;)*
                AssembleCounts { $($($field,)*)* }
            }};
        }
        let counts = counts! {
            kept: kept kept_events kept_bytes;
            partial: partial partial_events_in partial_bytes_in partial_events_out partial_bytes_out;
            emptied: emptied emptied_events_in emptied_bytes_in emptied_events_out emptied_bytes_out;
            skipped: skipped skipped_events_in skipped_bytes_in;
        };
        Ok(AssembleResult {
            out: PyBytes::new(py, &a.out).unbind(),
            next: a.next,
            out_pos: a.out_pos,
            counts: Py::new(py, counts)?,
            by_keys: super::results::by_keys(py, stmt.as_ref())?,
            full: a.full,
            gtids: packed(py, &a.gtids, u64::to_le_bytes)?.unbind(),
            last_timestamp: crate::assemble::last_timestamp(&a.out),
        })
    }

    /// The indices of the last `units` call's units that are not fast, as packed u32: what Python
    /// decides itself (statements, DDL, control events) before handing the rest to `assemble`.
    fn slow_units<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let slow: Vec<u32> = (self.last_units.iter().enumerate())
            .filter(|(_, u)| u.flags & scan::F_FAST == 0)
            .map(|(i, _)| i as u32)
            .collect();
        packed(py, &slow, u32::to_le_bytes)
    }

    /// Walks buf[off..]: returns the offsets, where it stopped and the error; `offsets` packs u64 buffer offsets of
    /// the events whose type's byte in `types` (256 bytes) is non-zero, and of every FDE.
    /// `buf`: any object with the buffer protocol (bytes, a memoryview of a mapping).
    fn walk<'py>(
        &mut self,
        py: Python<'py>,
        buf: Bound<'py, PyAny>,
        off: usize,
        base: u64,
        types: &[u8],
    ) -> PyResult<WalkResult> {
        self.here()?;
        let held = super::held::Held::new(&buf)?;
        let buf = held.bytes(py);
        check_off(off, buf.len())?;
        let mask: [bool; 256] = std::array::from_fn(|t| types.get(t).is_some_and(|b| *b != 0));
        let inner = &mut self.inner;
        let (offs, stop, err) = py.detach(|| inner.walk(buf, off, base, &mask));
        Ok(WalkResult {
            offsets: packed(py, &offs, u64::to_le_bytes)?.unbind(),
            stop,
            error: error_field(py, err.as_ref())?,
        })
    }
}
