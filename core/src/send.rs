//! What one slave's stream sends of a segment of the master's binlog, assembled in one call per
//! batch: runs of units kept whole (one copy of their bytes), MariaDB units kept in part (whole
//! statements dropped, see `assemble::partial`), and for each stretch of skipped units one
//! Heartbeat event naming where the stretch ends, as `master`'s stream loop did unit run by unit
//! run in Python. The segment (`UnitList`) is built once from the scanner's records and shared by
//! every stream; per stream there is only its answer byte per unit (`rows`) and this walk.

use crate::assemble::UnitCut;
use crate::heartbeat::Heartbeats;
use crate::hops::statements;
use crate::rows::{rows, rows_many, ROW_KEEP as KEEP, ROW_PARTIAL as PARTIAL, ROW_SKIP as SKIP};
use std::ops::Range;
use std::sync::OnceLock;

use crate::le::u32_at;
use crate::scan::{Unit, CONTROL, F_COMPLETE, F_FAST, F_MARIADB_GTID, F_ROTATE_END};
use crate::skip_forms::{self, SKIP_HEARTBEAT, SKIP_PLACEHOLDER};
use crate::sql::query_ranges;
use crate::stmt_units::StmtUnits;
use crate::types::{is_gtid, HEADER_LEN};

#[derive(Debug, Clone, Default)]
pub struct ListedUnit {
    pub part: u32,
    /// Offsets in the part's buffer.
    pub start: usize,
    pub end: usize,
    pub events: u32,
    pub flags: u32,
    pub gtid_size: u32,
    /// Its Table_maps' name ids are tids[lo..hi]; lo = u32::MAX for a unit that is not fast.
    pub lo: u32,
    pub hi: u32,
    /// The rest of the scanner's record (see scan::Unit), for the units Python makes objects of.
    pub kind: u8,
    pub last: usize,
    pub gtid_seq: u64,
    pub gtid_domain: u32,
    pub gtid_server: u32,
}

#[derive(Debug, Clone, Default)]
pub struct ListPart {
    /// The binlog file the part was read from (a Heartbeat's body) and its offset of buf[0].
    pub file: Vec<u8>,
    pub base: u64,
}

/// A segment's units across its parts (one part per scanned read buffer).
#[derive(Debug, Clone, Default)]
pub struct UnitList {
    pub parts: Vec<ListPart>,
    pub units: Vec<ListedUnit>,
    pub tids: Vec<u32>,
    /// tid-style bounds per unit, (lo, hi) pairs, for `rows`.
    pub bounds: Vec<u32>,
    /// Bytes of all units, and the OR of their flags (which rare shapes the segment holds).
    pub size: u64,
    pub flags_any: u32,
    /// Per unit, its statements once a stream or slave kept part of it (`unit_statements`).
    statements: OnceLock<Box<[UnitStatements]>>,
    /// Bytes and events before each unit, for walks that count only (`experiment`): made the first
    /// time one asks.
    sums: OnceLock<Sums>,
}

/// `UnitList::sums`: entry k of `bytes` (`events`) holds the bytes (events) of units 0..k; the
/// greatest end of each part's units; whether every unit's range is in order.
#[derive(Debug, Clone, Default)]
struct Sums {
    bytes: Box<[u64]>,
    events: Box<[u64]>,
    part_end: Box<[usize]>,
    sound: bool,
}

/// A fast unit's statements (`hops::statements` of its body), read once.
type UnitStatements = OnceLock<Option<Box<[(usize, u32, u32)]>>>;

/// The statements of a scan's units that may be kept in part, by their index in the scan.
pub type PartStatements = Vec<(usize, Option<Box<[(usize, u32, u32)]>>)>;

/// The statements (`hops::statements`) of the fast units of one scan of `buf` whose Table_maps
/// are two or more (only those can be kept in part), read while their bytes are still in the
/// caches: on the scan's own thread, for a caller whose slaves' table rules will cut units
/// (`experiment`). Read later, unit by unit, each waited on memory (a fifth of the counting's
/// CPU for 64 slaves each ignoring its own tables).
pub fn part_statements(buf: &[u8], units: &[Unit]) -> PartStatements {
    units
        .iter()
        .enumerate()
        .filter(|(_, u)| u.flags & F_FAST != 0 && u.tables_hi >= u.tables_lo.saturating_add(2))
        .map(|(k, u)| {
            let body = u.start + u.gtid_size as usize;
            let read = (body <= u.end)
                .then(|| statements(buf, body, u.end))
                .flatten();
            (k, read.map(Vec::into_boxed_slice))
        })
        .collect()
}

