//! The Python face of the core: `dumpfilter._core`. Calls are made per buffer, never per event;
//! results come back as packed little-endian arrays (bytes) that Python views with memoryview.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyTuple};

use crate::assemble;
use crate::flags::{self, FlagWords};
use crate::relay;
use crate::scan::{self, ErrorKind, ScanError, Scanner, UNIT_WORDS};
use crate::send::{self, Plan, SendOptions};

/// A str of UTF-8 bytes, undecodable bytes kept as surrogates (Python's "surrogateescape").
fn text<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, pyo3::types::PyString>> {
    use pyo3::types::PyString;
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(PyString::new(py, s)),
        Err(_) => PyString::from_encoded_object(
            &PyBytes::new(py, bytes),
            Some(c"utf-8"),
            Some(c"surrogateescape"),
        ),
    }
}

fn error_tuple<'py>(py: Python<'py>, e: &ScanError) -> PyResult<Bound<'py, PyAny>> {
    let kind = match e.kind {
        ErrorKind::Binlog => "binlog",
        ErrorKind::Checksum => "checksum",
    };
    Ok((kind, e.message.as_str(), e.offset)
        .into_pyobject(py)?
        .into_any())
}

/// Scanner state across the buffers of one stream: the format in force and interned names.
#[pyclass(module = "dumpfilter._core", name = "Scanner")]
struct PyScanner {
    inner: Scanner,
    /// Its state is on a scan thread (`Plan.scan_start`) until `Plan.scan_finish`.
    away: bool,
    names_sent: usize,
    /// The last `units` call's units and tables, for `assemble`.
    last_units: Vec<scan::Unit>,
    last_tables: Vec<u32>,
}

impl PyScanner {
    /// Refuses a call while the scanner's state is on a scan thread (`Plan.scan_start`).
    fn here(&self) -> PyResult<()> {
        if self.away {
            return Err(PyRuntimeError::new_err(
                "the scanner is busy: a Plan.scan_start has no scan_finish yet",
            ));
        }
        Ok(())
    }

    /// The (db, table) byte pairs interned since the last call.
    fn new_names<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let names = PyList::empty(py);
        for (db, table) in &self.inner.names[self.names_sent..] {
            names.append((PyBytes::new(py, db), PyBytes::new(py, table)))?;
        }
        self.names_sent = self.inner.names.len();
        Ok(names)
    }
}

#[pymethods]
impl PyScanner {
    #[new]
    #[pyo3(signature = (verify = true))]
    fn new(verify: bool) -> Self {
        PyScanner {
            inner: Scanner::new(verify),
            away: false,
            names_sent: 0,
            last_units: Vec::new(),
            last_tables: Vec::new(),
        }
    }

    /// Adopts the format of the Format_description event `event` (read at file offset `offset`);
    /// returns None, or an error tuple (kind, message, offset).
    fn load_fde<'py>(
        &mut self,
        py: Python<'py>,
        event: &[u8],
        offset: u64,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.here()?;
        match self.inner.load_fde(event, offset) {
            Ok(()) => Ok(None),
            Err(e) => Ok(Some(error_tuple(py, &e)?)),
        }
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
    fn fast_ok(&self) -> bool {
        self.inner.fmt.as_ref().is_some_and(|f| f.fast)
    }

    #[getter]
    fn events_walked(&self) -> u64 {
        self.inner.events_walked
    }

    #[getter]
    fn verify(&self) -> bool {
        self.inner.verify
    }

