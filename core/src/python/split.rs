//! `_core.split_route` and `_core.gtid_marks`: split's routing walk over a scanner's last units
//! and the GTID events a series' next state needs (see split.rs).

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList};

use super::results::{new_keys, RouteOutput, SplitRoute};

use super::scanner::PyScanner;
use crate::split;

fn packed<'py>(py: Python<'py>, words: &[u64]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, words.len() * 8, |b| {
        for (place, w) in b.chunks_exact_mut(8).zip(words) {
            place.copy_from_slice(&w.to_le_bytes());
        }
        Ok(())
    })
}

/// Routes the last `units` call's units from `start` on into one copy per output (`keeps`: one
/// keep byte per name id for each output; `counted`: the outputs counted as written for
/// `multi`; `bases`: each output's offset added to its unit ends). With `stmt_keeps` (one keep
/// byte per statement key id for each output, the keep vocabulary, keep.rs; ids from `stmt_known` on not
/// answered yet) and `query_post` (the format's QUERY
/// post-header length), statement units are routed by their keys too, interned by the scanner.
/// Returns a SplitRoute: the next unit index, a RouteOutput per output, units written to two
/// counted outputs or more, units no output keeps, whether the walk stopped at a key not
/// answered yet, the keys new since the last call.
#[pyfunction]
#[pyo3(signature = (scanner, buf, start, keeps, counted, bases, stmt_keeps = None, stmt_known = 0, query_post = 0, crc_len = 0, framing = false))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub(super) fn split_route<'py>(
    py: Python<'py>,
    mut scanner: PyRefMut<'py, PyScanner>,
    buf: &[u8],
    start: usize,
    keeps: Vec<Bound<'py, PyBytes>>,
    counted: Vec<bool>,
    bases: Vec<u64>,
    stmt_keeps: Option<Vec<Bound<'py, PyBytes>>>,
    stmt_known: u32,
    query_post: usize,
    crc_len: usize,
    framing: bool,
) -> PyResult<SplitRoute> {
    scanner.here()?;
    let keep_slices: Vec<&[u8]> = keeps.iter().map(|k| k.as_bytes()).collect();
    let s = &mut *scanner;
    let (units, tables, keys) = (&s.last_units, &s.last_tables, &mut s.stmt_keys);
    let mut stmt = stmt_keeps.as_ref().map(|k| {
        let slices = k.iter().map(|b| b.as_bytes()).collect();
        split::StmtRoute::new(keys, slices, stmt_known, query_post, crc_len, framing)
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
            stmt.as_mut(),
        )
    });
    let need_keys = stmt.map(|st| st.need_keys).unwrap_or(false);
    let new_keys = new_keys(py, &mut s.stmt_keys)?;
    let outs = PyList::empty(py);
    for (((pieces, size), ends), marks) in r.outs.iter().zip(&r.sizes).zip(&r.ends).zip(&r.marks) {
        // One copy, straight into the bytearray the series writer renumbers in place.
        let out = PyByteArray::new_with(py, *size, |dst| {
            split::fill(buf, pieces, dst);
            Ok(())
        })?;
        outs.append(RouteOutput {
            out: out.unbind(),
            ends: packed(py, ends)?.unbind(),
            gtid_marks: packed(py, marks)?.unbind(),
        })?;
    }
    Ok(SplitRoute {
        next: r.next,
        outputs: outs.unbind(),
        multi: r.multi,
        none: r.none,
        need_keys,
        new_keys,
    })
}

/// Offsets (packed u64) of the GTID events of buf[start..stop] (a bytearray: the series
/// writer's block) a series' next GTID state needs.
#[pyfunction]
pub(super) fn gtid_marks<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyByteArray>,
    start: usize,
    stop: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    // SAFETY: the GIL is held and no Python code runs during the call, so no one can resize or
    // write the bytearray while it is borrowed.
    let marks = split::gtid_marks(unsafe { buf.as_bytes() }, start, stop);
    packed(py, &marks)
}
