//! The slave's relay run: what `slave.node.Slave._receive` writes of a checked DumpBatch
//! without an Event per unit. From a unit index on, the lone Heartbeats (the master's marks for
//! skipped stretches: counted, never relayed) are passed over, stretches of skipped units
//! (`stretch`) relayed as the units they hold, the placeholder policy's units for
//! skipped ones relayed as their framing, its row units kept in part without their
//! placeholders (`holed_unit`), and the units the slave's own rules keep whole are
//! copied as they came: fast units by their tables, lone statements (a MariaDB GTID and one plain
//! QUERY: DDL, standalone groups, the empty-transaction policy's emptied units), whose texts go
//! back for the slave's own check (framing words need none), and statement units (a MIXED or
//! STATEMENT stream's transactions: a GTID, Queries with their context, an XID) whose every
//! statement the slave's rules keep by its key (`stmt_units::ByKeys`, the keys answered up front
//! in Python, once each: `rules.keep_table`). The run ends at the first unit that needs Python
//! (an FDE, a Rotate or another control event, a unit not kept whole: a statement its rules drop
//! is a disagreement the slave's check reports).

use std::ops::Range;

use crate::hops;
use crate::le::u32_at;
use crate::rename_db::{write, DbRenames, Edit, Renamer};
use crate::scan::{Unit, CONTROL, F_COMPLETE, F_FAST, F_HOLES, F_MARIADB_GTID, F_PLACEHOLDERS};
use crate::scan::{
    F_ANONYMOUS_GTID, F_HAS_FDE, F_MYSQL_GTID, F_PAYLOAD, F_STANDALONE, F_TAGGED_GTID,
};
use crate::skip_forms::{empty, empty_transactions, is_placeholder, made_query_len};
use crate::sql::query_ranges;
use crate::stmt::framing;
use crate::stmt_units::ByKeys;
use crate::stretch::inner;
use crate::types::{COMMIT_BODY, HEADER_LEN, HEARTBEAT, HEARTBEAT_V2, MARIADB_GTID, XID};
use crate::unit_cut::answer;

/// A piece of a relay run's output: a range of the buffer (the units' bytes as they came, no
/// renumbering: a relay log keeps the master's coordinates; under replicate-rewrite-db, with the
/// run's `edits` in it made), or a range of the run's own bytes
/// (`RelayRun::own`: a MySQL placeholder unit's events, its GTID's transaction_length counted
/// again).
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    Range(usize, usize),
    Made(usize, usize),
    /// An empty-transaction stretch's GTIDs (a range of the buffer), each written with the COMMIT
    /// that closes it (`skip_forms::empty_transactions`) straight into the bytes handed to Python.
    Empty {
        lo: usize,
        hi: usize,
        len: usize,
        crc: bool,
    },
}

/// A relay run before its bytes are copied (`fill` copies them, straight into the bytes object
/// handed to Python).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RelayRun<'r> {
    /// What to write, in order (kept units that lie back to back make one range).
    pub ranges: Vec<Piece>,
    /// The bytes made here (`Piece::Made`), one buffer for the run.
    pub own: Vec<u8>,
    /// The first unit not handled.
    pub next: usize,
    /// Units relayed (heartbeats not counted), their events and their bytes.
    pub units: u64,
    pub events: u64,
    pub bytes: u64,
    /// Lone Heartbeat units passed over.
    pub heartbeats: u64,
    /// Placeholders dropped from the units relayed (`placeholder_unit`).
    pub placeholders: u64,
    /// The lone statements copied whose text the slave's check reads (not framing words): the
    /// unit's index and its (default database, SQL) ranges in the buffer.
    pub lone: Vec<(usize, Range<usize>, Range<usize>)>,
    /// Each event whose database a rewrite-db rule renames (`rename_db`), in order, renamed as
    /// `fill` copies the ranges, and the checksum length to make them with.
    pub edits: Vec<Edit<'r>>,
    pub crc_len: usize,
}

