//! A segment's units across its parts (one part per scanned read buffer), built once from the
//! scanner's records and shared by every stream of the master: each unit's place and flags, its
//! Table_maps' name ids, and what is read of the units once for all streams (their statements,
//! the sums counting walks read). Per stream there is only its answer byte per unit (`rows`) and
//! the walk over the list (`send::walk`).

use std::ops::Range;
use std::sync::OnceLock;

use crate::heartbeat::Heartbeats;
use crate::hops::statements;
use crate::le::u32_at;
use crate::rows::{rows_many, StmtKeeps};
use crate::scan::{Unit, CONTROL, F_COMPLETE, F_FAST, F_MARIADB_GTID, F_ROTATE_END};
use crate::sql::query_ranges;
use crate::types::{is_gtid, HEADER_LEN};
use crate::unit_cut::{body_start, UnitCut};
use crate::unit_gtids::UnitGtids;

/// A unit's record as the list keeps it, 32 bytes (the scanner's `Unit` is 72): offsets as u32
/// (read them with `start()`, `end()`, `last()`), its Table_maps' name ids in the list's `bounds`,
/// its GTID in the list's runs (`UnitList::gtid_of`). 2.1 million units of small transactions
/// are 67 MB so, where the scanner's record was 150 MB. A part's buffer holds a segment and its
/// last unit: its offsets fit 32 bits as a binlog position does (`UnitList::add`).
#[derive(Debug, Clone, Default)]
pub struct ListedUnit {
    pub part: u32,
    /// Offsets in the part's buffer: where it starts, ends, and its last event starts.
    pub start: u32,
    pub end: u32,
    pub last: u32,
    pub events: u32,
    pub flags: u32,
    pub gtid_size: u32,
    pub kind: u8,
    /// Whether its Table_maps' name ids are in the list (a fast unit): `UnitList::tables`.
    pub tabled: bool,
}

impl ListedUnit {
    #[inline]
    pub fn start(&self) -> usize {
        self.start as usize
    }

    #[inline]
    pub fn end(&self) -> usize {
        self.end as usize
    }

    #[inline]
    pub fn last(&self) -> usize {
        self.last as usize
    }

    /// Whether its record allows a GTID and one QUERY event (`UnitList::lone_query` reads the
    /// rest): complete, not fast, not control, two events at most.
    #[inline]
    pub fn may_be_lone(&self) -> bool {
        self.flags & (F_FAST | F_COMPLETE) == F_COMPLETE && self.kind != CONTROL && self.events <= 2
    }
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
    /// Per entry of `tids`: its Table_map's bytes and its rows events' (`Scanner::tid_bytes`).
    tid_bytes: Vec<u32>,
    /// (unit, timestamp) where the units' first events' timestamp changes, 0 skipped (`times`).
    times: Vec<(u32, u32)>,
    /// tid-style bounds per unit, (lo, hi) pairs, for `rows`; (u32::MAX, u32::MAX) for a unit
    /// that is not fast.
    pub bounds: Vec<u32>,
    /// The units' GTIDs (as the scanner read them: MariaDB's, a MySQL gno) in runs.
    gtids: UnitGtids,
    /// Bytes of all units, and the OR of their flags (which rare shapes the segment holds).
    pub size: u64,
    pub flags_any: u32,
    /// The latest timestamp of the units' events, as their scans read them (ScanOut::latest).
    pub latest: u32,
    /// Per unit, its statements once a stream or slave kept part of it (`unit_statements`).
    statements: OnceLock<Box<[UnitStatements]>>,
    /// Bytes and events before each unit, for walks that count only (`experiment`): made the first
    /// time one asks.
    sums: OnceLock<Sums>,
    /// Table_maps per name id over every unit (`tally_names`): counted once for all streams.
    name_totals: OnceLock<Box<[u32]>>,
}

