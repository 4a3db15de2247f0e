//! What one slave's stream sends of a segment of the master's binlog, assembled in one call per
//! batch: runs of units kept whole (one copy of their bytes), MariaDB units kept in part (whole
//! statements dropped, see `unit_cut::cut`), and for each stretch of skipped units one
//! Heartbeat event naming where the stretch ends, as `master`'s stream loop did unit run by unit
//! run in Python. The segment (`unit_list::UnitList`) is built once from the scanner's records
//! and shared by every stream; per stream there is only its answer byte per unit (`rows`) and
//! this walk, which records what it sends as pieces (`sent::Sent`). Its modes: sending,
//! counting (`count_only`, with `count_walk`) and relaying (`relay`: `simulate --verify`'s
//! expectation of a slave's relay log).

use crate::relay::{placeholder_unit, skipped_ddl};
use crate::rows::{ROW_KEEP as KEEP, ROW_PARTIAL as PARTIAL, ROW_SKIP as SKIP};
use crate::scan::{Unit, F_MARIADB_GTID};
use crate::sent::Sent;
use crate::skip_forms::{self, skipped, SKIP_EMPTY, SKIP_HEARTBEAT, SKIP_PLACEHOLDER};
use crate::stmt_units::StmtUnits;
use crate::stretch::Stretch;
use crate::unit_list::{ListedUnit, UnitList};

#[derive(Default)]
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
    /// Placeholders in a row are written as one that counts them (`skip_forms::Run`: a gRPC
    /// slave that asked for runs). The counts, and the batch's size, are a replica's still.
    pub runs: bool,
    /// Skipped units in a row are sent as one stretch of what a slave relays of them
    /// (`stretch`: a gRPC slave that asked for them). The counts are a replica's still; the
    /// batch is cut by its bytes on the wire.
    pub stretches: bool,
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
    /// Relay mode (`simulate --verify`, `relayed`): what the slave writes in its relay log of
    /// what the walk sends, as its relay run (relay.rs) writes it: no Heartbeat; a placeholder
    /// form as its framing (`relayed_form`); a unit kept in part as its kept events, whatever
    /// the policy (slave-side filtering's expectation; `partial_ok` is the caller's to set).
    pub relay: bool,
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

/// How many units ahead of the one it makes a skip form of the walk asks for the bytes of the
/// next ones it will read (skipped, or kept in part). A do-db slave of eight schemas is sent a
/// form for seven units in eight, each in pages no cache holds: reading each unit's GTID (the
/// empty-transaction policy) or event headers (placeholders) waited on memory, the walk's first
/// load of each unit taking about 96% of its time in a perf profile of the master (500 MB
/// sysbench MIXED binlog, `bench skip_policies`).
const FORM_AHEAD: usize = 8;

/// Room made up front for the forms a placeholder or empty-transaction walk makes (two thirds
/// and two fifths of a do-db slave's batch, grown by doubling they were copied again at each
/// realloc); pages are touched as written.
fn own_room(opt: &SendOptions) -> usize {
    // (a relay run's forms are a GTID and a COMMIT or XID each: they grow as they come)
    let forms = matches!(opt.skip, SKIP_PLACEHOLDER | SKIP_EMPTY) && !opt.count_only && !opt.relay;
    usize::from(forms) * opt.limit.saturating_sub(opt.batch_bytes).min(4 << 20) as usize
}

enum Owed<'a> {
    None,
    Given(&'a [u8]),
    Unit(usize),
}

