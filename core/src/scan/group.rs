//! Grouping events into units, as `codec.transactions.TransactionGrouper` does: the loop over a
//! buffer (`Scanner::group_units`), each event's place (`group`, in named steps), and the tight
//! loop over a fast unit's body (`fast_body`).

use std::sync::Arc;

use super::{ScanError, ScanOut, ScanTally, Scanner, Unit};
use super::{CONTROL, STATEMENT, TRANSACTION};
use super::{F_ANONYMOUS_GTID, F_ROTATE_END, F_STANDALONE, F_TAGGED_GTID, F_UNKNOWN_NON_IGNORABLE};
use super::{F_COMPLETE, F_FAST, F_HAS_FDE, F_MARIADB_GTID, F_MYSQL_GTID, F_PAYLOAD};
use super::{F_HOLES, F_PLACEHOLDERS};
use crate::format::{type_name, Format};
use crate::le::{u16_at, u32_at, u64_at};
use crate::sql::{is_begin, is_begin_event, is_end, query_sql};
use crate::types::*;
use crate::types::{is_placeholder, stretch_kind};

#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum Fast {
    #[default]
    No,
    /// After a MySQL GTID: a plain `BEGIN` makes the unit a fast candidate.
    AwaitBegin,
    Body,
}

/// The unit being grouped, and what its events so far say about it.
#[derive(Default)]
struct Open {
    unit: Unit,
    in_body: bool,
    standalone: bool,
    has_gtid: bool,
    fast: Fast,
    annotation: bool,
    /// RAND placeholders `rand_run` took (`F_PLACEHOLDERS`, `F_HOLES`).
    placeholders: u32,
    /// The format in force when the unit opened, if an FDE inside it changed it since.
    fmt_before: Option<Option<Arc<Format>>>,
}

