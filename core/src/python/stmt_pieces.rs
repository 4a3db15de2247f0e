//! `_core.statement_pieces` (see stmt_units::StmtUnits::statements_into): the keyed statements of
//! a UnitList's statement units, by unit, for `lint` to answer them key by key.

use dumpfilter_stub_attrs::stub;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::unit_list::PyUnitList;

/// `statement_pieces`' answer, packed little-endian arrays.
#[stub]
#[pyclass(frozen, get_all, module = "dumpfilter._core", name = "StatementPieces")]
pub(super) struct StatementPieces {
    /// u32 per unit and one more: unit k's statements are [bounds[k], bounds[k + 1]).
    bounds: Py<PyBytes>,
    /// u32 per statement: its key id (`StatementUnits.keys`).
    keys: Py<PyBytes>,
    /// u64 per statement: its Query event's offset in its unit's part's buffer.
    queries: Py<PyBytes>,
}

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
    let packed = |words: Vec<u8>| PyBytes::new(py, &words).unbind();
    Ok(StatementPieces {
        bounds: packed(bounds.iter().flat_map(|w| w.to_le_bytes()).collect()),
        keys: packed(keys.iter().flat_map(|w| w.to_le_bytes()).collect()),
        queries: packed(queries.iter().flat_map(|w| w.to_le_bytes()).collect()),
    })
}