impl UnitList {
    /// Appends the units of one scan of a buffer (`tables` the scan's name ids).
    pub fn add(&mut self, file: &[u8], base: u64, units: &[Unit], tables: &[u32]) {
        self.statements = OnceLock::new(); // made again, for every unit, when asked
        self.sums = OnceLock::new();
        let part = self.parts.len() as u32;
        self.parts.push(ListPart {
            file: file.to_vec(),
            base,
        });
        let off = self.tids.len() as u32;
        self.tids.extend_from_slice(tables);
        self.units.reserve(units.len());
        self.bounds.reserve(2 * units.len());
        for u in units {
            let fast = u.flags & F_FAST != 0
                && u.tables_lo <= u.tables_hi
                && u.tables_hi as usize <= tables.len();
            let (lo, hi) = if fast {
                (u.tables_lo + off, u.tables_hi + off)
            } else {
                (u32::MAX, u32::MAX)
            };
            self.bounds.extend_from_slice(&[lo, hi]);
            self.size += u.end.saturating_sub(u.start) as u64;
            self.flags_any |= u.flags;
            self.units.push(ListedUnit {
                part,
                start: u.start,
                end: u.end,
                events: u.events,
                flags: u.flags,
                gtid_size: u.gtid_size,
                lo,
                hi,
                kind: u.kind,
                last: u.last,
                gtid_seq: u.gtid_seq,
                gtid_domain: u.gtid_domain,
                gtid_server: u.gtid_server,
            });
        }
    }

    /// The statements of fast unit k's body (after its GTID) in `buf`, its part's bytes, read
    /// the first time any stream or slave keeps part of it and kept with the list: the others
    /// cut it from them without reading its events again (64 slaves of a schema, each ignoring
    /// some of its tables, read each unit's events once, not once each). None where the body
    /// does not cut into statements (see `hops::statements`).
    pub fn unit_statements(&self, k: usize, buf: &[u8]) -> Option<&[(usize, u32, u32)]> {
        let u = self.units.get(k)?;
        let body = u.start + u.gtid_size as usize;
        if body > u.end || u.end > buf.len() {
            return None;
        }
        let cells = self
            .statements
            .get_or_init(|| (0..self.units.len()).map(|_| OnceLock::new()).collect());
        cells
            .get(k)?
            .get_or_init(|| statements(buf, body, u.end).map(Vec::into_boxed_slice))
            .as_deref()
    }

    fn sums(&self) -> &Sums {
        self.sums.get_or_init(|| {
            let n = self.units.len();
            let (mut bytes, mut events) = (Vec::with_capacity(n + 1), Vec::with_capacity(n + 1));
            let mut part_end = vec![0usize; self.parts.len()];
            let (mut b, mut e, mut sound) = (0u64, 0u64, true);
            for u in &self.units {
                bytes.push(b);
                events.push(e);
                b += u.end.saturating_sub(u.start) as u64;
                e += u.events as u64;
                sound &= u.start <= u.end;
                match part_end.get_mut(u.part as usize) {
                    Some(end) => *end = (*end).max(u.end),
                    None => sound = false,
                }
            }
            bytes.push(b);
            events.push(e);
            Sums {
                bytes: bytes.into_boxed_slice(),
                events: events.into_boxed_slice(),
                part_end: part_end.into_boxed_slice(),
                sound,
            }
        })
    }

    /// Unit statements read ahead (`part_statements`, for units from `first` on), set into the
    /// list's cells where none is read yet.
    pub fn preset_statements(&self, first: usize, read: PartStatements) {
        let cells = self
            .statements
            .get_or_init(|| (0..self.units.len()).map(|_| OnceLock::new()).collect());
        for (k, stmts) in read {
            if let Some(cell) = cells.get(first + k) {
                let _ = cell.set(stmts);
            }
        }
    }

