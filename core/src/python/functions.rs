//! The module's free functions: one-shot byte work on a buffer (CRC, Heartbeat, payloads,
//! renumbering, statement words) and the slave's relay run.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyTuple};

use super::results::RelayResult;
use super::scanner::PyScanner;
use super::text;
use crate::assemble;
use crate::relay;
use crate::replica;

use crate::{crc, hops, payload, sql};

/// A Heartbeat event for (file, pos), as the master sends one (see heartbeat::heartbeat).
#[pyfunction]
pub(super) fn heartbeat<'py>(
    py: Python<'py>,
    file: &str,
    pos: u64,
    server_id: u32,
    crc: bool,
) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(file.len() + 23);
    crate::heartbeat::heartbeat(file.as_bytes(), pos, server_id, crc, &mut out);
    PyBytes::new(py, &out)
}

/// CRC-32 (zlib's polynomial) of `data`, SIMD-accelerated.
#[pyfunction]
pub(super) fn crc32(py: Python<'_>, data: &[u8]) -> u32 {
    py.detach(|| crc::crc32(data))
}

/// The inner events' bytes of a Transaction_payload event body; ValueError when malformed.
#[pyfunction]
#[pyo3(signature = (body, max_out = 1 << 30))]
pub(super) fn payload_bytes<'py>(
    py: Python<'py>,
    body: &[u8],
    max_out: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let data = py
        .detach(|| payload::payload_bytes(body, max_out))
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &data))
}

/// The statements of a fast unit's body buf[body:end] (see hops::statements): a list of
/// (end offset, events, Table_maps so far), or None for the reference path.
#[pyfunction]
pub(super) fn statements(buf: &[u8], body: usize, end: usize) -> Option<Vec<(usize, u32, u32)>> {
    hops::statements(buf, body, end)
}

/// Renumbers the whole events of buf[start:stop] in place for output offset `base` (see
/// assemble::renumber); returns (last non-zero timestamp, offsets of FDEs left to the caller).
#[pyfunction]
pub(super) fn renumber(
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
/// answer (text with non-ASCII bytes or a leading comment; see sql::plain_statement).
#[pyfunction]
pub(super) fn plain_statement(sql: &[u8]) -> Option<bool> {
    sql::plain_statement(sql)
}

/// The key shape of a statement's UTF-8 bytes, as the compiled assembly reads it (see
/// stmt::dml_shape): (kind, qualifier or None, table), or None where Python's parser decides.
#[pyfunction]
pub(super) fn statement_key(sql: &[u8]) -> Option<(u8, Option<Vec<u8>>, Vec<u8>)> {
    crate::stmt::dml_shape(sql)
        .map(|s| (s.kind, s.db.map(|d| d.into_owned()), s.table.into_owned()))
}

/// Whether buf[off:] (a file's first bytes) holds another server's log_pos values: a relay log.
#[pyfunction]
pub(super) fn foreign_log_pos(buf: &[u8], off: usize) -> bool {
    hops::foreign_log_pos(buf, off)
}

/// The benchmarks' compiled baseline: a bare header hop over buf[off:], (events, stop).
#[pyfunction]
pub(super) fn hop(py: Python<'_>, buf: &[u8], off: usize) -> (u64, usize) {
    py.detach(|| hops::hop(buf, off))
}

/// The slave's relay run over the last `units` call of `scanner` (see relay::relay_ranges): the
/// bytes to relay, the next unit index, the counts, and the lone statements copied. `lone`:
/// (QUERY post-header length, checksum length) of the format in force, to copy lone statements
/// too; None, to stop at them.
#[pyfunction]
#[pyo3(signature = (scanner, buf, start, keep, lone = None))]
pub(super) fn relay_run<'py>(
    py: Python<'py>,
    scanner: PyRef<'py, PyScanner>,
    buf: &[u8],
    start: usize,
    keep: &[u8],
    lone: Option<(usize, usize)>,
) -> PyResult<RelayResult> {
    let (units, tables) = (&scanner.last_units, &scanner.last_tables);
    let lone = lone.map(|(query_post, crc_len)| relay::LoneFormat {
        query_post,
        crc_len,
    });
    let p = py.detach(|| relay::relay_ranges(buf, units, tables, keep, start, lone));
    // One copy, straight into the bytes object handed to Python.
    let out = PyBytes::new_with(py, p.bytes as usize, |dst| {
        p.fill(buf, dst);
        Ok(())
    })?;
    let texts = PyList::empty(py);
    for (db, sql) in &p.lone {
        texts.append((text(py, &buf[db.clone()])?, text(py, &buf[sql.clone()])?))?;
    }
    Ok(RelayResult {
        out: out.unbind(),
        next: p.next,
        units: p.units,
        events: p.events,
        bytes: p.bytes,
        heartbeats: p.heartbeats,
        lone: texts.unbind(),
        placeholders: p.placeholders,
    })
}

/// A batch's events framed for a real replica (see replica::frame): None where the batch needs
/// the per-event way, else (packets, next sequence id, the replica's moved position or None,
/// [(GTID domain, highest seq_no)], master position, counted position).
#[allow(clippy::type_complexity)]
#[pyfunction]
pub(super) fn replica_frames<'py>(
    py: Python<'py>,
    events: &[u8],
    seq: u8,
    annotate: bool,
    master_pos: u64,
    counted: u64,
) -> Option<(
    Bound<'py, PyBytes>,
    u8,
    Option<u64>,
    Vec<(u32, u64)>,
    u64,
    u64,
)> {
    let f = py.detach(|| replica::frame(events, seq, annotate, master_pos, counted))?;
    Some((
        PyBytes::new(py, &f.packets),
        f.seq,
        f.moved,
        f.gtids,
        f.master_pos,
        f.counted,
    ))
}

/// A statement's facts (see facts::facts) for `rules.statement_facts`: (kind, updated, read,
/// temporary, if_exists, db_name, renames, trigger, refs as ((db, table), alias), set_columns,
/// targets, columns, trigger_def as (timing, event, writes), target as (object, db, name));
/// names are bytes, a name's
/// database None where the statement does not give it. None where Python's parser reads it.
#[pyfunction]
pub(super) fn statement_facts<'py>(
    py: Python<'py>,
    sql: &[u8],
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    use pyo3::IntoPyObjectExt;
    let Some(f) = crate::facts::facts(sql) else {
        return Ok(None);
    };
    let refs: Vec<_> = f.refs.into_iter().map(|r| (r.table, r.alias)).collect();
    let trigger_def = f.trigger_def.map(|d| (d.timing, d.event, d.writes));
    let fields = [
        f.kind.into_bound_py_any(py)?,
        f.updated.into_bound_py_any(py)?,
        f.read.into_bound_py_any(py)?,
        f.temporary.into_bound_py_any(py)?,
        f.if_exists.into_bound_py_any(py)?,
        f.db_name.into_bound_py_any(py)?,
        f.renames.into_bound_py_any(py)?,
        f.trigger.into_bound_py_any(py)?,
        refs.into_bound_py_any(py)?,
        f.set_columns.into_bound_py_any(py)?,
        f.targets.into_bound_py_any(py)?,
        f.columns.into_bound_py_any(py)?,
        trigger_def.into_bound_py_any(py)?,
        f.target.into_bound_py_any(py)?,
    ];
    Ok(Some(PyTuple::new(py, fields)?))
}
