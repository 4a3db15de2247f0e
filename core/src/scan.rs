//! The scanner: the one walk over binlog bytes. It hops from header to header with bounds checks,
//! verifies CRC32s, follows the Format_description events, groups events into units exactly as
//! `binlog_codec.transactions.TransactionGrouper` does, and pulls out the fields a filter decision
//! needs (Table_map names, GTIDs, the Rotate target). It never decodes row images and never
//! panics on input: every malformed byte ends the scan with a `ScanError` carrying its offset.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use crate::crc::{self, Run};
use crate::format::{type_name, Format, FormatError};
use crate::types::*;

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
    fn binlog(message: String, offset: u64) -> Self {
        ScanError {
            kind: ErrorKind::Binlog,
            message,
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
}

/// Words per unit record in the packed form handed to Python (`Unit::pack`).
pub const UNIT_WORDS: usize = 8;

impl Unit {
    /// Eight little-endian u64 words: start, end, events | kind << 32 | flags << 40, gtid_size,
    /// tables_lo | tables_hi << 32, gtid_seq, gtid_domain | gtid_server << 32, last.
    pub fn pack(&self, out: &mut Vec<u8>) {
        let words = [
            self.start as u64,
            self.end as u64,
            self.events as u64 | (self.kind as u64) << 32 | (self.flags as u64) << 40,
            self.gtid_size as u64,
            self.tables_lo as u64 | (self.tables_hi as u64) << 32,
            self.gtid_seq,
            self.gtid_domain as u64 | (self.gtid_server as u64) << 32,
            self.last as u64,
        ];
        for w in words {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }
}

#[derive(Debug, Default)]
pub struct ScanOut {
    pub units: Vec<Unit>,
    /// Name ids of the fast units' Table_maps, in order (see `Scanner::names`).
    pub tables: Vec<u32>,
    /// Buffer offset after the last unit handed out: where the next scan starts.
    pub stop: usize,
    /// Events in the units handed out.
    pub events: u64,
    /// Buffer offset of the last real Rotate among them, if any.
    pub last_rotate: Option<usize>,
    pub error: Option<ScanError>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fast {
    No,
    /// After a MySQL GTID: a plain `BEGIN` makes the unit a fast candidate.
    AwaitBegin,
    Body,
}

struct Open {
    unit: Unit,
    in_body: bool,
    standalone: bool,
    has_gtid: bool,
    fast: Fast,
    annotation: bool,
    /// The format in force when the unit opened, if an FDE inside it changed it since.
    fmt_before: Option<Option<Arc<Format>>>,
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
    /// The open unit's Table_map ids and name ids (reused from unit to unit: no allocation).
    ids: Vec<[u8; 6]>,
    tables: Vec<u32>,
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

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

#[inline]
fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    buf.get(at..at + 2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
}

#[inline]
pub fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    buf.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

#[inline]
fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    buf.get(at..at + 8).map(|b| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        u64::from_le_bytes(a)
    })
}

pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// Whether the event's stored CRC (its last four bytes) matches the bytes before it.
#[inline]
pub fn crc_ok(event: &[u8]) -> bool {
    let n = event.len();
    n >= 4 && u32_at(event, n - 4) == Some(crc32fast::hash(&event[..n - 4]))
}

/// The FDE's CRC: the server computes it with LOG_EVENT_BINLOG_IN_USE_F cleared (it sets the flag
/// when it opens the file and clears it in place on close without recomputing the CRC).
pub fn fde_crc_ok(event: &[u8]) -> bool {
    let n = event.len();
    if n < HEADER_LEN + 4 {
        return false;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&event[..17]);
    h.update(&[event[17] & !(LOG_EVENT_BINLOG_IN_USE_F as u8)]);
    h.update(&event[18..n - 4]);
    u32_at(event, n - 4) == Some(h.finalize())
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
            events_walked: 0,
            batch_crc: crc::batch_available(),
            run: Run::default(),
            run_bad: false,
            pipeline_min: PIPELINE_MIN,
            run_sink: None,
            run_batch: Vec::new(),
        }
    }

    /// Adds a common event's CRC check to the open run (a new run where it is not contiguous
    /// or full, after checking the old one).
    #[inline(always)]
    fn run_add(&mut self, buf: &[u8], pos: usize, nxt: usize) {
        if pos == self.run.end && self.run.fits(nxt) {
            self.run.add(nxt);
        } else {
            self.run_restart(buf, pos, nxt);
        }
    }

    /// `run_add` for an event that does not join the open run.
    #[cold]
    #[inline(never)]
    fn run_restart(&mut self, buf: &[u8], pos: usize, nxt: usize) {
        self.run_check(buf);
        self.run = Run::at(pos);
        if !self.run.fits(nxt) {
            // An event too large for a run: checked alone (SIMD speed at this size).
            if !crc_ok(&buf[pos..nxt]) {
                self.run_bad = true;
            }
            self.run = Run::at(nxt);
            return;
        }
        self.run.add(nxt);
    }

    fn run_check(&mut self, buf: &[u8]) {
        if !self.run.is_empty() {
            if self.run_sink.is_some() {
                self.run_batch.push(self.run);
                if self.run_batch.len() >= RUNS_PER_SEND {
                    self.send_runs();
                }
            } else if !self.run.check(buf) {
                self.run_bad = true;
            }
        }
        self.run = Run::at(self.run.end);
    }

    fn send_runs(&mut self) {
        if let Some(sink) = &self.run_sink {
            let runs = std::mem::take(&mut self.run_batch);
            // A send fails only once the checker has found a bad run and stopped: run_bad follows.
            let _ = sink.send(runs);
        }
    }

    /// `scan` with its closed runs checked on a second thread as they come; true when every
    /// run's CRC is right.
    fn scan_pipelined<T>(&mut self, buf: &[u8], scan: &impl Fn(&mut Self) -> T) -> (T, bool) {
        std::thread::scope(|s| {
            let (sink, runs) = channel::<Vec<Run>>();
            let checker =
                s.spawn(move || runs.iter().all(|batch| batch.iter().all(|r| r.check(buf))));
            self.run_sink = Some(sink);
            let out = scan(self);
            self.run_check(buf);
            self.send_runs();
            self.run_sink = None; // closes the channel: the checker ends after the last batch
            (out, checker.join().unwrap_or(false))
        })
    }

    /// Whether common events' CRCs go to runs now (verifying, batched, a checksummed format):
    /// what `check` finds out per event, asked once per walk and again after each special event.
    #[inline]
    fn runs_on(&self) -> bool {
        self.verify && self.batch_crc && self.fmt.as_ref().is_some_and(|f| f.checksum_len != 0)
    }

    /// Runs `scan` with CRCs checked a run at a time; if a run holds a bad CRC, runs it again
    /// from the same state checking event by event, so that the answer (units, the error and
    /// its offset) is exactly the one-by-one check's.
    fn batched<T>(&mut self, buf: &[u8], off: usize, scan: impl Fn(&mut Self) -> T) -> T {
        if !(self.verify && self.batch_crc) {
            return scan(self);
        }
        let (fmt, walked) = (self.fmt.clone(), self.events_walked);
        self.run = Run::at(off);
        self.run_bad = false;
        let out = if buf.len().saturating_sub(off) >= self.pipeline_min {
            let (out, good) = self.scan_pipelined(buf, &scan);
            self.run_bad |= !good;
            out
        } else {
            let out = scan(self);
            self.run_check(buf);
            out
        };
        if !self.run_bad {
            return out;
        }
        self.fmt = fmt;
        self.events_walked = walked;
        self.run_bad = false;
        self.batch_crc = false;
        let out = scan(self);
        self.batch_crc = true;
        out
    }

    /// Adopts a format read elsewhere (a stream that starts past the file's FDE).
    pub fn load_fde(&mut self, event: &[u8], offset: u64) -> Result<(), ScanError> {
        let fmt = Format::parse(event).map_err(|e| fmt_error(e, offset))?;
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
            let fmt = Format::parse(ev).map_err(|e| fmt_error(e, offset))?;
            let alg_present = fmt.checksum_alg.is_some();
            self.fmt = Some(Arc::new(fmt));
            if self.verify && alg_present && !fde_crc_ok(ev) {
                return Err(ScanError {
                    kind: ErrorKind::Checksum,
                    message: "CRC32 mismatch in Format_description event".into(),
                    offset,
                });
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
            return Err(ScanError {
                kind: ErrorKind::Checksum,
                message: format!("CRC32 mismatch in {} event", type_name(t)),
                offset,
            });
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
        } else if self.verify {
            if let Some(fmt) = &self.fmt {
                if fmt.checksum_len != 0 && self.batch_crc {
                    self.run_add(buf, pos, nxt);
                } else if fmt.checksum_len != 0 && !crc_ok(ev) {
                    return Err(ScanError {
                        kind: ErrorKind::Checksum,
                        message: format!("CRC32 mismatch in {} event", type_name(t)),
                        offset: base + pos as u64,
                    });
                }
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
        self.batched(buf, off, |s| s.walk_events(buf, off, base, types))
    }

    fn walk_events(
        &mut self,
        buf: &[u8],
        off: usize,
        base: u64,
        types: &[bool; 256],
    ) -> (Vec<u64>, usize, Option<ScanError>) {
        let mut out = Vec::new();
        let mut pos = off;
        let mut count = 0u64;
        let mut runs = self.runs_on();
        let error = loop {
            let (t, size) = match Self::next_event(buf, pos, base) {
                Ok(Some(x)) => x,
                Ok(None) => break None,
                Err(e) => break Some(e),
            };
            let nxt = pos + size;
            if runs && t != FORMAT_DESCRIPTION && is_known(t) {
                self.run_add(buf, pos, nxt); // what `check` does for a common event, minus its tests
            } else {
                if let Err(e) = self.check(buf, pos, nxt, t, base) {
                    break Some(e);
                }
                runs = self.runs_on();
            }
            count += 1;
            if types[t as usize] || t == FORMAT_DESCRIPTION {
                out.push(pos as u64);
            }
            pos = nxt;
        };
        self.events_walked += count;
        (out, pos, error)
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

    /// The (db, table) name id of the Table_map at buf[pos..nxt], None when malformed.
    fn table_map_name(
        &mut self,
        buf: &[u8],
        pos: usize,
        nxt: usize,
        fmt_post: usize,
        crc_len: usize,
    ) -> Option<u32> {
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
        let mut tid = [0u8; 6];
        tid.copy_from_slice(buf.get(pos + 19..pos + 25)?);
        let slot = &mut self.name_cache[tid[0] as usize % NAME_CACHE_SLOTS];
        if slot.tid == tid && slot.key == key {
            return Some(slot.id);
        }
        let db = &buf[i + 1..i + 1 + db_len];
        let table = &buf[tbl + 1..key_end];
        let id = self.intern(key, db, table);
        let slot = &mut self.name_cache[tid[0] as usize % NAME_CACHE_SLOTS];
        slot.tid = tid;
        slot.key.clear();
        slot.key.extend_from_slice(key);
        slot.id = id;
        Some(id)
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

    fn group_units(
        &mut self,
        buf: &[u8],
        off: usize,
        base: u64,
        limit: usize,
        at_eof: bool,
    ) -> ScanOut {
        // Room for the units up front: grown by doubling, the records were copied about once
        // more each (a few percent of the master's CPU). Events average 60 to 500 bytes.
        let span = buf.len().saturating_sub(off).min(limit);
        let mut out = ScanOut {
            stop: off,
            units: Vec::with_capacity((span / 256).clamp(16, 1 << 16)),
            tables: Vec::with_capacity((span / 256).clamp(16, 1 << 16)),
            ..Default::default()
        };
        let mut cur: Option<Open> = None;
        let mut pos = off;
        let mut committed_events = 0u64;
        let mut pending_events = 0u64;
        let mut pending_rotate: Option<usize> = None;
        // The format in force, refreshed only after a Format_description event.
        let mut fmt = self.fmt.clone();
        loop {
            let (t, size) = match Self::next_event(buf, pos, base) {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) => {
                    out.error = Some(e);
                    break;
                }
            };
            let nxt = pos + size;
            let fmt_before = if t == FORMAT_DESCRIPTION {
                Some(self.fmt.clone())
            } else {
                None
            };
            let unknown = match self.check(buf, pos, nxt, t, base) {
                Ok(u) => u,
                Err(e) => {
                    out.error = Some(e);
                    break;
                }
            };
            pending_events += 1;
            if t == FORMAT_DESCRIPTION || fmt.is_none() {
                fmt = self.fmt.clone();
            }
            let Some(f) = fmt.as_deref() else {
                out.error = Some(ScanError::binlog(
                    format!("no Format_description event before {}", type_name(t)),
                    base + pos as u64,
                ));
                break;
            };
            match self.group(buf, pos, nxt, t, f, &mut cur, &mut out, unknown, fmt_before) {
                Ok(()) => {}
                Err(e) => {
                    out.error = Some(e);
                    break;
                }
            }
            if t == ROTATE && u16_at(buf, pos + 17).unwrap_or(0) & LOG_EVENT_ARTIFICIAL_F == 0 {
                pending_rotate = Some(pos);
            }
            pos = nxt;
            if let (Some(open), Some(f)) = (cur.as_mut(), fmt.as_deref()) {
                if open.fast == Fast::Body {
                    let (at, n, ended) = self.fast_body(buf, pos, f, open);
                    pos = at;
                    pending_events += n;
                    if ended {
                        if let Some(done) = cur.take() {
                            self.emit(done, true, &mut out);
                        }
                    }
                }
            }
            if cur.is_none() {
                out.stop = pos;
                committed_events += pending_events;
                pending_events = 0;
                if pending_rotate.is_some() {
                    out.last_rotate = pending_rotate;
                }
                if pos - off >= limit {
                    break;
                }
            }
        }
        if let Some(open) = cur.take() {
            if at_eof && out.error.is_none() {
                out.stop = pos;
                committed_events += pending_events;
                if pending_rotate.is_some() {
                    out.last_rotate = pending_rotate;
                }
                self.emit(open, false, &mut out);
            } else if let Some(saved) = open.fmt_before {
                // The open unit is scanned again from its start: so is the FDE inside it.
                self.fmt = saved;
            }
        }
        out.events = committed_events;
        self.events_walked += committed_events;
        out
    }

    /// The body of an open fast unit (Annotate_rows / Rows_query, Table_map, rows events) and
    /// the XID that ends it, from `pos` on, checked and grouped exactly as `check` and `group`
    /// do it event by event, in one tight loop. Stops after the XID, or before the first event
    /// it does not take: another type, a partial or impossible event, one that ends the fast
    /// shape, or any event when CRCs are checked one by one: the general path handles it.
    /// Returns (where it stopped, events taken, whether the unit ended: the caller emits it).
    fn fast_body(
        &mut self,
        buf: &[u8],
        mut pos: usize,
        fmt: &Format,
        open: &mut Open,
    ) -> (usize, u64, bool) {
        let crc_len = fmt.checksum_len;
        let runs = self.runs_on();
        if self.verify && crc_len != 0 && !runs {
            return (pos, 0, false);
        }
        let post = fmt.post_header_len(TABLE_MAP) as usize;
        let mut taken = 0u64;
        while pos + HEADER_LEN <= buf.len() {
            let t = buf[pos + 4];
            let size = u32_at(buf, pos + 9).unwrap_or(0);
            if (size as usize) < HEADER_LEN || size > MAX_EVENT_SIZE {
                break;
            }
            let nxt = pos + size as usize;
            if nxt > buf.len() {
                break;
            }
            if t == TABLE_MAP {
                let Some(id) = self.table_map_name(buf, pos, nxt, post, crc_len) else {
                    break;
                };
                let Some(tid) = buf.get(pos + 19..pos + 25) else {
                    break;
                };
                let mut key = [0u8; 6];
                key.copy_from_slice(tid);
                self.ids.push(key);
                self.tables.push(id);
                open.annotation = false;
            } else if is_rows(t) {
                let id = buf.get(pos + 19..pos + 25);
                let declared = id.is_some_and(|id| self.ids.iter().any(|x| x[..] == *id));
                if open.annotation || !declared {
                    break;
                }
            } else if t == ANNOTATE_ROWS || t == ROWS_QUERY {
                open.annotation = true;
            } else if t != XID {
                break;
            }
            if runs {
                self.run_add(buf, pos, nxt);
            }
            open.unit.events += 1;
            open.unit.end = nxt;
            open.unit.last = pos;
            open.unit.flags &= !F_ROTATE_END;
            taken += 1;
            pos = nxt;
            if t == XID {
                return (pos, taken, true);
            }
        }
        (pos, taken, false)
    }

    fn emit(&mut self, open: Open, complete: bool, out: &mut ScanOut) {
        let mut unit = open.unit;
        if complete {
            unit.flags |= F_COMPLETE;
        }
        if complete && open.fast == Fast::Body && !open.annotation {
            unit.flags |= F_FAST;
            unit.tables_lo = out.tables.len() as u32;
            out.tables.extend_from_slice(&self.tables);
            unit.tables_hi = out.tables.len() as u32;
        }
        out.units.push(unit);
    }

    #[allow(clippy::too_many_arguments)]
    fn group(
        &mut self,
        buf: &[u8],
        pos: usize,
        nxt: usize,
        t: u8,
        fmt: &Format,
        cur: &mut Option<Open>,
        out: &mut ScanOut,
        unknown: bool,
        fmt_before: Option<Option<Arc<Format>>>,
    ) -> Result<(), ScanError> {
        let size = nxt - pos;
        let flags_hdr = u16_at(buf, pos + 17).unwrap_or(0);
        let real_rotate = t == ROTATE && flags_hdr & LOG_EVENT_ARTIFICIAL_F == 0;
        let extra = if unknown { F_UNKNOWN_NON_IGNORABLE } else { 0 };

        if is_gtid(t) {
            if let Some(open) = cur.take() {
                self.emit(open, false, out); // the previous group never ended (crash, truncation)
            }
            let mut unit = Unit {
                start: pos,
                end: nxt,
                events: 1,
                kind: TRANSACTION,
                last: pos,
                gtid_size: size as u32,
                ..Default::default()
            };
            let mut standalone = false;
            let mut fast = Fast::No;
            let fast_ok = fmt.fast;
            match t {
                MARIADB_GTID => {
                    // server_id in the header; seq_no u64, domain u32, flags2 u8 in the body.
                    let body = pos + HEADER_LEN;
                    let seq = u64_at(buf, body).ok_or_else(|| short(t, pos))?;
                    let domain = u32_at(buf, body + 8).ok_or_else(|| short(t, pos))?;
                    let flags2 = *buf
                        .get(body + 12)
                        .filter(|_| body + 13 <= nxt)
                        .ok_or_else(|| short(t, pos))?;
                    unit.gtid_seq = seq;
                    unit.gtid_domain = domain;
                    unit.gtid_server = u32_at(buf, pos + 5).unwrap_or(0);
                    unit.flags |= F_MARIADB_GTID;
                    standalone = flags2 & MARIADB_FL_STANDALONE != 0;
                    if standalone {
                        unit.flags |= F_STANDALONE;
                    } else if fast_ok {
                        fast = Fast::Body;
                    }
                }
                GTID => {
                    // flags u8, source uuid [16], gno i64
                    if nxt < pos + HEADER_LEN + 25 {
                        return Err(short(t, pos));
                    }
                    unit.gtid_seq = u64_at(buf, pos + HEADER_LEN + 17).unwrap_or(0);
                    unit.flags |= F_MYSQL_GTID;
                    if fast_ok {
                        fast = Fast::AwaitBegin;
                    }
                }
                GTID_TAGGED => {
                    unit.flags |= F_TAGGED_GTID;
                    if fast_ok {
                        fast = Fast::AwaitBegin;
                    }
                }
                _ => {
                    unit.flags |= F_ANONYMOUS_GTID;
                    if fast_ok {
                        fast = Fast::AwaitBegin;
                    }
                }
            }
            unit.flags |= extra;
            self.ids.clear();
            self.tables.clear();
            *cur = Some(Open {
                unit,
                // A MariaDB GTID replaces BEGIN: unless standalone, the statements that follow
                // are inside the group until XID or COMMIT.
                in_body: t == MARIADB_GTID && !standalone,
                standalone,
                has_gtid: true,
                fast,
                annotation: false,
                fmt_before: None,
            });
            return Ok(());
        }

        if is_control(t) {
            if let Some(open) = cur.as_mut() {
                // Relay logs may carry a Rotate/FDE inside a transaction: keep order, keep it in.
                open.unit.events += 1;
                open.unit.end = nxt;
                open.unit.last = pos;
                open.fast = Fast::No;
                open.unit.flags |= extra;
                if t == FORMAT_DESCRIPTION {
                    open.unit.flags |= F_HAS_FDE;
                    if open.fmt_before.is_none() {
                        open.fmt_before = fmt_before;
                    }
                }
                if real_rotate {
                    open.unit.flags |= F_ROTATE_END;
                } else {
                    open.unit.flags &= !F_ROTATE_END;
                }
                return Ok(());
            }
            let mut flags = F_COMPLETE | extra;
            if t == FORMAT_DESCRIPTION {
                flags |= F_HAS_FDE;
            }
            if real_rotate {
                flags |= F_ROTATE_END;
            }
            out.units.push(Unit {
                start: pos,
                end: nxt,
                events: 1,
                kind: CONTROL,
                flags,
                last: pos,
                ..Default::default()
            });
            return Ok(());
        }

        let open = cur.get_or_insert_with(|| Open {
            unit: Unit {
                start: pos,
                end: pos,
                events: 0,
                kind: STATEMENT,
                last: pos,
                ..Default::default()
            },
            in_body: false,
            standalone: false,
            has_gtid: false,
            fast: Fast::No,
            annotation: false,
            fmt_before: None,
        });
        open.unit.events += 1;
        open.unit.end = nxt;
        open.unit.last = pos;
        open.unit.flags |= extra;
        open.unit.flags &= !F_ROTATE_END;
        let crc_len = fmt.checksum_len;

        // The fast shape (SegmentReader's): only what a decision needs is looked at.
        match open.fast {
            Fast::No => {}
            Fast::AwaitBegin => {
                open.fast = if t == QUERY && is_begin_event(buf, pos, nxt, fmt) {
                    Fast::Body
                } else {
                    Fast::No
                };
            }
            Fast::Body => {
                if is_rows(t) {
                    let id = buf.get(pos + 19..pos + 25);
                    let declared = id.is_some_and(|id| self.ids.iter().any(|x| x[..] == *id));
                    if open.annotation || !declared {
                        open.fast = Fast::No; // rows of a Table_map outside this unit
                    }
                } else if t == TABLE_MAP {
                    let post = fmt.post_header_len(TABLE_MAP) as usize;
                    match self.table_map_name(buf, pos, nxt, post, crc_len) {
                        Some(id) => {
                            let mut tid = [0u8; 6];
                            tid.copy_from_slice(&buf[pos + 19..pos + 25]);
                            self.ids.push(tid);
                            self.tables.push(id);
                            open.annotation = false;
                        }
                        None => open.fast = Fast::No,
                    }
                } else if t == ANNOTATE_ROWS || t == ROWS_QUERY {
                    open.annotation = true;
                } else if t != XID {
                    open.fast = Fast::No;
                }
            }
        }

        let finish = if t == XID || t == XA_PREPARE || t == TRANSACTION_PAYLOAD {
            if t == TRANSACTION_PAYLOAD {
                open.unit.flags |= F_PAYLOAD;
            }
            true
        } else if is_query(t) {
            let sql = query_sql(buf, pos, nxt, t, fmt)?;
            if !open.in_body && is_begin(&sql) {
                open.in_body = true;
                open.unit.kind = TRANSACTION;
                false
            } else {
                // A statement outside BEGIN ... COMMIT (MySQL DDL after its GTID, MariaDB
                // FL_STANDALONE, a pre-GTID autocommit statement) ends the unit.
                !open.in_body || is_end(&sql)
            }
        } else if is_rows(t) && !open.in_body && !open.standalone && !open.has_gtid {
            // Rows outside any BEGIN (old non-transactional RBR) end at STMT_END_F.
            let at = pos + HEADER_LEN + fmt.table_id_len(t);
            at + 2 <= nxt && u16_at(buf, at).is_some_and(|f| f & STMT_END_F != 0)
        } else {
            false
        };
        if finish {
            if let Some(done) = cur.take() {
                self.emit(done, true, out);
            }
        }
        Ok(())
    }
}

fn short(t: u8, pos: usize) -> ScanError {
    ScanError::binlog(format!("{} event too short", type_name(t)), pos as u64)
}

fn fmt_error(e: FormatError, offset: u64) -> ScanError {
    ScanError::binlog(e.0, offset)
}

/// The default database and SQL text (ranges of `raw`, CRC excluded) of the plain QUERY event at
/// raw[q..], which runs to the end of `raw` (the one event after a unit's GTID): what
/// `codec.event.query_text` reads. None for another type or lengths that do not add up.
/// The QUERY post-header: thread_id u32, exec_time u32, db_len u8, error_code u16,
/// status_vars_len u16 (13 bytes), then the status variables, the db, a NUL, the SQL.
pub fn query_ranges(
    raw: &[u8],
    q: usize,
    query_post: usize,
    crc_len: usize,
) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    if *raw.get(q + 4)? != QUERY || q + HEADER_LEN + 13 > raw.len() {
        return None;
    }
    let db_len = raw[q + HEADER_LEN + 8] as usize;
    let status_len = u16_at(raw, q + HEADER_LEN + 11)? as usize;
    let db_start = q + HEADER_LEN + query_post + status_len;
    let stop = raw.len().checked_sub(crc_len)?;
    if db_start + db_len + 1 > stop {
        return None;
    }
    Some((db_start..db_start + db_len, db_start + db_len + 1..stop))
}

/// The SQL text of a Query (or Query_compressed, Execute_load_query) event, decompressed.
pub fn query_sql<'a>(
    buf: &'a [u8],
    pos: usize,
    nxt: usize,
    t: u8,
    fmt: &Format,
) -> Result<std::borrow::Cow<'a, [u8]>, ScanError> {
    let end = nxt.saturating_sub(fmt.checksum_len);
    let (Some(db_len), Some(status_len)) = (buf.get(pos + 27), u16_at(buf, pos + 30)) else {
        return Ok(std::borrow::Cow::Borrowed(&[]));
    };
    let sql_at = pos
        + HEADER_LEN
        + fmt.post_header_len(t) as usize
        + status_len as usize
        + *db_len as usize
        + 1;
    if sql_at >= end || pos + 32 > nxt {
        return Ok(std::borrow::Cow::Borrowed(&[]));
    }
    let sql = &buf[sql_at..end];
    if t == QUERY_COMPRESSED {
        return mariadb_uncompress(sql)
            .map(std::borrow::Cow::Owned)
            .map_err(|m| ScanError::binlog(format!("Query_compressed event: {m}"), pos as u64));
    }
    Ok(std::borrow::Cow::Borrowed(sql))
}

