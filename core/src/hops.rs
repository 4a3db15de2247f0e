//! Walks that only hop from event header to event header, for one question each: a fast
//! unit's statements, the benchmarks' baseline, whether a file holds another server's positions;
//! and the hop itself (`events`), which the walks over a unit's or a buffer's events take.

use crate::le::{u16_at, u32_at};
use crate::types::*;

/// The statements of a fast unit's body buf[body..end) (the events after its GTID, and after
/// BEGIN for MySQL; its XID last): (end offset, events, Table_maps so far) per statement ended
/// by STMT_END_F. None when the body does not cut into whole statements each with its own
/// Table_maps (rows of an earlier statement's Table_map, a statement left open, a malformed
/// event): the caller then takes the reference path.
pub fn statements(buf: &[u8], body: usize, end: usize) -> Option<Vec<(usize, u32, u32)>> {
    let mut out = Vec::new();
    let (mut n, mut sn, mut tables) = (0u32, 0u32, 0u32);
    let mut ids: Vec<&[u8]> = Vec::new();
    let mut whole = true;
    for (at, size) in events(buf, body, end) {
        let t = buf[at + 4];
        if t == XID {
            return (whole && n == sn).then_some(out);
        }
        n += 1;
        if t == TABLE_MAP {
            tables += 1;
            ids.push(buf.get(at + 19..at + 25)?);
        } else if is_rows(t) {
            let id = buf.get(at + 19..at + 25)?;
            if !ids.contains(&id) {
                whole = false; // rows of a Table_map of an earlier statement
            }
            if u16_at(buf, at + 25)? & STMT_END_F != 0 {
                out.push((at + size, n - sn, tables));
                sn = n;
                ids.clear();
            }
        }
    }
    None
}

/// Where the BEGIN after a MySQL unit's GTID (ending at `gtid_end`) ends: the head a cut keeps
/// with the GTID (framing), where its statements start. None where the event there is not a
/// Query ending by `end`.
pub fn head_end(buf: &[u8], gtid_end: usize, end: usize) -> Option<usize> {
    let size = u32_at(buf, gtid_end + 9)? as usize;
    (buf.get(gtid_end + 4) == Some(&QUERY) && size >= HEADER_LEN && gtid_end + size <= end)
        .then_some(gtid_end + size)
}

/// The events of buf[at..end) back to back, from header to header, as (offset, size): whole
/// events at least a header long, up to the first that is not. `at` is where the hop stands:
/// `end` when the events tile the range.
pub struct Events<'a> {
    buf: &'a [u8],
    pub at: usize,
    end: usize,
}

/// `Events` of buf[at..end).
pub fn events(buf: &[u8], at: usize, end: usize) -> Events<'_> {
    let end = end.min(buf.len());
    Events { buf, at, end }
}

impl Iterator for Events<'_> {
    type Item = (usize, usize);

    #[inline]
    fn next(&mut self) -> Option<(usize, usize)> {
        let size = u32_at(self.buf, self.at.checked_add(9)?)? as usize;
        let end = self.at.checked_add(size)?;
        if size < HEADER_LEN || end > self.end {
            return None;
        }
        let event = (self.at, size);
        self.at = end;
        Some(event)
    }
}

/// The benchmarks' baseline: a bare header hop over buf[off..] (no CRC, no grouping, no
/// checks beyond bounds). Returns (events, stop).
pub fn hop(buf: &[u8], off: usize) -> (u64, usize) {
    let mut hops = events(buf, off, buf.len());
    let n = hops.by_ref().count() as u64;
    (n, hops.at)
}

/// Whether an event of buf[off..] carries a log_pos that is neither 0 nor its own end offset:
/// another server's coordinates, as a relay log copies them (a server's own binlog has log_pos =
/// the event's end, or 0 for artificial and MariaDB 11.4+ in-group events). Stops at the first
/// partial or impossible event.
pub fn foreign_log_pos(buf: &[u8], off: usize) -> bool {
    events(buf, off, buf.len()).any(|(at, size)| {
        let log_pos = u32_at(buf, at + 13).unwrap_or(0) as usize;
        log_pos != 0 && log_pos != at + size
    })
}
