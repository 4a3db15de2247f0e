//! Output assembly: what a filter keeps of the fast units of a scanned buffer, built as one byte
//! string. Units kept whole are copied (log_pos renumbered and CRC32 recomputed where the output
//! offset differs), units with whole statements dropped lose those byte ranges, and emptied
//! MariaDB groups become their GTID plus a COMMIT Query, byte for byte as the Python reference
//! path (TransactionFilter + BinlogWriter) writes them. The decision per table comes from a keep
//! array indexed by the scanner's name ids; the rules that fill it stay in Python.

use crate::scan::{statements, u32_at, Unit, F_FAST, F_MARIADB_GTID};
use crate::types::*;

/// Per-outcome counters, in the order Python's FilterStats adds them.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub kept: [u64; 3],     // units, events, bytes
    pub partial: [u64; 5],  // units, events in, bytes in, events out, bytes out
    pub emptied: [u64; 4],  // units, events in, bytes in, bytes out (2 events out each)
    pub skipped: [u64; 3],  // units, events in, bytes in
}

pub struct Assembly {
    pub out: Vec<u8>,
    /// The first unit not handled (Python takes it: not fast, a keep not known, a partly kept
    /// statement, a MySQL unit that needs transaction_length rewritten).
    pub next: usize,
    pub out_pos: u64,
    pub counts: Counts,
}

pub struct Options<'a> {
    pub base: u64,
    pub renumber: bool,
    pub crc: bool,
    pub empty_keep: bool,
    /// The body of the COMMIT Query an emptied group ends with (binlog_codec.encode.query_body).
    pub commit_body: &'a [u8],
    /// Only units kept whole (a slave relaying what its own rules keep): stop at any other.
    pub whole_only: bool,
}

/// Appends buf[start..end] (whole events) at output offset `out_pos`: every non-zero log_pos set
/// to the event's end in the output and its CRC recomputed (a zero log_pos stays: artificial
/// and MariaDB 11.4+ in-group events), as `binlog_files.filtering.renumbered` does.
pub fn push_renumbered(out: &mut Vec<u8>, buf: &[u8], start: usize, end: usize, out_pos: u64, crc: bool) {
    let first = out.len();
    out.extend_from_slice(&buf[start..end]);
    let mut at = first;
    while at + HEADER_LEN <= out.len() {
        let size = u32_at(out, at + 9).unwrap_or(0) as usize;
        if size < HEADER_LEN || at + size > out.len() {
            break;
        }
        let ev_end = at + size;
        if u32_at(out, at + 13).unwrap_or(0) != 0 {
            let lp = (out_pos + (ev_end - first) as u64) as u32;
            out[at + 13..at + 17].copy_from_slice(&lp.to_le_bytes());
            if crc && size >= HEADER_LEN + 4 {
                let c = crc32fast::hash(&out[at..ev_end - 4]);
                out[ev_end - 4..ev_end].copy_from_slice(&c.to_le_bytes());
            }
        }
        at = ev_end;
    }
}

fn keep_of(keep: &[u8], id: u32) -> Option<bool> {
    match keep.get(id as usize) {
        Some(0) => Some(false),
        Some(1) => Some(true),
        _ => None,
    }
}

