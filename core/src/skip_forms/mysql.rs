//! The skip policies' forms of a skipped MySQL unit (opened by a GTID or an Anonymous_GTID
//! event): the same bytes `Placeholder.skipped` and `EmptyTransaction.skipped` make of it in
//! Python (`_with_placeholders`, TransactionFilter's `_empty_transaction`, each through
//! `codec.writer.fix_transaction_length`), and what a slave relays of the placeholder form
//! (`slave/node.py`'s `_without_placeholders`), for `simulate --verify`.
//!
//! MySQL's rule that bites: from 8.0.2 a Gtid_log_event carries the byte length of its whole
//! transaction, the GTID event included (`transaction_length`, a packed integer after the commit
//! timestamps; control_events.h). A reader of the stream takes the transaction's size from it
//! (a replica's applier and its relay log, mysqlbinlog), so a group whose events the master
//! changed must carry its new length. The field's own width (1, 3, 4 or 9 bytes) changes with
//! the value, and the GTID event's size with it: the length is sought as
//! `fix_transaction_length` seeks it (at most four rewrites from the event's own value), so
//! that where two lengths would both be right the same one is chosen. A GTID whose value is 0
//! or absent (5.6 and 5.7 GTIDs, 8.0.1) is sent as it is. Tagged GTIDs (8.3+, another encoding),
//! Transaction_payload units, units with a Format_description inside, and anything that does
//! not read as Python reads it are declined (None): the per-unit way sends them.

use super::is_placeholder;
use super::{
    made_query, made_query_len, placeholders, rand_len, seal, Form, BEGIN_BODY, COMMIT_BODY,
    SKIP_EMPTY, SKIP_PLACEHOLDER,
};
use crate::le::u32_at;
use crate::scan::{F_ANONYMOUS_GTID, F_FAST, F_HAS_FDE, F_MYSQL_GTID, F_PAYLOAD};
use crate::sql::statement_verb;
use crate::types::{
    ANONYMOUS_GTID, EXECUTE_LOAD_QUERY, GTID, HEADER_LEN, QUERY, QUERY_COMPRESSED, XID,
};
use crate::unit_list::ListedUnit;

/// A Query's post-header length as every MySQL server since 5.0 writes it (QUERY_HEADER_LEN:
/// thread_id, exec_time, db_len, error_code, status_vars_len), where the text of a unit's second
/// event is read (the walk has no Format_description at hand; the scanner read it with one).
const QUERY_POST: usize = 13;

/// A MySQL GTID event (header, body and CRC) and its transaction_length field: (start, end,
/// value) in the event's bytes; None where the event carries none or 0 (nothing is rewritten).
struct Gtid<'a> {
    raw: &'a [u8],
    crc_len: usize,
    field: Option<(usize, usize, u64)>,
}

