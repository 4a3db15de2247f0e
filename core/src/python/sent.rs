//! What a walk over a UnitList sent (`sent::Sent`), handed to Python: its counters as a
//! `SendResult`, its bytes as one new bytes object filled without the GIL, its tallies added
//! into the caller's bytearrays.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::results::{records, SendResult};
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
