//! The master's statement units by key (issue #43): a segment's statement-logged transactions (a
//! GTID, Queries with their context events, an XID or COMMIT: MariaDB's default MIXED format,
//! MySQL 5.x STATEMENT) read once for every stream of the master, each Query's key (kind,
//! default database, table: `stmt::dml_shape`) interned per segment, each statement's byte range
//! kept; a stream then answers them from its keep byte per key id (rows::rows_many) and sends
//! them whole, skipped or cut at statements (`StmtUnits::partial`) in `send::walk`: no Python per
//! unit. Every compiled walk that decides statement units reads them here, and asks up front:
//! the walk's buffer (a segment's UnitList, a scanner's last scan: `build_part`) is read once,
//! its keys answered by the consumer's keep table, then walked with those answers (`ByKeys`:
//! `filter`'s assembly, the slave's relay run; `split::StmtRoute` per output).

use crate::hops::events;
use crate::keep::{self, Keep};
use crate::scan::{Unit, F_COMPLETE, F_FAST, F_MARIADB_GTID, F_MYSQL_GTID, F_TAGGED_GTID};
use crate::scan::{F_HOLES, F_PLACEHOLDERS};
use crate::skip_forms::is_placeholder;
use crate::sql::{query_literals, query_ranges};
use crate::stmt::{dml_shape_read, framing};
use crate::stmt_columns::KeyColumns;
use crate::stmt_keys::{Keys, NewKey};
use crate::types::{HEADER_LEN, INTVAR, QUERY, RAND, USER_VAR, XID};
use crate::unit_list::UnitList;

/// Key id of a piece every consumer keeps (the GTID, a framing Query, the XID).
pub const ALWAYS: u32 = u32::MAX;

/// One piece of a statement unit: a Query with the context events before it (kept or dropped
/// with it), or a piece always kept; its bytes in its part's buffer (`start()`, `end()`: 16
/// bytes a piece, as a ListedUnit's offsets, u32; a unit past 4 GiB of its buffer is not read
/// by keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub key: u32,
    pub start: u32,
    pub end: u32,
    pub events: u32,
}

impl Piece {
    #[inline]
    pub fn start(&self) -> usize {
        self.start as usize
    }

    #[inline]
    pub fn end(&self) -> usize {
        self.end as usize
    }
}

/// The statement units of a segment (one `UnitList`), by key.
#[derive(Debug, Default)]
pub struct StmtUnits {
    /// Per unit, (lo, hi) into `pieces`; lo == u32::MAX: not a statement unit decided by keys.
    pub bounds: Vec<(u32, u32)>,
    pub pieces: Vec<Piece>,
    /// The keys met, with their bytes and the statement each was first met in (for Python to
    /// decide).
    pub keys: Vec<NewKey>,
    /// Units decided by keys.
    pub units: usize,
    /// The keys as each stream's loops read them (`rows`, `count`).
    cols: KeyColumns,
}

impl StmtUnits {
    /// Reads every unit of `list` that is not fast (`bufs` its parts' buffers; `formats` per part
    /// (QUERY post-header length, checksum length, the first unit the format is in force for), as
    /// `UnitList.lone_queries` takes them). A lone statement (a GTID and one Query) is left to the
    /// statement flag words.
    pub fn build(list: &UnitList, bufs: &[&[u8]], formats: &[(usize, usize, usize)]) -> StmtUnits {
        let mut b = Builder::new(list.units.len());
        for (k, u) in list.units.iter().enumerate() {
            let p = u.part as usize;
            let unit = (u.start(), u.end(), u.flags, u.gtid_size, u.events);
            match (formats.get(p), bufs.get(p)) {
                (Some(&(post, crc, from)), Some(buf)) if k >= from => b.unit(buf, unit, post, crc),
                _ => b.none(),
            }
        }
        b.finish()
    }

    /// `build` over one scan's units (`scan::Units`, in `buf`) as they would be a UnitList's
    /// first part under `format` (QUERY post-header length, checksum length, the first unit
    /// the format is in force for): the same StmtUnits as `build` gives for a UnitList of that
    /// one part with `formats` = [format]. What the scan thread builds ahead (`UnitList.scan_start`).
    pub fn build_part(units: &[Unit], buf: &[u8], format: (usize, usize, usize)) -> StmtUnits {
        let (post, crc, from) = format;
        let mut b = Builder::new(units.len());
        for (k, u) in units.iter().enumerate() {
            let unit = (u.start, u.end, u.flags, u.gtid_size, u.events);
            if k >= from {
                b.unit(buf, unit, post, crc);
            } else {
                b.none();
            }
        }
        b.finish()
    }

