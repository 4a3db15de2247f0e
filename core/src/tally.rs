//! What a bandwidth experiment reports beside its totals, read off a UnitList in one pass each:
//! where binlog time crosses a bucket (an hour: which units fall in it), and the bytes of each
//! table's Table_map and Rows events (which tables cost the bandwidth). Only event headers and a
//! Rows event's table id are read; never a row image.

use crate::le::u32_at;
use crate::types::{is_rows, HEADER_LEN, TABLE_MAP};
use crate::unit_list::UnitList;

/// (first unit, bucket) for each run of units whose first event's timestamp divided by `seconds`
/// is the same bucket. A unit whose timestamp is 0 (an artificial event) joins the run before it.
pub fn time_cuts(plan: &UnitList, bufs: &[&[u8]], seconds: u32) -> Vec<(usize, u32)> {
    let seconds = seconds.max(1);
    let mut cuts: Vec<(usize, u32)> = Vec::new();
    for (k, u) in plan.units.iter().enumerate() {
        let Some(ts) = bufs
            .get(u.part as usize)
            .and_then(|b| u32_at(b, u.start))
            .filter(|t| *t != 0)
        else {
            continue;
        };
        let bucket = ts / seconds;
        if cuts.last().map(|c| c.1) != Some(bucket) {
            cuts.push((if cuts.is_empty() { 0 } else { k }, bucket));
        }
    }
    cuts
}

/// Bytes per table of the fast units: each Table_map event, and each Rows event under the table
/// its table id maps in the same unit, are added to that table's name id (`names` ids). Returns
/// (bytes per name id, the fast units' other bytes: GTID, BEGIN, annotations, XID, the bytes of
/// the units that are not fast).
pub fn table_bytes(plan: &UnitList, bufs: &[&[u8]], names: usize) -> (Vec<u64>, u64, u64) {
    let mut by_name = vec![0u64; names];
    let (mut framing, mut other) = (0u64, 0u64);
    let mut ids: Vec<(u64, u32)> = Vec::new();
    for (k, u) in plan.units.iter().enumerate() {
        let size = u.end.saturating_sub(u.start) as u64;
        let tids = plan.tables(k);
        let Some(buf) = bufs.get(u.part as usize).filter(|b| u.end <= b.len()) else {
            continue;
        };
        if u.lo == u32::MAX {
            other += size;
            continue;
        }
        ids.clear();
        let (mut at, mut maps, mut counted) = (u.start, 0usize, 0u64);
        while at + HEADER_LEN <= u.end {
            let len = u32_at(buf, at + 9).unwrap_or(0) as usize;
            if len < HEADER_LEN || at + len > u.end {
                break;
            }
            let kind = buf[at + 4];
            let name = if kind == TABLE_MAP {
                let id = table_id(buf, at);
                let name = tids.get(maps).copied();
                maps += 1;
                if let (Some(id), Some(n)) = (id, name) {
                    ids.push((id, n));
                }
                name
            } else if is_rows(kind) {
                table_id(buf, at).and_then(|id| ids.iter().rev().find(|m| m.0 == id).map(|m| m.1))
            } else {
                None
            };
            if let Some(slot) = name.and_then(|n| by_name.get_mut(n as usize)) {
                *slot += len as u64;
                counted += len as u64;
            }
            at += len;
        }
        framing += size - counted;
    }
    (by_name, framing, other)
}

/// The 6-byte table id that opens a Table_map or Rows event's body (every server since 5.1.4
/// writes 6; the 4-byte ids of older ones are read as the low bytes of these 6, which only
/// matters if two of their tables share those).
fn table_id(buf: &[u8], at: usize) -> Option<u64> {
    let b = buf.get(at + HEADER_LEN..at + HEADER_LEN + 6)?;
    Some(
        u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            | (u64::from(b[4]) << 32)
            | (u64::from(b[5]) << 40),
    )
}
