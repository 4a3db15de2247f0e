//! The scanner: the one walk over binlog bytes. It hops from header to header with bounds checks,
//! verifies CRC32s (a run at a time: scan/batched.rs), follows the Format_description events,
//! groups events into units exactly as `codec.transactions.TransactionGrouper` does
//! (scan/group.rs), and pulls out the fields a filter decision needs (Table_map names, GTIDs, the
//! Rotate target). It never decodes row images and never panics on input: every malformed byte
//! ends the scan with a `ScanError` carrying its offset.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use crate::crc::{self, crc_ok, fde_crc_ok, Run};
use crate::format::{type_name, Format};
use crate::le::{u16_at, u32_at};
use crate::types::*;

mod batched;
mod group;

/// Events larger than this are refused: the server's own limit (max_allowed_packet) is 1 GiB.
pub const MAX_EVENT_SIZE: u32 = 1 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Binlog,
    Checksum,
}

/// A malformed event: `offset` is the event's own file offset (`base` + buffer offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanError {
    pub kind: ErrorKind,
    pub message: String,
    pub offset: u64,
}

impl ScanError {
    pub(crate) fn binlog(message: String, offset: u64) -> Self {
        ScanError {
            kind: ErrorKind::Binlog,
            message,
            offset,
        }
    }

    /// A CRC32 mismatch in the event its type's `name` names.
    pub(crate) fn crc(name: &str, offset: u64) -> Self {
        ScanError {
            kind: ErrorKind::Checksum,
            message: format!("CRC32 mismatch in {name} event"),
            offset,
        }
    }
}

// Unit kinds, as in transactions.py.
pub const CONTROL: u8 = 0;
pub const TRANSACTION: u8 = 1;
pub const STATEMENT: u8 = 2;

// Unit flags.
/// The common ROW shape: `GTID [BEGIN] {Annotate|Rows_query|Table_map|Rows}* XID`, every rows
/// event after its own Table_map in this unit: decided from its tables alone.
pub const F_FAST: u32 = 1;
/// Ended by its terminator (XID, COMMIT, the statement...), not cut by the input's end.
pub const F_COMPLETE: u32 = 2;
/// The unit's last event is a real (non-artificial) Rotate: the slave continues in the next file.
pub const F_ROTATE_END: u32 = 4;
/// A Format_description event is in the unit (the format changes inside it).
pub const F_HAS_FDE: u32 = 8;
pub const F_MARIADB_GTID: u32 = 16;
/// Starts with a MySQL GTID (type 33); its source uuid is at raw[20..36], gno in `gtid_seq`.
pub const F_MYSQL_GTID: u32 = 32;
pub const F_TAGGED_GTID: u32 = 64;
pub const F_ANONYMOUS_GTID: u32 = 128;
/// An event of an unknown type without LOG_EVENT_IGNORABLE_F: a server would refuse it.
pub const F_UNKNOWN_NON_IGNORABLE: u32 = 256;
pub const F_PAYLOAD: u32 = 512;
pub const F_STANDALONE: u32 = 1024;
/// A MariaDB GTID, RAND placeholders only (`types::is_placeholder`, all taken by the
/// scanner's run of RANDs) and one event that ends the unit: what the placeholder policy sends
/// for a skipped row unit, whose framing a slave relays (`relay::placeholder_unit`).
pub const F_PLACEHOLDERS: u32 = 2048;
/// A slave's scanner only (`Scanner::holes`): the fast shape with the master's RAND placeholders
/// among its events, what the placeholder policy sends for a unit it keeps in part (a MySQL
/// transaction writing a kept table and a dropped one). Never F_FAST with it: every reader of a
/// fast unit takes its bytes as the source wrote them; the slave's relay run drops the holes
/// (`relay::holed_unit`). Its tables are recorded as a fast unit's.
pub const F_HOLES: u32 = 4096;

/// One unit: offsets are in the scanned buffer; `tables` indexes `ScanOut::tables` (fast units).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unit {
    pub start: usize,
    pub end: usize,
    pub events: u32,
    pub kind: u8,
    pub flags: u32,
    /// Size of the opening GTID event (0 without one).
    pub gtid_size: u32,
    pub tables_lo: u32,
    pub tables_hi: u32,
    /// MariaDB seq_no, or MySQL gno.
    pub gtid_seq: u64,
    pub gtid_domain: u32,
    pub gtid_server: u32,
    /// Buffer offset of the unit's last event.
    pub last: usize,
    /// Its first event's timestamp (`UnitList`'s runs of them: a count reads no unit for it).
    pub ts: u32,
}