/// The format a run reads lone statements with: its QUERY post-header length and checksum length.
#[derive(Debug, Clone, Copy)]
pub struct LoneFormat {
    pub query_post: usize,
    pub crc_len: usize,
}

impl LoneFormat {
    /// Whether `event` is framing: an XID, or a Query whose text is (`stmt::framing`).
    fn frames(&self, event: &[u8]) -> bool {
        event[4] == XID
            || query_ranges(event, 0, self.query_post, self.crc_len)
                .is_some_and(|(_, sql)| framing(&event[sql]))
    }
}

/// A lone statement: a complete unit of two events, a GTID (MariaDB's, MySQL's or an
/// Anonymous_GTID, as long as a MariaDB GTID with a checksum at least) and a plain QUERY whose
/// lengths add up (DDL); its text ranges in `buf`. The slave's Python loop takes the same units
/// (`Slave._receive`, `codec.event.query_text`).
pub fn lone_statement(buf: &[u8], u: &Unit, f: LoneFormat) -> Option<(Range<usize>, Range<usize>)> {
    if u.events != 2
        || u.flags & F_COMPLETE == 0
        || u.flags & ANY_GTID == 0
        || (u.gtid_size as usize) < HEADER_LEN + 13 + f.crc_len
    {
        return None;
    }
    let raw = buf.get(u.start..u.end)?;
    let (db, sql) = query_ranges(raw, u.gtid_size as usize, f.query_post, f.crc_len)?;
    Some((
        u.start + db.start..u.start + db.end,
        u.start + sql.start..u.start + sql.end,
    ))
}

impl RelayRun<'_> {
    /// Copies the pieces (ranges of `buf`, with their edits made) into `out`, which holds
    /// exactly `self.bytes` bytes.
    pub fn fill(&self, buf: &[u8], out: &mut [u8]) {
        let (mut at, mut edits) = (0, &self.edits[..]);
        for piece in &self.ranges {
            let src = match *piece {
                Piece::Range(lo, hi) => {
                    let (mine, rest) = edits.split_at(edits.partition_point(|e| e.at < hi));
                    at += write(buf, (lo, hi), mine, self.crc_len, &mut out[at..]);
                    edits = rest;
                    continue;
                }
                Piece::Made(lo, hi) => &self.own[lo..hi],
                Piece::Empty { lo, hi, len, crc } => {
                    empty_transactions(&buf[lo..hi], crc, &mut out[at..at + len]);
                    at += len;
                    continue;
                }
            };
            out[at..at + src.len()].copy_from_slice(src);
            at += src.len();
        }
        debug_assert_eq!(
            at,
            out.len(),
            "a relay run's fill writes every byte it counted"
        );
    }

    /// Appends buf[lo..hi], joined to the last range where it follows it.
    fn push(&mut self, lo: usize, hi: usize) {
        match self.ranges.last_mut() {
            Some(Piece::Range(_, b)) if *b == lo => *b = hi,
            _ => self.ranges.push(Piece::Range(lo, hi)),
        }
        self.bytes += (hi - lo) as u64;
    }

    /// Appends what was made into `own` since `lo`, joined to the last piece made where it
    /// follows it.
    fn made(&mut self, lo: usize) {
        let hi = self.own.len();
        match self.ranges.last_mut() {
            Some(Piece::Made(_, b)) if *b == lo => *b = hi,
            _ => self.ranges.push(Piece::Made(lo, hi)),
        }
        self.bytes += (hi - lo) as u64;
    }

    /// Counts units relayed, their events and the placeholders they drop.
    fn took(&mut self, units: u64, events: u64, holes: u64) {
        self.units += units;
        self.events += events;
        self.placeholders += holes;
    }
}