    #[setter]
    fn set_verify(&mut self, verify: bool) {
        self.inner.verify = verify;
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

    /// Groups buf[off..] into units (see scan::Scanner::units). Returns (units, tables,
    /// new_names, stop, events, last_rotate, error): `units` packs UNIT_WORDS u64 per unit,
    /// `tables` u32 name ids, `new_names` the (db, table) byte pairs interned since the last call
    /// (ids continue from the previous ones), `last_rotate` -1 for none, `error` None or
    /// (kind, message, offset).
    #[pyo3(signature = (buf, off, base, limit = usize::MAX, at_eof = false))]
    fn units<'py>(
        &mut self,
        py: Python<'py>,
        buf: &[u8],
        off: usize,
        base: u64,
        limit: usize,
        at_eof: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.here()?;
        check_off(off, buf.len())?;
        let inner = &mut self.inner;
        let out = py.detach(|| inner.units(buf, off, base, limit, at_eof));
        let mut packed = Vec::with_capacity(out.units.len() * UNIT_WORDS * 8);
        for u in &out.units {
            u.pack(&mut packed);
        }
        let mut tables = Vec::with_capacity(out.tables.len() * 4);
        for t in &out.tables {
            tables.extend_from_slice(&t.to_le_bytes());
        }
        let names = self.new_names(py)?;
        let error = match &out.error {
            Some(e) => error_tuple(py, e)?,
            None => py.None().into_bound(py),
        };
        let last_rotate = out.last_rotate.map_or(-1i64, |r| r as i64);
        let stop = out.stop;
        let events = out.events;
        self.last_units = out.units;
        self.last_tables = out.tables;
        PyTuple::new(
            py,
            [
                PyBytes::new(py, &packed).into_any(),
                PyBytes::new(py, &tables).into_any(),
                names.into_any(),
                stop.into_pyobject(py)?.into_any(),
                events.into_pyobject(py)?.into_any(),
                last_rotate.into_pyobject(py)?.into_any(),
                error,
            ],
        )
    }

    /// What a filter keeps of the last `units` call's units from index `from` on, for a sink
    /// that writes at output offset `out_pos` (see assemble::assemble); `buf` must be the
    /// buffer that call scanned. `keep` holds one byte per name id: 0 skip, 1 keep, 2 unknown.
    /// Returns (bytes, next unit index, output offset after them, counts as a flat tuple:
    /// kept units/events/bytes, partial units/events in/bytes in/events out/bytes out, emptied
    /// units/events in/bytes in/bytes out, skipped units/events in/bytes in).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (buf, from, keep, out_pos, base, renumber, crc, empty_keep, commit_body, whole_only = false, answers = None))]
    fn assemble<'py>(
        &self,
        py: Python<'py>,
        buf: &[u8],
        from: usize,
        keep: &[u8],
        out_pos: u64,
        base: u64,
        renumber: bool,
        crc: bool,
        empty_keep: bool,
        commit_body: &[u8],
        whole_only: bool,
        answers: Option<&[u8]>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let answers = answers.unwrap_or(&[]);
        let opt = assemble::Options {
            base,
            renumber,
            crc,
            empty_keep,
            commit_body,
            whole_only,
        };
        let (units, tables) = (&self.last_units, &self.last_tables);
        let a = py
            .detach(|| assemble::assemble(buf, units, tables, keep, answers, from, out_pos, &opt));
        let c = a.counts;
        let counts: Vec<u64> = c
            .kept
            .iter()
            .chain(&c.partial)
            .chain(&c.emptied)
            .chain(&c.skipped)
            .copied()
            .collect();
        PyTuple::new(
            py,
            [
                PyBytes::new(py, &a.out).into_any(),
                a.next.into_pyobject(py)?.into_any(),
                a.out_pos.into_pyobject(py)?.into_any(),
                PyTuple::new(py, counts)?.into_any(),
            ],
        )
    }

    /// The indices of the last `units` call's units that are not fast, as packed u32: what Python
    /// decides itself (statements, DDL, control events) before handing the rest to `assemble`.
    fn slow_units<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut packed = Vec::new();
        for (i, u) in self.last_units.iter().enumerate() {
            if u.flags & scan::F_FAST == 0 {
                packed.extend_from_slice(&(i as u32).to_le_bytes());
            }
        }
        PyBytes::new(py, &packed)
    }

    /// Walks buf[off..]: returns (offsets, stop, error), `offsets` packing u64 buffer offsets of
    /// the events whose type's byte in `types` (256 bytes) is non-zero, and of every FDE.
    fn walk<'py>(
        &mut self,
        py: Python<'py>,
        buf: &[u8],
        off: usize,
        base: u64,
        types: &[u8],
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.here()?;
        check_off(off, buf.len())?;
        let mut mask = [false; 256];
        for (m, t) in mask.iter_mut().zip(types) {
            *m = *t != 0;
        }
        let inner = &mut self.inner;
        let (offs, stop, err) = py.detach(|| inner.walk(buf, off, base, &mask));
        let mut packed = Vec::with_capacity(offs.len() * 8);
        for o in offs {
            packed.extend_from_slice(&o.to_le_bytes());
        }
        let error = match &err {
            Some(e) => error_tuple(py, e)?,
            None => py.None().into_bound(py),
        };
        PyTuple::new(
            py,
            [
                PyBytes::new(py, &packed).into_any(),
                stop.into_pyobject(py)?.into_any(),
                error,
            ],
        )
    }
}