/// Words per unit record in the packed form handed to Python (`Unit::pack_into`).
pub const UNIT_WORDS: usize = 8;

impl Unit {
    /// Eight little-endian u64 words: start, end, events | kind << 32 | flags << 40, gtid_size,
    /// tables_lo | tables_hi << 32, gtid_seq, gtid_domain | gtid_server << 32, last.
    /// `out` is UNIT_WORDS * 8 bytes long: the record's place in a packed array.
    pub fn pack_into(&self, out: &mut [u8]) {
        for (place, w) in out.chunks_exact_mut(8).zip(self.words()) {
            place.copy_from_slice(&w.to_le_bytes());
        }
    }

    fn words(&self) -> [u64; UNIT_WORDS] {
        [
            self.start as u64,
            self.end as u64,
            self.events as u64 | (self.kind as u64) << 32 | (self.flags as u64) << 40,
            self.gtid_size as u64,
            self.tables_lo as u64 | (self.tables_hi as u64) << 32,
            self.gtid_seq,
            self.gtid_domain as u64 | (self.gtid_server as u64) << 32,
            self.last as u64,
        ]
    }
}

#[derive(Debug, Default)]
pub struct ScanOut {
    pub units: Vec<Unit>,
    /// Name ids of the fast units' Table_maps, in order (see `Scanner::names`).
    pub tables: Vec<u32>,
    /// Per Table_map of `tables`: its bytes and its rows events' (`tally::table_bytes` reads them).
    pub tid_bytes: Vec<u32>,
    /// Buffer offset after the last unit handed out: where the next scan starts.
    pub stop: usize,
    /// Events in the units handed out.
    pub events: u64,
    /// The latest timestamp of their events (0 for none): where a binlog's time ends
    /// (`experiment`'s by-hour chart), read as the scan passes each header.
    pub latest: u32,
    /// Buffer offset of the last real Rotate among them, if any.
    pub last_rotate: Option<usize>,
    pub error: Option<ScanError>,
    /// What their placeholder runs stand for beyond themselves.
    pub runs: RunCount,
}

/// What a scan counts of the events it groups: their number, what their placeholder runs stand
/// for (`RunCount`) and their latest timestamp (`ScanOut::latest`).
#[derive(Default)]
pub(crate) struct ScanTally {
    pub(crate) events: u64,
    pub(crate) runs: RunCount,
    pub(crate) latest: u32,
}

impl ScanTally {
    #[inline]
    pub(crate) fn event(&mut self, buf: &[u8], pos: usize) {
        self.events += 1;
        self.latest = self.latest.max(u32_at(buf, pos).unwrap_or(0));
    }

    pub(crate) fn join(&mut self, other: ScanTally) {
        self.events += other.events;
        self.runs.join(other.runs);
        self.latest = self.latest.max(other.latest);
    }
}

/// The events and bytes that placeholder runs (`types::placeholder_run`: one placeholder sent
/// for a run of them) and stretches (`stretch`: skipped units in a row as one event)
/// stand for beyond their own event, to a gRPC slave that asked for them: what such a slave adds
/// to what it counts as received, so that it counts what a replica is sent; and the placeholders
/// among them. `bytes` may be negative: a stretch of empty transactions is its units and a head.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RunCount {
    pub events: u64,
    pub bytes: i64,
    pub placeholders: u64,
}

impl RunCount {
    /// Counts the event at buf[pos..pos + size] if it is a run or a stretch (`crc_len`: the
    /// checksum length of the events in force).
    #[inline]
    pub fn add(&mut self, buf: &[u8], pos: usize, size: usize, crc_len: usize) {
        if stretch_kind(buf, pos).is_some() {
            if let Some(inner) = crate::stretch::inner(buf, pos, size, crc_len) {
                self.stretch(inner, size, crc_len);
            }
        } else if let Some(n) = crate::types::placeholder_run(buf, pos) {
            let more = n.saturating_sub(1);
            self.events = self.events.saturating_add(more);
            self.placeholders = self.placeholders.saturating_add(more);
            let bytes = more.saturating_mul(size as u64).min(i64::MAX as u64) as i64;
            self.bytes = self.bytes.saturating_add(bytes);
        }
    }

