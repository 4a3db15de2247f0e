//! Output assembly: what a filter keeps of the fast units of a scanned buffer, built as one byte
//! string. Units kept whole are copied (log_pos renumbered and CRC32 recomputed where the output
//! offset differs), units with whole statements dropped lose those byte ranges, and emptied
//! MariaDB groups become their GTID plus a COMMIT Query, byte for byte as the Python reference
//! path (TransactionFilter + BinlogWriter) writes them. The decision per table comes from a keep
//! array indexed by the scanner's name ids; the rules that fill it stay in Python.

use crate::hops::events;
use crate::keep::{KEEP_DROP, KEEP_KEEP};
use crate::le::u32_at;
use crate::rename_db::{DbRenames, Renamer};
use crate::scan::{Unit, F_ANONYMOUS_GTID, F_FAST, F_HAS_FDE, F_MARIADB_GTID};
use crate::scan::{F_MYSQL_GTID, F_PAYLOAD, F_TAGGED_GTID};
use crate::skip_forms;
use crate::split::gtid_marks;
use crate::stmt_units::ByKeys;
use crate::trx_length::with_length;
use crate::types::*;
use crate::unit_cut::{answer, cut};

/// Per-outcome counters, in the order Python's FilterStats adds them.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub kept: [u64; 3],    // units, events, bytes
    pub partial: [u64; 5], // units, events in, bytes in, events out, bytes out
    pub emptied: [u64; 5], // units, events in, bytes in, events out, bytes out
    pub skipped: [u64; 3], // units, events in, bytes in
}

pub struct Assembly {
    pub out: Vec<u8>,
    /// The first unit not handled (Python takes it: not fast, a keep not known, a partly kept
    /// statement, a MySQL unit cut by its statements' keys or whose GTID skip_forms::mysql
    /// declines).
    pub next: usize,
    pub out_pos: u64,
    pub counts: Counts,
    /// Stopped at `Options::limit`: the caller starts the next file and calls again.
    pub full: bool,
    /// With `Options::gtids`: offsets in `out` of the GTID events a series' next GTID state needs
    /// (`split::gtid_marks` of it).
    pub gtids: Vec<u64>,
}

pub struct Options<'a> {
    pub base: u64,
    pub renumber: bool,
    pub crc: bool,
    pub empty_keep: bool,
    /// Stop before writing a unit once the output offset has reached this (a series' file size
    /// limit: the caller rotates and goes on); u64::MAX: none.
    pub limit: u64,
    /// The output file holds no unit yet: its first unit is written whatever `limit` says (a
    /// series' file takes one unit even when its framing alone passes the limit).
    pub fresh: bool,
    /// Report the GTID events written (`Assembly::gtids`), for a series' next file.
    pub gtids: bool,
    /// replicate-rewrite-db's names written into the units kept whole (rename_db): a unit naming
    /// a database the map lacks, or kept in part, or MySQL's, with a name to change, is Python's.
    pub renames: Option<&'a DbRenames>,
}

/// Gives every event of buf[start..stop] (whole events, back to back, to be written at output
/// offset `base`) its end offset as log_pos, except where log_pos is 0 (artificial and MariaDB
/// 11.4+ in-group events), and recomputes the CRC32 of each event whose log_pos changed, in
/// place. A Format_description event is left to the caller (its own checksum setting decides
/// its CRC): its offset is returned, with the last non-zero timestamp seen.
pub fn renumber(
    buf: &mut [u8],
    start: usize,
    stop: usize,
    base: u64,
    crc: bool,
) -> (u32, Vec<usize>) {
    let (mut at, mut last_ts, mut fdes) = (start, 0u32, Vec::new());
    while let Some((_, size)) = events(buf, at, stop).next() {
        let end = at + size;
        let ts = u32_at(buf, at).unwrap_or(0);
        if ts != 0 {
            last_ts = ts;
        }
        let want = (base + (end - start) as u64) as u32;
        let log_pos = u32_at(buf, at + 13).unwrap_or(0);
        if log_pos != 0 && log_pos != want {
            if buf[at + 4] == FORMAT_DESCRIPTION {
                fdes.push(at);
            } else {
                buf[at + 13..at + 17].copy_from_slice(&want.to_le_bytes());
                if crc && size >= HEADER_LEN + 4 {
                    let c = crc32fast::hash(&buf[at..end - 4]);
                    buf[end - 4..end].copy_from_slice(&c.to_le_bytes());
                }
            }
        }
        at = end;
    }
    (last_ts, fdes)
}

