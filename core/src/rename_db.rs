//! replicate-rewrite-db written into events, the one writer of renamed names (issue #80): the
//! compiled relay run's and `filter`'s assembly's units (`Renamer`, for the names a map gives),
//! and every event Python renames (`rename_event`: `dumpfilter.codec.rename`, for the
//! MySQL-protocol endpoint's replicas, the units the walks leave to Python, and WL#2516's REWRITE
//! patterns, which rename a Table_map's table too). As a replica's applier renames (log_event.cc's
//! set_thd_db, Table_map_log_event::do_apply_event): a Query's (compressed or not: only its text
//! is compressed) or an Execute_load_query's default database and a Table_map's database, never a
//! name inside a statement's text. The event's size changes with the name; its log_pos stays the
//! master's and its CRC32 is made again. A name the map does not hold stops a unit's run there:
//! Python renames that unit and teaches the map its names (`dumpfilter.slave.receive`).
//!
//! A unit is renamed in two steps, so that its bytes are written once, straight where they go
//! (the relay run's bytes handed to Python): `Renamer::unit` reads its events' names and notes
//! each event to rename (an `Edit`, no bytes copied), `write` copies a stretch of units with
//! their edits made.

use std::collections::HashMap;

use crate::hops::events;
use crate::le::u32_at;
use crate::types::{EXECUTE_LOAD_QUERY, HEADER_LEN, QUERY, QUERY_COMPRESSED, TABLE_MAP};

/// The renames of one slave's rules over the names met so far, and the format to read them with.
#[derive(Debug, Default)]
pub struct DbRenames {
    /// The master's database name -> the one the replica applies (itself where no rule renames).
    pub map: HashMap<Vec<u8>, Vec<u8>>,
    /// Post-header lengths of QUERY, EXECUTE_LOAD_QUERY and TABLE_MAP, and the checksum length.
    pub query_post: usize,
    pub load_post: usize,
    pub table_map_post: usize,
    pub crc_len: usize,
}

/// Why a unit cannot be renamed here: a name the map does not hold, or an event it cannot read.
#[derive(Debug, PartialEq, Eq)]
pub struct Declined;

/// One event to write renamed: the event buf[at..end], its database name from `lo` written as
/// `db` (its length byte at `at + len_at`) and, a Table_map's, its table as `table` (its NUL and
/// length too), the rest of the event from `rest` on as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edit<'r> {
    pub at: usize,
    pub end: usize,
    pub len_at: usize,
    pub lo: usize,
    pub rest: usize,
    pub db: &'r [u8],
    pub table: Option<&'r [u8]>,
}

impl Edit<'_> {
    /// What the event's size changes by.
    pub fn grows(&self) -> isize {
        let table = self.table.map_or(0, |t| t.len() as isize + 2);
        self.db.len() as isize + table - (self.rest - self.lo) as isize
    }
}

/// Where an event's database name lies in it: (its length byte, its range), or None where it
/// has none.
fn db_span(event: &[u8], r: &DbRenames) -> Result<Option<(usize, usize, usize)>, Declined> {
    let body = HEADER_LEN;
    let (len_at, lo) = match *event.get(4).ok_or(Declined)? {
        kind @ (QUERY | QUERY_COMPRESSED | EXECUTE_LOAD_QUERY) => {
            let post = event.get(body..body + 13).ok_or(Declined)?;
            if post[8] == 0 {
                return Ok(None);
            }
            let status = u16::from_le_bytes([post[11], post[12]]) as usize;
            let post = if kind == EXECUTE_LOAD_QUERY {
                r.load_post
            } else {
                r.query_post
            };
            (body + 8, body + post + status)
        }
        TABLE_MAP => (body + r.table_map_post, body + r.table_map_post + 1),
        _ => return Ok(None),
    };
    let hi = lo + *event.get(len_at).ok_or(Declined)? as usize;
    if hi + r.crc_len > event.len() {
        return Err(Declined);
    }
    Ok(Some((len_at, lo, hi)))
}

/// Copies buf[lo..hi] (whole events) to the start of `out` with `edits` (theirs, in order) made,
/// each edited event's size, name length and CRC32 written again: the bytes written (hi - lo
/// and what the edits grow by). The edits' names fit a byte (`Renamer::name`).
pub fn write(
    buf: &[u8],
    (lo, hi): (usize, usize),
    edits: &[Edit],
    crc_len: usize,
    out: &mut [u8],
) -> usize {
    fn put(out: &mut [u8], w: &mut usize, bytes: &[u8]) {
        out[*w..*w + bytes.len()].copy_from_slice(bytes);
        *w += bytes.len();
    }
    let crc = crc32fast::Hasher::new(); // (cloned for each event: no CPU check per event)
    let (mut from, mut w) = (lo, 0);
    for e in edits {
        let e0 = w + (e.at - from);
        put(out, &mut w, &buf[from..e.lo]);
        put(out, &mut w, e.db);
        if let Some(table) = e.table {
            put(out, &mut w, &[0, table.len() as u8]);
            put(out, &mut w, table);
        }
        put(out, &mut w, &buf[e.rest..e.end - crc_len]);
        out[e0 + e.len_at] = e.db.len() as u8;
        out[e0 + 9..e0 + 13].copy_from_slice(&((w - e0 + crc_len) as u32).to_le_bytes());
        if crc_len == 4 {
            let mut h = crc.clone();
            h.update(&out[e0..w]);
            put(out, &mut w, &h.finalize().to_le_bytes());
        }
        from = e.end;
    }
    put(out, &mut w, &buf[from..hi]);
    w
}

