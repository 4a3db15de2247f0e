//! What a segment's gated streams read of its texts, once for all of them (`GateReads`, held by
//! the Python UnitList): per statement piece whether its text reaches its key's table alone, per
//! unit what its annotations need of a stream (gate_reach.rs answers both for one text), and
//! those needs as a scan thread reads them ahead (`needs_ahead`).

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::gate_reach::{annotation_needs, text_reaches_key_alone};
use crate::keep::{KEEP_DROP, KEEP_KEEP};
use crate::rows::{ROW_KEEP, ROW_PARTIAL, ROW_SLOW};
use crate::scan::{Unit, F_FAST};
use crate::sql::query_ranges;
use crate::stmt_units::{query_at, Piece, StmtUnits, ALWAYS};
use crate::unit_list::UnitList;

/// A unit's `annotation_needs`, read once.
type Needs = OnceLock<Option<Box<[u32]>>>;

/// What a segment's gated streams read of its texts, once for all of them (held by the Python
/// UnitList): per statement piece whether its text reaches its key's table alone, per unit what
/// its annotations need (`annotation_needs`).
#[derive(Debug, Default)]
pub struct GateReads {
    /// Per piece: 0 not read yet, ALONE, NOT_ALONE (read only for the pieces a stream keeps by a
    /// gated key: a do-db stream reads an eighth of a sysbench segment's).
    alone: OnceLock<Box<[AtomicU8]>>,
    needs: OnceLock<Box<[Needs]>>,
    /// What scan threads read ahead (`NeedsAhead`), with the first unit of the part each is of:
    /// taken into `needs` when a stream first asks.
    ahead: Mutex<Vec<(usize, NeedsAhead)>>,
    /// Units whose `annotation_needs` a stream read itself, not found read ahead.
    pub read_here: AtomicUsize,
}

/// The `annotation_needs` of a scan's units, read on its thread (`needs_ahead`) while the
/// streams send the segment before, under the format the scanner holds after the scan: its
/// checksum length `crc`, from unit `from` (of the scan's) on, after the last one holding an FDE.
#[derive(Debug)]
pub struct NeedsAhead {
    crc: usize,
    from: usize,
    needs: Vec<Option<Box<[u32]>>>,
}

/// `annotation_needs` of units[from..] of one scan (`data` its buffer, `tables` its name ids,
/// `names` its scanner's (db, table) by id), as `GateReads::annotations_unshown` reads each.
pub fn needs_ahead<N: AsRef<[u8]>>(
    units: &[Unit],
    tables: &[u32],
    data: &[u8],
    crc: usize,
    from: usize,
    names: &[(N, N)],
) -> NeedsAhead {
    let needs = units
        .iter()
        .skip(from)
        .map(|u| {
            let fast = u.flags & F_FAST != 0 && u.tables_lo <= u.tables_hi;
            let tids = tables.get(u.tables_lo as usize..u.tables_hi as usize);
            let tids = tids.filter(|_| fast).unwrap_or(&[]);
            annotation_needs(data.get(u.start..u.end)?, crc, tids, names)
        })
        .collect();
    NeedsAhead { crc, from, needs }
}

impl GateReads {
    /// `out` (a stream's row with its statement units answered by key: rows::rows_many) with
    /// every statement unit answered there turned ROW_SLOW when it holds a statement of a key
    /// whose KEEP_KEEP holds only for texts that reach its table alone (`gated` 1) and whose
    /// text is not shown to (`reaches_key_alone`). `bufs`: the parts' buffers; `formats` as
    /// `UnitList.statement_units` takes them.
    #[allow(clippy::too_many_arguments)]
    pub fn statement_rows(
        &self,
        list: &UnitList,
        st: &StmtUnits,
        bufs: &[&[u8]],
        formats: &[(usize, usize, usize)],
        out: &mut [u8],
        keep: &[u8],
        gated: &[u8],
    ) {
        if !gated.contains(&1) {
            return;
        }
        let alone = self
            .alone
            .get_or_init(|| st.pieces.iter().map(|_| AtomicU8::new(0)).collect());
        for (k, code) in out.iter_mut().enumerate() {
            if *code == ROW_SLOW {
                continue; // not answered (by keys)
            }
            let (Some(&(lo, hi)), Some(u)) = (st.bounds.get(k), list.units.get(k)) else {
                continue;
            };
            let (buf, format) = (bufs.get(u.part as usize), formats.get(u.part as usize));
            let doubtful = (lo as usize..hi as usize).any(|p| {
                let piece = &st.pieces[p];
                let key = piece.key as usize;
                if piece.key == ALWAYS
                    || gated.get(key) != Some(&1)
                    || keep.get(key) != Some(&KEEP_KEEP)
                {
                    return false;
                }
                let mut state = alone[p].load(Ordering::Relaxed);
                if state == 0 {
                    let read = buf
                        .zip(format)
                        .is_some_and(|(b, &(post, crc, _))| piece_alone(b, piece, post, crc));
                    state = if read { ALONE } else { NOT_ALONE };
                    alone[p].store(state, Ordering::Relaxed);
                }
                state != ALONE
            });
            if doubtful {
                *code = ROW_SLOW;
            }
        }
    }

    /// Keeps what a scan thread read ahead (if it did) of the part whose first unit is `first`.
    pub fn preset_needs(&mut self, first: usize, ahead: Option<NeedsAhead>) {
        if let Some(ahead) = ahead.filter(|a| !a.needs.is_empty()) {
            let parts = self.ahead.get_mut().unwrap_or_else(|e| e.into_inner());
            parts.push((first, ahead));
        }
    }