/// Appends buf[start..end] (whole events, no Format_description among them) at output offset
/// `out_pos`, renumbered (see `renumber`), as `binlogs.filtering.renumbered` does.
pub fn push_renumbered(
    out: &mut Vec<u8>,
    buf: &[u8],
    start: usize,
    end: usize,
    out_pos: u64,
    crc: bool,
) {
    let first = out.len();
    out.extend_from_slice(&buf[start..end]);
    let stop = out.len();
    renumber(out, first, stop, out_pos, crc);
}

/// The last non-zero timestamp of the whole events in `out` (0: none): what the writer of a file
/// dates a Rotate with after them (`BinlogWriter.last_timestamp`), as after events it wrote.
pub fn last_timestamp(out: &[u8]) -> u32 {
    let stamps = events(out, 0, out.len()).filter_map(|(at, _)| u32_at(out, at));
    stamps.filter(|ts| *ts != 0).last().unwrap_or(0)
}

/// Appends `made` (whole events) at output offset `out_pos`, renumbered; returns its size.
fn push_made(out: &mut Vec<u8>, made: &[u8], out_pos: u64, crc: bool) -> u64 {
    push_renumbered(out, made, 0, made.len(), out_pos, crc);
    made.len() as u64
}

/// Assembles units[from..] until one needs Python. `answers` holds one byte per unit for the
/// units that are not fast and that Python decided beforehand (a GTID and one statement: DDL,
/// MariaDB's standalone groups; or a statement alone, without a GTID), in the keep vocabulary
/// (keep.rs): KEEP_KEEP writes it whole, KEEP_DROP as the emptied group (as for fast units; a
/// MySQL unit's GTID with its transaction_length for what is left, skip_forms::mysql), or
/// nothing for a unit without a GTID, as a replica leaves it. The statement units (a
/// GTID, Queries with their context events, an XID or COMMIT) that `answers` leaves open are
/// decided by their statements' keys with `stmt` (the scan's statement units and the keys'
/// answers, given up front); any other unit stops there.
#[allow(clippy::too_many_arguments)]
pub fn assemble(
    buf: &[u8],
    units: &[Unit],
    tables: &[u32],
    keep: &[u8],
    answers: &[u8],
    from: usize,
    mut out_pos: u64,
    opt: &Options,
    mut stmt: Option<&mut ByKeys>,
) -> Assembly {
    // Room for every byte left in the buffer from the first unit on: a fast unit's output is
    // never longer than the unit (an emptied one loses at least a Table_map and its rows for the
    // COMMIT it gains), so the output is not copied again at each doubling of its capacity (an
    // emptied DDL shorter than a COMMIT may still make it grow, as before). Reserved at the first
    // unit handled: a call that stops at once (a unit Python takes) allocates nothing.
    let mut out: Vec<u8> = Vec::new();
    let mut counts = Counts::default();
    let mut i = from;
    let mut full = false;
    let mut renamer = opt.renames.map(Renamer::new);
    while i < units.len() {
        let u = &units[i];
        if u.end > buf.len() {
            break;
        }
        let mariadb = u.flags & F_MARIADB_GTID != 0;
        // A MySQL unit's GTID carries its transaction's length (skip_forms::mysql): made there
        // for an emptied or cut unit, but for a tagged GTID, a compressed payload, an FDE inside.
        let mysql = u.flags & (F_MYSQL_GTID | F_ANONYMOUS_GTID) != 0
            && u.flags & (F_PAYLOAD | F_HAS_FDE | F_TAGGED_GTID) == 0;
        let size = (u.end - u.start) as u64;
        let source_pos = opt.base + u.start as u64;
        let mut by_keys = false;
        // Whether the unit holds a name replicate-rewrite-db changes (one it has not met: Python's).
        let renamed = match renamer.as_mut() {
            None => false,
            Some(r) => {
                r.edits.clear();
                if r.unit(buf, (u.start, u.end)).is_err() {
                    break;
                }
                !r.edits.is_empty()
            }
        };
        if renamed && !(mariadb || mysql || u.gtid_size == 0) {
            break; // a tagged GTID's transaction_length would change with the name
        }
        let fast = u.flags & F_FAST != 0;
        let ids = match fast {
            true => tables.get(u.tables_lo as usize..u.tables_hi as usize),
            false => Some(&[][..]),
        };
        let Some(ids) = ids else {
            break;
        };
        let (all, none) = if fast {
            let Some(answer) = answer(ids, keep) else {
                break;
            };
            answer
        } else {
            match answers.get(i) {
                Some(&KEEP_KEEP) => (true, false),
                Some(&KEEP_DROP) => (false, true),
                _ => {
                    let Some((content, kept)) =
                        stmt.as_deref().and_then(|s| s.units.answer(i, s.keep))
                    else {
                        break;
                    };
                    by_keys = true;
                    (kept == content, kept == 0)
                }
            }
        };
        // (a unit without a GTID leaves nothing when emptied: MySQL 5.5/5.6 without GTIDs)
        let empty = none && opt.empty_keep && u.gtid_size > 0;
        if (all || empty || !none) && out_pos >= opt.limit && (!out.is_empty() || !opt.fresh) {
            full = true;
            break; // something to write, and the file is full: the caller rotates
        }
        if out.capacity() == 0 && (all || ((mariadb || mysql) && opt.renumber)) {
            out.reserve(buf.len().saturating_sub(u.start)); // a unit this call handles
        }
        // A unit done: its outcome's counters added (the unit, its events and bytes, then what
        // went out of it: `$out`), its keys' uses counted where keys decided it, the next unit.
        macro_rules! done {
            ($counts:expr, $out:expr) => {{
                let unit = [1, u.events as u64, size].into_iter().chain($out);
                $counts.iter_mut().zip(unit).for_each(|(c, n)| *c += n);
                if by_keys {
                    if let Some(s) = stmt.as_deref_mut() {
                        s.used(i);
                    }
                }
                i += 1;
                continue;
            }};
        }
        if all {
            if let (true, Some(r)) = (renamed, renamer.as_ref()) {
                if !opt.renumber {
                    break; // (a relay log's units keep the master's coordinates: the slave's run)
                }
                let made = r.made(buf, (u.start, u.end));
                // (a MySQL GTID's transaction_length counts the renamed events)
                let made = if mysql {
                    with_length(&made, opt.crc)
                } else {
                    Some(made)
                };
                let Some(made) = made else {
                    break;
                };
                out_pos += push_made(&mut out, &made, out_pos, opt.crc);
                done!(counts.kept, []);
            }
            if opt.renumber && out_pos != source_pos {
                push_renumbered(&mut out, buf, u.start, u.end, out_pos, opt.crc);
            } else {
                out.extend_from_slice(&buf[u.start..u.end]);
            }
            out_pos += size;
            done!(counts.kept, []);
        }
        if none && u.gtid_size == 0 {
            done!(counts.skipped, []);
        }
        if !(mariadb || mysql) || !opt.renumber {
            break; // relay logs: the reference framing
        }
        if none {
            if !opt.empty_keep {
                done!(counts.skipped, []);
            }
            if renamed && mysql && u.events != 2 {
                break; // its BEGIN, which may name a database: Python's renames
            }
            // (a MariaDB group as its GTID and a COMMIT, a MySQL one with a BEGIN too)
            let (at, raw) = (out.len(), &buf[u.start..u.end]);
            let events_out = if mariadb {
                let gtid_size = u.gtid_size as usize;
                skip_forms::empty(raw, gtid_size, opt.crc, Some(out_pos), Some(&mut out)).map(|_| 2)
            } else {
                let made = skip_forms::mysql::empty_transaction(raw, opt.crc, &mut out);
                let end = out.len();
                made.map(|()| renumber(&mut out, at, end, out_pos, opt.crc))
                    .map(|_| 3)
            };
            let Some(events_out) = events_out else {
                out.truncate(at);
                break;
            };
            let written = (out.len() - at) as u64;
            out_pos += written;
            done!(counts.emptied, [events_out, written]);
        }
        if renamed {
            break; // kept in part with a name to change: Python's framing and renames
        }
        // Partly kept: whole statements dropped, when each statement's tables get one answer
        // (or, in a statement unit, each Query's key).
        let made = match (by_keys, stmt.as_deref()) {
            // (a MySQL statement unit cut by its keys is left to Python's framing)
            (true, Some(s)) => s.units.partial(i, buf, s.keep).filter(|_| mariadb),
            _ => cut(buf, u, ids, keep, opt.crc),
        };
        let Some((joined, events_out)) = made else {
            break;
        };
        let written = push_made(&mut out, &joined, out_pos, opt.crc);
        out_pos += written;
        done!(counts.partial, [events_out, written]);
    }
    let gtids = match opt.gtids {
        true => gtid_marks(&out, 0, out.len()),
        false => Vec::new(),
    };
    Assembly {
        out,
        next: i,
        out_pos,
        counts,
        full,
        gtids,
    }
}
