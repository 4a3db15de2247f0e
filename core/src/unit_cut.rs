//! A fast unit cut at its statements (`UnitCut`): the byte ranges left of it when its
//! statements whose tables are not kept are dropped, where each statement has its own
//! Table_maps and they all get one answer. `assemble` writes the cut and split copies it (`cut`),
//! the send walk sends its ranges or counts their size.

use crate::hops::{head_end, statements};
use crate::keep::{KEEP_DROP, KEEP_KEEP};
use crate::scan::{Unit, F_ANONYMOUS_GTID, F_MARIADB_GTID, F_MYSQL_GTID};
use crate::trx_length::with_length;

/// A name id's keep byte: Some(kept) for KEEP_DROP or KEEP_KEEP, None for any other answer (or
/// out of range).
pub(crate) fn keep_of(keep: &[u8], id: u32) -> Option<bool> {
    match keep.get(id as usize) {
        Some(&KEEP_DROP) => Some(false),
        Some(&KEEP_KEEP) => Some(true),
        _ => None,
    }
}

/// A fast unit's answer for `keep` over its Table_maps' name ids `ids`: whether every table is
/// kept, and whether none is; None where an id's answer is not given (KEEP_ASK, or past `keep`).
pub(crate) fn answer(ids: &[u32], keep: &[u8]) -> Option<(bool, bool)> {
    let (mut all, mut none) = (true, true);
    for id in ids {
        match keep_of(keep, *id)? {
            true => none = false,
            false => all = false,
        }
    }
    Some((all, none))
}

/// Fast unit `u` of `buf` (`ids`: its Table_maps' name ids) without its statements whose tables
/// `keep` does not keep, when every statement has its own Table_maps and they all get one answer
/// (so no STMT_END_F has to move): the bytes as the source holds them (positions not renumbered;
/// a MySQL unit keeps its BEGIN with its GTID, whose transaction_length counts what is left,
/// `trx_length::with_length`, `crc`: the events carry checksums), and the events left.
/// What `filter` writes and split copies of it. None otherwise.
pub fn cut(buf: &[u8], u: &Unit, ids: &[u32], keep: &[u8], crc: bool) -> Option<(Vec<u8>, u64)> {
    let (start, end, buf) = (u.start, u.end, buf.get(..u.end)?);
    let gtid_end = body_start(buf, start, u.gtid_size, end, u.flags)?;
    let stmts = statements(buf, gtid_end, end)?;
    let cut = UnitCut {
        start,
        end,
        gtid_end,
        events: u.events,
        ids,
        stmts: &stmts,
    };
    let (joined, events_out) = cut.joined(buf, keep)?;
    if u.flags & F_MARIADB_GTID != 0 {
        return Some((joined, events_out));
    }
    Some((with_length(&joined, crc)?, events_out))
}

/// Where fast unit buf[start..end)'s statements start: after its GTID, and in a MySQL unit
/// after the BEGIN that follows it (framing, which a cut keeps with the GTID). None where that
/// does not add up.
pub(crate) fn body_start(
    buf: &[u8],
    start: usize,
    gtid_size: u32,
    end: usize,
    flags: u32,
) -> Option<usize> {
    let gtid_end = start
        .checked_add(gtid_size as usize)
        .filter(|&e| e <= end)?;
    if flags & (F_MYSQL_GTID | F_ANONYMOUS_GTID) != 0 {
        return head_end(buf, gtid_end, end);
    }
    Some(gtid_end)
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
    /// `cut`'s cut as byte ranges of the buffer, in order, and the events left.
    pub fn parts(&self, keep: &[u8]) -> Option<(Vec<(usize, usize)>, u64)> {
        let mut parts: Vec<(usize, usize)> = Vec::with_capacity(self.stmts.len() + 2);
        let events = self.ranges(keep, |a, b| parts.push((a, b)))?;
        Some((parts, events))
    }

    /// The cut's bytes (of `buf`, its buffer), joined, and the events left.
    pub fn joined(&self, buf: &[u8], keep: &[u8]) -> Option<(Vec<u8>, u64)> {
        let (parts, events) = self.parts(keep)?;
        let mut joined = Vec::with_capacity(self.end - self.start);
        for (a, b) in parts {
            joined.extend_from_slice(buf.get(a..b)?);
        }
        Some((joined, events))
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