/// MariaDB's compressed field: a header byte (0x80 | length bytes), the big-endian length, zlib.
pub fn mariadb_uncompress(buf: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let Some(&header) = buf.first() else {
        return Err("empty compressed field".into());
    };
    let n = (header & 7) as usize;
    if header & 0x80 == 0 || !(1..=4).contains(&n) {
        return Err(format!("bad MariaDB compression header 0x{header:02x}"));
    }
    if (header >> 4) & 7 != 0 {
        return Err(format!(
            "unknown MariaDB compression algorithm {}",
            (header >> 4) & 7
        ));
    }
    let Some(len_bytes) = buf.get(1..1 + n) else {
        return Err("compressed field too short".into());
    };
    let expected = len_bytes.iter().fold(0usize, |a, b| a << 8 | *b as usize);
    // Never trust the header for the allocation: read at most expected + 1 bytes.
    let mut out = Vec::with_capacity(expected.min(1 << 20));
    let mut dec = flate2::read::ZlibDecoder::new(&buf[1 + n..]).take(expected as u64 + 1);
    dec.read_to_end(&mut out)
        .map_err(|e| format!("does not decompress: {e}"))?;
    if out.len() != expected {
        return Err(format!(
            "compressed field holds {} bytes, header says {expected}",
            out.len()
        ));
    }
    Ok(out)
}

