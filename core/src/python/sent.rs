//! What a walk over a UnitList sent (`sent::Sent`), handed to Python: its counters as a
//! `SendResult`, its bytes as one new bytes object filled without the GIL, its tallies added
//! into the caller's bytearrays; and `_core.relayed` (send::relayed): what a slave's relay logs
//! hold of a run of the full stream's units under its skip policies, the send walk in relay
//! mode, for `simulate --verify`.

use dumpfilter_stub_attrs::stub;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::results::{records, Relayed, SendResult};
use super::unit_list::PyUnitList;
use crate::sent::Sent;

/// A walk's outcome as Python reads it (`send`: `out` its bytes; `count`: empty).
pub(super) fn send_result(out: Py<PyBytes>, s: &Sent) -> SendResult {
    macro_rules! result {
        ($($f:ident)*) => {
            SendResult {
                out,
                next: s.next,
                pending_unit: s.pending.map_or(-1i64, |k| k as i64),
                pending_done: s.pending_done,
                $($f: s.$f,)*
            }
        };
    }
    crate::sent::counters!(result!())
}

/// Adds `counts` to the u32 LE slots of `tally`.
pub(super) fn add_counts(tally: &mut [u8], counts: &[u32]) {
    for (slot, c) in tally.chunks_exact_mut(4).zip(counts) {
        if *c != 0 {
            let old = u32::from_le_bytes([slot[0], slot[1], slot[2], slot[3]]);
            slot.copy_from_slice(&old.wrapping_add(*c).to_le_bytes());
        }
    }
}

/// A new bytes object holding what a walk sends (`Sent::fill`), its kept bytes copied straight
/// into it, without the GIL (a Vec assembled first, then copied into the bytes, cost a second
/// full copy of everything sent: about 4 ms per do-db slave's pass over a 263 MB binlog).
pub(super) fn filled_bytes(py: Python<'_>, s: &Sent, bufs: &[&[u8]]) -> PyResult<Py<PyBytes>> {
    let len = s.out_len;
    // SAFETY: PyBytes_FromStringAndSize(NULL, len) returns a new, uninitialised bytes object of
    // `len` bytes (or NULL with an exception set), which no other code can see until it is
    // handed back below; its buffer is written once, in full, before that.
    unsafe {
        let obj =
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as pyo3::ffi::Py_ssize_t);
        let bytes: Bound<'_, PyBytes> =
            Bound::from_owned_ptr_or_err(py, obj)?.cast_into_unchecked();
        let dst = Dst(pyo3::ffi::PyBytes_AsString(bytes.as_ptr()) as *mut u8, len);
        py.detach(|| {
            let dst = dst;
            s.fill(bufs, std::slice::from_raw_parts_mut(dst.0, dst.1))
        });
        Ok(bytes.unbind())
    }
}

/// A bytes object's buffer handed to the fill without the GIL (see `filled_bytes`).
struct Dst(*mut u8, usize);
// SAFETY: the buffer belongs to a bytes object no other thread can reach while it is filled.
unsafe impl Send for Dst {}

records! {
    /// A stream's walk configuration for `UnitList.send` and `UnitList.count_many`, one typed value (see
    /// send::SendOptions): what a skipped unit becomes (SKIP_*), whether units kept in part may be
    /// sent as kept statements, the master's server id and the Heartbeats' checksum, and for `send`
    /// the bytes already in the batch, the size at which it is full, whether placeholders in a
    /// row are written as one (`placeholder_runs`) and skipped units in a row as one stretch
    /// (`skip_stretches`): a gRPC slave that asked for them.
    SendConfig = "SendConfig" new(*, skip, partial_ok, server_id, heartbeat_crc, batch_bytes = 0, limit = u64::MAX, placeholder_runs = false, skip_stretches = false) {
        skip: u8,
        partial_ok: bool,
        server_id: u32,
        heartbeat_crc: bool,
        batch_bytes: u64,
        limit: u64,
        placeholder_runs: bool,
        skip_stretches: bool,
    }
}

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