    /// Fast unit k (of `buf`, its part's bytes) to cut at its statements; None where they do
    /// not cut (see `hops::statements`) or its records do not add up.
    fn unit_cut<'a>(&'a self, k: usize, buf: &[u8]) -> Option<UnitCut<'a>> {
        let u = self.units.get(k)?;
        Some(UnitCut {
            start: u.start,
            end: u.end,
            gtid_end: u.start + u.gtid_size as usize,
            events: u.events,
            ids: self.tids.get(u.lo as usize..u.hi as usize)?,
            stmts: self.unit_statements(k, buf)?,
        })
    }

    /// The name ids of unit k's Table_maps (empty for a unit that is not fast, or out of range).
    pub fn tables(&self, k: usize) -> &[u32] {
        match self.units.get(k) {
            Some(u) if u.lo != u32::MAX => {
                self.tids.get(u.lo as usize..u.hi as usize).unwrap_or(&[])
            }
            _ => &[],
        }
    }

    /// Unit k's end as (part, file offset); None for a unit that ends with a real Rotate (its
    /// end is where the Rotate points: the caller reads it) or out of range.
    pub fn end(&self, k: usize) -> Option<(u32, u64)> {
        let u = self.units.get(k)?;
        if u.flags & F_ROTATE_END != 0 {
            return None;
        }
        let part = self.parts.get(u.part as usize)?;
        Some((u.part, part.base + u.end as u64))
    }

    /// Unit k's MariaDB GTID as (domain, server_id, seq_no), None without one.
    pub fn gtid(&self, k: usize) -> Option<(u32, u32, u64)> {
        let u = self.units.get(k)?;
        (u.flags & F_MARIADB_GTID != 0).then_some((u.gtid_domain, u.gtid_server, u.gtid_seq))
    }

    /// How many distinct (domain, server_id) the units' MariaDB GTIDs have.
    pub fn gtid_sources(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        let mut last = None;
        for u in &self.units {
            if u.flags & F_MARIADB_GTID == 0 {
                continue;
            }
            let source = (u.gtid_domain, u.gtid_server);
            if last == Some(source) {
                continue; // the common case: a run of one source, no search
            }
            last = Some(source);
            seen.insert(source);
        }
        seen.len()
    }

    /// The indexes of the units from `from` on with any of `mask`'s flags.
    pub fn with_flags(&self, mask: u32, from: usize) -> Vec<usize> {
        let from = from.min(self.units.len());
        (from..self.units.len())
            .filter(|&k| self.units[k].flags & mask != 0)
            .collect()
    }

    /// Where unit k's default database and SQL text lie in `buf` (its part's buffer) when the
    /// unit is a complete GTID and one plain QUERY event (DDL, MariaDB's standalone groups: what
    /// the master's statement flag words answer), read as `codec.event.query_text` reads them
    /// (`query_post` the format's QUERY post-header length, `crc_len` its checksum length);
    /// None for any other unit, or lengths that do not add up.
    pub fn lone_query(
        &self,
        k: usize,
        buf: &[u8],
        query_post: usize,
        crc_len: usize,
    ) -> Option<(Range<usize>, Range<usize>)> {
        let u = self.units.get(k)?;
        if u.flags & F_FAST != 0 || u.flags & F_COMPLETE == 0 || u.kind == CONTROL || u.events != 2
        {
            return None;
        }
        let raw = buf.get(u.start..u.end)?;
        if !is_gtid(*raw.get(4)?) {
            return None;
        }
        let q = u32_at(raw, 9)? as usize; // the GTID event's size: where the QUERY starts
        let (db, sql) = query_ranges(raw, q, query_post, crc_len)?;
        let at = u.start;
        Some((at + db.start..at + db.end, at + sql.start..at + sql.end))
    }

    /// One stream's answer byte per unit from its keep byte per name id (see rows::rows).
    pub fn rows(&self, keep: &[u8]) -> Vec<u8> {
        rows(&self.tids, &self.bounds, keep)
    }

    /// `rows` for many slaves at once (see rows::rows_many).
    pub fn rows_many(&self, keeps: &[&[u8]]) -> Vec<Vec<u8>> {
        rows_many(&self.tids, &self.bounds, keeps)
    }

    /// The Heartbeat event for the end of unit k (see heartbeat::heartbeat), made by `made`,
    /// which is replaced by one for unit k's file when it was made for another part.
    fn heartbeat(
        &self,
        k: usize,
        server_id: u32,
        crc: bool,
        made: &mut Option<(u32, Heartbeats)>,
        out: &mut Vec<u8>,
    ) -> usize {
        let Some(u) = self.units.get(k) else {
            return 0;
        };
        let Some(part) = self.parts.get(u.part as usize) else {
            return 0;
        };
        if !matches!(made, Some((p, _)) if *p == u.part) {
            *made = Some((u.part, Heartbeats::new(&part.file, server_id, crc)));
        }
        match made {
            Some((_, maker)) => maker.append(part.base + u.end as u64, out),
            None => 0,
        }
    }

    /// The size of the Heartbeat `heartbeat(k, ..)` appends, without making it.
    pub fn heartbeat_len(&self, k: usize, crc: bool) -> usize {
        match self
            .units
            .get(k)
            .and_then(|u| self.parts.get(u.part as usize))
        {
            Some(part) => HEADER_LEN + part.file.len() + if crc { 4 } else { 0 },
            None => 0,
        }
    }
}