impl<'a> Gtid<'a> {
    /// The GTID event `raw`, read as `codec.gtid.decode_mysql_gtid` reads its body: flags,
    /// source uuid, gno (25 bytes); from 5.7 the logical timestamps (lt_type 2, last_committed,
    /// sequence_number); from 8.0.1 the immediate commit timestamp (7 bytes, whose top bit says
    /// the original one follows, 7 more); then, if the body goes on, the transaction_length. None
    /// where Python's reading would fail (a body under 25 bytes, a packed integer that does not
    /// read or runs past the body).
    fn read(raw: &'a [u8], crc: bool) -> Option<Gtid<'a>> {
        let crc_len = if crc { 4 } else { 0 };
        let body = raw.get(HEADER_LEN..raw.len().checked_sub(crc_len)?)?;
        if body.len() < 25 {
            return None;
        }
        let mut field = None;
        if body.len() > 25 && body[25] == 2 && body.len() >= 42 + 7 {
            let at = if body[48] & 0x80 != 0 { 56 } else { 49 };
            if body.len() > at {
                let (value, end) = packed(body, at)?;
                if value != 0 {
                    field = Some((HEADER_LEN + at, HEADER_LEN + end, value));
                }
            }
        }
        Some(Gtid {
            raw,
            crc_len,
            field,
        })
    }

    /// The transaction_length and its width once the events after the GTID are `rest` bytes
    /// (`fix_transaction_length`'s loop: the wanted length from the event's present size, at
    /// most four times), or None where nothing is rewritten.
    fn fixed(&self, rest: u64) -> Option<(u64, usize)> {
        let (start, end, value) = self.field?;
        let base = (self.raw.len() - (end - start)) as u64;
        let (mut length, mut width) = (value, end - start);
        for _ in 0..4 {
            let wanted = rest + base + width as u64;
            if length == wanted {
                break;
            }
            length = wanted;
            width = packed_len(wanted);
        }
        Some((length, width))
    }

    /// The event's size once the events after it are `rest` bytes.
    fn len(&self, rest: u64) -> usize {
        match (self.fixed(rest), self.field) {
            (Some((_, width)), Some((start, end, _))) => self.raw.len() - (end - start) + width,
            _ => self.raw.len(),
        }
    }

    /// The event, its transaction_length for `rest` bytes after it, appended to `out`: the
    /// header as it was but for the size, a fresh CRC (`Event.with_body`).
    fn put(&self, rest: u64, out: &mut Vec<u8>) {
        let (Some((length, _)), Some((start, end, value))) = (self.fixed(rest), self.field) else {
            out.extend_from_slice(self.raw);
            return;
        };
        if length == value {
            out.extend_from_slice(self.raw);
            return;
        }
        let at = out.len();
        out.extend_from_slice(&self.raw[..start]);
        put_packed(length, out);
        out.extend_from_slice(&self.raw[end..self.raw.len() - self.crc_len]);
        let size = (out.len() - at + self.crc_len) as u32;
        out[at + 9..at + 13].copy_from_slice(&size.to_le_bytes());
        seal(out, at, self.crc_len != 0);
    }
}

/// A packed (length-encoded) integer at body[at..]: its value and where it ends; None where it
/// does not read (0xfb, 0xff, or past the body).
fn packed(body: &[u8], at: usize) -> Option<(u64, usize)> {
    let first = *body.get(at)?;
    let n = match first {
        0..=0xfa => return Some((u64::from(first), at + 1)),
        0xfc => 2,
        0xfd => 3,
        0xfe => 8,
        _ => return None,
    };
    let bytes = body.get(at + 1..at + 1 + n)?;
    let mut word = [0u8; 8];
    word[..n].copy_from_slice(bytes);
    Some((u64::from_le_bytes(word), at + 1 + n))
}

/// The width of `value` packed (`codec.packing.encode_lenenc`).
fn packed_len(value: u64) -> usize {
    match value {
        0..=0xfa => 1,
        0xfb..=0xffff => 3,
        0x1_0000..=0xff_ffff => 4,
        _ => 9,
    }
}

fn put_packed(value: u64, out: &mut Vec<u8>) {
    let bytes = value.to_le_bytes();
    match packed_len(value) {
        1 => out.push(value as u8),
        3 => {
            out.push(0xfc);
            out.extend_from_slice(&bytes[..2]);
        }
        4 => {
            out.push(0xfd);
            out.extend_from_slice(&bytes[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&bytes);
        }
    }
}

/// The events of `raw` from `at` on, as (offset, size, type); None where they do not tile it.
fn events(raw: &[u8], mut at: usize) -> Option<Vec<(usize, usize, u8)>> {
    let mut out = Vec::new();
    while at < raw.len() {
        let size = u32_at(raw, at + 9)? as usize;
        if size < HEADER_LEN || at + size > raw.len() {
            return None;
        }
        out.push((at, size, raw[at + 4]));
        at += size;
    }
    Some(out)
}

/// Whether the Query event `ev` is a BEGIN as TransactionFilter asks (`statement_verb` of its
/// text is BEGIN); None where the verb is not ASCII (Python upper-cases other letters too).
fn is_begin(ev: &[u8], crc_len: usize) -> Option<bool> {
    let db_len = *ev.get(HEADER_LEN + 8)? as usize;
    let status = crate::le::u16_at(ev, HEADER_LEN + 11)? as usize;
    let sql_at = HEADER_LEN + QUERY_POST + status + db_len + 1;
    let sql = ev.get(sql_at..ev.len().checked_sub(crc_len)?)?;
    let verb = statement_verb(sql);
    verb.is_ascii().then(|| verb.eq_ignore_ascii_case(b"BEGIN"))
}

/// The form of the skipped MySQL unit `u` (its bytes `raw`) under `skip` (see
/// `super::skipped`): None for a unit this module declines (see the module's note).
pub(super) fn skipped(
    u: &ListedUnit,
    raw: &[u8],
    skip: u8,
    crc: bool,
    runs: bool,
    framing: Option<&[(usize, usize)]>,
    out: Option<&mut Vec<u8>>,
) -> Option<Form> {
    let (g, gtid) = formed_gtid(u, raw, crc)?;
    match skip {
        SKIP_EMPTY => empty(&gtid, raw, crc, out),
        SKIP_PLACEHOLDER => {
            // The framing a skipped unit keeps (`is_framing`): of a statement unit, the pieces
            // its keys say are (BEGIN, COMMIT, XID); of a row unit, the BEGIN the fast shape
            // opens with (a plain BEGIN: the scanner read it) and its XID; of a lone statement
            // (a GTID and one Query, never a framing one) nothing but the GTID.
            let begin;
            let kept = match framing {
                Some(kept) => kept,
                None if u.tabled && u.flags & F_FAST != 0 => {
                    let size = u32_at(raw, g + 9)? as usize;
                    if raw.get(g + 4) != Some(&QUERY) || size < HEADER_LEN {
                        return None;
                    }
                    begin = [(u.start() + g, u.start() + g + size)];
                    &begin[..]
                }
                None if u.events == 2 => &[][..],
                None => return None,
            };
            let mut out = out;
            let row = framing.is_none() && u.flags & F_FAST != 0; // (`kept`: its BEGIN)
            if let (true, Some(out), &[(_, begin)]) = (runs && row, out.as_deref_mut(), kept) {
                if let Some(form) = framed_run(u, raw, &gtid, begin - u.start(), crc, out) {
                    return Some(form);
                }
            }
            let body = &raw[g..];
            // (transaction_length counts the placeholders a replica is sent, runs or not)
            let rest = placeholders(body, u.start() + g, kept, true, crc, false, None)?;
            if let Some(out) = out {
                gtid.put(rest.bytes, out);
                placeholders(body, u.start() + g, kept, true, crc, runs, Some(out));
            }
            Some(Form {
                bytes: rest.bytes + gtid.len(rest.bytes) as u64,
                events: rest.events + 1,
                placeholders: rest.placeholders,
                ..Form::default()
            })
        }
        _ => None,
    }
}

/// A skipped row unit framed at its ends, for a slave that asked for runs, as
/// `placeholder::framed_run` makes a MariaDB one: its GTID (transaction_length counting every
/// placeholder a replica is sent), its BEGIN (`raw[..head]` after the GTID), one run for its
/// body and its XID, from the unit's record without reading the body. None where the record
/// does not say so (the caller reads the unit).
fn framed_run(
    u: &ListedUnit,
    raw: &[u8],
    gtid: &Gtid,
    head: usize,
    crc: bool,
    out: &mut Vec<u8>,
) -> Option<Form> {
    let last = u.last().checked_sub(u.start())?;
    let tail = raw.get(last..)?;
    let g = gtid.raw.len();
    if *tail.get(4)? != XID || u32_at(tail, 9)? as usize != tail.len() || head <= g || head > last {
        return None;
    }
    let body = u.events.checked_sub(3)?; // (its GTID, BEGIN and XID)
    let mut run = super::placeholder::Run::before(body, tail)?;
    if head + body as usize * HEADER_LEN > last {
        return None; // (its body cannot hold them)
    }
    let rest = (head - g + tail.len() + body as usize * rand_len(crc)) as u64;
    gtid.put(rest, out);
    out.extend_from_slice(&raw[g..head]);
    run.flush(crc, out);
    out.extend_from_slice(tail);
    Some(Form {
        bytes: rest + gtid.len(rest) as u64,
        events: u64::from(u.events),
        placeholders: u64::from(body),
        ..Form::default()
    })
}

/// The GTID (its size, and it read) of a MySQL unit (`raw`) the walk makes a form of: one
/// opened by a GTID or an Anonymous_GTID, without a Transaction_payload or an FDE inside.
fn formed_gtid<'a>(u: &ListedUnit, raw: &'a [u8], crc: bool) -> Option<(usize, Gtid<'a>)> {
    if u.flags & (F_MYSQL_GTID | F_ANONYMOUS_GTID) == 0 || u.flags & (F_PAYLOAD | F_HAS_FDE) != 0 {
        return None;
    }
    let g = u32_at(raw, 9)? as usize;
    Some((g, Gtid::read(raw.get(..g)?, crc)?))
}

/// A MySQL unit kept in part under the placeholder policy (`with_placeholders`): its GTID, whose
/// transaction_length counts what is sent, then its body with the events inside `kept` (its
/// BEGIN, its kept statements; ranges of the buffer) and its XID as they are, every other event
/// a placeholder, as `_with_placeholders` and `fix_transaction_length` make it.
pub(super) fn with_placeholders(
    u: &ListedUnit,
    raw: &[u8],
    kept: &[(usize, usize)],
    crc: bool,
    runs: bool,
    out: Option<&mut Vec<u8>>,
) -> Option<Form> {
    let (g, gtid) = formed_gtid(u, raw, crc)?;
    let body = raw.get(g..)?;
    let rest = placeholders(body, u.start() + g, kept, false, crc, false, None)?;
    let sent = rest.bytes + rest.kept_bytes;
    if let Some(out) = out {
        gtid.put(sent, out);
        placeholders(body, u.start() + g, kept, false, crc, runs, Some(out));
    }
    Some(Form {
        kept_bytes: rest.kept_bytes + gtid.len(sent) as u64, // (its GTID made anew)
        kept_events: rest.kept_events + 1,
        ..rest
    })
}

/// The empty transaction of a MySQL unit (`_empty_transaction`): its GTID, its own BEGIN where
/// its second event is one (a Query whose verb is BEGIN) or a BEGIN made up, and its XID where it
/// ends with one or a COMMIT made up (a DDL unit, a non-transactional one), the made-up Queries
/// dated and numbered as the GTID; transaction_length counting the three.
fn empty(gtid: &Gtid, raw: &[u8], crc: bool, out: Option<&mut Vec<u8>>) -> Option<Form> {
    let crc_len = if crc { 4 } else { 0 };
    let evs = events(raw, gtid.raw.len())?;
    let (&(last_at, last_size, last_kind), second) = (evs.last()?, evs.first()?);
    let begin = match second.2 {
        QUERY if evs.len() > 1 => is_begin(&raw[second.0..second.0 + second.1], crc_len)?,
        QUERY_COMPRESSED | EXECUTE_LOAD_QUERY if evs.len() > 1 => return None,
        _ => false,
    };
    let begin_len = if begin {
        second.1
    } else {
        made_query_len(BEGIN_BODY, crc)
    };
    let xid = last_kind == XID;
    let end_len = if xid {
        last_size
    } else {
        made_query_len(COMMIT_BODY, crc)
    };
    let rest = (begin_len + end_len) as u64;
    if let Some(out) = out {
        gtid.put(rest, out);
        if begin {
            out.extend_from_slice(&raw[second.0..second.0 + second.1]);
        } else {
            made_query(gtid.raw, BEGIN_BODY, crc, out);
        }
        if xid {
            out.extend_from_slice(&raw[last_at..last_at + last_size]);
        } else {
            made_query(gtid.raw, COMMIT_BODY, crc, out);
        }
    }
    Some(Form {
        bytes: rest + gtid.len(rest) as u64,
        events: 3,
        ..Form::default()
    })
}

/// The MySQL unit `raw` (its GTID event first) as its empty transaction (`empty`: what
/// `filter` writes of a unit whose every statement it drops), appended to `out`; None, with
/// nothing appended, where this module declines it.
pub(crate) fn empty_transaction(raw: &[u8], crc: bool, out: &mut Vec<u8>) -> Option<()> {
    let g = u32_at(raw, 9)? as usize;
    let gtid = Gtid::read(raw.get(..g)?, crc)?;
    empty(&gtid, raw, crc, Some(out)).map(|_| ())
}

/// `joined`, a MySQL unit's GTID event and the events kept of the unit, with the GTID's
/// transaction_length counting them (`fix_transaction_length`), appended to `out`; None, with
/// nothing appended, where the GTID does not read as Python reads it.
pub(crate) fn with_length(joined: &[u8], crc: bool, out: &mut Vec<u8>) -> Option<()> {
    let g = u32_at(joined, 9)? as usize;
    let gtid = Gtid::read(joined.get(..g)?, crc)?;
    gtid.put((joined.len() - g) as u64, out);
    out.extend_from_slice(&joined[g..]);
    Some(())
}

/// What a slave relays of a MySQL unit the placeholder policy sent (`sent`: the form `skipped`
/// made), as `_without_placeholders` writes it: its events but the placeholders, its GTID's
/// transaction_length counting what is left; a GTID left alone (a skipped DDL's) becomes the
/// empty transaction of a GTID (made-up BEGIN and COMMIT). Appended to `out`; None where `sent`
/// is not such a unit.
pub fn relayed_placeholders(sent: &[u8], crc: bool, out: &mut Vec<u8>) -> Option<()> {
    let g = u32_at(sent, 9)? as usize;
    if !matches!(sent.get(4), Some(&GTID | &ANONYMOUS_GTID)) {
        return None;
    }
    let gtid = Gtid::read(sent.get(..g)?, crc)?;
    // Two hops over the headers, no list of them: a slave relays about a million such units a
    // pass of the 500 MB MySQL bench binlog, each list an allocation (perf).
    let (mut at, mut rest) = (g, 0u64);
    while at < sent.len() {
        let size = u32_at(sent, at + 9)? as usize;
        if size < HEADER_LEN || at + size > sent.len() {
            return None;
        }
        rest += if is_placeholder(sent, at) {
            0
        } else {
            size as u64
        };
        at += size;
    }
    if rest == 0 {
        let rest = (made_query_len(BEGIN_BODY, crc) + made_query_len(COMMIT_BODY, crc)) as u64;
        gtid.put(rest, out);
        made_query(gtid.raw, BEGIN_BODY, crc, out);
        made_query(gtid.raw, COMMIT_BODY, crc, out);
        return Some(());
    }
    gtid.put(rest, out);
    at = g;
    while at < sent.len() {
        let size = u32_at(sent, at + 9)? as usize;
        if !is_placeholder(sent, at) {
            out.extend_from_slice(&sent[at..at + size]);
        }
        at += size;
    }
    Some(())
}

#[cfg(test)]
#[path = "mysql_tests.rs"]
mod tests;