/// Whether `u` is a lone Heartbeat: a control unit of one event whose type is a Heartbeat.
pub fn is_lone_heartbeat(buf: &[u8], u: &Unit) -> bool {
    u.kind == CONTROL
        && u.events == 1
        && matches!(buf.get(u.start + 4), Some(&HEARTBEAT) | Some(&HEARTBEAT_V2))
}

/// A placeholder unit's framing ranges in its buffer and the placeholders it drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaceholderUnit {
    pub gtid: (usize, usize),
    pub xid: (usize, usize),
    pub holes: u64,
}

/// A MariaDB unit the placeholder policy sent for a skipped one: its GTID, RAND placeholders
/// (server_id 0, LOG_EVENT_SKIP_REPLICATION_F: `skip_policy.is_placeholder`) and its XID. The
/// slave relays its framing without them (`Placeholder.relayed`): the GTID's and the XID's
/// ranges in `buf`, and the placeholders dropped. None for any other unit.
pub fn placeholder_unit(buf: &[u8], u: &Unit) -> Option<PlaceholderUnit> {
    const MARIADB: u32 = F_MARIADB_GTID | F_COMPLETE;
    if u.flags & MARIADB != MARIADB || u.kind == CONTROL || u.events < 3 {
        return None;
    }
    let raw = buf.get(u.start..u.end)?;
    let gtid = u32_at(raw, 9)? as usize;
    if *raw.get(4)? != MARIADB_GTID || gtid < HEADER_LEN {
        return None;
    }
    // Placeholders the scanner took (`F_PLACEHOLDERS`) need no second walk: 5.4 million of them
    // in the placeholder stream of the 500 MB sysbench ROW binlog, 20 ms of a slave's CPU read
    // again here (perf).
    let last = u.last.wrapping_sub(u.start);
    if u.flags & F_PLACEHOLDERS != 0 && gtid == u.gtid_size as usize && gtid < last {
        return (raw.get(last + 4) == Some(&XID)
            && u32_at(raw, last + 9)? as usize == raw.len() - last)
            .then_some(PlaceholderUnit {
                gtid: (u.start, u.start + gtid),
                xid: (u.last, u.end),
                holes: u64::from(u.events - 2),
            });
    }
    for (holes, (p, size)) in hops::events(raw, gtid, raw.len()).enumerate() {
        if p + size == raw.len() {
            return (*raw.get(p + 4)? == XID && holes > 0).then_some(PlaceholderUnit {
                gtid: (u.start, u.start + gtid),
                xid: (u.start + p, u.end),
                holes: holes as u64,
            });
        }
        if !is_placeholder(raw, p) {
            return None;
        }
    }
    None
}

/// A MariaDB DDL the placeholder policy sent for a skipped one: its GTID (FL_STANDALONE) and the
/// one placeholder standing for its statement, which nothing closes (the scanner's unit ends
/// where the next one starts; Python's grouper ends it at the placeholder). Relayed as
/// `Placeholder.relayed` writes it, the empty transaction of `skip_forms::empty` (the GTID
/// without FL_STANDALONE and FL_DDL, closed by a COMMIT), appended to `own`; false, nothing
/// written, for any other unit. Each went through the slave's per-event way: 11,906 of them in
/// the placeholder stream of the DDL-heavy 431 MB binlog, which ran at 0.30x the heartbeat's.
pub(crate) fn skipped_ddl(buf: &[u8], u: &Unit, crc_len: usize, own: &mut Vec<u8>) -> bool {
    const DDL: u32 = F_MARIADB_GTID | F_STANDALONE;
    let g = u.gtid_size as usize;
    let Some(raw) = buf
        .get(u.start..u.end)
        .filter(|raw| u.flags & DDL == DDL && u.kind != CONTROL && u.events == 2 && g < raw.len())
    else {
        return false;
    };
    raw.get(4) == Some(&MARIADB_GTID)
        && is_placeholder(raw, g)
        && u32_at(raw, g + 9) == Some((raw.len() - g) as u32)
        && empty(raw, g, crc_len != 0, None, Some(own)).is_some()
}