pub struct SendOptions<'a> {
    /// Bytes already in the batch, and the size at which it is full (it is cut after the unit
    /// that fills it, as the reference path cuts).
    pub batch_bytes: u64,
    pub limit: u64,
    /// What a skipped unit becomes (`skip_forms::SKIP_*`): one Heartbeat per skipped stretch,
    /// the unit's placeholders or its empty transaction, or (SKIP_STOP, or a unit the walk
    /// cannot make that form of) the end of the call, where the caller's per-unit way sends what
    /// its policy says.
    pub skip: u8,
    /// Units kept in part may be sent as kept statements (not under the placeholder policy).
    pub partial_ok: bool,
    /// A Heartbeat the caller still owes (a stretch skipped before this call), sent before the
    /// next kept bytes or replaced by a later stretch's.
    pub pending: Option<&'a [u8]>,
    pub server_id: u32,
    pub heartbeat_crc: bool,
    /// The segment's statement units by key and the stream's keep byte per key id: units
    /// kept in part are cut at statements (`stmt_units::StmtUnits::partial`).
    pub stmts: Option<(&'a StmtUnits, &'a [u8])>,
    /// Count only (`experiment`): what would be sent, its bytes and events and Heartbeats, with
    /// nothing assembled (no pieces, no Heartbeat bytes) and no Table_map or key tallies.
    pub count_only: bool,
}

/// A unit kept in part: its kept bytes (a statement unit's), their ranges in its buffer, or
/// (counting only) their size.
enum Cut {
    Bytes(Vec<u8>),
    Parts(Vec<(usize, usize)>),
    Size(u64),
}

impl Cut {
    fn len(&self) -> u64 {
        match self {
            Cut::Bytes(bytes) => bytes.len() as u64,
            Cut::Parts(parts) => parts.iter().map(|(a, b)| (b - a) as u64).sum(),
            Cut::Size(size) => *size,
        }
    }
}

/// A stretch of what a call sends, in order (`Sent::pieces`): bytes of a part's buffer (kept
/// units, copied once, where they go) or of `Sent::own` (Heartbeats, units kept in part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    Buf { part: u32, start: usize, end: usize },
    Own { start: usize, end: usize },
}

#[derive(Debug, Default)]
pub struct Sent {
    /// What the call sends, assembled (`send`); empty after `walk`, which leaves it in `pieces`.
    pub out: Vec<u8>,
    /// What the call sends as pieces (`walk`), `out_len` bytes in all.
    pub pieces: Vec<Piece>,
    pub own: Vec<u8>,
    pub out_len: usize,
    /// The first unit not handled.
    pub next: usize,
    pub kept: u64,
    pub partial: u64,
    pub skipped: u64,
    /// Master event bytes and events sent (kept units and the kept part of partial ones).
    pub sent_bytes: u64,
    pub sent_events: u64,
    /// Bytes and events of the units handled.
    pub read_bytes: u64,
    pub read_events: u64,
    pub heartbeats: u64,
    pub heartbeat_bytes: u64,
    /// Skipped units sent in their skip policy's form (placeholders, empty transactions), and
    /// the events and bytes of those forms, of which `placeholders` RAND placeholders.
    pub skip_units: u64,
    pub skip_events: u64,
    pub skip_bytes: u64,
    pub placeholders: u64,
    /// The unit whose end a Heartbeat is still owed for, if any.
    pub pending: Option<usize>,
    /// Whether the caller's pending Heartbeat was sent or replaced.
    pub pending_done: bool,
    /// Table_map occurrences per name id over the units handled (their rule hits).
    pub name_counts: Vec<u32>,
    /// Statements per key id over the statement units handled (their rule hits).
    pub key_counts: Vec<u32>,
}