/// One event (`post`: its kind's post-header length) with its database renamed `db` and, a
/// Table_map's, its table `table` (None: kept); None where it names no database or a name is
/// longer than a server writes (255 bytes), Err where it cannot be read.
pub fn rename_event(
    event: &[u8],
    db: &[u8],
    table: Option<&[u8]>,
    post: usize,
    crc_len: usize,
) -> Result<Option<Vec<u8>>, Declined> {
    if event.len() < HEADER_LEN + crc_len || u32_at(event, 9) != Some(event.len() as u32) {
        return Err(Declined);
    }
    let r = DbRenames {
        query_post: post,
        load_post: post,
        table_map_post: post,
        crc_len,
        ..DbRenames::default()
    };
    let Some((len_at, lo, hi)) = db_span(event, &r)? else {
        return Ok(None);
    };
    if db.len() > 255 || table.is_some_and(|t| t.len() > 255) {
        return Ok(None);
    }
    let table = table.filter(|_| event[4] == TABLE_MAP);
    // (a Table_map's table renamed: its NUL, its length and its name written again)
    let rest = match table {
        None => hi,
        Some(_) => hi + 2 + *event.get(hi + 1).ok_or(Declined)? as usize,
    };
    if rest + crc_len > event.len() {
        return Err(Declined);
    }
    let edit = Edit {
        at: 0,
        end: event.len(),
        len_at,
        lo,
        rest,
        db,
        table,
    };
    let mut out = vec![0; (event.len() as isize + edit.grows()) as usize];
    write(event, (0, event.len()), &[edit], crc_len, &mut out);
    Ok(Some(out))
}

/// The names of the units a walk renames (`r.map`), read unit by unit into `edits`.
pub struct Renamer<'r> {
    r: &'r DbRenames,
    /// The last name looked up and what it gave (most events name the one before's database).
    last: Option<(&'r [u8], Option<&'r [u8]>)>,
    /// The events to write renamed, in order.
    pub edits: Vec<Edit<'r>>,
}

impl<'r> Renamer<'r> {
    pub fn new(r: &'r DbRenames) -> Self {
        Renamer {
            r,
            last: None,
            edits: Vec::new(),
        }
    }

    /// The name `r.map` gives `name`, where it renames it (None where it is kept, or the new one
    /// is longer than a server writes); Err where the map lacks it.
    fn name(&mut self, name: &[u8]) -> Result<Option<&'r [u8]>, Declined> {
        if let Some((_, new)) = self
            .last
            .filter(|(old, _)| old.len() == name.len() && *old == name)
        {
            return Ok(new);
        }
        let (old, new) = self.r.map.get_key_value(name).ok_or(Declined)?;
        let new = (new != old && new.len() <= 255).then_some(new.as_slice());
        self.last = Some((old.as_slice(), new));
        Ok(new)
    }

    /// Notes the edits of the unit buf[lo..hi] (its events back to back), one per event it
    /// renames; Err (no edit noted) where a name is not in the map or an event cannot be read.
    pub fn unit(&mut self, buf: &[u8], (lo, hi): (usize, usize)) -> Result<(), Declined> {
        let before = self.edits.len();
        let done = self.read(buf, lo, hi);
        if done.is_err() {
            self.edits.truncate(before);
        }
        done
    }

    fn read(&mut self, buf: &[u8], lo: usize, hi: usize) -> Result<(), Declined> {
        let unit = buf.get(..hi).ok_or(Declined)?;
        let mut walk = events(unit, lo, hi);
        for (at, size) in walk.by_ref() {
            if matches!(
                unit[at + 4],
                QUERY | QUERY_COMPRESSED | EXECUTE_LOAD_QUERY | TABLE_MAP
            ) {
                let event = &unit[at..at + size];
                if let Some((len_at, a, b)) = db_span(event, self.r)? {
                    if let Some(db) = self.name(&event[a..b])? {
                        self.edits.push(Edit {
                            at,
                            end: at + size,
                            len_at,
                            lo: at + a,
                            rest: at + b,
                            db,
                            table: None,
                        });
                    }
                }
            }
        }
        if walk.at < hi {
            return Err(Declined); // an event cut short or overrunning the unit
        }
        Ok(())
    }

    /// buf[lo..hi] written with the edits noted (those of the units in it), in bytes of its own.
    pub fn made(&self, buf: &[u8], (lo, hi): (usize, usize)) -> Vec<u8> {
        let grows: isize = self.edits.iter().map(Edit::grows).sum();
        let mut out = vec![0; (hi - lo).saturating_add_signed(grows)];
        write(buf, (lo, hi), &self.edits, self.r.crc_len, &mut out);
        out
    }
}

#[cfg(test)]
#[path = "rename_db_tests.rs"]
mod tests;