/// A unit as `Plan.unit` hands it to Python: (part, start, end, events, kind, flags, gtid_size,
/// last, gtid_seq, gtid_domain, gtid_server).
type PlanRecord = (u32, usize, usize, u32, u8, u32, u32, usize, u64, u32, u32);

/// A segment of the master's binlog as every stream walks it (see send::Plan): the units of
/// one or more scans, with the read buffers they lie in.
#[pyclass(module = "dumpfilter._core", name = "Plan")]
struct PyPlan {
    plan: Plan,
    bufs: Vec<Held>,
    /// A scan under way on its own thread (`scan_start`), joined by `scan_finish`.
    pending: Option<Pending>,
}

/// What a scan thread returns: the scanner's state, handed back, and the units it found.
type Scanned = (Scanner, scan::ScanOut);

/// A scan started by `Plan.scan_start`: its thread (or, when no thread could be started, its
/// result, made at once), the buffer it reads, held until the thread is joined, and where the
/// units go.
struct Pending {
    run: Result<std::thread::JoinHandle<Option<Scanned>>, Scanned>,
    held: Held,
    scanner: Py<PyScanner>,
    file: String,
    base: u64,
}

impl Pending {
    /// The scan's result, waited for without the GIL; Err when its thread panicked (the core
    /// never panics on input: this would be a bug), the scanner's state then lost.
    fn wait(
        run: Result<std::thread::JoinHandle<Option<Scanned>>, Scanned>,
        py: Python<'_>,
    ) -> PyResult<Scanned> {
        match run {
            Ok(thread) => match py.detach(|| thread.join()) {
                Ok(Some(done)) => Ok(done),
                _ => Err(PyRuntimeError::new_err("the scan thread failed")),
            },
            Err(done) => Ok(done),
        }
    }
}

impl Drop for PyPlan {
    fn drop(&mut self) {
        // A scan left running reads a buffer this Plan holds: it ends before the buffer goes.
        if let Some(Pending {
            run: Ok(thread), ..
        }) = self.pending.take()
        {
            let _ = thread.join();
        }
    }
}

/// A buffer a Plan reads after the call that handed it over: a bytes object, or any object
/// exporting read-only contiguous bytes (the master maps closed binlog files rather than
/// copying them). Held, a mapping cannot be closed or resized under the Plan: Python refuses
/// while it is exported. A writable buffer is refused: it could change under a scan that runs
/// without the GIL.
enum Held {
    Bytes(Py<PyBytes>),
    View(PyBuffer<u8>),
}

impl Held {
    fn new(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(bytes) = obj.cast::<PyBytes>() {
            return Ok(Held::Bytes(bytes.clone().unbind()));
        }
        let view = PyBuffer::<u8>::get(obj)?;
        if !view.is_c_contiguous() || !view.readonly() {
            return Err(PyValueError::new_err(
                "a Plan reads bytes or a read-only contiguous buffer (a mapping opened PROT_READ)",
            ));
        }
        Ok(Held::View(view))
    }

    fn bytes<'a>(&'a self, py: Python<'_>) -> &'a [u8] {
        match self {
            Held::Bytes(b) => b.as_bytes(py),
            // SAFETY: the export is held as long as self: the memory stays valid and in place,
            // and the object is read-only or not written while it is a Plan's part.
            Held::View(v) => unsafe {
                std::slice::from_raw_parts(v.buf_ptr() as *const u8, v.len_bytes())
            },
        }
    }
}

/// A scan moved to a thread: the scanner's state and the buffer's address (held by the
/// Plan's `Pending` until the thread is joined).
struct ScanJob {
    scanner: Scanner,
    at: usize,
    len: usize,
    off: usize,
    base: u64,
    limit: usize,
    at_eof: bool,
}

impl ScanJob {
    fn run(mut self) -> Scanned {
        // SAFETY: the Pending that holds the buffer's export (or bytes object) outlives this
        // thread: scan_finish and the Plan's Drop join it before letting the buffer go.
        let data = unsafe { std::slice::from_raw_parts(self.at as *const u8, self.len) };
        let out = self
            .scanner
            .units(data, self.off, self.base, self.limit, self.at_eof);
        (self.scanner, out)
    }
}