/// Walks plan.units[from..] with a stream's answers `row` (from `UnitList::rows`) and keep bytes,
/// until a unit it cannot handle, or the batch is full: what it sends, as `pieces` (see
/// `Sent::fill`). `bufs` are the parts' buffers. Never panics: a unit or answer out of range ends
/// the walk. The walk checks every range it records against its buffer, so `fill` cannot go out
/// of bounds. Counting only (`count_only`), it is the count mode's walk of the units it does not
/// count by their sums (`count_walk`), one at a time.
pub fn walk(
    plan: &UnitList,
    bufs: &[&[u8]],
    row: &[u8],
    keep: &[u8],
    from: usize,
    opt: &SendOptions,
) -> Sent {
    // (statements are counted by key only where the walk sends: `count`)
    let tallied = opt.stmts.filter(|_| !opt.count_only);
    let keys = tallied.map_or(0, |(_, k)| k.len());
    let mut s = Sent::for_walk(keys, own_room(opt));
    let n = row.len().min(plan.units.len());
    let mut owed = opt.pending.map_or(Owed::None, Owed::Given);
    let mut batch = opt.batch_bytes;
    let mut i = from;
    let mut made = None; // the Heartbeats of the last unit's part (its file)
    let forms = opt.skip != SKIP_HEARTBEAT; // (skip forms are made: their units read ahead)
    let mut asked = from; // units before this one were asked for (`skip_forms::prefetch_form`)
    let mut ranges = Vec::new(); // a unit's kept ranges, for its placeholders (reused)
    let stretches = opt.stretches && !opt.count_only;
    let runs = opt.runs || stretches; // (a stretch drops the run a placeholder unit is made with)
    let (mut stretch, mut form_bytes) = (Stretch::default(), Vec::new());
    let crc_len = if opt.heartbeat_crc { 4 } else { 0 };
    let mut flush = |owed: &mut Owed, s: &mut Sent, batch: &mut u64| {
        let size = match *owed {
            Owed::None => return,
            _ if opt.relay => {
                // (a Heartbeat is counted by the slave, never relayed)
                *owed = Owed::None;
                return;
            }
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
        if row[i] != SKIP {
            if let Some((a, b)) = stretch.close(&mut s.own, opt.heartbeat_crc) {
                s.own_span(a, b);
            }
        }
        let unit = &plan.units[i];
        let Some(buf) = bufs.get(unit.part as usize) else {
            break;
        };
        if unit.start() > unit.end() || unit.end() > buf.len() {
            break;
        }
        if forms && matches!(row[i], SKIP | PARTIAL) {
            asked = asked.max(i + 1);
            while asked <= (i + FORM_AHEAD).min(n - 1) {
                skip_forms::prefetch_form(plan, bufs, row, asked, opt.skip, runs);
                asked += 1;
            }
        }
        match row[i] {
            KEEP => {
                flush(&mut owed, &mut s, &mut batch);
                // Units i..j of one part, cut after the unit that fills the batch.
                let left = opt.limit.saturating_sub(batch);
                let (mut j, mut took, mut at) = (i, 0u64, unit.start());
                while j < n && row[j] == KEEP {
                    let u = &plan.units[j];
                    if u.part != unit.part
                        || u.start() != at
                        || u.end() < u.start()
                        || u.end() > buf.len()
                    {
                        break;
                    }
                    at = u.end();
                    took += (u.end() - u.start()) as u64;
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
                    s.buf_piece(unit.part, unit.start(), at);
                }
                s.sent_bytes += took;
                s.kept += (j - i) as u64;
                batch += took;
                i = j;
                if batch >= opt.limit {
                    break;
                }
            }
            SKIP if opt.skip == SKIP_HEARTBEAT => {
                let j = run_end(&row[..n], i);
                if matches!(owed, Owed::Given(_)) {
                    s.pending_done = true;
                }
                owed = Owed::Unit(j - 1);
                s.skipped += (j - i) as u64;
                i = j;
            }
            SKIP => {
                // The placeholder and empty-transaction policies: the unit's own form, after the
                // Heartbeat still owed for a stretch before it (as the per-unit way flushes it).
                let crc = opt.heartbeat_crc;
                let framing = match opt.stmts {
                    Some((st, kb)) if opt.skip == SKIP_PLACEHOLDER && !unit.tabled => {
                        st.kept_ranges(i, kb, &mut ranges).map(|()| &ranges[..])
                    }
                    _ => None,
                };
                // A stretch takes the unit's GTID (and XID) straight from the binlog where its
                // form would be those (and a run, or a COMMIT the slave makes): `stretch_unit`.
                let direct = match stretches {
                    true => skip_forms::stretch_unit(unit, buf, opt.skip, crc, framing),
                    false => None,
                };
                let mut form = None;
                if let Some(skip_forms::StretchUnit { gtid, xid, form: f }) = direct {
                    flush(&mut owed, &mut s, &mut batch);
                    let mark = s.own.len();
                    if stretch.take_unit(gtid, xid, f.placeholders, crc_len, &mut s.own) {
                        batch += (s.own.len() - mark) as u64;
                        form = Some(f);
                    }
                }
                let form = match form {
                    Some(form) => form,
                    None => {
                        // Made once, into `own`: the Heartbeat still owed goes after it there,
                        // and before it in the pieces (a form the walk cannot make leaves nothing
                        // behind).
                        let start = s.own.len();
                        let relayed = opt.relay && opt.skip == SKIP_PLACEHOLDER;
                        let out = match (opt.count_only, stretches || relayed) {
                            (true, _) => None,
                            (false, true) => {
                                form_bytes.clear();
                                Some(&mut form_bytes)
                            }
                            (false, false) => Some(&mut s.own),
                        };
                        let Some(form) = skipped(unit, buf, opt.skip, crc, runs, framing, out)
                        else {
                            s.own.truncate(start);
                            break;
                        };
                        if stretches {
                            // Joins the stretch (the Heartbeat still owed before it), or ends
                            // it and goes as its form. The batch counts what the wire carries: a
                            // stretch stands for what a replica is sent, and its batch is cut by
                            // its own size.
                            flush(&mut owed, &mut s, &mut batch);
                            let mark = s.own.len();
                            let commits = opt.skip == SKIP_EMPTY;
                            if !stretch.take(
                                &form_bytes,
                                form.placeholders,
                                commits,
                                crc_len,
                                &mut s.own,
                            ) {
                                if let Some((a, b)) = stretch.close(&mut s.own, opt.heartbeat_crc) {
                                    s.own_span(a, b);
                                }
                                if runs != opt.runs {
                                    // (made with a run to join a stretch: as asked, without)
                                    form_bytes.clear();
                                    let out = Some(&mut form_bytes);
                                    skipped(unit, buf, opt.skip, crc, opt.runs, framing, out);
                                }
                                s.own_piece(&form_bytes);
                            }
                            batch += (s.own.len() - mark) as u64;
                        } else if relayed {
                            if !relayed_form(unit, &form_bytes, form.events, crc, &mut s.own) {
                                break;
                            }
                            s.own_range(start);
                        } else {
                            let end = s.own.len();
                            flush(&mut owed, &mut s, &mut batch);
                            if !opt.count_only {
                                s.own_span(start, end);
                            }
                            batch += form.bytes;
                        }
                        form
                    }
                };
                s.skip_units += 1;
                s.skip_events += form.events;
                s.skip_bytes += form.bytes;
                s.placeholders += form.placeholders;
                s.skipped += 1;
                i += 1;
                if batch >= opt.limit {
                    break;
                }
            }
            PARTIAL if opt.skip == SKIP_PLACEHOLDER && !opt.relay => {
                // Kept in part under the placeholder policy: the kept statements as they are,
                // every other event a placeholder (a MySQL GTID's transaction_length made anew).
                if placeholder_kept(plan, i, buf, keep, opt, &mut ranges).is_none() {
                    break;
                }
                let crc = opt.heartbeat_crc;
                let start = s.own.len(); // (made once, as a skipped unit's form is)
                let out = (!opt.count_only).then_some(&mut s.own);
                let Some(form) =
                    skip_forms::with_placeholders(unit, buf, &ranges, crc, opt.runs, out)
                else {
                    s.own.truncate(start);
                    break;
                };
                let end = s.own.len();
                flush(&mut owed, &mut s, &mut batch);
                if !opt.count_only {
                    s.own_span(start, end);
                }
                s.sent_bytes += form.kept_bytes;
                s.sent_events += form.kept_events;
                s.skip_events += form.events;
                s.skip_bytes += form.bytes;
                s.placeholders += form.placeholders;
                s.partial += 1;
                batch += form.bytes + form.kept_bytes;
                i += 1;
                if batch >= opt.limit {
                    break;
                }
            }
            PARTIAL if opt.partial_ok => {
                let Some((cut, events)) = cut(plan, i, buf, keep, opt) else {
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
                i += 1;
                if batch >= opt.limit {
                    break;
                }
            }
            _ => break,
        }
    }
    if let Some((a, b)) = stretch.close(&mut s.own, opt.heartbeat_crc) {
        s.own_span(a, b);
    }
    // Every unit of from..i was handled: counted at once, not run by run (a do-db stream's runs
    // are a unit or two long on a MIXED binlog of eight schemas).
    count(plan, from, i, opt, &mut s);
    s.next = i;
    if let Owed::Unit(k) = owed {
        s.pending = Some(k);
    }
    s
}

/// What a slave's relay logs hold of plan.units[from..row.len()] under each skip policy of
/// `skips` (`walk` in relay mode, `SendOptions::relay`; `crc`: the events carry checksums), with
/// its answers `row`, keep bytes per name id and (with `st`, the list's statement units) per
/// statement key id: one Sent per policy, each up to the first unit one of them cannot answer.
pub fn relayed(
    plan: &UnitList,
    bufs: &[&[u8]],
    st: Option<&StmtUnits>,
    (row, keep, stmt_keep): (&[u8], &[u8], Option<&[u8]>),
    from: usize,
    skips: &[u8],
    crc: bool,
) -> Vec<Sent> {
    let opt = |skip| SendOptions {
        limit: u64::MAX,
        skip,
        partial_ok: true,
        heartbeat_crc: crc,
        stmts: st.zip(stmt_keep),
        relay: true,
        ..SendOptions::default()
    };
    let mut end = row.len().min(plan.units.len());
    let mut out: Vec<Sent> = Vec::with_capacity(skips.len());
    for &skip in skips {
        let s = walk(plan, bufs, &row[..end], keep, from, &opt(skip));
        end = end.min(s.next);
        out.push(s);
    }
    // (a policy walked before one that stopped sooner: again, to where that one stopped)
    for (s, &skip) in out.iter_mut().zip(skips) {
        if s.next > end {
            *s = walk(plan, bufs, &row[..end], keep, from, &opt(skip));
        }
    }
    out
}

/// Skipped unit `u`'s placeholder form (`form`, of `events` events) as the slave relays it,
/// appended to `out`: a MariaDB unit's GTID and XID, its placeholders dropped (the relay run's
/// `placeholder_unit`), a DDL's its empty transaction (`skipped_ddl`); a MySQL unit's framing,
/// its GTID's transaction_length counting what is left (`skip_forms::relayed_placeholders`).
/// False, `out` as it was, for any other form (a MariaDB statement unit's): the caller takes it.
fn relayed_form(u: &ListedUnit, form: &[u8], events: u64, crc: bool, out: &mut Vec<u8>) -> bool {
    if u.flags & F_MARIADB_GTID == 0 {
        return skip_forms::relayed_placeholders(form, crc, out).is_some();
    }
    // The unit the master sent, as the slave's relay run reads it.
    let sent = Unit {
        start: 0,
        end: form.len(),
        events: events as u32,
        kind: u.kind,
        flags: u.flags,
        gtid_size: u.gtid_size,
        ..Unit::default()
    };
    let Some(p) = placeholder_unit(form, &sent) else {
        return skipped_ddl(form, &sent, if crc { 4 } else { 0 }, out);
    };
    out.extend_from_slice(&form[p.gtid.0..p.gtid.1]);
    out.extend_from_slice(&form[p.xid.0..p.xid.1]);
    true
}

/// The byte ranges of unit i (of `buf`) a stream keeps in part, for the placeholder policy, into
/// `out`: a statement unit's kept pieces, a row unit's kept statements; None where it cannot be
/// cut (a MySQL statement unit, a statement partly kept).
fn placeholder_kept(
    plan: &UnitList,
    i: usize,
    buf: &[u8],
    keep: &[u8],
    opt: &SendOptions,
    out: &mut Vec<(usize, usize)>,
) -> Option<()> {
    let unit = plan.units.get(i)?;
    if !unit.tabled {
        // (a MySQL statement unit's framing is Python's to say)
        let (st, kb) = opt.stmts.filter(|_| unit.flags & F_MARIADB_GTID != 0)?;
        return st.kept_ranges(i, kb, out);
    }
    *out = plan.unit_cut(i, buf)?.parts(keep)?.0;
    Some(())
}

/// Unit i (of `buf`, its part's bytes) kept in part: its kept bytes and events, or None where it
/// cannot be cut (a statement unit its keys do not read; a statement of a row unit partly kept,
/// or without its own Table_map).
fn cut(
    plan: &UnitList,
    i: usize,
    buf: &[u8],
    keep: &[u8],
    opt: &SendOptions,
) -> Option<(Cut, u64)> {
    let unit = plan.units.get(i)?;
    let mariadb = unit.flags & F_MARIADB_GTID != 0;
    // A statement unit is cut at its statements by their keys; a row unit at its statements
    // (read once for every stream: `unit_statements`) by its tables.
    let (joined, events) = match unit.tabled {
        false => opt.stmts.and_then(|(st, kb)| st.partial(i, buf, kb))?,
        true if mariadb => {
            let unit_cut = plan.unit_cut(i, buf)?;
            if opt.count_only {
                let (size, events) = unit_cut.size(keep)?;
                return Some((Cut::Size(size), events));
            }
            let (parts, events) = unit_cut.parts(keep)?;
            return Some((Cut::Parts(parts), events));
        }
        true => plan.unit_cut(i, buf)?.joined(buf, keep)?,
    };
    if mariadb {
        return Some((Cut::Bytes(joined), events));
    }
    // A MySQL unit keeps its BEGIN with its GTID, whose transaction_length counts what is left:
    // made anew (trx_length::with_length), as `filter` writes it.
    let made = crate::trx_length::with_length(&joined, opt.heartbeat_crc)?;
    Some((Cut::Bytes(made), events))
}

/// The end of the run of equal answers that starts at `i` (the first index after it whose answer
/// differs, or the row's length), read eight answers at a time: 64 slaves' counting walks each
/// read every answer byte of a segment.
pub(crate) fn run_end(row: &[u8], i: usize) -> usize {
    let answer = row[i];
    let pattern = u64::from_ne_bytes([answer; 8]);
    let mut j = i + 1;
    while j + 8 <= row.len() {
        let differs = u64::from_le_bytes(row[j..j + 8].try_into().expect("8 bytes")) ^ pattern;
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

/// Adds units i..j to the read counters, and (unless counting only) their statements to the key
/// counts. (Their Table_maps are tallied by the caller over the ranges it walked:
/// `UnitList::tally_names`.)
fn count(plan: &UnitList, i: usize, j: usize, opt: &SendOptions, s: &mut Sent) {
    let sums = plan.sums();
    s.read_bytes += sums.bytes[j] - sums.bytes[i];
    s.read_events += sums.events[j] - sums.events[i];
    if opt.count_only || opt.relay {
        return;
    }
    if let Some((st, _)) = opt.stmts {
        st.columns().count(i, j, &mut s.key_counts);
    }
}

#[cfg(test)]
#[path = "send_tests.rs"]
mod tests;