enum Owed<'a> {
    None,
    Given(&'a [u8]),
    Unit(usize),
}

/// Walks plan.units[from..] with a stream's answers `row` (from `UnitList::rows`) and keep bytes,
/// assembling what it sends, until a unit it cannot handle, or the batch is full. `bufs` are
/// the parts' buffers. Never panics: a unit or answer out of range ends the walk.
pub fn send(
    plan: &UnitList,
    bufs: &[&[u8]],
    row: &[u8],
    keep: &[u8],
    from: usize,
    opt: &SendOptions,
) -> Sent {
    let mut s = walk(plan, bufs, row, keep, from, opt);
    let mut out = vec![0u8; s.out_len];
    s.fill(bufs, &mut out);
    s.out = out;
    s
}

/// How many pieces ahead `fill` asks for the source's cache lines. A do-db slave of eight schemas
/// is sent one unit in eight, about 1 KB each, out of pages no cache holds: each copy waited on
/// memory. A C loop copying that pattern out of the bench's binlog ran at 4.3 GB/s (14 GB/s
/// copying it all), 5.9 GB/s asking eight pieces ahead; eight do-db streams in process spent
/// 10% less in `UnitList.send`.
const PREFETCH_AHEAD: usize = 8;

/// Asks for the cache lines of `src` (at most 2 KB of it) ahead of the copy.
#[inline]
fn prefetch(src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let n = src.len().min(2048);
        let mut off = 0;
        while off < n {
            // SAFETY: a prefetch never faults; the address lies inside `src`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(src.as_ptr().add(off) as *const i8) };
            off += 64;
        }
    }
}

impl Sent {
    /// Copies the pieces into `dst` (`out_len` bytes: what `send` returns as `out`). The
    /// Python binding fills the bytes object it hands back, so each kept byte is copied once
    /// (it was copied into a Vec, then again into the bytes: a full copy of all that is sent).
    pub fn fill(&self, bufs: &[&[u8]], dst: &mut [u8]) {
        let mut at = 0;
        let slice = |piece: &Piece| match *piece {
            Piece::Buf { part, start, end } => &bufs[part as usize][start..end],
            Piece::Own { start, end } => &self.own[start..end],
        };
        for (k, piece) in self.pieces.iter().enumerate() {
            if let Some(ahead) = self.pieces.get(k + PREFETCH_AHEAD) {
                prefetch(slice(ahead));
            }
            let src = slice(piece);
            dst[at..at + src.len()].copy_from_slice(src);
            at += src.len();
        }
    }
}