impl Scanner {
    pub(super) fn group_units(
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
            tid_bytes: Vec::with_capacity((span / 256).clamp(16, 1 << 16)),
            ..Default::default()
        };
        let mut cur: Option<Open> = None;
        let mut pos = off;
        // What the units handed out hold (`committed`), and the open unit's events so far.
        let (mut committed, mut pending) = (ScanTally::default(), ScanTally::default());
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
            let fmt_before = (t == FORMAT_DESCRIPTION).then(|| self.fmt.clone());
            let unknown = match self.check(buf, pos, nxt, t, base) {
                Ok(u) => u,
                Err(e) => {
                    out.error = Some(e);
                    break;
                }
            };
            pending.event(buf, pos);
            if t == RAND {
                pending
                    .runs
                    .add(buf, pos, size, fmt.as_deref().map_or(0, |f| f.checksum_len));
            }
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
                Err(mut e) => {
                    e.offset += base; // (group reads the buffer: its offsets are the buffer's)
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
                    let (at, ended) = self.fast_body(buf, pos, f, open, &mut pending);
                    pos = at;
                    if ended {
                        if let Some(done) = cur.take() {
                            self.emit(done, true, &mut out);
                        }
                    }
                }
            }
            if let (Some(open), Some(f)) = (cur.as_mut(), fmt.as_deref()) {
                if buf.get(pos + 4) == Some(&RAND) {
                    pos = self.rand_run(buf, pos, f, open, &mut pending);
                }
            }
            if cur.is_none() {
                out.stop = pos;
                committed.join(std::mem::take(&mut pending));
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
                committed.join(pending);
                if pending_rotate.is_some() {
                    out.last_rotate = pending_rotate;
                }
                self.emit(open, false, &mut out);
            } else if let Some(saved) = open.fmt_before {
                // The open unit is scanned again from its start: so is the FDE inside it.
                self.fmt = saved;
            }
        }
        (out.events, out.runs, out.latest) = (committed.events, committed.runs, committed.latest);
        self.events_walked += committed.events;
        out
    }

    /// The body of an open fast unit (Annotate_rows / Rows_query, Table_map, rows events) and
    /// the XID that ends it, from `pos` on, checked and grouped exactly as `check` and `group`
    /// do it event by event, in one tight loop. Stops after the XID, or before the first event
    /// it does not take: another type, a partial or impossible event, one that ends the fast
    /// shape, or any event when CRCs are checked one by one: the general path handles it.
    /// Returns (where it stopped, whether the unit ended: the caller emits it); its events are
    /// counted into `tally`.
    fn fast_body(
        &mut self,
        buf: &[u8],
        mut pos: usize,
        fmt: &Format,
        open: &mut Open,
        tally: &mut ScanTally,
    ) -> (usize, bool) {
        let crc_len = fmt.checksum_len;
        let runs = self.runs_on();
        if self.verify && crc_len != 0 && !runs {
            return (pos, false);
        }
        let post = fmt.post_header_len(TABLE_MAP) as usize;
        // (the general path reports an impossible event: its error here is dropped)
        while let Ok(Some((t, size))) = Self::next_event(buf, pos, 0) {
            let nxt = pos + size;
            if t == TABLE_MAP {
                if self.add_table_map(buf, pos, nxt, post, crc_len).is_none() {
                    break;
                }
                open.annotation = false;
            } else if is_rows(t) {
                if open.annotation || !self.rows_under(buf, pos, size) {
                    break;
                }
                if statement_ends(buf, pos) {
                    self.ids.clear(); // the applier releases the statement's maps here
                }
            } else if t == ANNOTATE_ROWS || t == ROWS_QUERY {
                open.annotation = true;
            } else if t != XID {
                break;
            }
            if runs {
                self.run_add(buf, pos, nxt);
            }
            tally.event(buf, pos);
            open.join(pos, nxt);
            pos = nxt;
            if t == XID {
                return (pos, true);
            }
        }
        (pos, false)
    }

    /// The RAND events from `pos` on inside the open unit, checked and grouped exactly as
    /// `check` and `group` take each one (it joins the unit, never ends it, and the unit is not
    /// fast), in one tight loop: the placeholder policy sends a RAND for every event a slave's
    /// rules drop, and through the general path each of them cost a slave's scan about 17 ns
    /// (perf, 500 MB sysbench MIXED binlog: 3.1 million placeholders). Stops before any other
    /// event, a partial or impossible one, or any event when CRCs are checked one by one.
    /// Returns where it stopped; its events are counted into `tally`.
    fn rand_run(
        &mut self,
        buf: &[u8],
        mut pos: usize,
        fmt: &Format,
        open: &mut Open,
        tally: &mut ScanTally,
    ) -> usize {
        let runs = self.runs_on();
        if self.verify && fmt.checksum_len != 0 && !runs {
            return pos;
        }
        let (mut taken, mut others) = (false, false);
        while let Ok(Some((RAND, size))) = Self::next_event(buf, pos, 0) {
            if stretch_kind(buf, pos).is_some() {
                break; // (a unit of its own: `group` ends the open one)
            }
            let nxt = pos + size;
            if runs {
                self.run_add(buf, pos, nxt);
            }
            let placeholder = is_placeholder(buf, pos);
            open.placeholders += u32::from(placeholder);
            others |= !placeholder;
            tally.runs.add(buf, pos, size, fmt.checksum_len);
            tally.event(buf, pos);
            open.join(pos, nxt);
            taken = true;
            pos = nxt;
        }
        // A slave's scanner (`holes`) keeps a fast unit's shape through the master's
        // placeholders: a rows event after them still needs its own Table_map in the unit.
        if taken && (others || !self.holes || open.fast != Fast::Body) {
            open.fast = Fast::No;
        }
        pos
    }

    fn emit(&mut self, open: Open, complete: bool, out: &mut ScanOut) {
        let mut unit = open.unit;
        if complete {
            unit.flags |= F_COMPLETE;
        }
        let framing = 2; // (the GTID and the event that ends the unit)
        let mariadb = unit.flags & F_MARIADB_GTID != 0;
        if complete
            && mariadb
            && open.placeholders > 0
            && unit.events == open.placeholders + framing
        {
            unit.flags |= F_PLACEHOLDERS;
        }
        if complete && open.fast == Fast::Body && !open.annotation {
            unit.flags |= if open.placeholders > 0 {
                F_HOLES
            } else {
                F_FAST
            };
            unit.tables_lo = out.tables.len() as u32;
            out.tables.extend_from_slice(&self.tables);
            out.tid_bytes.extend_from_slice(&self.tid_bytes);
            unit.tables_hi = out.tables.len() as u32;
        }
        out.units.push(unit);
    }

    /// Puts the event at buf[pos..nxt] (type `t`, read with `fmt`) where TransactionGrouper
    /// puts it: a GTID opens a unit (emitting one left open, which never ended); a control event
    /// joins the open unit or is a unit of its own; anything else joins the open unit (a
    /// statement unit opens if none is), follows its fast shape, and may end it.
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
        let extra = if unknown { F_UNKNOWN_NON_IGNORABLE } else { 0 };
        if is_gtid(t) {
            if let Some(open) = cur.take() {
                self.emit(open, false, out); // the previous group never ended (crash, truncation)
            }
            let mut open = open_gtid(buf, pos, nxt, t, fmt.fast)?;
            open.unit.flags |= extra;
            self.ids.clear();
            self.tables.clear();
            self.tid_bytes.clear();
            *cur = Some(open);
            return Ok(());
        }
        // A stretch (skipped units in a row as one event) is a unit of its own, after the open
        // one: the placeholder policy's skipped DDL (a GTID and one placeholder) never ends.
        if t == RAND && stretch_kind(buf, pos).is_some() {
            if let Some(open) = cur.take() {
                self.emit(open, false, out);
            }
            out.units.push(control_unit(buf, pos, nxt, t, extra, false));
            return Ok(());
        }
        if is_control(t) {
            let real_rotate =
                t == ROTATE && u16_at(buf, pos + 17).unwrap_or(0) & LOG_EVENT_ARTIFICIAL_F == 0;
            match cur.as_mut() {
                Some(open) => open.join_control(pos, nxt, t, extra, real_rotate, fmt_before),
                None => out
                    .units
                    .push(control_unit(buf, pos, nxt, t, extra, real_rotate)),
            }
            return Ok(());
        }
        let open = cur.get_or_insert_with(|| Open::statement(buf, pos));
        open.join(pos, nxt);
        open.placeholders += u32::from(t == RAND && is_placeholder(buf, pos)); // (as `rand_run`)
        open.unit.flags |= extra;
        self.follow_fast_shape(buf, pos, nxt, t, fmt, open);
        if ends_unit(buf, pos, nxt, t, fmt, open)? {
            if let Some(done) = cur.take() {
                self.emit(done, true, out);
            }
        }
        Ok(())
    }

    /// The fast shape (SegmentReader's), followed event by event: only what a decision needs is
    /// looked at (Table_map names, the rows events' table ids, annotations); any other event
    /// leaves the shape.
    fn follow_fast_shape(
        &mut self,
        buf: &[u8],
        pos: usize,
        nxt: usize,
        t: u8,
        fmt: &Format,
        open: &mut Open,
    ) {
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
                    if open.annotation || !self.rows_under(buf, pos, nxt - pos) {
                        open.fast = Fast::No; // rows of a Table_map outside this unit, or this statement
                    } else if statement_ends(buf, pos) {
                        // A replica forgets a statement's Table_maps at its STMT_END_F: a later
                        // rows event naming one of those ids has no map (a crafted stream would
                        // route one table's rows by another's name), and goes to the reference
                        // path, which refuses it.
                        self.ids.clear();
                    }
                } else if t == TABLE_MAP {
                    let post = fmt.post_header_len(TABLE_MAP) as usize;
                    match self.add_table_map(buf, pos, nxt, post, fmt.checksum_len) {
                        Some(()) => open.annotation = false,
                        None => open.fast = Fast::No,
                    }
                } else if t == ANNOTATE_ROWS || t == ROWS_QUERY {
                    open.annotation = true;
                } else if t != XID && !(t == RAND && self.holes && is_placeholder(buf, pos)) {
                    open.fast = Fast::No;
                }
            }
        }
    }
}