    /// Whether any of `units` may be a statement unit by keys (`walk`'s first checks): a scan
    /// without one (a ROW binlog's) needs no build ahead.
    pub fn may_hold(units: &[Unit]) -> bool {
        units
            .iter()
            .any(|u| candidate(u.flags, u.gtid_size, u.events))
    }

    /// The heap bytes they hold: per unit its bounds, per statement its piece, per key its bytes,
    /// and the columns the streams read (`KeyColumns`).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let texts = self
            .keys
            .iter()
            .map(|k| k.key.capacity() + k.db.capacity() + k.sql.capacity());
        self.bounds.capacity() * size_of::<(u32, u32)>()
            + self.pieces.capacity() * size_of::<Piece>()
            + self.keys.capacity() * size_of::<NewKey>()
            + texts.sum::<usize>()
            + self.cols.heap_bytes()
    }

    /// Unit k's pieces; None when it is not a statement unit by keys.
    pub fn of(&self, k: usize) -> Option<&[Piece]> {
        let &(lo, hi) = self.bounds.get(k)?;
        if lo == u32::MAX {
            return None;
        }
        self.pieces.get(lo as usize..hi as usize)
    }

    /// The units' keys as the streams' answers read them (`UnitList::rows_many`'s `by_keys`).
    pub fn columns(&self) -> &KeyColumns {
        &self.cols
    }

    /// Unit k without its dropped statements: the bytes, as they were (positions not
    /// renumbered, as `unit_cut::partial` gives a fast unit's), and the events left. None when
    /// unit k is not a statement unit by keys, or a key's answer is not given.
    pub fn partial(&self, k: usize, buf: &[u8], keep: &[u8]) -> Option<(Vec<u8>, u64)> {
        let mut out = Vec::new();
        let mut events = 0u64;
        let mut inside = true;
        self.kept_each(k, keep, |p| match buf.get(p.start()..p.end()) {
            Some(bytes) => {
                out.extend_from_slice(bytes);
                events += p.events as u64;
            }
            None => inside = false,
        })?;
        inside.then_some((out, events))
    }

    /// The byte ranges of unit k's pieces a stream keeps, in order, into `out` (cleared first):
    /// what the placeholder policy sends as they are (`skip_forms::with_placeholders`). None
    /// when unit k is not a statement unit by keys, or a key's answer is not given. The caller's
    /// Vec is reused: the master's placeholder stream asks for every skipped statement unit,
    /// and two allocations each were 26 ms of its 0.4 CPU s (perf, 500 MB sysbench MIXED).
    pub fn kept_ranges(&self, k: usize, keep: &[u8], out: &mut Vec<(usize, usize)>) -> Option<()> {
        out.clear();
        self.kept_each(k, keep, |p| out.push((p.start(), p.end())))
    }

    /// Each of unit k's pieces a stream keeps (its framing, and the statements whose key it
    /// keeps), in order, to `f`; None when unit k is not a statement unit by keys, or a key's
    /// answer is not given (`f` may have seen some pieces).
    fn kept_each(&self, k: usize, keep: &[u8], mut f: impl FnMut(&Piece)) -> Option<()> {
        for p in self.of(k)? {
            let keeps = p.key == ALWAYS
                || match keep::at(keep, p.key as usize) {
                    Keep::Keep => true,
                    Keep::Drop => false,
                    Keep::Ask => return None,
                };
            if keeps {
                f(p);
            }
        }
        Some(())
    }

    /// Unit k's answer from `keep` (a keep byte per key id): (statements, statements kept); None
    /// when it is not a statement unit by keys, or a key's answer is neither keep nor drop.
    pub fn answer(&self, k: usize, keep: &[u8]) -> Option<(u64, u64)> {
        let mut kept = 0u64;
        self.kept_each(k, keep, |p| kept += u64::from(p.key != ALWAYS))?;
        let content = self.of(k)?.iter().filter(|p| p.key != ALWAYS).count();
        Some((content as u64, kept))
    }

    /// Unit k's keyed statements in order, each as (its key id, its Query event's offset in
    /// `buf`, unit k's part's buffer: after the context events its piece opens with), appended
    /// to `keys` and `queries`: what `lint` answers a unit's statements from, key by key. False
    /// (nothing appended) when unit k is not a statement unit by keys, or `buf` is not its buffer.
    pub fn statements_into(
        &self,
        k: usize,
        buf: &[u8],
        keys: &mut Vec<u32>,
        queries: &mut Vec<u64>,
    ) -> bool {
        let Some(pieces) = self.of(k) else {
            return false;
        };
        let (had_keys, had_queries) = (keys.len(), queries.len());
        for p in pieces.iter().filter(|p| p.key != ALWAYS) {
            let Some(at) = query_at(buf, p) else {
                keys.truncate(had_keys);
                queries.truncate(had_queries);
                return false;
            };
            keys.push(p.key);
            queries.push(at as u64);
        }
        true
    }
}