/// The GTIDs that open a unit of the master's (MariaDB's, MySQL's, Anonymous_GTID).
const ANY_GTID: u32 = F_MARIADB_GTID | F_MYSQL_GTID | F_ANONYMOUS_GTID;

/// A complete GTID unit whose events after its GTID are all framing (BEGIN, COMMIT, ...: the
/// slave's check keeps them whatever its rules) or an XID: the empty transaction the master sent
/// for a skipped MySQL unit (GTID, BEGIN, COMMIT or XID), relayed as it came, as Python's loop
/// relays it. (A MariaDB one, GTID and COMMIT, is a lone statement.)
fn framing_only(buf: &[u8], u: &Unit, f: LoneFormat) -> bool {
    const DECLINED: u32 = F_PAYLOAD | F_HAS_FDE;
    if u.flags & F_COMPLETE == 0
        || u.flags & ANY_GTID == 0
        || u.flags & DECLINED != 0
        || u.events < 2
    {
        return false;
    }
    let Some(raw) = buf.get(u.start..u.end) else {
        return false;
    };
    let mut walk = hops::events(raw, u.gtid_size as usize, raw.len());
    for (p, size) in walk.by_ref() {
        if !f.frames(&raw[p..p + size]) || is_placeholder(raw, p) {
            return false;
        }
    }
    walk.at == raw.len() && walk.at > u.gtid_size as usize
}

/// A MySQL unit the placeholder policy sent for a skipped one: its GTID, RAND placeholders, and
/// its framing (a BEGIN and an XID or COMMIT; a skipped DDL has none, and ends at the next unit). The slave relays it as
/// `Slave._without_placeholders` does (`skip_forms::relayed_placeholders`): without the
/// placeholders, its GTID's transaction_length counting what is left, a lone GTID as the empty
/// transaction a MySQL replica persists. The bytes, their events and the placeholders dropped;
/// None for any other unit (one that kept a statement goes to Python, whose check reads it).
fn mysql_placeholder_unit(
    buf: &[u8],
    u: &Unit,
    f: LoneFormat,
    own: &mut Vec<u8>,
) -> Option<(u64, u64)> {
    const DECLINED: u32 = F_TAGGED_GTID | F_PAYLOAD | F_HAS_FDE;
    if u.flags & (F_MYSQL_GTID | F_ANONYMOUS_GTID) == 0
        || u.flags & DECLINED != 0
        || u.kind == CONTROL
    {
        return None;
    }
    let raw = buf.get(u.start..u.end)?;
    let (mut walk, mut holes, mut events) = (
        hops::events(raw, u32_at(raw, 9)? as usize, raw.len()),
        0u64,
        1u64,
    );
    for (p, size) in walk.by_ref() {
        if is_placeholder(raw, p) {
            holes += 1;
        } else if f.frames(&raw[p..p + size]) {
            events += 1;
        } else {
            return None;
        }
    }
    // A skipped DDL's GTID and placeholder: no event ends it, so the scanner's unit is not
    // complete (it ends where the next GTID begins); Python's grouper takes it as a group.
    if walk.at != raw.len() || holes == 0 || (u.flags & F_COMPLETE == 0 && events > 1) {
        return None;
    }
    crate::skip_forms::relayed_placeholders(raw, f.crc_len != 0, own)?;
    Some((if events == 1 { 3 } else { events }, holes))
}