fn check_off(off: usize, len: usize) -> PyResult<()> {
    if off > len {
        return Err(PyValueError::new_err(format!(
            "offset {off} is past the buffer ({len} bytes)"
        )));
    }
    Ok(())
}

impl PyPlan {
    fn idle(&self) -> PyResult<()> {
        if self.pending.is_some() {
            return Err(PyRuntimeError::new_err(
                "a scan is under way on this Plan (scan_start without scan_finish)",
            ));
        }
        Ok(())
    }

    /// A finished scan's units into the plan, as one part; the tuple `scan` returns.
    fn adopt<'py>(
        &mut self,
        py: Python<'py>,
        scanner: &mut PyScanner,
        out: scan::ScanOut,
        held: Held,
        file: &str,
        base: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let names = scanner.new_names(py)?;
        let error = match &out.error {
            Some(e) => error_tuple(py, e)?,
            None => py.None().into_bound(py),
        };
        let added = out.units.len();
        if added > 0 {
            self.plan
                .add(file.as_bytes(), base, &out.units, &out.tables);
            self.bufs.push(held);
        }
        let last_rotate = out.last_rotate.map_or(-1i64, |r| r as i64);
        PyTuple::new(
            py,
            [
                names.into_any(),
                out.stop.into_pyobject(py)?.into_any(),
                out.events.into_pyobject(py)?.into_any(),
                last_rotate.into_pyobject(py)?.into_any(),
                error,
                added.into_pyobject(py)?.into_any(),
            ],
        )
    }
}

#[pymethods]
impl PyPlan {
    #[new]
    fn new() -> Self {
        PyPlan {
            plan: Plan::default(),
            bufs: Vec::new(),
            pending: None,
        }
    }

    /// Appends the units of `scanner`'s last `units` call, made over `buf` (file offset
    /// `base` of the binlog file `file`).
    fn add(
        &mut self,
        scanner: PyRef<'_, PyScanner>,
        buf: Bound<'_, PyBytes>,
        file: &str,
        base: u64,
    ) {
        self.plan.add(
            file.as_bytes(),
            base,
            &scanner.last_units,
            &scanner.last_tables,
        );
        self.bufs.push(Held::Bytes(buf.unbind()));
    }