    /// Counts a stretch of `size` bytes whose inner units are `inner`: each unit's two events
    /// (a GTID and its XID or COMMIT, made again where `inner.commits`) and the placeholders
    /// they stand for (`crc_len`: their checksum length), less the stretch itself.
    pub fn stretch(&mut self, inner: crate::stretch::Inner, size: usize, crc_len: usize) {
        let holes = inner.placeholders.min(u32::MAX as u64);
        let rand = (HEADER_LEN + 16 + crc_len) as u64;
        let commit = (HEADER_LEN + COMMIT_BODY.len() + crc_len) as u64;
        let commits = u64::from(inner.commits) * inner.units * commit;
        let sent = (inner.range.1 - inner.range.0) as u64 + holes * rand + commits;
        let events = 2 * inner.units + holes;
        self.events = self.events.saturating_add(events.saturating_sub(1));
        self.placeholders = self.placeholders.saturating_add(holes);
        self.bytes = self.bytes.saturating_add(sent as i64 - size as i64);
    }

    pub(crate) fn join(&mut self, other: RunCount) {
        self.events = self.events.saturating_add(other.events);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.placeholders = self.placeholders.saturating_add(other.placeholders);
    }
}

/// Scanner state that lives across buffers: the format in force and the interned table names.
pub struct Scanner {
    pub fmt: Option<Arc<Format>>,
    pub verify: bool,
    /// (db, table) byte strings by name id.
    pub names: Vec<(Vec<u8>, Vec<u8>)>,
    name_ids: HashMap<Vec<u8>, u32, BuildHasherDefault<Fnv>>,
    /// The last name id seen per Table_map table id (direct-mapped on its low bits): a table
    /// keeps its id across the transactions that write it, so most Table_maps are found here by
    /// comparing their name bytes with the entry's, without hashing them.
    name_cache: Vec<NameSlot>,
    /// The open unit's Table_map ids and name ids (reused from unit to unit: no allocation),
    /// and each Table_map's bytes with its rows events' (`ScanOut::tid_bytes`).
    ids: Vec<[u8; 6]>,
    tables: Vec<u32>,
    tid_bytes: Vec<u32>,
    pub events_walked: u64,
    /// CRCs of the common events are checked a run at a time (see `crc`); off, one by one.
    pub batch_crc: bool,
    run: Run,
    run_bad: bool,
    /// While a buffer of at least `pipeline_min` bytes is scanned, closed runs go to a checker
    /// thread (see `batched`); usize::MAX: never.
    pub pipeline_min: usize,
    run_sink: Option<Sender<Vec<Run>>>,
    run_batch: Vec<Run>,
    /// A slave's scanner: placeholders inside a fast unit keep its shape (`F_HOLES`). Off for a
    /// binlog's reader, where no placeholder belongs (a server never writes server_id 0).
    pub holes: bool,
}

/// A `Scanner::name_cache` entry: a Table_map's table id, its (db, table) key bytes, the name id.
#[derive(Default, Clone)]
struct NameSlot {
    tid: [u8; 6],
    key: Vec<u8>,
    id: u32,
}

const NAME_CACHE_SLOTS: usize = 256;

/// Buffers at least this large have their runs' CRCs checked on a second thread while the
/// walk goes on (the walk is a chain of dependent loads, the CRC pure throughput: on one core
/// they add up, on two they overlap). Smaller ones are not worth a thread.
const PIPELINE_MIN: usize = 1 << 20;
/// Closed runs handed to the checker thread at a time (about 2 MB of events).
const RUNS_PER_SEND: usize = 64;

/// FNV-1a: the name table's keys are a few dozen bytes from the binlog itself, hashed once per
/// Table_map; SipHash's DoS resistance buys nothing against a file we are reading anyway
/// (a hostile binlog can only slow its own scan).
#[derive(Default)]
pub struct Fnv(u64);
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { FNV_OFFSET } else { self.0 };
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