/// One walk's statement units and its consumer's keep byte per key id (KEEP_KEEP, KEEP_DROP:
/// the keys answered up front, `StatementUnits.keys`), with the statements it answered by them
/// (for the consumer's rule hits: `rules.keep_table.KeepTable.account`).
pub struct ByKeys<'a> {
    pub units: &'a StmtUnits,
    pub keep: &'a [u8],
    /// Statements answered per key id.
    pub uses: Vec<u64>,
    /// Statement units and statements answered.
    pub units_done: u64,
    pub statements: u64,
}

impl<'a> ByKeys<'a> {
    pub fn new(units: &'a StmtUnits, keep: &'a [u8]) -> Self {
        ByKeys {
            units,
            keep,
            uses: Vec::new(),
            units_done: 0,
            statements: 0,
        }
    }

    /// Unit k was written from its keys' answers: its statements counted per key.
    pub fn used(&mut self, k: usize) {
        let Some(pieces) = self.units.of(k) else {
            return;
        };
        self.units_done += 1;
        for p in pieces.iter().filter(|p| p.key != ALWAYS) {
            let id = p.key as usize;
            if self.uses.len() <= id {
                self.uses.resize(id + 1, 0);
            }
            self.uses[id] += 1;
            self.statements += 1;
        }
    }

    /// (key id, statements) for each key used.
    pub fn key_uses(&self) -> Vec<(u32, u64)> {
        self.uses
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(id, n)| (id as u32, *n))
            .collect()
    }
}

/// The offset of piece `p`'s Query event in `buf`, past the context events it opens with; None
/// when `buf` does not hold them.
pub(crate) fn query_at(buf: &[u8], p: &Piece) -> Option<usize> {
    let mut hops = events(buf, p.start(), p.end());
    for _ in 1..p.events {
        hops.next()?;
    }
    (hops.at + HEADER_LEN <= buf.len().min(p.end())).then_some(hops.at)
}

/// `StmtUnits::build`'s state: the units read so far, the keys interned.
struct Builder<'a> {
    keys: Keys,
    scratch: Vec<u8>,
    /// One unit's pieces as `walk` reads them (reused: no allocation per unit).
    reads: Vec<Read<'a>>,
    s: StmtUnits,
}

impl<'a> Builder<'a> {
    fn new(units: usize) -> Self {
        Builder {
            keys: Keys::default(),
            scratch: Vec::new(),
            reads: Vec::new(),
            s: StmtUnits {
                bounds: Vec::with_capacity(units),
                ..Default::default()
            },
        }
    }

    /// The next unit: not a statement unit by keys.
    fn none(&mut self) {
        self.s.bounds.push((u32::MAX, u32::MAX));
    }

    /// The next unit, (start, end, flags, gtid_size, events) in `buf`.
    fn unit(
        &mut self,
        buf: &'a [u8],
        (start, end, flags, gtid_size, events): (usize, usize, u32, u32, u32),
        post: usize,
        crc: usize,
    ) {
        // (`walk` declines a unit its record rules out before reading a byte: a row unit, most
        // of a ROW binlog's, costs no call)
        if end > buf.len() || u32::try_from(end).is_err() || !candidate(flags, gtid_size, events) {
            return self.none();
        }
        let mut reads = std::mem::take(&mut self.reads);
        let read = walk(
            buf, start, end, flags, gtid_size, events, post, crc, &mut reads,
        );
        if read.is_none() {
            self.reads = reads;
            return self.none();
        }
        let lo = self.s.pieces.len();
        for (key, start, end, events, db, sql) in reads.drain(..) {
            let key = match (key, db, sql) {
                (Some(shape), Some(db), Some(sql)) => {
                    self.keys.id(&buf[db], &buf[sql], &shape, &mut self.scratch)
                }
                _ => ALWAYS,
            };
            self.s.pieces.push(Piece {
                key,
                start: start as u32, // (end <= u32::MAX: see above)
                end: end as u32,
                events,
            });
        }
        self.reads = reads;
        self.s.units += 1;
        self.s.bounds.push((lo as u32, self.s.pieces.len() as u32));
    }