    /// Groups buf[off..] with `scanner` (see scan::Scanner::units) and appends the units to the
    /// plan, as one part read from the binlog file `file` at file offset `base` of buf[0], without
    /// handing the records to Python. Returns (new_names, stop, events, last_rotate, error,
    /// units added) as `Scanner.units` does; the records are read back with `unit(k)`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (scanner, buf, off, base, file, limit = usize::MAX, at_eof = false))]
    fn scan<'py>(
        &mut self,
        py: Python<'py>,
        mut scanner: PyRefMut<'_, PyScanner>,
        buf: Bound<'py, PyAny>,
        off: usize,
        base: u64,
        file: &str,
        limit: usize,
        at_eof: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.idle()?;
        scanner.here()?;
        let held = Held::new(&buf)?;
        let data = held.bytes(py);
        check_off(off, data.len())?;
        let inner = &mut scanner.inner;
        let out = py.detach(|| inner.units(data, off, base, limit, at_eof));
        self.adopt(py, &mut scanner, out, held, file, base)
    }

    /// `scan`, started on a thread of its own: the call returns at once, the GIL free, while
    /// the scan runs (the master scans the next segment while its stream sends this one).
    /// The scanner's state goes with the thread: the scanner refuses calls until `scan_finish`,
    /// which waits for the scan and returns what `scan` returns. One scan at a time per Plan.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (scanner, buf, off, base, file, limit = usize::MAX, at_eof = false))]
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
        };
        // The job reaches the thread through a channel, so that a thread that cannot be started
        // leaves it here: then it runs now, on this thread.
        let (send, recv) = std::sync::mpsc::sync_channel::<ScanJob>(1);
        let run = match std::thread::Builder::new()
            .name("dumpfilter-scan".into())
            .spawn(move || recv.recv().ok().map(ScanJob::run))
        {
            Ok(thread) => match send.send(job) {
                Ok(()) => Ok(thread),
                Err(std::sync::mpsc::SendError(job)) => Err(py.detach(|| job.run())),
            },
            Err(_) => Err(py.detach(|| job.run())),
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

    /// Waits for the scan `scan_start` began and adds its units: returns what `scan` returns.
    fn scan_finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let Some(Pending {
            run,
            held,
            scanner,
            file,
            base,
        }) = self.pending.take()
        else {
            return Err(PyRuntimeError::new_err(
                "no scan under way (Plan.scan_start)",
            ));
        };
        let done = Pending::wait(run, py);
        let scanner = scanner.bind(py);
        let mut s = scanner.try_borrow_mut()?;
        s.away = false;
        let (inner, out) = done?;
        s.inner = inner;
        self.adopt(py, &mut s, out, held, &file, base)
    }

    fn __len__(&self) -> usize {
        self.plan.units.len()
    }

    /// Bytes of all units.
    #[getter]
    fn size(&self) -> u64 {
        self.plan.size
    }

    /// The OR of every unit's flags.
    #[getter]
    fn flags_any(&self) -> u32 {
        self.plan.flags_any
    }

    /// Unit k's record: (part, start, end, events, kind, flags, gtid_size, last, gtid_seq,
    /// gtid_domain, gtid_server), offsets in its part's buffer; IndexError out of range.
    fn unit(&self, k: usize) -> PyResult<PlanRecord> {
        let u = self
            .plan
            .units
            .get(k)
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(k))?;
        Ok((
            u.part,
            u.start,
            u.end,
            u.events,
            u.kind,
            u.flags,
            u.gtid_size,
            u.last,
            u.gtid_seq,
            u.gtid_domain,
            u.gtid_server,
        ))
    }

    /// The name ids of unit k's Table_maps (fast units; empty for the others).
    fn tables(&self, k: usize) -> Vec<u32> {
        self.plan.tables(k).to_vec()
    }

    /// Unit k's end as (part, file offset), None when it ends with a real Rotate.
    fn end(&self, k: usize) -> Option<(u32, u64)> {
        self.plan.end(k)
    }

    /// Unit k's MariaDB GTID ((domain, server_id), seq_no), None without one.
    fn gtid(&self, k: usize) -> Option<((u32, u32), u64)> {
        self.plan.gtid(k).map(|(d, s, q)| ((d, s), q))
    }

    /// `gtid(k)` for k in start..stop (clipped to the units).
    fn gtids(&self, start: usize, stop: usize) -> Vec<Option<((u32, u32), u64)>> {
        let stop = stop.min(self.plan.units.len());
        (start.min(stop)..stop)
            .map(|k| self.plan.gtid(k).map(|(d, s, q)| ((d, s), q)))
            .collect()
    }

    /// How many distinct (domain, server_id) the MariaDB GTIDs have.
    fn gtid_sources(&self) -> usize {
        self.plan.gtid_sources()
    }

    /// The indexes of the units from `start` on with any flag of `mask`.
    #[pyo3(signature = (mask, start = 0))]
    fn with_flags(&self, mask: u32, start: usize) -> Vec<usize> {
        self.plan.with_flags(mask, start)
    }

    /// The units that are a complete GTID and one plain QUERY event (see
    /// send::Plan::lone_query), in order: what the master's statement flag words answer, read
    /// for a whole segment in one call, as (plain, others). `plain`: [(default database, unit
    /// indices as u32 LE bytes)], the units whose SQL is plain (`plain_statement`), grouped by
    /// their default database, which alone keys their answer under database rules: no text and
    /// no object per unit. `others`: [(k, default database, plain, SQL)], plain False, or None
    /// where Python must tell. `formats` gives per part (its format's QUERY post-header length,
    /// its checksum length, the first unit the format is in force for): the part's units before
    /// that one (an FDE inside the part changed the format) are left out, as is every other
    /// unit. Texts decode as UTF-8 with surrogateescape, as `codec.event.query_text` does.
    fn lone_queries<'py>(
        &self,
        py: Python<'py>,
        formats: Vec<(usize, usize, usize)>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let others = PyList::empty(py);
        // A segment's DDL names a few databases: a short list beats hashing.
        let mut plain: Vec<(&[u8], Vec<u8>)> = Vec::new();
        for (k, u) in self.plan.units.iter().enumerate() {
            let p = u.part as usize;
            let (Some(&(post, crc, from)), Some(buf)) = (formats.get(p), self.bufs.get(p)) else {
                continue;
            };
            if k < from {
                continue;
            }
            let buf = buf.bytes(py);
            if let Some((db, sql)) = self.plan.lone_query(k, buf, post, crc) {
                let (db, sql) = (&buf[db], &buf[sql]);
                match scan::plain_statement(sql) {
                    Some(true) => {
                        let at = match plain.iter().position(|(d, _)| *d == db) {
                            Some(at) => at,
                            None => {
                                plain.push((db, Vec::new()));
                                plain.len() - 1
                            }
                        };
                        plain[at].1.extend_from_slice(&(k as u32).to_le_bytes());
                    }
                    verdict => others.append((k, text(py, db)?, verdict, text(py, sql)?))?,
                }
            }
        }
        let groups = PyList::empty(py);
        for (db, ks) in plain {
            groups.append((text(py, db)?, PyBytes::new(py, &ks)))?;
        }
        PyTuple::new(py, [groups.into_any(), others.into_any()])
    }

    /// One stream's answer byte per unit (0 skip, 1 partial, 2 keep, 3 not fast) from its keep
    /// byte per name id (non-zero: kept).
    fn rows<'py>(&self, py: Python<'py>, keep: &[u8]) -> Bound<'py, PyBytes> {
        let out = py.detach(|| self.plan.rows(keep));
        PyBytes::new(py, &out)
    }

    /// What a stream with answers `row` (from `rows`) and keep bytes sends of units[start..]
    /// until a unit it cannot handle or the batch is full (see send::send). Returns (bytes,
    /// next unit, kept, partial, skipped, sent bytes, sent events, read bytes, read events,
    /// heartbeats, heartbeat bytes, pending unit or -1, pending sent-or-replaced); the units'
    /// Table_maps are tallied per name id into `counts` (a bytearray of u32, added to in place).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (row, keep, start, batch_bytes, limit, skip_ok, partial_ok, pending, server_id, heartbeat_crc, counts))]
    fn send<'py>(
        &self,
        py: Python<'py>,
        row: &[u8],
        keep: &[u8],
        start: usize,
        batch_bytes: u64,
        limit: u64,
        skip_ok: bool,
        partial_ok: bool,
        pending: Option<&[u8]>,
        server_id: u32,
        heartbeat_crc: bool,
        counts: &Bound<'py, PyByteArray>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let bufs: Vec<&[u8]> = self.bufs.iter().map(|b| b.bytes(py)).collect();
        let opt = SendOptions {
            batch_bytes,
            limit,
            skip_ok,
            partial_ok,
            pending,
            server_id,
            heartbeat_crc,
        };
        let plan = &self.plan;
        let s = py.detach(|| send::send(plan, &bufs, row, keep, start, &opt));
        // SAFETY: the GIL is held and no Python code runs while the bytearray is borrowed.
        let tally = unsafe { counts.as_bytes_mut() };
        for (slot, c) in tally.chunks_exact_mut(4).zip(&s.name_counts) {
            if *c != 0 {
                let old = u32::from_le_bytes([slot[0], slot[1], slot[2], slot[3]]);
                slot.copy_from_slice(&old.wrapping_add(*c).to_le_bytes());
            }
        }
        let pending = s.pending.map_or(-1i64, |k| k as i64);
        PyTuple::new(
            py,
            [
                PyBytes::new(py, &s.out).into_any(),
                s.next.into_pyobject(py)?.into_any(),
                s.kept.into_pyobject(py)?.into_any(),
                s.partial.into_pyobject(py)?.into_any(),
                s.skipped.into_pyobject(py)?.into_any(),
                s.sent_bytes.into_pyobject(py)?.into_any(),
                s.sent_events.into_pyobject(py)?.into_any(),
                s.read_bytes.into_pyobject(py)?.into_any(),
                s.read_events.into_pyobject(py)?.into_any(),
                s.heartbeats.into_pyobject(py)?.into_any(),
                s.heartbeat_bytes.into_pyobject(py)?.into_any(),
                pending.into_pyobject(py)?.into_any(),
                pyo3::types::PyBool::new(py, s.pending_done)
                    .to_owned()
                    .into_any(),
            ],
        )
    }
}