/// A unit the placeholder policy sent for one it keeps in part (`scan::F_HOLES`: the fast shape
/// with placeholders among its events), every table of which the slave's own rules keep
/// (`keep`, by the unit's Table_map name ids): relayed as `Slave._without_placeholders` relays
/// it, without the placeholders, a MySQL GTID's transaction_length counting what is left
/// (`skip_forms::relayed_placeholders`). Its pieces go to `plan`; false (nothing added) for any
/// other unit, or one with a table the slave's rules do not keep (its check reads it in Python).
fn holed_unit(
    buf: &[u8],
    u: &Unit,
    (tables, keep): (&[u32], &[u8]),
    crc: bool,
    plan: &mut RelayRun,
) -> bool {
    const DECLINED: u32 = F_TAGGED_GTID | F_PAYLOAD | F_HAS_FDE;
    if u.flags & F_HOLES == 0 || u.flags & DECLINED != 0 || u.flags & ANY_GTID == 0 {
        return false;
    }
    // (a unit of framing and placeholders alone names no table: see placeholder_unit)
    let kept = u.tables_hi > u.tables_lo && tables_kept(u, tables, keep);
    let Some(raw) = buf.get(u.start..u.end).filter(|_| kept) else {
        return false;
    };
    let mut walk = hops::events(raw, 0, raw.len());
    let (mut holes, mut events) = (0u64, 0u64);
    for (p, _) in walk.by_ref() {
        let hole = is_placeholder(raw, p);
        (holes, events) = (holes + u64::from(hole), events + u64::from(!hole));
    }
    if walk.at != raw.len() {
        return false;
    }
    if u.flags & F_MARIADB_GTID == 0 {
        let at = plan.own.len();
        if crate::skip_forms::relayed_placeholders(raw, crc, &mut plan.own).is_none() {
            return false;
        }
        plan.made(at);
    } else {
        for (p, size) in hops::events(raw, 0, raw.len()) {
            if !is_placeholder(raw, p) {
                plan.push(u.start + p, u.start + p + size);
            }
        }
    }
    plan.took(1, events, holes);
    true
}

/// Whether the slave's own rules keep every table of the unit's Table_maps (`tables[lo..hi]`,
/// `keep` one byte per name id; not where its record's range is not in `tables`).
fn tables_kept(u: &Unit, tables: &[u32], keep: &[u8]) -> bool {
    let ids = tables.get(u.tables_lo as usize..u.tables_hi as usize);
    ids.and_then(|ids| answer(ids, keep))
        .is_some_and(|(all, _)| all)
}