/// `UnitList::sums`: entry k of `bytes` (`events`) holds the bytes (events) of units 0..k; the
/// greatest end of each part's units; whether every unit's range is in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sums {
    pub(crate) bytes: Box<[u64]>,
    pub(crate) events: Box<[u64]>,
    pub(crate) part_end: Box<[usize]>,
    pub(crate) sound: bool,
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
            let read = body_start(buf, u.start, u.gtid_size, u.end, u.flags)
                .and_then(|body| statements(buf, body, u.end));
            (k, read.map(Vec::into_boxed_slice))
        })
        .collect()
}

impl UnitList {
    /// Appends the units of one scan of a buffer (`tables` the scan's name ids): how many, the
    /// first `n` of them, up to one whose offsets in the buffer do not fit 32 bits (a part is a
    /// segment's read buffer: only a transaction of 4 GiB does not, which a binlog position, 32
    /// bits in every event's header, cannot address either).
    /// `tid_bytes`: each name id's bytes (`ScanOut::tid_bytes`; 0 past its end).
    pub fn add(
        &mut self,
        file: &[u8],
        base: u64,
        units: &[Unit],
        tables: &[u32],
        tid_bytes: &[u32],
    ) -> usize {
        self.statements = OnceLock::new(); // made again, for every unit, when asked
        self.sums = OnceLock::new();
        self.name_totals = OnceLock::new();
        let part = self.parts.len() as u32;
        self.parts.push(ListPart {
            file: file.to_vec(),
            base,
        });
        let off = self.tids.len() as u32;
        self.tids.extend_from_slice(tables);
        self.tid_bytes.extend(tid_bytes.iter().take(tables.len()));
        self.tid_bytes.resize(self.tids.len(), 0);
        self.units.reserve(units.len());
        self.bounds.reserve(2 * units.len());
        for (n, u) in units.iter().enumerate() {
            let offsets = [u.start, u.end, u.last].map(u32::try_from);
            let [Ok(start), Ok(end), Ok(last)] = offsets else {
                return n;
            };
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
            let k = self.units.len() as u32;
            if u.ts != 0 && self.times.last().map(|t| t.1) != Some(u.ts) {
                self.times.push((k, u.ts));
            }
            self.gtids.push(k, u.gtid_domain, u.gtid_server, u.gtid_seq);
            self.units.push(ListedUnit {
                part,
                start,
                end,
                last,
                events: u.events,
                flags: u.flags,
                gtid_size: u.gtid_size,
                kind: u.kind,
                tabled: fast,
            });
        }
        units.len()
    }

    /// Unit k's GTID fields as the scanner read them: (domain, server_id, seq_no or gno).
    pub fn gtid_of(&self, k: usize) -> Option<(u32, u32, u64)> {
        self.units.get(k).and(self.gtids.get(k))
    }