/// `send` without assembling: what it sends as `pieces` (see `Sent::fill`). The walk checks every
/// range it records against its buffer, so `fill` cannot go out of bounds.
pub fn walk(
    plan: &UnitList,
    bufs: &[&[u8]],
    row: &[u8],
    keep: &[u8],
    from: usize,
    opt: &SendOptions,
) -> Sent {
    if opt.count_only && opt.limit == u64::MAX && opt.skip <= SKIP_HEARTBEAT {
        if let Some(s) = walk_counting(plan, bufs, row, keep, from, opt) {
            return s;
        }
    }
    let mut s = Sent {
        name_counts: vec![0; keep.len()],
        key_counts: vec![0; opt.stmts.map_or(0, |(_, k)| k.len())],
        ..Default::default()
    };
    let n = row.len().min(plan.units.len());
    let mut owed = match opt.pending {
        Some(raw) => Owed::Given(raw),
        None => Owed::None,
    };
    let mut batch = opt.batch_bytes;
    let mut i = from;
    let mut made = None; // the Heartbeats of the last unit's part (its file)
    let mut flush = |owed: &mut Owed, s: &mut Sent, batch: &mut u64| {
        let size = match *owed {
            Owed::None => return,
            Owed::Given(raw) => {
                if !opt.count_only {
                    s.own_piece(raw);
                }
                s.pending_done = true;
                raw.len()
            }
            Owed::Unit(k) if opt.count_only => plan.heartbeat_len(k, opt.heartbeat_crc),
            Owed::Unit(k) => {
                let start = s.own.len();
                let size =
                    plan.heartbeat(k, opt.server_id, opt.heartbeat_crc, &mut made, &mut s.own);
                s.own_range(start);
                size
            }
        };
        *owed = Owed::None;
        s.heartbeats += 1;
        s.heartbeat_bytes += size as u64;
        *batch += size as u64;
    };
    while i < n {
        let unit = &plan.units[i];
        let Some(buf) = bufs.get(unit.part as usize) else {
            break;
        };
        if unit.start > unit.end || unit.end > buf.len() {
            break;
        }
        match row[i] {
            KEEP => {
                flush(&mut owed, &mut s, &mut batch);
                // Units i..j of one part, cut after the unit that fills the batch.
                let left = opt.limit.saturating_sub(batch);
                let (mut j, mut took, mut at) = (i, 0u64, unit.start);
                while j < n && row[j] == KEEP {
                    let u = &plan.units[j];
                    if u.part != unit.part || u.start != at || u.end < u.start || u.end > buf.len()
                    {
                        break;
                    }
                    at = u.end;
                    took += (u.end - u.start) as u64;
                    s.sent_events += u.events as u64;
                    j += 1;
                    if took >= left {
                        break;
                    }
                }
                if j == i {
                    break;
                }
                if !opt.count_only {
                    s.buf_piece(unit.part, unit.start, at);
                }
                s.sent_bytes += took;
                s.kept += (j - i) as u64;
                batch += took;
                count(plan, i, j, opt, &mut s);
                i = j;
                if batch >= opt.limit {
                    break;
                }
            }
            SKIP if opt.skip == SKIP_HEARTBEAT => {
                let mut j = i;
                while j < n && row[j] == SKIP {
                    j += 1;
                }
                if matches!(owed, Owed::Given(_)) {
                    s.pending_done = true;
                }
                owed = Owed::Unit(j - 1);
                s.skipped += (j - i) as u64;
                count(plan, i, j, opt, &mut s);
                i = j;
            }
            SKIP => {
                // The placeholder and empty-transaction policies: the unit's own form, after the
                // Heartbeat still owed for a stretch before it (as the per-unit way flushes it).
                let mariadb = unit.flags & F_MARIADB_GTID != 0;
                let crc = opt.heartbeat_crc;
                let framing = match opt.stmts {
                    Some((st, kb)) if opt.skip == SKIP_PLACEHOLDER && unit.lo == u32::MAX => {
                        st.kept_ranges(i, kb)
                    }
                    _ => None,
                };
                let framing = framing.as_deref();
                let Some(form) =
                    skip_forms::skipped(unit, mariadb, buf, opt.skip, crc, framing, None)
                else {
                    break;
                };
                flush(&mut owed, &mut s, &mut batch);
                if !opt.count_only {
                    let start = s.own.len();
                    let out = Some(&mut s.own);
                    skip_forms::skipped(unit, mariadb, buf, opt.skip, crc, framing, out);
                    s.own_range(start);
                }
                s.skip_units += 1;
                s.skip_events += form.events;
                s.skip_bytes += form.bytes;
                s.placeholders += form.placeholders;
                s.skipped += 1;
                batch += form.bytes;
                count(plan, i, i + 1, opt, &mut s);
                i += 1;
                if batch >= opt.limit {
                    break;
                }
            }
            PARTIAL if opt.skip == SKIP_PLACEHOLDER => {
                // Kept in part under the placeholder policy: the kept statements as they are,
                // every other event a placeholder (MariaDB units: a MySQL GTID's
                // transaction_length would change).
                let Some(kept) = placeholder_kept(plan, i, buf, keep, opt) else {
                    break;
                };
                let crc = opt.heartbeat_crc;
                let Some(form) = skip_forms::with_placeholders(unit, buf, &kept, crc, None) else {
                    break;
                };
                flush(&mut owed, &mut s, &mut batch);
                if !opt.count_only {
                    let start = s.own.len();
                    skip_forms::with_placeholders(unit, buf, &kept, crc, Some(&mut s.own));
                    s.own_range(start);
                }
                s.sent_bytes += form.kept_bytes;
                s.sent_events += form.kept_events;
                s.skip_events += form.events;
                s.skip_bytes += form.bytes;
                s.placeholders += form.placeholders;
                s.partial += 1;
                batch += form.bytes + form.kept_bytes;
                count(plan, i, i + 1, opt, &mut s);
                i += 1;
                if batch >= opt.limit {
                    break;
                }
            }
            PARTIAL if opt.partial_ok => {
                let cut = cut(plan, i, buf, keep, opt);
                let Some((cut, events)) = cut else {
                    break;
                };
                flush(&mut owed, &mut s, &mut batch);
                let len = cut.len();
                match cut {
                    Cut::Bytes(bytes) if !opt.count_only => s.own_piece(&bytes),
                    Cut::Parts(parts) if !opt.count_only => s.own_parts(buf, &parts),
                    _ => {}
                }
                s.sent_bytes += len;
                s.sent_events += events;
                s.partial += 1;
                batch += len;
                count(plan, i, i + 1, opt, &mut s);
                i += 1;
                if batch >= opt.limit {
                    break;
                }
            }
            _ => break,
        }
    }
    s.next = i;
    if let Owed::Unit(k) = owed {
        s.pending = Some(k);
    }
    s
}

