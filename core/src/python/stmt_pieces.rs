//! `_core.statement_pieces` (see stmt_units::StmtUnits::statements_into): the keyed statements of
//! a UnitList's statement units, by unit, for `lint` to answer them key by key.

use super::packed;
use super::results::StatementPieces;
use super::unit_list::PyUnitList;
use dumpfilter_stub_attrs::stub;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The keyed statements of `units[:n]` (after `UnitList.statement_units`): a unit that is not
/// a statement unit by keys has none.
#[stub]
#[pyfunction]
pub(super) fn statement_pieces(
    py: Python<'_>,
    units: PyRef<'_, PyUnitList>,
    n: usize,
) -> PyResult<StatementPieces> {
    let Some(st) = units.stmts.get() else {
        return Err(PyValueError::new_err(
            "statement_pieces: the list's statement_units were not read",
        ));
    };
    let n = n.min(units.list.units.len());
    let (mut bounds, mut keys, mut queries) = (Vec::with_capacity(n + 1), Vec::new(), Vec::new());
    bounds.push(0u32);
    for (k, u) in units.list.units[..n].iter().enumerate() {
        if let Some(buf) = units.bufs.get(u.part as usize) {
            st.statements_into(k, buf.bytes(py), &mut keys, &mut queries);
        }
        bounds.push(keys.len() as u32);
    }
    Ok(StatementPieces {
        bounds: packed(py, &bounds, u32::to_le_bytes)?.unbind(),
        keys: packed(py, &keys, u32::to_le_bytes)?.unbind(),
        queries: packed(py, &queries, u64::to_le_bytes)?.unbind(),
    })
}