/// A Heartbeat event for (file, pos), as the master sends one (see send::heartbeat).
#[pyfunction]
fn heartbeat<'py>(
    py: Python<'py>,
    file: &str,
    pos: u64,
    server_id: u32,
    crc: bool,
) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(file.len() + 23);
    send::heartbeat(file.as_bytes(), pos, server_id, crc, &mut out);
    PyBytes::new(py, &out)
}

/// CRC-32 (zlib's polynomial) of `data`, SIMD-accelerated.
#[pyfunction]
fn crc32(py: Python<'_>, data: &[u8]) -> u32 {
    py.detach(|| scan::crc32(data))
}

/// The inner events' bytes of a Transaction_payload event body; ValueError when malformed.
#[pyfunction]
#[pyo3(signature = (body, max_out = 1 << 30))]
fn payload_bytes<'py>(
    py: Python<'py>,
    body: &[u8],
    max_out: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let data = py
        .detach(|| scan::payload_bytes(body, max_out))
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &data))
}

/// The statements of a fast unit's body buf[body:end] (see scan::statements): a list of
/// (end offset, events, Table_maps so far), or None for the reference path.
#[pyfunction]
fn statements(buf: &[u8], body: usize, end: usize) -> Option<Vec<(usize, u32, u32)>> {
    scan::statements(buf, body, end)
}

