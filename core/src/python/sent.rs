//! What a walk over a UnitList sent (`sent::Sent`), handed to Python: its counters as a
//! `SendResult` (its bytes a `SentBytes`: python::sent_bytes), its tallies added into the
//! caller's bytearrays.

use pyo3::prelude::*;

use super::results::{records, SendResult};
use super::sent_bytes::SentBytes;
use crate::sent::Sent;

/// A walk's outcome as Python reads it (`send`: `out` its bytes; `count`: empty).
pub(super) fn send_result(out: Py<SentBytes>, s: &Sent) -> SendResult {
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