/// Whether the event is a plain `BEGIN` Query, read from the raw bytes: what opens a MySQL
/// transaction (the sql text is exactly `BEGIN`).
pub fn is_begin_event(buf: &[u8], pos: usize, nxt: usize, fmt: &Format) -> bool {
    let (Some(db_len), Some(status_len)) = (buf.get(pos + 27), u16_at(buf, pos + 30)) else {
        return false;
    };
    let sql_at = pos
        + HEADER_LEN
        + fmt.post_header_len(QUERY) as usize
        + status_len as usize
        + *db_len as usize
        + 1;
    sql_at + 5 + fmt.checksum_len == nxt && buf.get(sql_at..sql_at + 5) == Some(b"BEGIN")
}

#[inline]
fn is_space(b: u8) -> bool {
    // Python's str.isspace() over ASCII: what statement_verb() and str.split() skip.
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x1c..=0x1f)
}

/// The statement's first keyword, skipping leading blanks and /* comments */ (statement_verb).
pub fn statement_verb(sql: &[u8]) -> &[u8] {
    let mut s = sql;
    loop {
        while let Some((&b, rest)) = s.split_first() {
            if !is_space(b) {
                break;
            }
            s = rest;
        }
        if s.starts_with(b"/*") {
            match s.windows(2).skip(2).position(|w| w == b"*/") {
                Some(i) => s = &s[i + 4..],
                None => return &[],
            }
        } else {
            break;
        }
    }
    // Letters as Python's str.isalpha() sees the text decoded with surrogateescape: a valid UTF-8
    // letter continues the word, a byte that does not decode (a surrogate there) ends it.
    let mut end = 0;
    while end < s.len() {
        let b = s[end];
        if b.is_ascii_alphabetic() || b == b'_' {
            end += 1;
            continue;
        }
        if b < 0x80 {
            break;
        }
        let len = match b {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => break,
        };
        match s
            .get(end..end + len)
            .and_then(|c| std::str::from_utf8(c).ok())
            .and_then(|c| c.chars().next())
        {
            Some(c) if c.is_alphabetic() => end += len,
            _ => break,
        }
    }
    &s[..end]
}