/// Works out the relay run of units[from..] of `buf` (the buffer they were scanned from; `tables` the
/// name ids of their Table_maps, `keep` one byte per name id, KEEP_KEEP kept) until a unit needs
/// Python; with `lone` (the format in force), lone statements are copied too (see
/// `lone_statement`), and with `stmts` as well the statement units their keys keep.
#[allow(clippy::too_many_arguments)]
pub fn relay_ranges<'r>(
    buf: &[u8],
    units: &[Unit],
    tables: &[u32],
    keep: &[u8],
    from: usize,
    lone: Option<LoneFormat>,
    mut stmts: Option<&mut ByKeys>,
    renames: Option<&'r DbRenames>,
) -> RelayRun<'r> {
    let mut plan = RelayRun {
        crc_len: renames.map_or(0, |r| r.crc_len),
        ..RelayRun::default()
    };
    let mut renamer = renames.map(Renamer::new);
    if let Some(r) = renamer.as_mut() {
        r.edits.reserve(2 * units.len().saturating_sub(from)); // (a MIXED unit renames 2-3 events)
    }
    let mut i = from;
    while i < units.len() {
        let u = &units[i];
        if u.start > u.end || u.end > buf.len() {
            break;
        }
        if is_lone_heartbeat(buf, u) {
            plan.heartbeats += 1;
            i += 1;
            continue;
        }
        // A stretch: its units' GTIDs and XIDs relayed as they came, or its GTIDs each closed
        // by the COMMIT the master would have made (what they stand for is the scanner's to
        // count: `RunCount::stretch`).
        let crc_len = lone.map(|f| f.crc_len);
        let stretch = crc_len.filter(|_| u.kind == CONTROL && u.events == 1);
        if let Some(st) = stretch.and_then(|c| inner(buf, u.start, u.end - u.start, c)) {
            if st.commits {
                let (lo, hi, crc) = (st.range.0, st.range.1, crc_len == Some(4));
                let len = hi - lo + st.units as usize * made_query_len(COMMIT_BODY, crc);
                plan.ranges.push(Piece::Empty { lo, hi, len, crc });
                plan.bytes += len as u64;
            } else {
                plan.push(st.range.0, st.range.1);
            }
            plan.took(st.units, 2 * st.units, 0);
            i += 1;
            continue;
        }
        if let Some(PlaceholderUnit { gtid, xid, holes }) = placeholder_unit(buf, u) {
            for (lo, hi) in [gtid, xid] {
                plan.push(lo, hi);
            }
            plan.took(1, 2, holes);
            i += 1;
            continue;
        }
        let at = plan.own.len();
        if lone.is_some_and(|f| skipped_ddl(buf, u, f.crc_len, &mut plan.own)) {
            plan.made(at);
            plan.took(1, 2, 1);
            i += 1;
            continue;
        }
        // (under renames, a MySQL placeholder unit's BEGIN names a database: Python's)
        let made = lone
            .filter(|_| renames.is_none())
            .and_then(|f| mysql_placeholder_unit(buf, u, f, &mut plan.own));
        if let Some((events, holes)) = made {
            plan.made(at);
            plan.took(1, events, holes);
            i += 1;
            continue;
        }
        // (a unit kept in part is renamed by Python)
        if renames.is_none()
            && lone.is_some_and(|f| holed_unit(buf, u, (tables, keep), f.crc_len != 0, &mut plan))
        {
            i += 1;
            continue;
        }
        // replicate-rewrite-db: the unit's names read first, in the one read of its events, each
        // to rename noted as an edit that `fill` makes as it copies (a database the renames have
        // not met: Python renames the unit and teaches them; a MySQL GTID's transaction_length
        // would change with a name: Python's too), given back below if the unit is not taken.
        let edits_at = renamer.as_ref().map_or(0, |r| r.edits.len());
        if let Some(r) = renamer.as_mut() {
            let mysql = u.flags & (F_MYSQL_GTID | F_TAGGED_GTID) != 0;
            if r.unit(buf, (u.start, u.end)).is_err() || (mysql && r.edits.len() > edits_at) {
                r.edits.truncate(edits_at);
                break;
            }
        }
        let taken = 'take: {
            if u.flags & F_FAST != 0 {
                if !tables_kept(u, tables, keep) {
                    break 'take false;
                }
            } else {
                let Some(f) = lone else {
                    break 'take false;
                };
                if let Some((db, sql)) = lone_statement(buf, u, f) {
                    // BEGIN, COMMIT, ...: the check keeps framing words whatever the rules (the
                    // empty-transaction policy's COMMIT, one per skipped unit, among them).
                    if !framing(&buf[sql.clone()]) {
                        plan.lone.push((i, db, sql));
                    }
                } else if framing_only(buf, u, f) {
                    // (relayed as it came)
                } else {
                    let Some(s) = stmts.as_deref_mut() else {
                        break 'take false;
                    };
                    match s.units.answer(i, s.keep) {
                        Some((content, kept)) if kept == content => s.used(i),
                        _ => break 'take false,
                    }
                }
            }
            true
        };
        if !taken {
            if let Some(r) = renamer.as_mut() {
                r.edits.truncate(edits_at);
            }
            break;
        }
        plan.push(u.start, u.end);
        plan.took(1, u.events as u64, 0);
        i += 1;
    }
    plan.next = i;
    plan.edits = renamer.map(|r| r.edits).unwrap_or_default();
    let grows: isize = plan.edits.iter().map(Edit::grows).sum();
    plan.bytes = plan.bytes.wrapping_add_signed(grows as i64);
    plan
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