    /// The heap bytes the list holds: its records, name ids and bounds, and what is read of it
    /// once for every stream (unit statements, sums, name totals). A master keeps a segment's
    /// list by this (SegmentCache._keep).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let statements = self.statements.get().map_or(0, |cells| {
            let read = cells
                .iter()
                .filter_map(|c| c.get().and_then(Option::as_ref));
            cells.len() * size_of::<UnitStatements>()
                + read.map(|s| std::mem::size_of_val(&**s)).sum::<usize>()
        });
        let sums = self.sums.get().map_or(0, |s| {
            (s.bytes.len() + s.events.len()) * size_of::<u64>()
                + s.part_end.len() * size_of::<usize>()
        });
        let parts: usize = self.parts.iter().map(|p| p.file.capacity()).sum();
        self.units.capacity() * size_of::<ListedUnit>()
            + (self.tids.capacity() + self.tid_bytes.capacity() + self.bounds.capacity())
                * size_of::<u32>()
            + self.times.capacity() * size_of::<(u32, u32)>()
            + self.gtids.heap_bytes()
            + self.parts.capacity() * size_of::<ListPart>()
            + parts
            + statements
            + sums
            + self
                .name_totals
                .get()
                .map_or(0, |t| t.len() * size_of::<u32>())
    }

    /// The statements of fast unit k's body (after its GTID, and its BEGIN in a MySQL unit:
    /// `body_start`) in `buf`, its part's bytes, read
    /// the first time any stream or slave keeps part of it and kept with the list: the others
    /// cut it from them without reading its events again (64 slaves of a schema, each ignoring
    /// some of its tables, read each unit's events once, not once each). None where the body
    /// does not cut into statements (see `hops::statements`).
    pub fn unit_statements(&self, k: usize, buf: &[u8]) -> Option<&[(usize, u32, u32)]> {
        let u = self.units.get(k)?;
        if u.end() > buf.len() {
            return None;
        }
        let cells = self
            .statements
            .get_or_init(|| (0..self.units.len()).map(|_| OnceLock::new()).collect());
        cells
            .get(k)?
            .get_or_init(|| {
                body_start(buf, u.start(), u.gtid_size, u.end(), u.flags)
                    .and_then(|body| statements(buf, body, u.end()))
                    .map(Vec::into_boxed_slice)
            })
            .as_deref()
    }

    /// Adds to `counts` (one per name id) the Table_maps of the fast units in `ranges`
    /// (ascending, disjoint [i, j) pairs): the rule hits a stream's walks ran. A stream walks most
    /// of a segment, so where the ranges cover most units this is the list's totals (counted once
    /// for every stream) less the units between them: eight do-db streams each counted every
    /// unit's Table_maps as they walked it, a third of their walks' CPU on small transactions.
    pub fn tally_names(&self, ranges: &[(usize, usize)], counts: &mut [u32]) {
        let n = self.units.len();
        let ranges = ranges.iter().map(|&(i, j)| (i.min(n), j.min(n)));
        let covered: usize = ranges.clone().map(|(i, j)| j.saturating_sub(i)).sum();
        if 2 * covered < n {
            for (i, j) in ranges {
                self.add_names(i, j, counts, u32::wrapping_add);
            }
            return;
        }
        let totals = self.name_totals.get_or_init(|| {
            let size = self.tids.iter().max().map_or(0, |m| *m as usize + 1);
            let mut totals = vec![0u32; size];
            self.add_names(0, n, &mut totals, u32::wrapping_add);
            totals.into_boxed_slice()
        });
        for (c, t) in counts.iter_mut().zip(totals.iter()) {
            *c = c.wrapping_add(*t);
        }
        let mut at = 0;
        for (i, j) in ranges.chain([(n, n)]) {
            if i > at {
                self.add_names(at, i, counts, u32::wrapping_sub);
            }
            at = at.max(j);
        }
    }

    fn add_names(&self, i: usize, j: usize, counts: &mut [u32], op: fn(u32, u32) -> u32) {
        for k in i..j.min(self.units.len()) {
            let ids = self.tables(k);
            for id in ids {
                if let Some(c) = counts.get_mut(*id as usize) {
                    *c = op(*c, 1);
                }
            }
        }
    }

    pub(crate) fn sums(&self) -> &Sums {
        self.sums.get_or_init(|| {
            let n = self.units.len();
            let (mut bytes, mut events) = (Vec::with_capacity(n + 1), Vec::with_capacity(n + 1));
            let mut part_end = vec![0usize; self.parts.len()];
            let (mut b, mut e, mut sound) = (0u64, 0u64, true);
            for u in &self.units {
                bytes.push(b);
                events.push(e);
                b += u.end().saturating_sub(u.start()) as u64;
                e += u.events as u64;
                sound &= u.start() <= u.end();
                match part_end.get_mut(u.part as usize) {
                    Some(end) => *end = (*end).max(u.end()),
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
    pub(crate) fn unit_cut<'a>(&'a self, k: usize, buf: &[u8]) -> Option<UnitCut<'a>> {
        let u = self.units.get(k)?;
        Some(UnitCut {
            start: u.start(),
            end: u.end(),
            gtid_end: body_start(buf, u.start(), u.gtid_size, u.end(), u.flags)?,
            events: u.events,
            ids: self.tids.get(self.table_range(k)?)?,
            stmts: self.unit_statements(k, buf)?,
        })
    }

    /// The name ids of unit k's Table_maps (empty for a unit that is not fast, or out of range).
    pub fn tables(&self, k: usize) -> &[u32] {
        self.table_range(k)
            .and_then(|r| self.tids.get(r))
            .unwrap_or(&[])
    }

    /// Unit k's Table_maps: their name ids (`tables`) and their bytes, each with its rows events'.
    pub fn maps(&self, k: usize) -> (&[u32], &[u32]) {
        let r = self.table_range(k).unwrap_or_default();
        let bytes = self.tid_bytes.get(r.clone()).unwrap_or(&[]);
        (self.tids.get(r).unwrap_or(&[]), bytes)
    }

    /// (unit, timestamp) at each change of the units' first events' timestamps (0 skipped).
    pub fn times(&self) -> &[(u32, u32)] {
        &self.times
    }

    /// Where unit k's name ids lie in `tids`; None for a unit that is not fast.
    fn table_range(&self, k: usize) -> Option<Range<usize>> {
        match self.bounds.get(2 * k..2 * k + 2)? {
            &[lo, hi] if lo != u32::MAX => Some(lo as usize..hi as usize),
            _ => None,
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
        Some((u.part, part.base + u.end() as u64))
    }

    /// Unit k's MariaDB GTID as (domain, server_id, seq_no), None without one.
    pub fn gtid(&self, k: usize) -> Option<(u32, u32, u64)> {
        let u = self.units.get(k)?;
        (u.flags & F_MARIADB_GTID != 0).then(|| self.gtid_of(k))?
    }

    /// How many distinct (domain, server_id) the units' MariaDB GTIDs have.
    pub fn gtid_sources(&self) -> usize {
        let ends = self.gtids.sources().skip(1).map(|(from, _)| from);
        let runs = self.gtids.sources().zip(ends.chain([self.units.len()]));
        let mariadb = |(from, end): (usize, usize)| {
            let units = self.units.get(from..end).unwrap_or_default();
            units.iter().any(|u| u.flags & F_MARIADB_GTID != 0)
        };
        let seen: std::collections::HashSet<_> = runs
            .filter(|&((from, _), end)| mariadb((from, end)))
            .map(|((_, source), _)| source)
            .collect();
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
    /// the master's statement flag words answer), or one plain QUERY event without a GTID (MySQL
    /// before 5.6's GTIDs), read as `codec.event.query_text` reads them (`query_post` the
    /// format's QUERY post-header length, `crc_len` its checksum length); None for any other
    /// unit, or lengths that do not add up.
    pub fn lone_query(
        &self,
        k: usize,
        buf: &[u8],
        query_post: usize,
        crc_len: usize,
    ) -> Option<(Range<usize>, Range<usize>)> {
        let u = self.units.get(k)?;
        // (the record first: a statement unit's bytes, a cache miss each, are not read)
        if !u.may_be_lone() {
            return None;
        }
        let raw = buf.get(u.start()..u.end())?;
        let q = match (u.events, is_gtid(*raw.get(4)?)) {
            (2, true) => u32_at(raw, 9)? as usize, // the GTID event's size: where the QUERY starts
            (1, false) => 0,
            _ => return None,
        };
        let (db, sql) = query_ranges(raw, q, query_post, crc_len)?;
        let at = u.start();
        Some((at + db.start..at + db.end, at + sql.start..at + sql.end))
    }

    /// Each slave's answer byte per unit from its keep byte per name id, and its statement
    /// units' by key (see rows::rows_many).
    pub fn rows_many(&self, keeps: &[&[u8]], by_keys: Option<StmtKeeps<'_>>) -> Vec<Vec<u8>> {
        rows_many(&self.tids, &self.bounds, keeps, by_keys)
    }

    /// The Heartbeat event for the end of unit k (see heartbeat::heartbeat), made by `made`,
    /// which is replaced by one for unit k's file when it was made for another part.
    pub(crate) fn heartbeat(
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
        let Some((_, maker)) = made else { return 0 };
        maker.append(part.base + u.end() as u64, out)
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

#[cfg(test)]
#[path = "unit_list_tests.rs"]
mod tests;
