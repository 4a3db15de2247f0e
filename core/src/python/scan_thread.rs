//! What lets a UnitList read a buffer while Python goes on: a scan moved to a thread of its own
//! (`ScanJob`) until `UnitList.scan_finish` joins it (`Pending`), its buffer held (`held::Held`).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use super::held::Held;
use super::scanner::PyScanner;
use crate::gate_reads::{needs_ahead, NeedsAhead};
use crate::scan::{self, Scanner, F_HAS_FDE};
use crate::stmt_units::StmtUnits;
use crate::types::QUERY;
use crate::unit_list::{part_statements, PartStatements};

/// What a scan thread returns: the scanner's state, handed back, the units it found, their
/// statement units when it built them (`ScanJob::statements`), the statements of the units
/// that may be kept in part when it read them (`ScanJob::unit_statements`), and what their
/// annotations need of a gated stream when it read that (`ScanJob::annotations`).
pub(super) type Scanned = (
    Scanner,
    scan::ScanOut,
    Option<Ahead>,
    Option<PartStatements>,
    Option<NeedsAhead>,
);

/// The statement units of a scan's units, built on its thread (`StmtUnits::build_part`), with
/// the format they were read under: (QUERY post-header length, checksum length, the first unit
/// that format is in force for). `UnitList.statement_units` takes them when the list is that one
/// part and its caller's formats are that one.
pub(super) type Ahead = ((usize, usize, usize), StmtUnits);

/// A scan started by `UnitList.scan_start`: its thread (or, when no thread could be started, its
/// result, made at once), the buffer it reads, held until the thread is joined, and where the
/// units go.
pub(super) struct Pending {
    pub(super) run: Result<std::thread::JoinHandle<Option<Scanned>>, Scanned>,
    pub(super) held: Held,
    pub(super) scanner: Py<PyScanner>,
    pub(super) file: String,
    pub(super) base: u64,
}

impl Pending {
    /// The scan's result, waited for without the GIL; Err when its thread panicked (the core
    /// never panics on input: this would be a bug), the scanner's state then lost.
    pub(super) fn wait(
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

/// A scan moved to a thread: the scanner's state and the buffer's address (held by the
/// UnitList's `Pending` until the thread is joined).
pub(super) struct ScanJob {
    pub(super) scanner: Scanner,
    pub(super) at: usize,
    pub(super) len: usize,
    pub(super) off: usize,
    pub(super) base: u64,
    pub(super) limit: usize,
    pub(super) at_eof: bool,
    /// Build the statement units of the units found (the list's first part) after the scan,
    /// on this thread: the master's streams then find them read (see `Ahead`).
    pub(super) statements: bool,
    /// Read the statements of the units that may be kept in part (`unit_list::part_statements`).
    pub(super) unit_statements: bool,
    /// Read what the units' Annotate_rows / Rows_query texts need of a gated stream
    /// (`gate_reads::needs_ahead`): a master with a policy gate then finds them read.
    pub(super) annotations: bool,
}

impl ScanJob {
    pub(super) fn run(mut self) -> Scanned {
        // SAFETY: the Pending that holds the buffer's export (or bytes object) outlives this
        // thread: scan_finish and the UnitList's Drop join it before letting the buffer go.
        let data = unsafe { std::slice::from_raw_parts(self.at as *const u8, self.len) };
        let out = self
            .scanner
            .units(data, self.off, self.base, self.limit, self.at_eof);
        let ahead = self
            .statements
            .then(|| statements_ahead(&self.scanner, &out, data));
        let stmts = self
            .unit_statements
            .then(|| part_statements(data, &out.units));
        let needs = self
            .annotations
            .then(|| annotations_ahead(&self.scanner, &out, data));
        (self.scanner, out, ahead.flatten(), stmts, needs.flatten())
    }
}

/// The first unit under the format the scanner holds after the scan: the one after the last
/// unit holding an FDE (what the master's `UnitIndex._formats` gives for such a part).
fn format_from(out: &scan::ScanOut) -> usize {
    out.units
        .iter()
        .rposition(|u| u.flags & F_HAS_FDE != 0)
        .map_or(0, |k| k + 1)
}

/// What the annotations of a scan's units need (`gate_reads::needs_ahead`), under the format
/// the scanner holds after the scan; None without a format.
fn annotations_ahead(scanner: &Scanner, out: &scan::ScanOut, data: &[u8]) -> Option<NeedsAhead> {
    let crc = scanner.fmt.as_ref()?.checksum_len;
    let from = format_from(out);
    Some(needs_ahead(
        &out.units,
        &out.tables,
        data,
        crc,
        from,
        &scanner.names,
    ))
}

/// The statement units of a scan's units read as a UnitList's first part, when any may be one:
/// under the format the scanner holds after the scan, from the unit after the last one holding
/// an FDE (what the master's `UnitIndex._formats` gives for such a part; where it gives another,
/// `UnitList.statement_units` builds them anew).
fn statements_ahead(scanner: &Scanner, out: &scan::ScanOut, data: &[u8]) -> Option<Ahead> {
    if !StmtUnits::may_hold(&out.units) {
        return None;
    }
    let fmt = scanner.fmt.as_ref()?;
    let from = format_from(out);
    let format = (fmt.post_header_len(QUERY) as usize, fmt.checksum_len, from);
    Some((format, StmtUnits::build_part(&out.units, data, format)))
}