/// The second whitespace-separated token of the text (str.split()[1]), if any.
fn second_token(sql: &[u8]) -> Option<&[u8]> {
    sql.split(|b| is_space(*b)).filter(|t| !t.is_empty()).nth(1)
}

pub fn is_begin(sql: &[u8]) -> bool {
    let verb = statement_verb(sql);
    if verb.eq_ignore_ascii_case(b"BEGIN") {
        return true;
    }
    verb.eq_ignore_ascii_case(b"XA")
        && second_token(sql).is_some_and(|t| t.eq_ignore_ascii_case(b"START"))
}

pub fn is_end(sql: &[u8]) -> bool {
    let verb = statement_verb(sql);
    if verb.eq_ignore_ascii_case(b"COMMIT") || verb.eq_ignore_ascii_case(b"ROLLBACK") {
        // "ROLLBACK TO SAVEPOINT" stays inside the transaction.
        return !second_token(sql).is_some_and(|t| t.eq_ignore_ascii_case(b"TO"));
    }
    verb.eq_ignore_ascii_case(b"XA")
        && second_token(sql).is_some_and(|t| t.eq_ignore_ascii_case(b"PREPARE"))
}

/// `rules.statements.plain_statement` for ASCII text: whether the statement is certainly none of
/// CREATE/ALTER/DROP DATABASE or SCHEMA, a transaction statement, a multi-table UPDATE, judged
/// from its first keyword (and for CREATE/ALTER/DROP, no DATABASE or SCHEMA word anywhere).
/// None for text with any non-ASCII byte: Python's Unicode rules bite there (`"ſ".upper()` is
/// "S", IGNORECASE matches "ſchema", `\b` knows Unicode letters), so Python answers it.
pub fn plain_statement(sql: &[u8]) -> Option<bool> {
    if !sql.is_ascii() {
        return None;
    }
    // A leading comment: left to Python, whose reading of one (str.find from the comment's
    // first byte, so "/*/" closes it) the core's statement_verb does not copy.
    let start = sql.iter().position(|b| !is_space(*b)).unwrap_or(sql.len());
    if sql[start..].starts_with(b"/*") {
        return None;
    }
    let verb = statement_verb(sql);
    let is = |w: &[u8]| verb.eq_ignore_ascii_case(w);
    if is(b"CREATE") || is(b"ALTER") || is(b"DROP") {
        return Some(!has_database_word(sql));
    }
    // No plain first keyword; may open a multi-table UPDATE or a transaction; transaction words.
    const NOT_PLAIN: [&[u8]; 10] = [
        b"",
        b"UPDATE",
        b"WITH",
        b"START",
        b"BEGIN",
        b"COMMIT",
        b"ROLLBACK",
        b"SAVEPOINT",
        b"RELEASE",
        b"XA",
    ];
    Some(!NOT_PLAIN.iter().any(|w| is(w)))
}