/// The byte ranges of unit i (of `buf`) a stream keeps in part, for the placeholder policy: a
/// statement unit's kept pieces, a row unit's kept statements; None where it cannot be cut (a
/// MySQL unit, a statement partly kept).
fn placeholder_kept(
    plan: &UnitList,
    i: usize,
    buf: &[u8],
    keep: &[u8],
    opt: &SendOptions,
) -> Option<Vec<(usize, usize)>> {
    let unit = plan.units.get(i)?;
    if unit.flags & F_MARIADB_GTID == 0 {
        return None;
    }
    if unit.lo == u32::MAX {
        let (st, kb) = opt.stmts?;
        return st.kept_ranges(i, kb);
    }
    plan.unit_cut(i, buf)?.parts(keep).map(|(parts, _)| parts)
}

/// Unit i (of `buf`, its part's bytes) kept in part: its kept bytes and events, or None where it
/// cannot be cut (a MySQL unit, whose GTID's transaction_length would have to be rewritten; a
/// statement of a row unit partly kept, or without its own Table_map).
fn cut(
    plan: &UnitList,
    i: usize,
    buf: &[u8],
    keep: &[u8],
    opt: &SendOptions,
) -> Option<(Cut, u64)> {
    let unit = plan.units.get(i)?;
    if unit.flags & F_MARIADB_GTID == 0 {
        return None; // MySQL: the GTID's transaction_length must be rewritten
    }
    // A statement unit is cut at its statements by their keys; a row unit at its statements
    // (read once for every stream: `unit_statements`) by its tables.
    if unit.lo == u32::MAX {
        let (st, kb) = opt.stmts?;
        let (bytes, events) = st.partial(i, buf, kb)?;
        return Some((Cut::Bytes(bytes), events));
    }
    let unit_cut = plan.unit_cut(i, buf)?;
    if opt.count_only {
        let (size, events) = unit_cut.size(keep)?;
        return Some((Cut::Size(size), events));
    }
    let (parts, events) = unit_cut.parts(keep)?;
    Some((Cut::Parts(parts), events))
}

/// `walk` for a caller that counts only and sets no batch limit (`experiment`'s `UnitList.count`),
/// from the list's sums: a run of units kept or skipped whole costs its answer bytes, not a read
/// of each unit's record (64 slaves each walked every unit). The same counts as `walk`; None
/// where the list's units do not all lie in order inside the given buffers (`walk` then stops
/// at the first that does not).
fn walk_counting(
    plan: &UnitList,
    bufs: &[&[u8]],
    row: &[u8],
    keep: &[u8],
    from: usize,
    opt: &SendOptions,
) -> Option<Sent> {
    let sums = plan.sums();
    let inside = sums
        .part_end
        .iter()
        .enumerate()
        .all(|(p, end)| bufs.get(p).is_some_and(|b| *end <= b.len()));
    if !sums.sound || !inside {
        return None;
    }
    let between = |i: usize, j: usize| {
        (
            sums.bytes[j] - sums.bytes[i],
            sums.events[j] - sums.events[i],
        )
    };
    let mut s = Sent::default();
    let n = row.len().min(plan.units.len());
    let (mut given, mut owed) = (opt.pending.map(<[u8]>::len), None::<usize>);
    let flush = |s: &mut Sent, given: &mut Option<usize>, owed: &mut Option<usize>| {
        let size = match (given.take(), owed.take()) {
            (Some(len), _) => {
                s.pending_done = true;
                len
            }
            (None, Some(k)) => plan.heartbeat_len(k, opt.heartbeat_crc),
            (None, None) => return,
        };
        s.heartbeats += 1;
        s.heartbeat_bytes += size as u64;
    };
    let mut i = from.min(n);
    while i < n {
        let answer = row[i];
        let j = match answer {
            KEEP | SKIP => run_end(&row[..n], i),
            _ => i + 1,
        };
        match answer {
            KEEP => {
                flush(&mut s, &mut given, &mut owed);
                let (bytes, events) = between(i, j);
                s.sent_bytes += bytes;
                s.sent_events += events;
                s.kept += (j - i) as u64;
            }
            SKIP if opt.skip == SKIP_HEARTBEAT => {
                if given.take().is_some() {
                    s.pending_done = true;
                }
                owed = Some(j - 1);
                s.skipped += (j - i) as u64;
            }
            PARTIAL if opt.partial_ok => {
                let buf = bufs[plan.units[i].part as usize];
                let Some((cut, events)) = cut(plan, i, buf, keep, opt) else {
                    break;
                };
                flush(&mut s, &mut given, &mut owed);
                s.sent_bytes += cut.len();
                s.sent_events += events;
                s.partial += 1;
            }
            _ => break,
        }
        let (bytes, events) = between(i, j);
        s.read_bytes += bytes;
        s.read_events += events;
        i = j;
    }
    s.next = i;
    s.pending = owed;
    Some(s)
}

