//! `_core.relay_statements`: the slave's relay run over statement units (see relay_stmt).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use super::scanner::PyScanner;
use crate::relay_stmt;

/// The slave's relay run over the statement units of the last `units` call of `scanner` from
/// `start` on (see relay_stmt::relay_statements), `formats` (QUERY post-header length, checksum
/// length) of the format in force, `stmt_keep` a byte per statement key id: (the bytes to relay,
/// the next unit index, units, events, bytes, heartbeats, whether it stopped at a key without
/// an answer, the keys met for the first time [(id, default database, statement)], the
/// statements per key used [(id, times)], the statements).
#[pyfunction]
pub(super) fn relay_statements<'py>(
    py: Python<'py>,
    mut scanner: PyRefMut<'py, PyScanner>,
    buf: &[u8],
    start: usize,
    formats: (usize, usize),
    stmt_keep: &[u8],
) -> PyResult<Bound<'py, PyTuple>> {
    let s = &mut *scanner;
    let (units, keys) = (&s.last_units, &mut s.stmt_keys);
    let r = py.detach(|| {
        relay_stmt::relay_statements(buf, units, start, formats.0, formats.1, keys, stmt_keep)
    });
    let p = &r.run;
    let out = PyBytes::new_with(py, p.bytes as usize, |dst| {
        p.fill(buf, dst);
        Ok(())
    })?;
    let new_keys = PyList::empty(py);
    for k in s.stmt_keys.new.drain(..) {
        new_keys.append((k.id, PyBytes::new(py, &k.db), PyBytes::new(py, &k.sql)))?;
    }
    (
        out,
        p.next,
        p.units,
        p.events,
        p.bytes,
        p.heartbeats,
        r.need_keys,
        new_keys,
        r.key_uses.clone(),
        r.statements,
    )
        .into_pyobject(py)
}