/// `\b(?:DATABASE|SCHEMA)\b`, case-insensitive, over ASCII text.
fn has_database_word(sql: &[u8]) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < sql.len() {
        if word(sql[i]) {
            let start = i;
            while i < sql.len() && word(sql[i]) {
                i += 1;
            }
            let w = &sql[start..i];
            if w.eq_ignore_ascii_case(b"DATABASE") || w.eq_ignore_ascii_case(b"SCHEMA") {
                return true;
            }
        } else {
            i += 1;
        }
    }
    false
}

/// Decompresses a MySQL Transaction_payload event's body (the fields are lenenc-encoded, then
/// the zstd frame) into the inner events' bytes. `max_out` bounds the allocation.
pub fn payload_bytes(body: &[u8], max_out: usize) -> Result<Vec<u8>, String> {
    let mut i = 0;
    let mut compression = 255u64;
    let mut uncompressed = 0u64;
    while i < body.len() {
        let field = body[i];
        i += 1;
        if field == 0 {
            break;
        }
        let (len, at) = read_lenenc(body, i).ok_or("Transaction_payload header is truncated")?;
        let (value, _) = read_lenenc(body, at).ok_or("Transaction_payload header is truncated")?;
        i = at
            .checked_add(len as usize)
            .ok_or("Transaction_payload field length overflows")?;
        match field {
            2 => compression = value,
            3 => uncompressed = value,
            _ => {}
        }
    }
    let data = body.get(i..).unwrap_or(&[]);
    match compression {
        255 => Ok(data.to_vec()),
        0 => {
            let cap = (uncompressed as usize).min(max_out).max(1);
            let mut out = Vec::new();
            let mut dec =
                zstd::stream::read::Decoder::new(data).map_err(|e| format!("zstd: {e}"))?;
            use std::io::Read;
            (&mut dec)
                .take(cap as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("Transaction_payload does not decompress: {e}"))?;
            if out.len() > cap {
                return Err(format!("Transaction_payload holds more than {cap} bytes"));
            }
            Ok(out)
        }
        other => Err(format!(
            "unknown Transaction_payload compression type {other}"
        )),
    }
}