/// Renumbers the whole events of buf[start:stop] in place for output offset `base` (see
/// assemble::renumber); returns (last non-zero timestamp, offsets of FDEs left to the caller).
#[pyfunction]
fn renumber(
    buf: &Bound<'_, PyByteArray>,
    start: usize,
    stop: usize,
    base: u64,
    crc: bool,
) -> (u32, Vec<usize>) {
    // SAFETY: the GIL is held and nothing else runs Python code during the call, so no one can
    // resize or read the bytearray while it is borrowed.
    let data = unsafe { buf.as_bytes_mut() };
    assemble::renumber(data, start, stop, base, crc)
}

/// `rules.statements.plain_statement` for a statement's UTF-8 bytes, None where Python must
/// answer (text with non-ASCII bytes or a leading comment; see scan::plain_statement).
#[pyfunction]
fn plain_statement(sql: &[u8]) -> Option<bool> {
    scan::plain_statement(sql)
}

/// Whether buf[off:] (a file's first bytes) holds another server's log_pos values: a relay log.
#[pyfunction]
fn foreign_log_pos(buf: &[u8], off: usize) -> bool {
    scan::foreign_log_pos(buf, off)
}

/// The benchmarks' compiled baseline: a bare header hop over buf[off:], (events, stop).
#[pyfunction]
fn hop(py: Python<'_>, buf: &[u8], off: usize) -> (u64, usize) {
    py.detach(|| scan::hop(buf, off))
}

/// The master's flag words (see flags.rs): `compute(db, table)` (the Python rule engines) gives
/// a missing word as little-endian bytes, once per table and generation.
#[pyclass(module = "dumpfilter._core", name = "FlagWords")]
struct PyFlagWords {
    inner: FlagWords,
    compute: Py<PyAny>,
}

impl PyFlagWords {
    /// The word of (db, table), computed on a miss. The borrow is let go while Python computes
    /// (another thread may use the words meanwhile; a word computed across a `clear` is not kept).
    fn word_of(slf: &Bound<'_, Self>, db: &str, table: &str) -> PyResult<flags::Word> {
        let key = flags::key(db.as_bytes(), table.as_bytes());
        let (compute, generation) = {
            let this = slf.borrow();
            if let Some(word) = this.inner.get(&key) {
                return Ok(word.clone());
            }
            (this.compute.clone_ref(slf.py()), this.inner.generation)
        };
        let bytes: Vec<u8> = compute.call1(slf.py(), (db, table))?.extract(slf.py())?;
        let word = flags::word_from_le(&bytes);
        slf.borrow_mut().inner.insert(key, word.clone(), generation);
        Ok(word)
    }
}

#[pymethods]
impl PyFlagWords {
    #[new]
    fn new(compute: Py<PyAny>) -> Self {
        PyFlagWords {
            inner: FlagWords::default(),
            compute,
        }
    }

    /// Whether slave bit `bit` keeps (db, table).
    fn kept(slf: &Bound<'_, Self>, db: &str, table: &str, bit: usize) -> PyResult<bool> {
        Ok(flags::has_bit(&Self::word_of(slf, db, table)?, bit))
    }

