//! `_core.relayed` (send::relayed): what a slave's relay logs hold of a run of the full stream's
//! units under its skip policies, the send walk in relay mode, for `simulate --verify`.

use dumpfilter_stub_attrs::stub;
use pyo3::prelude::*;

use super::results::Relayed;
use super::sent_bytes::filled_bytes;
use super::unit_list::PyUnitList;

/// What a slave with answers `row` (from `UnitList.rows_many`), keep bytes `keep`
/// per name id and `stmt_keep` per statement key id relays of units[start..stop] of `units`
/// under each skip policy of `skips` (`SKIP_*`; `crc`: the events carry checksums), until the
/// first unit it cannot answer under all of them (see send::relayed): `simulate --verify`'s
/// expectation of its relay logs.
#[allow(clippy::too_many_arguments)]
#[stub]
#[pyfunction]
#[pyo3(signature = (units, row, keep, start, stop, skips, crc, stmt_keep = None))]
pub(super) fn relayed(
    py: Python<'_>,
    units: PyRef<'_, PyUnitList>,
    row: &[u8],
    keep: &[u8],
    start: usize,
    stop: usize,
    skips: &[u8],
    crc: bool,
    stmt_keep: Option<&[u8]>,
) -> PyResult<Relayed> {
    let bufs: Vec<&[u8]> = units.bufs.iter().map(|b| b.bytes(py)).collect();
    let (list, st) = (&units.list, units.stmts.get());
    let row = &row[..stop.min(row.len())];
    let answers = (row, keep, stmt_keep);
    let walks = py.detach(|| crate::send::relayed(list, &bufs, st, answers, start, skips, crc));
    let data = super::list(py, walks.iter().map(|s| filled_bytes(py, s, &bufs)))?;
    Ok(Relayed {
        data,
        units: walks
            .iter()
            .map(|s| s.kept + s.partial + s.skip_units)
            .collect(),
        next: walks.first().map_or(start, |s| s.next),
    })
}