fn read_lenenc(buf: &[u8], i: usize) -> Option<(u64, usize)> {
    let first = *buf.get(i)?;
    match first {
        0..=250 => Some((first as u64, i + 1)),
        252 => Some((u16_at(buf, i + 1)? as u64, i + 3)),
        253 => {
            let b = buf.get(i + 1..i + 4)?;
            Some((
                b[0] as u64 | (b[1] as u64) << 8 | (b[2] as u64) << 16,
                i + 4,
            ))
        }
        254 => Some((u64_at(buf, i + 1)?, i + 9)),
        _ => None,
    }
}

/// The statements of a fast unit's body buf[body..end) (the events after its GTID, and after
/// BEGIN for MySQL; its XID last): (end offset, events, Table_maps so far) per statement ended
/// by STMT_END_F. None when the body does not cut into whole statements each with its own
/// Table_maps (rows of an earlier statement's Table_map, a statement left open, a malformed
/// event): the caller then takes the reference path.
pub fn statements(buf: &[u8], body: usize, end: usize) -> Option<Vec<(usize, u32, u32)>> {
    let end = end.min(buf.len());
    let mut out = Vec::new();
    let (mut n, mut sn, mut tables) = (0u32, 0u32, 0u32);
    let mut ids: Vec<&[u8]> = Vec::new();
    let mut whole = true;
    let mut at = body;
    while at + HEADER_LEN <= end {
        let t = buf[at + 4];
        let size = u32_at(buf, at + 9)? as usize;
        let nxt = at
            .checked_add(size)
            .filter(|n| *n <= end && size >= HEADER_LEN)?;
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
                out.push((nxt, n - sn, tables));
                sn = n;
                ids.clear();
            }
        }
        at = nxt;
    }
    None
}