    /// One byte per (db, table) of `names` (1: slave bit `bit` keeps it): a segment's keep
    /// bytes for `Plan.rows`.
    fn keep<'py>(
        slf: &Bound<'py, Self>,
        names: &Bound<'py, PyList>,
        bit: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::with_capacity(names.len());
        for name in names.iter() {
            let (db, table): (String, String) = name.extract()?;
            out.push(u8::from(flags::has_bit(
                &Self::word_of(slf, &db, &table)?,
                bit,
            )));
        }
        Ok(PyBytes::new(slf.py(), &out))
    }

    /// The whole word of (db, table) as little-endian bytes (the reference path's masks).
    fn word<'py>(slf: &Bound<'py, Self>, db: &str, table: &str) -> PyResult<Bound<'py, PyBytes>> {
        let word = Self::word_of(slf, db, table)?;
        let mut out = Vec::with_capacity(word.len() * 8);
        for limb in word {
            out.extend_from_slice(&limb.to_le_bytes());
        }
        Ok(PyBytes::new(slf.py(), &out))
    }

    /// Forgets every word (slaves or their rules changed).
    fn invalidate(&mut self) {
        self.inner.clear();
    }

    #[getter]
    fn generation(&self) -> u64 {
        self.inner.generation
    }

    #[getter]
    fn computed(&self) -> u64 {
        self.inner.computed
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// The slave's relay run over the last `units` call of `scanner` (see relay::relay_plan):
/// (bytes, next unit index, units, events, bytes relayed, heartbeats passed over, lone
/// statements copied as [(default database, SQL)]). `lone`: (QUERY post-header length,
/// checksum length) of the format in force, to copy lone statements too; None, to stop at them.
#[pyfunction]
#[pyo3(signature = (scanner, buf, from, keep, lone = None))]
fn relay_run<'py>(
    py: Python<'py>,
    scanner: PyRef<'py, PyScanner>,
    buf: &[u8],
    from: usize,
    keep: &[u8],
    lone: Option<(usize, usize)>,
) -> PyResult<Bound<'py, PyTuple>> {
    let (units, tables) = (&scanner.last_units, &scanner.last_tables);
    let lone = lone.map(|(query_post, crc_len)| relay::LoneFormat {
        query_post,
        crc_len,
    });
    let p = py.detach(|| relay::relay_plan(buf, units, tables, keep, from, lone));
    // One copy, straight into the bytes object handed to Python.
    let out = PyBytes::new_with(py, p.bytes as usize, |dst| {
        p.fill(buf, dst);
        Ok(())
    })?;
    let texts = PyList::empty(py);
    for (db, sql) in &p.lone {
        texts.append((text(py, &buf[db.clone()])?, text(py, &buf[sql.clone()])?))?;
    }
    (out, p.next, p.units, p.events, p.bytes, p.heartbeats, texts).into_pyobject(py)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyScanner>()?;
    m.add_class::<PyPlan>()?;
    m.add_class::<PyFlagWords>()?;
    m.add_function(wrap_pyfunction!(heartbeat, m)?)?;
    m.add_function(wrap_pyfunction!(crc32, m)?)?;
    m.add_function(wrap_pyfunction!(payload_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(statements, m)?)?;
    m.add_function(wrap_pyfunction!(hop, m)?)?;
    m.add_function(wrap_pyfunction!(foreign_log_pos, m)?)?;
    m.add_function(wrap_pyfunction!(plain_statement, m)?)?;
    m.add_function(wrap_pyfunction!(renumber, m)?)?;
    m.add_function(wrap_pyfunction!(relay_run, m)?)?;
    m.add("UNIT_WORDS", UNIT_WORDS)?;
    m.add("F_FAST", scan::F_FAST)?;
    m.add("F_COMPLETE", scan::F_COMPLETE)?;
    m.add("ANSWER_KEEP", assemble::ANSWER_KEEP)?;
    m.add("ANSWER_EMPTY", assemble::ANSWER_EMPTY)?;
    m.add("F_ROTATE_END", scan::F_ROTATE_END)?;
    m.add("F_HAS_FDE", scan::F_HAS_FDE)?;
    m.add("F_MARIADB_GTID", scan::F_MARIADB_GTID)?;
    m.add("F_MYSQL_GTID", scan::F_MYSQL_GTID)?;
    m.add("F_TAGGED_GTID", scan::F_TAGGED_GTID)?;
    m.add("F_ANONYMOUS_GTID", scan::F_ANONYMOUS_GTID)?;
    m.add("F_UNKNOWN_NON_IGNORABLE", scan::F_UNKNOWN_NON_IGNORABLE)?;
    m.add("F_PAYLOAD", scan::F_PAYLOAD)?;
    m.add("F_STANDALONE", scan::F_STANDALONE)?;
    Ok(())
}