/// The end of the run of equal answers that starts at `i` (the first index after it whose answer
/// differs, or the row's length), read eight answers at a time: 64 slaves' counting walks each
/// read every answer byte of a segment.
fn run_end(row: &[u8], i: usize) -> usize {
    let answer = row[i];
    let pattern = u64::from_ne_bytes([answer; 8]);
    let mut j = i + 1;
    while j + 8 <= row.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&row[j..j + 8]);
        let differs = u64::from_le_bytes(word) ^ pattern;
        if differs != 0 {
            return j + (differs.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    j + row[j..]
        .iter()
        .position(|a| *a != answer)
        .unwrap_or(row.len() - j)
}

impl Sent {
    fn buf_piece(&mut self, part: u32, start: usize, end: usize) {
        if let Some(Piece::Buf {
            part: p, end: e, ..
        }) = self.pieces.last_mut()
        {
            if *p == part && *e == start {
                *e = end; // kept units that follow one another: one piece
                self.out_len += end - start;
                return;
            }
        }
        self.pieces.push(Piece::Buf { part, start, end });
        self.out_len += end - start;
    }

    fn own_piece(&mut self, bytes: &[u8]) {
        let start = self.own.len();
        self.own.extend_from_slice(bytes);
        self.own_range(start);
    }

    /// The ranges `parts` of `buf`, joined, as the next piece.
    fn own_parts(&mut self, buf: &[u8], parts: &[(usize, usize)]) {
        let start = self.own.len();
        for &(a, b) in parts {
            self.own.extend_from_slice(&buf[a..b]);
        }
        self.own_range(start);
    }

    /// own[start..] (just appended) as the next piece.
    fn own_range(&mut self, start: usize) {
        let end = self.own.len();
        if let Some(Piece::Own { end: e, .. }) = self.pieces.last_mut() {
            if *e == start {
                *e = end;
                self.out_len += end - start;
                return;
            }
        }
        self.pieces.push(Piece::Own { start, end });
        self.out_len += end - start;
    }
}

/// Adds units i..j to the read counters, and (unless counting only) their Table_maps to the
/// name counts and their statements to the key counts.
fn count(plan: &UnitList, i: usize, j: usize, opt: &SendOptions, s: &mut Sent) {
    if opt.count_only {
        for u in &plan.units[i..j] {
            s.read_bytes += (u.end - u.start) as u64;
            s.read_events += u.events as u64;
        }
        return;
    }
    if let Some((st, _)) = opt.stmts {
        st.count(i, j, &mut s.key_counts);
    }
    for u in &plan.units[i..j] {
        s.read_bytes += (u.end - u.start) as u64;
        s.read_events += u.events as u64;
        if u.lo == u32::MAX {
            continue;
        }
        if let Some(ids) = plan.tids.get(u.lo as usize..u.hi as usize) {
            for id in ids {
                if let Some(c) = s.name_counts.get_mut(*id as usize) {
                    *c += 1;
                }
            }
        }
    }
}