    fn finish(mut self) -> StmtUnits {
        self.s.keys = std::mem::take(&mut self.keys.new);
        if self.s.units == 0 {
            // None (a ROW segment's): no bounds, no columns, where they were 12 bytes a unit (25
            // MB over a small-transaction binlog's lists). `of` answers None past the bounds.
            return StmtUnits::default();
        }
        let (bounds, pieces) = (&self.s.bounds, &self.s.pieces);
        let keyed = |&(lo, hi): &(u32, u32)| {
            let unit = pieces.get(lo as usize..hi as usize)?; // (lo == u32::MAX: not a statement unit)
            Some(unit.iter().filter(|p| p.key != ALWAYS).map(|p| p.key))
        };
        self.s.cols = KeyColumns::build(bounds.iter().map(keyed));
        self.s
    }
}

/// `walk`'s checks of a unit's record before it reads a byte (a unit of placeholders only,
/// `F_PLACEHOLDERS`, or a row unit with some, `F_HOLES`, would be declined at its first
/// placeholder: a slave's placeholder stream is mostly such units, each a read of memory no
/// cache holds).
fn candidate(flags: u32, gtid_size: u32, events: u32) -> bool {
    let gtid = F_MARIADB_GTID | F_MYSQL_GTID | F_TAGGED_GTID;
    flags & (F_FAST | F_PLACEHOLDERS | F_HOLES) == 0
        && flags & F_COMPLETE != 0
        && flags & gtid != 0
        && gtid_size != 0
        && events >= 3
}

/// A piece as read: its key's shape and the Query's (db, sql) ranges (None: always kept),
/// its range and events.
pub(crate) type Read<'a> = (
    Option<crate::stmt::Shape<'a>>,
    usize,
    usize,
    u32,
    Option<std::ops::Range<usize>>,
    Option<std::ops::Range<usize>>,
);

