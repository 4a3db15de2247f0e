//! `_core.split_route` and `_core.gtid_marks`: split's routing walk over a scanner's last units
//! and the GTID events a series' next state needs (see split.rs).

use dumpfilter_stub_attrs::stub;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList};

use super::results::{RouteOutput, SplitRoute};

use super::packed;
use super::scanner::PyScanner;
use crate::types::QUERY;
use crate::{split, split_mysql};

/// Routes the last `units` call's units from `start` on into one copy per output (`keeps`: one
/// keep byte per name id for each output; `counted`: the outputs counted as written for
/// `none`; `bases`: each output's offset added to its unit ends). With `stmt_keeps` (one keep
/// byte per key id of the scanner's `statement_units` for each output, the keep vocabulary,
/// keep.rs), statement units are routed by their keys too; `framing`: a framing Query may be
/// copied as it is. `schemas` (by schema: each output's schema, utf-8) gives a MySQL copy's
/// BEGIN its output's schema as default database (split_mysql.rs). Returns a SplitRoute: the
/// next unit index, a RouteOutput per output, units no counted output keeps.
#[stub]
#[pyfunction]
#[pyo3(signature = (scanner, buf, start, keeps, counted, bases, stmt_keeps = None, framing = false, schemas = None))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub(super) fn split_route<'py>(
    py: Python<'py>,
    scanner: PyRef<'py, PyScanner>,
    buf: &[u8],
    start: usize,
    keeps: Vec<Bound<'py, PyBytes>>,
    counted: Vec<bool>,
    bases: Vec<u64>,
    stmt_keeps: Option<Vec<Bound<'py, PyBytes>>>,
    framing: bool,
    schemas: Option<Vec<Bound<'py, PyBytes>>>,
) -> PyResult<SplitRoute> {
    scanner.here()?;
    let keep_slices: Vec<&[u8]> = keeps.iter().map(|k| k.as_bytes()).collect();
    let (units, tables) = (&scanner.last_units, &scanner.last_tables);
    let stmt = stmt_keeps.as_ref().zip(scanner.last_stmt.as_ref());
    let stmt = stmt.map(|(k, st)| split::StmtRoute {
        units: st,
        keeps: k.iter().map(|b| b.as_bytes()).collect(),
        framing,
    });
    // MySQL units are copied where the scanner knows the format (CRC32, the Query post-header).
    let mysql = scanner.inner.fmt.as_ref().map(|f| split_mysql::MysqlRoute {
        crc: f.checksum_len != 0,
        query_post: f.post_header_len(QUERY) as usize,
        schemas: schemas
            .as_ref()
            .map(|s| s.iter().map(|b| b.as_bytes()).collect()),
    });
    let r = py.detach(|| {
        split::route(
            buf,
            units,
            tables,
            &keep_slices,
            &counted,
            &bases,
            start,
            stmt.as_ref(),
            mysql.as_ref(),
        )
    });
    let outs = PyList::empty(py);
    for (sent, ends) in r.outs.iter().zip(&r.ends) {
        // One copy, straight into the bytearray the series writer renumbers in place.
        let mut marks = Vec::new();
        let out = PyByteArray::new_with(py, sent.out_len, |dst| {
            sent.fill(&[buf], dst);
            marks = split::gtid_marks(dst, 0, dst.len());
            Ok(())
        })?;
        outs.append(RouteOutput {
            out: out.unbind(),
            ends: packed(py, ends, u64::to_le_bytes)?.unbind(),
            gtid_marks: packed(py, &marks, u64::to_le_bytes)?.unbind(),
        })?;
    }
    Ok(SplitRoute {
        next: r.next,
        outputs: outs.unbind(),
        none: r.none,
    })
}

/// Offsets (packed u64) of the GTID events of buf[start..stop] (a bytearray: the series
/// writer's block) a series' next GTID state needs.
#[stub]
#[pyfunction]
pub(super) fn gtid_marks<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    start: usize,
    stop: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let marks = super::read_buffer(buf, "gtid_marks", |b| split::gtid_marks(b, start, stop))?;
    packed(py, &marks, u64::to_le_bytes)
}