    /// One cell per unit of `list`, holding what was read ahead where the part's format
    /// (`formats`, as `annotations_unshown` takes them) is the one it was read under.
    fn take_ahead(&self, list: &UnitList, formats: &[(usize, usize, usize)]) -> Box<[Needs]> {
        let mut cells: Vec<Needs> = (0..list.units.len()).map(|_| OnceLock::new()).collect();
        let parts = std::mem::take(&mut *self.ahead.lock().unwrap_or_else(|e| e.into_inner()));
        for (first, ahead) in parts {
            let part = list.units.get(first).map(|u| u.part as usize);
            let format = part.and_then(|p| formats.get(p));
            if format.map(|&(_, crc, from)| (crc, from)) != Some((ahead.crc, first + ahead.from)) {
                continue; // read under another format: read again, by the stream
            }
            let at = first + ahead.from;
            for (cell, needs) in cells.iter_mut().skip(at).zip(ahead.needs) {
                *cell = OnceLock::from(needs);
            }
        }
        cells.into_boxed_slice()
    }

    /// The units `row` keeps whole or in part (ROW_KEEP, ROW_PARTIAL) whose Annotate_rows /
    /// Rows_query texts are not shown to reach only tables `keep` keeps (`annotation_needs`, read
    /// once per unit for every stream; `names` (db, table) by name id), in order. A unit without
    /// such a text is never listed; one that is not fast (no Table_maps here) with one is.
    pub fn annotations_unshown(
        &self,
        list: &UnitList,
        bufs: &[&[u8]],
        formats: &[(usize, usize, usize)],
        names: &[(String, String)],
        row: &[u8],
        keep: &[u8],
    ) -> Vec<usize> {
        let cache = self.needs.get_or_init(|| self.take_ahead(list, formats));
        let mut out = Vec::new();
        for (k, u) in list.units.iter().enumerate() {
            if !matches!(row.get(k), Some(&ROW_KEEP) | Some(&ROW_PARTIAL)) {
                continue;
            }
            let needs = cache.get(k).and_then(|c| {
                c.get_or_init(|| {
                    self.read_here.fetch_add(1, Ordering::Relaxed);
                    let part = u.part as usize;
                    let (buf, &(_, crc, from)) = (bufs.get(part)?, formats.get(part)?);
                    let bytes = buf.get(u.start()..u.end()).filter(|_| k >= from)?;
                    annotation_needs(bytes, crc, list.tables(k), names)
                })
                .as_ref()
            });
            let shown = needs.is_some_and(|ids| {
                ids.iter()
                    .all(|id| keep.get(*id as usize).is_some_and(|b| *b != KEEP_DROP))
            });
            if !shown {
                out.push(k);
            }
        }
        out
    }
}

const ALONE: u8 = 1;
const NOT_ALONE: u8 = 2;

/// Whether the statement of `piece` (its Query the piece's last event, after its context events;
/// in `buf`, the QUERY post-header `post` and checksum `crc` bytes long) reaches its key's table
/// alone; false where it cannot be read.
fn piece_alone(buf: &[u8], piece: &Piece, post: usize, crc: usize) -> bool {
    let (Some(raw), Some(q)) = (buf.get(..piece.end()), query_at(buf, piece)) else {
        return false;
    };
    query_ranges(raw, q, post, crc).is_some_and(|(_, sql)| text_reaches_key_alone(&buf[sql]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_events::event;

    use crate::types::{ANNOTATE_ROWS, TABLE_MAP};

    #[test]
    fn needs_read_ahead_are_taken_under_their_format_only() {
        let names = [("db", "t"), ("db", "u")].map(|(d, t)| (d.to_owned(), t.to_owned()));
        let (mut data, mut units) = (Vec::new(), Vec::new());
        for (sql, tid) in [
            (&b"UPDATE t SET a=1"[..], 0u32),
            (b"UPDATE u SET a=f(1)", 1),
        ] {
            let start = data.len();
            data.extend(event(ANNOTATE_ROWS, sql));
            data.extend(event(TABLE_MAP, b""));
            let (tables_lo, tables_hi, flags) = (tid, tid + 1, F_FAST);
            let end = data.len();
            units.push(Unit {
                start,
                end,
                flags,
                tables_lo,
                tables_hi,
                ..Unit::default()
            });
        }
        let tables = [0u32, 1];
        let ahead = || needs_ahead(&units, &tables, &data, 0, 0, &names);
        assert_eq!(
            ahead().needs,
            vec![Some(vec![0u32].into_boxed_slice()), None]
        );
        let mut list = UnitList::default();
        list.add(b"f", 0, &units, &tables, &[]);
        let (row, keep) = ([ROW_KEEP; 2], [KEEP_KEEP; 2]);
        let unshown = |preset: bool, formats: &[(usize, usize, usize)]| {
            let mut gate = GateReads::default();
            gate.preset_needs(0, preset.then(ahead));
            let out = gate.annotations_unshown(&list, &[&data], formats, &names, &row, &keep);
            (out, gate.read_here.load(Ordering::Relaxed))
        };
        assert_eq!(unshown(true, &[(0, 0, 0)]), (vec![1], 0));
        assert_eq!(unshown(false, &[(0, 0, 0)]), (vec![1], 2));
        // Another checksum length or first unit: read again by the stream, with its answers.
        for other in [(0, 4, 0), (0, 0, 1)] {
            let (got, here) = unshown(true, &[other]);
            assert_eq!((got, here), unshown(false, &[other]));
            assert!(here > 0);
        }
    }
}
