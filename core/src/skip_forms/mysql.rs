//! The skip policies' forms of a skipped MySQL unit (opened by a GTID or an Anonymous_GTID
//! event): the same bytes `Placeholder.skipped` and `EmptyTransaction.skipped` make of it in
//! Python (`_with_placeholders`, TransactionFilter's `_empty_transaction`, each through
//! `codec.writer.fix_transaction_length`), and what a slave relays of the placeholder form
//! (`slave/node.py`'s `_without_placeholders`), for `simulate --verify`.
//!
//! Each GTID's transaction_length counts what is left of its unit (`trx_length`). Tagged GTIDs
//! (8.3+, another encoding), Transaction_payload units, units with a Format_description inside,
//! and anything that does not read as Python reads it are declined (None): the per-unit way
//! sends them.

use super::is_placeholder;
use super::{
    made_query, made_query_len, placeholders, rand_len, Form, BEGIN_BODY, COMMIT_BODY, SKIP_EMPTY,
    SKIP_PLACEHOLDER,
};
use crate::hops;
use crate::le::u32_at;
use crate::scan::{F_ANONYMOUS_GTID, F_FAST, F_HAS_FDE, F_MYSQL_GTID, F_PAYLOAD};
use crate::sql::{query_ranges, statement_verb};
use crate::trx_length::Gtid;
use crate::types::{
    ANONYMOUS_GTID, EXECUTE_LOAD_QUERY, GTID, HEADER_LEN, QUERY, QUERY_COMPRESSED, XID,
};
use crate::unit_list::ListedUnit;

/// A Query's post-header length as every MySQL server since 5.0 writes it (QUERY_HEADER_LEN:
/// thread_id, exec_time, db_len, error_code, status_vars_len), where the text of a unit's second
/// event is read (the walk has no Format_description at hand; the scanner read it with one).
const QUERY_POST: usize = 13;

/// The events of `raw` from `at` on, as (offset, size, type); None where they do not tile it.
fn events(raw: &[u8], at: usize) -> Option<Vec<(usize, usize, u8)>> {
    let mut walk = hops::events(raw, at, raw.len());
    let out = walk
        .by_ref()
        .map(|(at, size)| (at, size, raw[at + 4]))
        .collect();
    (walk.at == raw.len()).then_some(out)
}

/// Whether the Query event `ev` is a BEGIN as TransactionFilter asks (`statement_verb` of its
/// text is BEGIN); None where the verb is not ASCII (Python upper-cases other letters too).
fn is_begin(ev: &[u8], crc_len: usize) -> Option<bool> {
    let (_, sql) = query_ranges(ev, 0, QUERY_POST, crc_len)?;
    let verb = statement_verb(&ev[sql]);
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

/// What a slave relays of a MySQL unit the placeholder policy sent (`sent`: the form `skipped`
/// made), as `_without_placeholders` writes it: its events but the placeholders, its GTID's
/// transaction_length counting what is left; a GTID left alone (a skipped DDL's) becomes the
/// empty transaction of a GTID (made-up BEGIN and COMMIT). Appended to `out`; None, `out` as it
/// was, where `sent` is not such a unit.
pub fn relayed_placeholders(sent: &[u8], crc: bool, out: &mut Vec<u8>) -> Option<()> {
    let g = u32_at(sent, 9)? as usize;
    if !matches!(sent.get(4), Some(&GTID | &ANONYMOUS_GTID)) {
        return None;
    }
    let gtid = Gtid::read(sent.get(..g)?, crc)?;
    // Two hops over the headers, no list of them: a slave relays about a million such units a
    // pass of the 500 MB MySQL bench binlog, each list an allocation (perf).
    let (mut walk, mut rest) = (hops::events(sent, g, sent.len()), 0u64);
    for (at, size) in walk.by_ref() {
        if !is_placeholder(sent, at) {
            rest += size as u64;
        }
    }
    if walk.at != sent.len() {
        return None;
    }
    if rest == 0 {
        let rest = (made_query_len(BEGIN_BODY, crc) + made_query_len(COMMIT_BODY, crc)) as u64;
        gtid.put(rest, out);
        made_query(gtid.raw, BEGIN_BODY, crc, out);
        made_query(gtid.raw, COMMIT_BODY, crc, out);
        return Some(());
    }
    gtid.put(rest, out);
    for (at, size) in hops::events(sent, g, sent.len()) {
        if !is_placeholder(sent, at) {
            out.extend_from_slice(&sent[at..at + size]);
        }
    }
    Some(())
}

#[cfg(test)]
#[path = "mysql_tests.rs"]
mod tests;
