//! `_core.UnitList`: a segment's unit list as every stream of the master walks it, with the read
//! buffers its units lie in; scanned into (on a thread, or not), read back unit by unit, and
//! sent from per stream (`UnitList.send`).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use dumpfilter_stub_attrs::stub;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList};

use super::held::Held;
use super::lone_classes::PyLoneClasses;
use super::results::{
    statement_keys, LoneQueries, LoneSums, MysqlGtids, ScanResult, SendResult, StatementUnits,
    UnitEnd, UnitEntry,
};
use super::scan_thread::{Ahead, Pending, ScanJob};
use super::scanner::PyScanner;
use super::sent::{add_counts, send_result, SendConfig};
use super::sent_bytes::SentBytes;
use super::unit_list_reads::Answered;
use super::{check_off, error_field};
use crate::count_forms::FormsCache;
use crate::gate_reads::GateReads;
use crate::scan::{self, Scanner};
use crate::send::{self, SendOptions};
use crate::stmt_units::StmtUnits;
use crate::unit_list::UnitList;

/// A segment of the master's binlog as every stream walks it (see unit_list::UnitList): the units of
/// one or more scans, with the read buffers they lie in.
#[stub]
#[pyclass(module = "dumpfilter._core", name = "UnitList")]
pub(super) struct PyUnitList {
    pub(super) list: UnitList,
    pub(super) bufs: Vec<Held>,
    /// A scan under way on its own thread (`scan_start`), joined by `scan_finish`.
    pending: Option<Pending>,
    /// Scans `scan_start` ran at once on the calling thread, their bytes at most INLINE_SCAN.
    #[pyo3(get)]
    scans_inline: u64,
    /// The statement units by key, read once for every stream (`statement_units`).
    pub(super) stmts: std::sync::OnceLock<StmtUnits>,
    /// The first part's statement units as its scan thread built them (`scan_start`'s
    /// `statements`), until `statement_units` takes them (or builds anew: see there).
    pub(super) ahead: std::sync::Mutex<Option<Ahead>>,
    /// Whether `statement_units` took the scan thread's build (the getter `statements_ahead`).
    took_ahead: AtomicBool,
    /// What gated streams read of the texts, once for all (`rows_many`, `annotations_unshown`).
    gate: GateReads,
    /// Units whose statements a scan thread read (`scan_start(unit_statements=True)`).
    #[pyo3(get)]
    unit_statements_ahead: usize,
    /// The skipped units' forms `count_many` made, per skip policy.
    pub(super) forms: FormsCache,
}

/// The bytes below which `scan_start` scans at once, on the calling thread (without the GIL),
/// rather than on a thread of its own: a thread's start and join cost tens of microseconds, and a
/// scan of this much about as long (the core scans 1-3 GB/s). The master's streams at the end of
/// a live binlog read a few kilobytes per wake, a scan each on the path from a commit to its
/// replicas, with nothing to overlap it with; a segment read ahead is megabytes.
const INLINE_SCAN: usize = 128 << 10;

impl Drop for PyUnitList {
    fn drop(&mut self) {
        // A scan left running reads a buffer this UnitList holds: it ends before the buffer goes.
        if let Some(Pending {
            run: Ok(thread), ..
        }) = self.pending.take()
        {
            let _ = thread.join();
        }
    }
}

impl PyUnitList {
    fn idle(&self) -> PyResult<()> {
        if self.pending.is_some() {
            return Err(PyRuntimeError::new_err(
                "a scan is under way on this UnitList (scan_start without scan_finish)",
            ));
        }
        Ok(())
    }
}

#[stub]
#[pymethods]
impl PyUnitList {
    #[new]
    fn new() -> Self {
        PyUnitList {
            list: UnitList::default(),
            bufs: Vec::new(),
            pending: None,
            scans_inline: 0,
            stmts: std::sync::OnceLock::new(),
            ahead: std::sync::Mutex::new(None),
            took_ahead: AtomicBool::new(false),
            gate: GateReads::default(),
            unit_statements_ahead: 0,
            forms: FormsCache::default(),
        }
    }