/// The pieces of the unit buf[start..end], into `out` (cleared first), when it is a complete
/// statement unit the keys decide (a GTID, then Intvar/Rand/User_var events each
/// before its Query, single-table DML Queries (keyed) or framing ones (kept), XIDs); None
/// otherwise, and for a lone statement (two events).
#[allow(clippy::too_many_arguments)]
pub(crate) fn walk<'a>(
    buf: &'a [u8],
    start: usize,
    end: usize,
    flags: u32,
    gtid_size: u32,
    events: u32,
    query_post: usize,
    crc_len: usize,
    out: &mut Vec<Read<'a>>,
) -> Option<()> {
    if !candidate(flags, gtid_size, events) || start + gtid_size as usize > end {
        return None;
    }
    let gtid_end = start + gtid_size as usize;
    out.clear();
    out.push((None, start, gtid_end, 1, None, None));
    let mut pending: Option<(usize, u32)> = None;
    let mut content = 0;
    let mut hops = crate::hops::events(buf, gtid_end, end);
    for (at, size) in hops.by_ref() {
        let nxt = at + size;
        match buf[at + 4] {
            // A placeholder (a RAND the master made in place of a skipped event) is no
            // statement's context: the unit is one the placeholder policy kept in part.
            RAND if is_placeholder(buf, at) => return None,
            INTVAR | RAND | USER_VAR => {
                let (from, n) = pending.unwrap_or((at, 0));
                pending = Some((from, n + 1));
            }
            QUERY => {
                let (db, sql) = query_ranges(&buf[..nxt], at, query_post, crc_len)?;
                let (from, n) = pending.take().unwrap_or((at, 0));
                let literals = || query_literals(buf, at, query_post);
                if let Some(shape) = dml_shape_read(&buf[sql.clone()], literals) {
                    content += 1;
                    out.push((Some(shape), from, nxt, n + 1, Some(db), Some(sql)));
                } else if framing(&buf[sql]) && n == 0 {
                    out.push((None, from, nxt, 1, None, None));
                } else {
                    return None;
                }
            }
            XID => {
                if pending.is_some() {
                    return None;
                }
                out.push((None, at, nxt, 1, None, None));
            }
            _ => return None,
        }
    }
    if hops.at < end || pending.is_some() || content == 0 {
        return None;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::{ROW_KEEP, ROW_PARTIAL, ROW_SKIP, ROW_SLOW};
    use crate::test_events::{event, query};

    /// A list of one complete MariaDB unit, all of `buf`, its GTID `gtid_size` bytes long.
    fn one_unit(buf: &[u8], gtid_size: usize, events: u32) -> UnitList {
        let mut list = UnitList::default();
        let unit = crate::scan::Unit {
            start: 0,
            end: buf.len(),
            events,
            flags: F_COMPLETE | F_MARIADB_GTID,
            gtid_size: gtid_size as u32,
            ..Default::default()
        };
        list.add(b"f", 0, &[unit], &[], &[]);
        list
    }

    #[test]
    fn a_statement_unit_by_keys() {
        let mut buf = event(162, &[0u8; 13]); // a MariaDB GTID
        let g = buf.len();
        buf.extend(query("db1", "UPDATE t SET a=1"));
        buf.extend(event(INTVAR, &[0u8; 9]));
        buf.extend(query("db1", "INSERT INTO u VALUES (1)"));
        buf.extend(event(XID, &[0u8; 8]));
        let list = one_unit(&buf, g, 5);
        let s = StmtUnits::build(&list, &[&buf], &[(13, 0, 0)]);
        assert_eq!((s.units, s.keys.len()), (1, 2));
        let row = |keep: &[u8]| list.rows_many(&[&[]], Some((s.columns(), &[Some(keep)])))[0][0];
        for (keep, code, events) in [
            (&[1u8, 1][..], ROW_KEEP, 5),
            (&[0, 0], ROW_SKIP, 2),
            (&[1, 0], ROW_PARTIAL, 3),
        ] {
            assert_eq!(row(keep), code);
            assert_eq!(s.partial(0, &buf, keep).unwrap().1, events);
        }
        assert_eq!(row(&[1]), ROW_SLOW, "a key without an answer");
        let mut counts = vec![0u32; 2];
        s.columns().count(0, 1, &mut counts);
        assert_eq!(counts, vec![1, 1]);
    }

    #[test]
    fn a_units_statements_are_its_keyed_queries() {
        let mut buf = event(162, &[0u8; 13]);
        let g = buf.len();
        buf.extend(query("db1", "BEGIN"));
        let update = buf.len();
        buf.extend(query("db1", "UPDATE t SET a=1"));
        let intvar = buf.len();
        buf.extend(event(INTVAR, &[0u8; 9]));
        let insert = buf.len();
        buf.extend(query("db1", "INSERT INTO u VALUES (1)"));
        buf.extend(event(XID, &[0u8; 8]));
        let s = StmtUnits::build(&one_unit(&buf, g, 6), &[&buf], &[(13, 0, 0)]);
        let (mut keys, mut queries) = (vec![7u32], vec![]);
        assert!(s.statements_into(0, &buf, &mut keys, &mut queries));
        assert_eq!(keys, vec![7, 0, 1]);
        assert!(intvar > update);
        assert_eq!(queries, vec![update as u64, insert as u64]);
        assert!(!s.statements_into(1, &buf, &mut keys, &mut queries));
        assert!(!s.statements_into(0, &buf[..insert], &mut keys, &mut queries));
        assert_eq!(keys.len(), 3, "nothing appended for a unit not read whole");
    }

    #[test]
    fn a_placeholder_is_no_statement_context() {
        // A unit the placeholder policy kept in part: a real RAND is its Query's context, a
        // placeholder (server_id 0, LOG_EVENT_SKIP_REPLICATION_F) stands for a skipped event.
        let unit_with = |rand: Vec<u8>| {
            let mut buf = event(162, &[0u8; 13]);
            let g = buf.len();
            buf.extend(rand);
            buf.extend(query("db1", "UPDATE t SET a=RAND()"));
            buf.extend(event(XID, &[0u8; 8]));
            let events = 4;
            let mut pieces = Vec::new();
            walk(
                &buf,
                0,
                buf.len(),
                F_COMPLETE | F_MARIADB_GTID,
                g as u32,
                events,
                13,
                0,
                &mut pieces,
            )
            .map(|()| pieces.len())
        };
        let mut real = event(RAND, &[0u8; 16]);
        real[5] = 1; // server_id 1
        assert_eq!(unit_with(real.clone()), Some(3));
        let mut placeholder = event(RAND, &[0u8; 16]);
        placeholder[17..19].copy_from_slice(&0x8000u16.to_le_bytes());
        assert_eq!(unit_with(placeholder), None);
        real[17..19].copy_from_slice(&0x8000u16.to_le_bytes());
        assert_eq!(
            unit_with(real),
            Some(3),
            "a server's own RAND may carry the flag"
        );
    }
}