impl Scanner {
    pub fn new(verify: bool) -> Self {
        Scanner {
            fmt: None,
            verify,
            names: Vec::new(),
            name_ids: HashMap::default(),
            name_cache: vec![NameSlot::default(); NAME_CACHE_SLOTS],
            ids: Vec::new(),
            tables: Vec::new(),
            tid_bytes: Vec::new(),
            events_walked: 0,
            batch_crc: crc::batch_available(),
            run: Run::default(),
            run_bad: false,
            pipeline_min: PIPELINE_MIN,
            run_sink: None,
            run_batch: Vec::new(),
            holes: false,
        }
    }

    /// Adopts a format read elsewhere (a stream that starts past the file's FDE).
    pub fn load_fde(&mut self, event: &[u8], offset: u64) -> Result<(), ScanError> {
        let fmt = Format::parse(event).map_err(|e| ScanError::binlog(e.0, offset))?;
        self.fmt = Some(Arc::new(fmt));
        Ok(())
    }

    /// The checks every event but the common ones gets (EventSplitter._check): an FDE is parsed
    /// and its CRC checked; before the first FDE nothing is readable; an unknown type is
    /// CRC-checked and flagged unless it is marked ignorable.
    fn check_special(
        &mut self,
        ev: &[u8],
        t: u8,
        offset: u64,
        unknown: &mut bool,
    ) -> Result<(), ScanError> {
        if t == FORMAT_DESCRIPTION {
            let fmt = Format::parse(ev).map_err(|e| ScanError::binlog(e.0, offset))?;
            let alg_present = fmt.checksum_alg.is_some();
            self.fmt = Some(Arc::new(fmt));
            if self.verify && alg_present && !fde_crc_ok(ev) {
                return Err(ScanError::crc("Format_description", offset));
            }
            return Ok(());
        }
        let Some(fmt) = &self.fmt else {
            if t == START_V3 {
                return Err(ScanError::binlog(
                    "binlog v1/v3 (Start_v3 event) is not supported: no Format_description event"
                        .into(),
                    offset,
                ));
            }
            return Err(ScanError::binlog(
                format!("no Format_description event before {}", type_name(t)),
                offset,
            ));
        };
        if self.verify && fmt.checksum_len != 0 && !crc_ok(ev) {
            return Err(ScanError::crc(&type_name(t), offset));
        }
        let flags = u16_at(ev, 17).unwrap_or(0);
        if !is_known(t) && flags & LOG_EVENT_IGNORABLE_F == 0 {
            *unknown = true;
        }
        Ok(())
    }

    /// Checks the event at buf[pos..nxt] as EventSplitter does; returns whether it is an unknown,
    /// non-ignorable type.
    #[inline]
    fn check(
        &mut self,
        buf: &[u8],
        pos: usize,
        nxt: usize,
        t: u8,
        base: u64,
    ) -> Result<bool, ScanError> {
        let ev = &buf[pos..nxt];
        let mut unknown = false;
        if t == FORMAT_DESCRIPTION || !is_known(t) || self.fmt.is_none() {
            self.check_special(ev, t, base + pos as u64, &mut unknown)?;
        } else if self.verify && self.fmt.as_ref().is_some_and(|f| f.checksum_len != 0) {
            if self.batch_crc {
                self.run_add(buf, pos, nxt);
            } else if !crc_ok(ev) {
                return Err(ScanError::crc(&type_name(t), base + pos as u64));
            }
        }
        Ok(unknown)
    }

    /// The next event's (type, size) at `pos`, None when the buffer holds no whole event there.
    #[inline]
    fn next_event(buf: &[u8], pos: usize, base: u64) -> Result<Option<(u8, usize)>, ScanError> {
        if pos + HEADER_LEN > buf.len() {
            return Ok(None);
        }
        let t = buf[pos + 4];
        let size = u32_at(buf, pos + 9).unwrap_or(0);
        if (size as usize) < HEADER_LEN || size > MAX_EVENT_SIZE {
            return Err(ScanError::binlog(
                format!("event size {size} is impossible (type {t})"),
                base + pos as u64,
            ));
        }
        if pos + size as usize > buf.len() {
            return Ok(None);
        }
        Ok(Some((t, size as usize)))
    }

