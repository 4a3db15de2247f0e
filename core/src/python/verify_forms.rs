//! `_core.relayed` (see verify_forms::relayed): what a slave's relay logs hold of a run of the
//! full stream's units under its skip policies, for `simulate --verify`.

use dumpfilter_stub_attrs::stub;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::unit_list::PyUnitList;

/// `relayed`'s answer: per skip policy asked for, the bytes its relay log holds for the
/// run and the units that left them; `next`, the first unit not answered.
#[stub]
#[pyclass(frozen, get_all, module = "dumpfilter._core", name = "Relayed")]
pub(super) struct Relayed {
    #[gen_stub(override_type(type_repr = "list[bytes]"))]
    data: Py<PyList>,
    units: Vec<u64>,
    next: usize,
}

/// What a slave with answers `row` (from `UnitList.rows`, `statement_rows`) relays of
/// units[start..stop] of `units` under each skip policy of `skips` (`SKIP_*`; `crc`: the events
/// carry checksums), until the first unit it cannot answer under all of them (see
/// verify_forms::relayed): `simulate --verify`'s expectation of its relay logs.
#[stub]
#[pyfunction]
#[pyo3(signature = (units, row, start, stop, skips, crc))]
pub(super) fn relayed(
    py: Python<'_>,
    units: PyRef<'_, PyUnitList>,
    row: &[u8],
    start: usize,
    stop: usize,
    skips: &[u8],
    crc: bool,
) -> PyResult<Relayed> {
    let bufs: Vec<&[u8]> = units.bufs.iter().map(|b| b.bytes(py)).collect();
    let (list, st) = (&units.list, units.stmts.get());
    let r =
        py.detach(|| crate::verify_forms::relayed(list, &bufs, st, row, start, stop, skips, crc));
    // Each policy's bytes copied once, straight into its bytes object.
    let data = PyList::empty(py);
    for (p, len) in r.len.iter().enumerate() {
        data.append(PyBytes::new_with(py, *len, |out| {
            r.fill(p, &bufs, out);
            Ok(())
        })?)?;
    }
    Ok(Relayed {
        data: data.unbind(),
        units: r.units,
        next: r.next,
    })
}