impl Open {
    /// The event pos..nxt joins the unit: its last so far, and no Rotate ends the unit after it.
    #[inline]
    fn join(&mut self, pos: usize, nxt: usize) {
        self.unit.events += 1;
        self.unit.end = nxt;
        self.unit.last = pos;
        self.unit.flags &= !F_ROTATE_END;
    }

    /// A unit that opens without a GTID (a statement, or old non-transactional rows), at `pos`.
    fn statement(buf: &[u8], pos: usize) -> Self {
        Open {
            unit: Unit {
                start: pos,
                end: pos,
                events: 0,
                kind: STATEMENT,
                last: pos,
                ts: u32_at(buf, pos).unwrap_or(0),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A control event inside the open unit: relay logs may carry a Rotate/FDE inside a
    /// transaction; it keeps its place, in the unit, and the unit is no longer fast.
    fn join_control(
        &mut self,
        pos: usize,
        nxt: usize,
        t: u8,
        extra: u32,
        real_rotate: bool,
        fmt_before: Option<Option<Arc<Format>>>,
    ) {
        self.join(pos, nxt);
        self.fast = Fast::No;
        self.unit.flags |= extra;
        if t == FORMAT_DESCRIPTION {
            self.unit.flags |= F_HAS_FDE;
            if self.fmt_before.is_none() {
                self.fmt_before = fmt_before;
            }
        }
        if real_rotate {
            self.unit.flags |= F_ROTATE_END;
        }
    }
}

/// The unit a GTID event at buf[pos..nxt] opens: its GTID fields and flags, and whether it may
/// be fast (`fast_ok`: the format allows it). A MariaDB GTID replaces BEGIN: unless standalone,
/// the statements that follow are inside the group until XID or COMMIT.
fn open_gtid(buf: &[u8], pos: usize, nxt: usize, t: u8, fast_ok: bool) -> Result<Open, ScanError> {
    let mut unit = Unit {
        start: pos,
        end: nxt,
        events: 1,
        kind: TRANSACTION,
        last: pos,
        gtid_size: (nxt - pos) as u32,
        ts: u32_at(buf, pos).unwrap_or(0),
        ..Default::default()
    };
    let mut standalone = false;
    // MySQL's GTIDs are followed by BEGIN for a transaction (DDL comes without one).
    let mut fast = if fast_ok { Fast::AwaitBegin } else { Fast::No };
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
                fast = Fast::No;
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
        }
        GTID_TAGGED => unit.flags |= F_TAGGED_GTID,
        _ => unit.flags |= F_ANONYMOUS_GTID,
    }
    Ok(Open {
        unit,
        in_body: t == MARIADB_GTID && !standalone,
        standalone,
        has_gtid: true,
        fast,
        ..Default::default()
    })
}

/// A control event outside any unit: a complete unit of its own.
fn control_unit(buf: &[u8], pos: usize, nxt: usize, t: u8, extra: u32, real_rotate: bool) -> Unit {
    let mut flags = F_COMPLETE | extra;
    if t == FORMAT_DESCRIPTION {
        flags |= F_HAS_FDE;
    }
    if real_rotate {
        flags |= F_ROTATE_END;
    }
    Unit {
        start: pos,
        end: nxt,
        events: 1,
        kind: CONTROL,
        flags,
        last: pos,
        ts: u32_at(buf, pos).unwrap_or(0),
        ..Default::default()
    }
}

/// Whether the event at buf[pos..nxt], just added to `open`, ends it: XID, XA_PREPARE, a
/// Transaction_payload; COMMIT/ROLLBACK/XA PREPARE inside BEGIN; a statement outside it (MySQL
/// DDL after its GTID, MariaDB FL_STANDALONE, a pre-GTID autocommit statement); rows outside any
/// BEGIN (old non-transactional RBR) at STMT_END_F. A BEGIN opens the body instead.
fn ends_unit(
    buf: &[u8],
    pos: usize,
    nxt: usize,
    t: u8,
    fmt: &Format,
    open: &mut Open,
) -> Result<bool, ScanError> {
    if t == XID || t == XA_PREPARE || t == TRANSACTION_PAYLOAD {
        if t == TRANSACTION_PAYLOAD {
            open.unit.flags |= F_PAYLOAD;
        }
        return Ok(true);
    }
    if is_query(t) {
        let sql = query_sql(buf, pos, nxt, t, fmt)?;
        if *sql == *b"COMMIT" {
            return Ok(true); // (the empty-transaction policy's, one per skipped unit: no reading)
        }
        if !open.in_body && is_begin(&sql) {
            open.in_body = true;
            open.unit.kind = TRANSACTION;
            return Ok(false);
        }
        return Ok(!open.in_body || is_end(&sql));
    }
    if is_rows(t) && !open.in_body && !open.standalone && !open.has_gtid {
        let at = pos + HEADER_LEN + fmt.table_id_len(t);
        return Ok(at + 2 <= nxt && u16_at(buf, at).is_some_and(|f| f & STMT_END_F != 0));
    }
    Ok(false)
}

fn short(t: u8, pos: usize) -> ScanError {
    ScanError::binlog(format!("{} event too short", type_name(t)), pos as u64)
}

/// Whether the rows event at `pos` (6-byte table id: fast units only) ends its statement.
fn statement_ends(buf: &[u8], pos: usize) -> bool {
    u16_at(buf, pos + HEADER_LEN + 6).is_some_and(|f| f & STMT_END_F != 0)
}