/// The benchmarks' baseline: a bare header hop over buf[off..] (no CRC, no grouping, no
/// checks beyond bounds). Returns (events, stop).
pub fn hop(buf: &[u8], off: usize) -> (u64, usize) {
    let (mut n, mut at) = (0u64, off);
    while at + HEADER_LEN <= buf.len() {
        let size = u32_at(buf, at + 9).unwrap_or(0) as usize;
        if size < HEADER_LEN || at + size > buf.len() {
            break;
        }
        n += 1;
        at += size;
    }
    (n, at)
}

/// Whether an event of buf[off..] carries a log_pos that is neither 0 nor its own end offset:
/// another server's coordinates, as a relay log copies them (a server's own binlog has log_pos =
/// the event's end, or 0 for artificial and MariaDB 11.4+ in-group events). Stops at the first
/// partial or impossible event.
pub fn foreign_log_pos(buf: &[u8], off: usize) -> bool {
    let mut at = off;
    while at + HEADER_LEN <= buf.len() {
        let size = u32_at(buf, at + 9).unwrap_or(0) as usize;
        if size < HEADER_LEN || at + size > buf.len() {
            break;
        }
        let log_pos = u32_at(buf, at + 13).unwrap_or(0) as usize;
        if log_pos != 0 && log_pos != at + size {
            return true;
        }
        at += size;
    }
    false
}