    /// Groups buf[off..] with `scanner` (see scan::Scanner::units) into units appended to the
    /// list, as one part read from the binlog file `file` at file offset `base` of buf[0],
    /// without handing the records to Python (read back with `unit(k)`), on a thread of its own:
    /// the call returns at once, the GIL free, while the scan runs (the master scans the next
    /// segment while its stream sends this one). The scanner's state goes with the thread: the
    /// scanner refuses calls until `scan_finish`, which waits for the scan and returns what
    /// `Scanner.units` says of the units, and how many were added. One scan at a time per UnitList.
    /// A buffer of at most INLINE_SCAN bytes from `off` is scanned at once instead, without the
    /// GIL (counted in `scans_inline`). `statements`: when this is the list's first part, the
    /// thread then builds its statement units too (see `statement_units`), which a segment read
    /// ahead has ready before a stream asks (no build when no unit may be one).
    /// `unit_statements`: the thread also reads the statements of the units that may be kept
    /// in part (see unit_list::part_statements).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (scanner, buf, off, base, file, limit = usize::MAX, at_eof = false, statements = false, unit_statements = false, annotations = false))]
    fn scan_start(
        &mut self,
        py: Python<'_>,
        scanner: Bound<'_, PyScanner>,
        buf: Bound<'_, PyAny>,
        off: usize,
        base: u64,
        file: &str,
        limit: usize,
        at_eof: bool,
        statements: bool,
        unit_statements: bool,
        annotations: bool,
    ) -> PyResult<()> {
        self.idle()?;
        let mut s = scanner.try_borrow_mut()?;
        s.here()?;
        let held = Held::new(&buf)?;
        let data = held.bytes(py);
        check_off(off, data.len())?;
        let (at, len) = (data.as_ptr() as usize, data.len());
        let verify = s.inner.verify;
        let job = ScanJob {
            scanner: std::mem::replace(&mut s.inner, Scanner::new(verify)),
            at,
            len,
            off,
            base,
            limit,
            at_eof,
            statements: statements && self.bufs.is_empty(),
            unit_statements,
            annotations,
        };
        let run = if len - off <= INLINE_SCAN {
            self.scans_inline += 1;
            Err(py.detach(|| job.run()))
        } else {
            // The job reaches the thread through a channel, so that a thread that cannot be
            // started leaves it here: then it runs now, on this thread.
            let (send, recv) = std::sync::mpsc::sync_channel::<ScanJob>(1);
            match std::thread::Builder::new()
                .name("dumpfilter-scan".into())
                .spawn(move || recv.recv().ok().map(ScanJob::run))
            {
                Ok(thread) => match send.send(job) {
                    Ok(()) => Ok(thread),
                    Err(std::sync::mpsc::SendError(job)) => Err(py.detach(|| job.run())),
                },
                Err(_) => Err(py.detach(|| job.run())),
            }
        };
        s.away = true;
        self.pending = Some(Pending {
            run,
            held,
            scanner: scanner.clone().unbind(),
            file: file.to_owned(),
            base,
        });
        Ok(())
    }

    /// Waits for the scan `scan_start` began and adds its units (see there).
    fn scan_finish(&mut self, py: Python<'_>) -> PyResult<ScanResult> {
        let Some(Pending {
            run,
            held,
            scanner,
            file,
            base,
        }) = self.pending.take()
        else {
            return Err(PyRuntimeError::new_err(
                "no scan under way (UnitList.scan_start)",
            ));
        };
        let done = Pending::wait(run, py);
        let scanner = scanner.bind(py);
        let mut s = scanner.try_borrow_mut()?;
        s.away = false;
        let (inner, mut out, ahead, stmts, needs) = done?;
        s.inner = inner;
        let (first, before) = (self.bufs.is_empty(), self.list.units.len());
        let mut added = out.units.len();
        if added > 0 {
            let (file, maps) = (file.as_bytes(), (&out.tables, &out.tid_bytes));
            added = self.list.add(file, base, &out.units, maps.0, maps.1);
            if let Some(u) = out.units.get(added) {
                let at = base + u.start as u64;
                let message = format!(
                    "a transaction of 4 GiB or more at {at}: past what a binlog position addresses"
                );
                (out.stop, out.error) = (u.start, Some(scan::ScanError::binlog(message, at)));
            }
            self.list.latest = self.list.latest.max(out.latest);
            self.bufs.push(held);
            // Built ahead for the list's first part only: a second part leaves it to
            // `statement_units`, which reads every part.
            let ahead = ahead.filter(|_| first && added > 0);
            *self.ahead.get_mut().unwrap_or_else(|e| e.into_inner()) = ahead;
        }
        if let Some(stmts) = stmts {
            self.unit_statements_ahead += stmts.len();
            self.list.preset_statements(before, stmts);
        }
        self.gate.preset_needs(before, needs);
        Ok(ScanResult {
            new_names: s.new_names(py)?.unbind(),
            stop: out.stop,
            events: out.events,
            last_rotate: out.last_rotate.map_or(-1i64, |r| r as i64),
            error: error_field(py, out.error.as_ref())?,
            added,
        })
    }

