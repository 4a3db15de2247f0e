//! `_core.relay_statements`: the slave's relay run over statement units (see relay_stmt).

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::results::{key_uses, new_keys, StatementRelay};
use super::scanner::PyScanner;
use crate::relay_stmt;

/// The slave's relay run over the statement units of the last `units` call of `scanner` from
/// `start` on (see relay_stmt::relay_statements), `formats` (QUERY post-header length, checksum
/// length) of the format in force, `stmt_keep` a keep byte per statement key id.
#[pyfunction]
pub(super) fn relay_statements<'py>(
    py: Python<'py>,
    mut scanner: PyRefMut<'py, PyScanner>,
    buf: &[u8],
    start: usize,
    formats: (usize, usize),
    stmt_keep: &[u8],
) -> PyResult<StatementRelay> {
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
    Ok(StatementRelay {
        out: out.unbind(),
        next: p.next,
        units: p.units,
        events: p.events,
        bytes: p.bytes,
        heartbeats: p.heartbeats,
        need_keys: r.need_keys,
        new_keys: new_keys(py, &mut s.stmt_keys)?,
        key_uses: key_uses(py, &r.key_uses)?,
        statements: r.statements,
    })
}