    /// Walks buf[off..] and hands out the buffer offsets of the events whose type is in `types`
    /// (always including Format_description events, which the caller must follow). Every event
    /// is still bounds- and CRC-checked and counted. Stops at the first partial event; an error
    /// ends the walk after the events before it.
    pub fn walk(
        &mut self,
        buf: &[u8],
        off: usize,
        base: u64,
        types: &[bool; 256],
    ) -> (Vec<u64>, usize, Option<ScanError>) {
        self.batched(buf, off, |s| {
            let mut out = Vec::new();
            let mut pos = off;
            let mut count = 0u64;
            let mut runs = s.runs_on();
            let error = loop {
                let (t, size) = match Self::next_event(buf, pos, base) {
                    Ok(Some(x)) => x,
                    Ok(None) => break None,
                    Err(e) => break Some(e),
                };
                let nxt = pos + size;
                if runs && t != FORMAT_DESCRIPTION && is_known(t) {
                    s.run_add(buf, pos, nxt); // what `check` does for a common event, minus its tests
                } else {
                    if let Err(e) = s.check(buf, pos, nxt, t, base) {
                        break Some(e);
                    }
                    runs = s.runs_on();
                }
                count += 1;
                if types[t as usize] || t == FORMAT_DESCRIPTION {
                    out.push(pos as u64);
                }
                pos = nxt;
            };
            s.events_walked += count;
            (out, pos, error)
        })
    }

    fn intern(&mut self, key: &[u8], db: &[u8], table: &[u8]) -> u32 {
        if let Some(id) = self.name_ids.get(key) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.names.push((db.to_vec(), table.to_vec()));
        self.name_ids.insert(key.to_vec(), id);
        id
    }

    /// Adds the Table_map at buf[pos..nxt] to the open unit's (its table id and (db, table) name
    /// id: `ids`, `tables`); None when malformed.
    fn add_table_map(
        &mut self,
        buf: &[u8],
        pos: usize,
        nxt: usize,
        fmt_post: usize,
        crc_len: usize,
    ) -> Option<()> {
        let body_end = nxt.checked_sub(crc_len)?;
        let i = pos + HEADER_LEN + fmt_post;
        let db_len = *buf.get(i)? as usize;
        let tbl = i + 2 + db_len;
        let tbl_len = *buf.get(tbl)? as usize;
        let key_end = tbl + 1 + tbl_len;
        if key_end > body_end {
            return None;
        }
        let key = &buf[i..key_end];
        let tid: [u8; 6] = buf.get(pos + 19..pos + 25)?.try_into().ok()?;
        self.ids.push(tid);
        self.tid_bytes.push((nxt - pos) as u32); // (an event's size fits its header's 32 bits)
        let slot = &mut self.name_cache[tid[0] as usize % NAME_CACHE_SLOTS];
        if slot.tid == tid && slot.key == key {
            self.tables.push(slot.id);
            return Some(());
        }
        let db = &buf[i + 1..i + 1 + db_len];
        let table = &buf[tbl + 1..key_end];
        let id = self.intern(key, db, table);
        let slot = &mut self.name_cache[tid[0] as usize % NAME_CACHE_SLOTS];
        slot.tid = tid;
        slot.key.clear();
        slot.key.extend_from_slice(key);
        slot.id = id;
        self.tables.push(id);
        Some(())
    }

    /// Whether the rows event at buf[pos..] (`size` bytes) is under a Table_map of the open
    /// statement (`ids`): then its bytes are that table id's latest Table_map's (`tid_bytes`).
    fn rows_under(&mut self, buf: &[u8], pos: usize, size: usize) -> bool {
        let id = buf.get(pos + 19..pos + 25);
        let Some(j) = id.and_then(|id| self.ids.iter().rposition(|x| x[..] == *id)) else {
            return false;
        };
        // (`ids` are the unit's last Table_maps: the applier forgets a statement's at STMT_END)
        let k = self.tables.len() - self.ids.len() + j;
        if let Some(b) = self.tid_bytes.get_mut(k) {
            *b = b.saturating_add(size as u32);
        }
        true
    }

    /// Groups buf[off..] into units. Stops at the first partial event, after the first unit
    /// that ends `limit` bytes or more past `off`, or at an error (the units before it are
    /// handed out). A unit still open where the buffer ends is not handed out (the next scan
    /// starts at its first byte) unless `at_eof`, when it comes out incomplete.
    pub fn units(
        &mut self,
        buf: &[u8],
        off: usize,
        base: u64,
        limit: usize,
        at_eof: bool,
    ) -> ScanOut {
        self.batched(buf, off, |s| s.group_units(buf, off, base, limit, at_eof))
    }
}
