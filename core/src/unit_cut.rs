//! A fast unit cut at its statements (`UnitCut`): the byte ranges left of it when its
//! statements whose tables are not kept are dropped, where each statement has its own
//! Table_maps and they all get one answer. `assemble` writes the cut (`partial`), the send
//! walk sends its ranges or counts their size.

use crate::hops::statements;
use crate::keep::{KEEP_DROP, KEEP_KEEP};

/// A name id's keep byte: Some(kept) for KEEP_DROP or KEEP_KEEP, None for any other answer (or
/// out of range).
pub(crate) fn keep_of(keep: &[u8], id: u32) -> Option<bool> {
    match keep.get(id as usize) {
        Some(&KEEP_DROP) => Some(false),
        Some(&KEEP_KEEP) => Some(true),
        _ => None,
    }
}

/// A fast unit buf[start..end] (GTID ending at `gtid_end`, `events` events, `ids` the name ids
/// of its Table_maps) without its statements whose tables are not kept, when every statement
/// has its own Table_maps and they all get one answer (so no STMT_END_F has to move): the
/// bytes, as they were (positions not renumbered), and the events left. None otherwise.
pub fn partial(
    buf: &[u8],
    start: usize,
    end: usize,
    gtid_end: usize,
    events: u32,
    ids: &[u32],
    keep: &[u8],
) -> Option<(Vec<u8>, u64)> {
    if end > buf.len() || gtid_end > end || start > gtid_end {
        return None;
    }
    let stmts = statements(buf, gtid_end, end)?;
    let cut = UnitCut {
        start,
        end,
        gtid_end,
        events,
        ids,
        stmts: &stmts,
    };
    let (parts, events_out) = cut.parts(keep)?;
    let mut joined = Vec::with_capacity(end - start);
    for (a, b) in parts {
        joined.extend_from_slice(&buf[a..b]);
    }
    Some((joined, events_out))
}

/// A fast unit to cut at its statements: its bounds in its buffer, where its head ends (`gtid_end`:
/// its GTID, and a MySQL unit's BEGIN, which the cut keeps), its
/// events, its Table_maps' name ids and its statements (`hops::statements` of its body, which
/// the caller may have kept from before).
pub struct UnitCut<'a> {
    pub start: usize,
    pub end: usize,
    pub gtid_end: usize,
    pub events: u32,
    pub ids: &'a [u32],
    pub stmts: &'a [(usize, u32, u32)],
}

impl UnitCut<'_> {
    /// `partial`'s cut as byte ranges of the buffer, in order, and the events left.
    pub fn parts(&self, keep: &[u8]) -> Option<(Vec<(usize, usize)>, u64)> {
        let mut parts: Vec<(usize, usize)> = Vec::with_capacity(self.stmts.len() + 2);
        let events = self.ranges(keep, |a, b| parts.push((a, b)))?;
        Some((parts, events))
    }

    /// The cut's bytes and events, for a caller that counts only (nothing allocated).
    pub fn size(&self, keep: &[u8]) -> Option<(u64, u64)> {
        let mut size = 0u64;
        let events = self.ranges(keep, |a, b| size += (b - a) as u64)?;
        Some((size, events))
    }

    /// The one definition of the cut: hands `range` each kept byte range in order and returns
    /// the events left, or None (after some ranges, which the caller then drops) where the unit
    /// cannot be cut.
    fn ranges(&self, keep: &[u8], mut range: impl FnMut(usize, usize)) -> Option<u64> {
        let (mut at, mut t0) = (self.gtid_end, 0usize);
        let mut events_out = self.events as u64;
        range(self.start, self.gtid_end);
        for (stmt_end, n, t1) in self.stmts {
            let t1 = *t1 as usize;
            if t1 == t0 || t1 > self.ids.len() || *stmt_end > self.end {
                return None; // a statement without its own Table_map
            }
            let k = keep_of(keep, self.ids[t0]);
            k?;
            if self.ids[t0 + 1..t1]
                .iter()
                .any(|id| keep_of(keep, *id) != k)
            {
                return None; // a partly kept statement: its STMT_END_F would move
            }
            if k == Some(true) {
                range(at, *stmt_end);
            } else {
                events_out -= (*n as u64).min(events_out);
            }
            at = *stmt_end;
            t0 = t1;
        }
        range(at, self.end);
        Some(events_out)
    }
}