/// Assembles units[from..] until one needs Python.
pub fn assemble(buf: &[u8], units: &[Unit], tables: &[u32], keep: &[u8], from: usize, mut out_pos: u64, opt: &Options) -> Assembly {
    let mut out = Vec::new();
    let mut counts = Counts::default();
    let mut i = from;
    let crc_len = if opt.crc { 4 } else { 0 };
    'units: while i < units.len() {
        let u = &units[i];
        if u.flags & F_FAST == 0 || u.end > buf.len() || u.tables_hi as usize > tables.len() {
            break;
        }
        let mariadb = u.flags & F_MARIADB_GTID != 0;
        let ids = &tables[u.tables_lo as usize..u.tables_hi as usize];
        let mut all = true;
        let mut none = true;
        for id in ids {
            match keep_of(keep, *id) {
                Some(true) => none = false,
                Some(false) => all = false,
                None => break 'units,
            }
        }
        let size = (u.end - u.start) as u64;
        let source_pos = opt.base + u.start as u64;
        if all {
            if opt.renumber && out_pos != source_pos {
                push_renumbered(&mut out, buf, u.start, u.end, out_pos, opt.crc);
            } else {
                out.extend_from_slice(&buf[u.start..u.end]);
            }
            out_pos += size;
            counts.kept[0] += 1;
            counts.kept[1] += u.events as u64;
            counts.kept[2] += size;
            i += 1;
            continue;
        }
        if !mariadb || !opt.renumber || opt.whole_only {
            break; // MySQL: transaction_length to rewrite; relay logs: the reference framing
        }
        let gtid_end = u.start + u.gtid_size as usize;
        if none {
            if !opt.empty_keep {
                counts.skipped[0] += 1;
                counts.skipped[1] += u.events as u64;
                counts.skipped[2] += size;
                i += 1;
                continue;
            }
            // The GTID (its log_pos renumbered) and a COMMIT Query, as _write_gtid_commit_into.
            let g = &buf[u.start..gtid_end];
            let (Some(ts), Some(sid), Some(log_pos)) = (u32_at(g, 0), u32_at(g, 5), u32_at(g, 13)) else { break };
            let gsize = g.len() as u64;
            let csize = (HEADER_LEN + opt.commit_body.len() + crc_len) as u64;
            let renumber = log_pos != 0;
            let gtid_out_end = if renumber { out_pos } else { source_pos } + gsize;
            if renumber && out_pos != source_pos {
                push_renumbered(&mut out, buf, u.start, gtid_end, out_pos, opt.crc);
            } else {
                out.extend_from_slice(g);
            }
            let c0 = out.len();
            out.extend_from_slice(&ts.to_le_bytes());
            out.push(QUERY);
            out.extend_from_slice(&sid.to_le_bytes());
            out.extend_from_slice(&(csize as u32).to_le_bytes());
            let clp = if log_pos != 0 { (gtid_out_end + csize) as u32 } else { 0 };
            out.extend_from_slice(&clp.to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(opt.commit_body);
            if opt.crc {
                let c = crc32fast::hash(&out[c0..]);
                out.extend_from_slice(&c.to_le_bytes());
            }
            out_pos += gsize + csize;
            counts.emptied[0] += 1;
            counts.emptied[1] += u.events as u64;
            counts.emptied[2] += size;
            counts.emptied[3] += gsize + csize;
            i += 1;
            continue;
        }
        // Partly kept: whole statements dropped, when each statement's tables get one answer.
        let Some(stmts) = statements(buf, gtid_end, u.end) else { break };
        let mut parts: Vec<(usize, usize)> = Vec::with_capacity(stmts.len() + 2);
        let (mut at, mut t0) = (gtid_end, 0usize);
        let mut events_out = u.events as u64;
        parts.push((u.start, gtid_end));
        for (stmt_end, events, t1) in &stmts {
            let t1 = *t1 as usize;
            if t1 == t0 || t1 > ids.len() {
                break 'units; // a statement without its own Table_map
            }
            let k = keep_of(keep, ids[t0]);
            if ids[t0 + 1..t1].iter().any(|id| keep_of(keep, *id) != k) {
                break 'units; // a partly kept statement: its STMT_END_F would move
            }
            if k == Some(true) {
                parts.push((at, *stmt_end));
            } else {
                events_out -= *events as u64;
            }
            at = *stmt_end;
            t0 = t1;
        }
        parts.push((at, u.end));
        let mut joined = Vec::with_capacity(u.end - u.start);
        for (a, b) in parts {
            joined.extend_from_slice(&buf[a..b]);
        }
        let before = out.len();
        push_renumbered(&mut out, &joined, 0, joined.len(), out_pos, opt.crc);
        let written = (out.len() - before) as u64;
        out_pos += written;
        counts.partial[0] += 1;
        counts.partial[1] += u.events as u64;
        counts.partial[2] += size;
        counts.partial[3] += events_out;
        counts.partial[4] += written;
        i += 1;
    }
    Assembly { out, next: i, out_pos, counts }
}

/// One slave's answer per unit of a segment, one byte each: 0 skip (no table kept), 1 partial
/// (some kept), 2 keep (every table kept, or none to decide), 3 slow (not a fast unit, or a
/// table whose answer is not given). `bounds` holds (lo, hi) per unit into `tids` (name ids of
/// the fast units' Table_maps), lo = u32::MAX for a unit that is not fast; `keep` one byte per
/// name id (non-zero: kept). What `master.service._Stream._row` works from.
pub fn rows(tids: &[u32], bounds: &[u32], keep: &[u8]) -> Vec<u8> {
    bounds
        .chunks_exact(2)
        .map(|b| {
            let (lo, hi) = (b[0] as usize, b[1] as usize);
            if b[0] == u32::MAX || lo > hi || hi > tids.len() {
                return 3;
            }
            let (mut all, mut any) = (true, false);
            for id in &tids[lo..hi] {
                match keep.get(*id as usize) {
                    Some(0) => all = false,
                    Some(_) => any = true,
                    None => return 3,
                }
            }
            if all {
                2
            } else if any {
                1
            } else {
                0
            }
        })
        .collect()
}