    /// Units whose annotations a gated stream read itself, not found read ahead by a scan
    /// thread (`scan_start(annotations=True)`; see gate_reads::GateReads::annotations_unshown).
    #[getter]
    fn annotations_read_here(&self) -> usize {
        self.gate.read_here.load(Relaxed)
    }

    /// Whether `statement_units` took the statement units the scan thread built (see there).
    #[getter]
    fn statements_ahead(&self) -> bool {
        self.took_ahead.load(Relaxed)
    }

    fn __len__(&self) -> usize {
        self.list.units.len()
    }

    /// Bytes of all units.
    #[getter]
    fn size(&self) -> u64 {
        self.list.size
    }

    /// The OR of every unit's flags.
    #[getter]
    fn flags_any(&self) -> u32 {
        self.list.flags_any
    }

    /// Unit k's record, offsets in its part's buffer; IndexError out of range.
    fn unit(&self, k: usize) -> PyResult<UnitEntry> {
        let u = self
            .list
            .units
            .get(k)
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(k))?;
        let (gtid_domain, gtid_server, gtid_seq) = self.list.gtid_of(k).unwrap_or_default();
        Ok(UnitEntry {
            part: u.part,
            start: u.start(),
            end: u.end(),
            events: u.events,
            kind: u.kind,
            flags: u.flags,
            gtid_size: u.gtid_size,
            last: u.last(),
            gtid_seq,
            gtid_domain,
            gtid_server,
        })
    }

    /// The name ids of unit k's Table_maps (fast units; empty for the others).
    fn tables(&self, k: usize) -> Vec<u32> {
        self.list.tables(k).to_vec()
    }

    /// Unit k's end (its part and file offset), None when it ends with a real Rotate.
    fn end(&self, k: usize) -> Option<UnitEnd> {
        self.list.end(k).map(|(part, pos)| UnitEnd { part, pos })
    }

    /// Unit k's MariaDB GTID as a GTID state's item ((domain, server_id), seq_no), None without
    /// one: a pair, the (key, value) a state's dict is updated with, kept a tuple on purpose.
    fn gtid(&self, k: usize) -> Option<((u32, u32), u64)> {
        self.list.gtid(k).map(|(d, s, q)| ((d, s), q))
    }

    /// `gtid(k)` for k in start..stop (clipped to the units).
    fn gtids(&self, start: usize, stop: usize) -> Vec<Option<((u32, u32), u64)>> {
        let stop = stop.min(self.list.units.len());
        (start.min(stop)..stop)
            .map(|k| self.list.gtid(k).map(|(d, s, q)| ((d, s), q)))
            .collect()
    }

    /// The MySQL GTIDs of the complete units among units[start..stop], as runs of consecutive
    /// gnos per source, and the units whose tagged GTID the caller decodes (see gtid_runs).
    fn mysql_gtids(&self, py: Python<'_>, start: usize, stop: usize) -> PyResult<MysqlGtids> {
        let bufs: Vec<&[u8]> = self.bufs.iter().map(|b| b.bytes(py)).collect();
        let found = crate::gtid_runs::mysql_gtids(&self.list, &bufs, start, stop);
        super::unit_list_reads::gtids_record(py, found)
    }

    /// How many distinct (domain, server_id) the MariaDB GTIDs have.
    fn gtid_sources(&self) -> usize {
        self.list.gtid_sources()
    }

    /// The indexes of the units from `start` on with any flag of `mask`.
    #[pyo3(signature = (mask, start = 0))]
    fn with_flags(&self, mask: u32, start: usize) -> Vec<usize> {
        self.list.with_flags(mask, start)
    }

    /// The units that are a complete GTID and one plain QUERY event (see
    /// unit_list::UnitList::lone_query), in order: what the master's statement flag words answer, read
    /// for a whole segment in one call. `plain`: a LoneGroup (default database, unit indices as
    /// u32 LE bytes) per default database of the units whose SQL is plain (`plain_statement`),
    /// which alone keys their answer under database rules: no text and no object per unit.
    /// `others`: a LoneQuery per other unit, plain False, or None where Python must tell; with
    /// `every`, per plain unit too (plain True: `experiment` reads each one's text). `formats`
    /// gives per part (its format's QUERY post-header length, its checksum length, the first unit
    /// the format is in force for): the part's units before that one (an FDE inside the part
    /// changed the format) are left out, as is every other unit. Texts decode as UTF-8 with
    /// surrogateescape, as `codec.event.query_text` does. `classes`: each LoneQuery's number
    /// there (`class_id`: its class's, or its text's where its class is declined; -1 where not
    /// numbered or not asked). `resolved` (with `classes`, `class_of` and `key_of`: see
    /// lone_class::resolved_at): a unit with a GTID of a number answered there, plain or not
    /// (not one Python must tell), has its code and key written into `class_of` and `key_of` (a
    /// u32 a unit) and no LoneQuery; those that replay are listed in `replays` (a DEFER number's
    /// with their texts in `texts`). ValueError where `class_of` or `key_of` is short.
    #[pyo3(signature = (formats, every = false, classes = None, resolved = None, class_of = None, key_of = None))]
    #[allow(clippy::too_many_arguments)]
    fn lone_queries<'py>(
        &self,
        py: Python<'py>,
        formats: Vec<(usize, usize, usize)>,
        every: bool,
        classes: Option<PyRef<'py, PyLoneClasses>>,
        resolved: Option<&[u8]>,
        class_of: Option<Bound<'py, PyByteArray>>,
        key_of: Option<Bound<'py, PyByteArray>>,
    ) -> PyResult<LoneQueries> {
        let mut classes = classes.as_ref().map(|c| c.lock());
        let answered = match (resolved, &class_of, &key_of) {
            (Some(resolved), Some(class_of), Some(key_of)) => Some(Answered {
                resolved,
                class_of,
                key_of,
            }),
            (None, None, None) => None,
            _ => {
                return Err(PyValueError::new_err(
                    "lone_queries: resolved, class_of and key_of go together",
                ))
            }
        };
        super::unit_list_reads::lone_queries(
            py,
            &self.list,
            &self.bufs,
            &formats,
            every,
            classes.as_deref_mut(),
            answered,
        )
    }

    /// The bytes of the lone units among `left` summed by key (see lone_sums::lone_sums): `key_of`
    /// each unit's key (as `lone_queries` writes it), `shares` each key's tables (u32 LE; 0:
    /// grouped by its text, its units not summed), `sums` 24 bytes a key, `met` a byte a key; `formats` as
    /// `lone_queries` takes them. Returns the units left to Python; ValueError where a key is
    /// past `sums` or `met`.
    #[allow(clippy::too_many_arguments)]
    fn lone_sums(
        &self,
        py: Python<'_>,
        formats: Vec<(usize, usize, usize)>,
        left: Vec<u32>,
        key_of: &[u8],
        shares: &[u8],
        sums: Bound<'_, PyByteArray>,
        met: Bound<'_, PyByteArray>,
    ) -> PyResult<LoneSums> {
        super::unit_list_reads::lone_sums(
            py,
            &self.list,
            &self.bufs,
            &formats,
            &left,
            (key_of, shares),
            &sums,
            &met,
        )
    }

    /// Each slave's answer byte per unit (ROW_SKIP, ROW_PARTIAL, ROW_KEEP, ROW_SLOW: not fast)
    /// from its keep byte per name id (`keeps`; any byte but KEEP_DROP: kept), over one read of
    /// the units for all of them (see rows::rows_many): a list of answer bytes, in order. `stmt_keeps` (after `statement_units`;
    /// one per slave, None: its statement units stay ROW_SLOW): the statement units answered too,
    /// from each slave's keep byte per key id. `gated` (one per slave, None: not gated),
    /// `formats`: a master policy's keys kept only for texts that reach their table alone (see
    /// gate_reads::GateReads::statement_rows).
    #[pyo3(signature = (keeps, stmt_keeps = None, gated = None, formats = None))]
    #[gen_stub(override_return_type(type_repr = "list[bytes]"))]
    fn rows_many<'py>(
        &self,
        py: Python<'py>,
        keeps: Vec<Vec<u8>>,
        stmt_keeps: Option<Vec<Option<Vec<u8>>>>,
        gated: Option<Vec<Option<Vec<u8>>>>,
        formats: Option<Vec<(usize, usize, usize)>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let on = (&self.list, &self.bufs[..], &self.gate);
        let by_keys = self.stmts.get().zip(stmt_keeps);
        let out = super::unit_list_reads::rows_many(py, on, &keeps, by_keys, gated, formats)?;
        PyList::new(py, out.iter().map(|row| PyBytes::new(py, row)))
    }

    /// The statement units by key (see stmt_units::StmtUnits), read on the first call for every
    /// stream (`formats` as `lone_queries` takes them; later calls' are not read): a StatementKey
    /// per key, and the units decided by keys. Only after the list's scans are done. The scan thread's build
    /// (`scan_start`'s `statements`) is taken when the list is its one part and `formats` is the
    /// format it read under (`statements_ahead` then true); otherwise they are read now.
    fn statement_units(
        &self,
        py: Python<'_>,
        formats: Vec<(usize, usize, usize)>,
    ) -> PyResult<StatementUnits> {
        self.idle()?;
        let st = match self.stmts.get() {
            Some(st) => st,
            None => {
                let ahead = self.ahead.lock().unwrap_or_else(|e| e.into_inner()).take();
                let built = match ahead {
                    Some((format, st)) if self.bufs.len() == 1 && formats == [format] => {
                        self.took_ahead.store(true, Relaxed);
                        st
                    }
                    _ => {
                        let bufs: Vec<&[u8]> = self.bufs.iter().map(|b| b.bytes(py)).collect();
                        let list = &self.list;
                        py.detach(|| StmtUnits::build(list, &bufs, &formats))
                    }
                };
                let _ = self.stmts.set(built);
                self.stmts.get().expect("set above")
            }
        };
        Ok(StatementUnits {
            keys: statement_keys(py, &st.keys)?,
            units: st.units,
        })
    }

    /// The units a gated stream's `row` keeps whose Annotate_rows / Rows_query texts the core
    /// cannot show name only tables `keep` keeps (gate_reads::GateReads::annotations_unshown:
    /// `names` (db, table) by name id, `formats` as `statement_units` takes them), in order:
    /// what the scan threads read ahead (`scan_start(annotations=True)`) taken, the rest read
    /// here, without the GIL.
    fn annotations_unshown(
        &self,
        py: Python<'_>,
        row: &[u8],
        keep: &[u8],
        names: Vec<(String, String)>,
        formats: Vec<(usize, usize, usize)>,
    ) -> Vec<usize> {
        let bufs: Vec<&[u8]> = self.bufs.iter().map(|b| b.bytes(py)).collect();
        let (list, gate) = (&self.list, &self.gate);
        py.detach(|| gate.annotations_unshown(list, &bufs, &formats, &names, row, keep))
    }

    /// Adds units[i..j)'s Table_maps, per (i, j) of `ranges`, to `counts` (u32 per name id).
    fn tally_names(&self, ranges: Vec<(usize, usize)>, counts: &Bound<'_, PyByteArray>) {
        let mut tally = vec![0u32; counts.len() / 4];
        self.list.tally_names(&ranges, &mut tally);
        // SAFETY: the GIL is held and no Python code runs while the bytearray is borrowed.
        add_counts(unsafe { counts.as_bytes_mut() }, &tally);
    }

    /// What a stream with answers `row` (from `rows_many`) and keep bytes sends of units[start..]
    /// until a unit it cannot handle or the batch is full (see send::walk), walked as `config`
    /// says (the Table_maps it ran: `tally_names`).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (row, keep, start, config, pending, stmt_keep = None, stmt_counts = None))]
    fn send<'py>(
        &self,
        py: Python<'py>,
        row: &[u8],
        keep: &[u8],
        start: usize,
        config: PyRef<'py, SendConfig>,
        pending: Option<&[u8]>,
        stmt_keep: Option<&[u8]>,
        stmt_counts: Option<&Bound<'py, PyByteArray>>,
    ) -> PyResult<SendResult> {
        let bufs: Vec<&[u8]> = self.bufs.iter().map(|b| b.bytes(py)).collect();
        let opt = SendOptions {
            batch_bytes: config.batch_bytes,
            limit: config.limit,
            skip: config.skip,
            partial_ok: config.partial_ok,
            runs: config.placeholder_runs,
            stretches: config.skip_stretches,
            pending,
            server_id: config.server_id,
            heartbeat_crc: config.heartbeat_crc,
            stmts: self.stmts.get().zip(stmt_keep),
            ..SendOptions::default()
        };
        let list = &self.list;
        let s = py.detach(|| send::walk(list, &bufs, row, keep, start, &opt));
        if let Some(key_tally) = stmt_counts {
            // SAFETY: as above.
            add_counts(unsafe { key_tally.as_bytes_mut() }, &s.key_counts);
        }
        let out = Py::new(py, SentBytes::new(py, s, &self.bufs)?)?;
        Ok(send_result(out.clone_ref(py), out.get().sent()))
    }
}
