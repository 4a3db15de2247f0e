//! `experiment`'s counting walk under the placeholder and empty-transaction policies: what
//! `send::walk` counts of a slave's stream (`count_only`), each skipped unit's form (its
//! placeholders, its empty transaction) made once per segment for every slave under the policy
//! (`skip_forms`) rather than once per slave, runs of units kept whole from the list's sums, and
//! what it cannot take (a unit kept in part, a form not made) by `send::walk` itself, unit by unit.

use crate::rows::{ROW_KEEP as KEEP, ROW_SKIP as SKIP};
use crate::send::{self, SendOptions};
use crate::sent::Sent;
use crate::skip_forms::{self, SKIP_EMPTY, SKIP_PLACEHOLDER};
use crate::stmt_units::{StmtUnits, ALWAYS};
use crate::tally::pieces_of;
use crate::unit_list::{ListedUnit, UnitList};

/// Bytes per unit in `skip_forms`' packing: its form's bytes (FORM_NONE: the walk cannot make
/// it), events and placeholders, each a u64 LE; after a head of the same size (the policy's skip
/// code, the checksum flag, the units).
pub const FORM_BYTES: usize = 24;
const FORM_NONE: u64 = u64::MAX;

/// What `send::walk` sends for unit k (`u`) of `plan` skipped whole under `skip` (see
/// skip_forms::skipped): (bytes, events, placeholders), None where it cannot make it. A
/// statement unit by keys (`st`) is framed by the pieces every stream keeps (what
/// `StmtUnits::kept_ranges` gives a stream that keeps none of its statements); `scratch` holds
/// them.
fn form(
    k: usize,
    u: &ListedUnit,
    bufs: &[&[u8]],
    st: Option<&StmtUnits>,
    (skip, crc): (u8, bool),
    scratch: &mut Vec<(usize, usize)>,
) -> Option<(u64, u64, u64)> {
    let framing = match st.and_then(|st| pieces_of(st, k)) {
        Some(pieces) if skip == SKIP_PLACEHOLDER && u.lo == u32::MAX => {
            scratch.clear();
            let always = pieces.iter().filter(|p| p.key == ALWAYS);
            scratch.extend(always.map(|p| (p.start, p.end)));
            Some(scratch.as_slice())
        }
        _ => None,
    };
    let buf = bufs.get(u.part as usize)?;
    let f = skip_forms::skipped(u, buf, skip, crc, false, framing, None)?;
    Some((f.bytes, f.events, f.placeholders))
}

/// Every unit's form under one skip policy (`skip`: SKIP_PLACEHOLDER or SKIP_EMPTY; `crc`: its
/// events' checksums) if the unit is skipped whole (`form`), packed FORM_BYTES each after a
/// head: made once for every stream counted under that policy (`count_with_forms`).
pub fn skip_forms(
    plan: &UnitList,
    bufs: &[&[u8]],
    st: Option<&StmtUnits>,
    skip: u8,
    crc: bool,
) -> Vec<u8> {
    let n = plan.units.len();
    let mut out = Vec::with_capacity(FORM_BYTES * (n + 1));
    let mut scratch = Vec::new();
    let head = [u64::from(skip), u64::from(crc), n as u64];
    let forms = plan.units.iter().enumerate().map(|(k, u)| {
        form(k, u, bufs, st, (skip, crc), &mut scratch)
            .map_or([FORM_NONE, 0, 0], |(b, e, p)| [b, e, p])
    });
    for words in std::iter::once(head).chain(forms) {
        for word in words {
            out.extend_from_slice(&word.to_le_bytes());
        }
    }
    out
}

/// Word `i` of `forms` (`skip_forms`' packing).
fn word(forms: &[u8], i: usize) -> Option<u64> {
    let b = forms.get(8 * i..8 * i + 8)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

/// `send::walk` counting only (`opt.count_only`, no batch limit) under the placeholder or
/// empty-transaction policy, a skipped unit's form read from `forms` (`skip_forms` of this list
/// under this policy, made once for every stream; other bytes: made here, unit by unit), runs of
/// units kept whole from the list's sums, and a unit kept in part (or whose form cannot be made)
/// by `send::walk` itself, that unit alone. The same counts as `send::walk`, which it is under
/// any other policy or where the units do not all lie in order inside the buffers.
pub fn count_with_forms(
    plan: &UnitList,
    bufs: &[&[u8]],
    row: &[u8],
    keep: &[u8],
    from: usize,
    opt: &SendOptions,
    forms: &[u8],
) -> Sent {
    let sums = plan.sums();
    let inside = sums
        .part_end
        .iter()
        .enumerate()
        .all(|(p, end)| bufs.get(p).is_some_and(|b| *end <= b.len()));
    let policy = (opt.skip, opt.heartbeat_crc);
    let counting = opt.count_only && opt.limit == u64::MAX;
    if !(counting && matches!(opt.skip, SKIP_PLACEHOLDER | SKIP_EMPTY) && sums.sound && inside) {
        return send::walk(plan, bufs, row, keep, from, opt);
    }
    let n = row.len().min(plan.units.len());
    let head = [
        u64::from(opt.skip),
        u64::from(opt.heartbeat_crc),
        plan.units.len() as u64,
    ];
    let made = forms.len() == FORM_BYTES * (plan.units.len() + 1)
        && (0..3).all(|i| word(forms, i) == Some(head[i]));
    let mut scratch = Vec::new();
    let mut form_of = |k: usize, u: &ListedUnit| {
        if !made {
            return form(
                k,
                u,
                bufs,
                opt.stmts.map(|(st, _)| st),
                policy,
                &mut scratch,
            );
        }
        let at = 3 * (k + 1);
        let bytes = word(forms, at).filter(|b| *b != FORM_NONE)?;
        Some((bytes, word(forms, at + 1)?, word(forms, at + 2)?))
    };
    let between = |i: usize, j: usize| {
        (
            sums.bytes[j] - sums.bytes[i],
            sums.events[j] - sums.events[i],
        )
    };
    let mut s = Sent::default();
    // The Heartbeat the caller owes (none of this walk's own: no policy here skips by stretch).
    let mut given = opt.pending;
    let flush = |s: &mut Sent, given: &mut Option<&[u8]>| {
        if let Some(raw) = given.take() {
            s.pending_done = true;
            s.heartbeats += 1;
            s.heartbeat_bytes += raw.len() as u64;
        }
    };
    let mut i = from.min(n);
    while i < n {
        let u = &plan.units[i];
        if row[i] == KEEP {
            let j = (i + 1..n).find(|j| row[*j] != KEEP).unwrap_or(n);
            flush(&mut s, &mut given);
            let (bytes, events) = between(i, j);
            s.sent_bytes += bytes;
            s.sent_events += events;
            s.kept += (j - i) as u64;
            s.read_bytes += bytes;
            s.read_events += events;
            i = j;
            continue;
        }
        // A statement unit's framing is its keys' to say: without them, the walk's own answer.
        let framed = opt.stmts.is_some() || u.lo != u32::MAX || opt.skip == SKIP_EMPTY;
        let skipped = if row[i] == SKIP && framed {
            form_of(i, u)
        } else {
            None
        };
        if let Some((bytes, events, placeholders)) = skipped {
            flush(&mut s, &mut given);
            s.skip_units += 1;
            s.skip_events += events;
            s.skip_bytes += bytes;
            s.placeholders += placeholders;
            s.skipped += 1;
            let (bytes, events) = between(i, i + 1);
            s.read_bytes += bytes;
            s.read_events += events;
            i += 1;
            continue;
        }
        // Unit i by the walk itself, alone, with the Heartbeat still owed.
        let one = SendOptions {
            pending: given,
            ..*opt
        };
        let t = send::walk(plan, bufs, &row[..i + 1], keep, i, &one);
        if t.next == i {
            break;
        }
        if t.pending_done {
            given = None;
            s.pending_done = true;
        }
        add(&mut s, &t);
        i = t.next;
    }
    s.next = i;
    s
}

/// Adds the counts of `t` to `s`.
fn add(s: &mut Sent, t: &Sent) {
    s.kept += t.kept;
    s.partial += t.partial;
    s.skipped += t.skipped;
    s.sent_bytes += t.sent_bytes;
    s.sent_events += t.sent_events;
    s.read_bytes += t.read_bytes;
    s.read_events += t.read_events;
    s.heartbeats += t.heartbeats;
    s.heartbeat_bytes += t.heartbeat_bytes;
    s.skip_units += t.skip_units;
    s.skip_events += t.skip_events;
    s.skip_bytes += t.skip_bytes;
    s.placeholders += t.placeholders;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tally::tests::unit;

    fn counts(s: &Sent) -> [u64; 15] {
        [
            s.next as u64,
            s.kept,
            s.partial,
            s.skipped,
            s.sent_bytes,
            s.sent_events,
            s.read_bytes,
            s.read_events,
            s.heartbeats,
            s.heartbeat_bytes,
            s.skip_units,
            s.skip_events,
            s.skip_bytes,
            s.placeholders,
            u64::from(s.pending_done),
        ]
    }

    #[test]
    fn counting_with_forms_counts_as_the_send_walk() {
        use crate::rows::ROW_SLOW;
        let mut buf = Vec::new();
        let (a, _) = unit(&mut buf, &["UPDATE t SET a=1", "INSERT INTO u VALUES (1)"]);
        let (b, _) = unit(&mut buf, &["UPDATE t SET a=2", "UPDATE t SET a=3"]);
        let (c, _) = unit(&mut buf, &["INSERT INTO u VALUES (2)"]);
        let mut list = UnitList::default();
        list.add(b"f", 0, &[a, b, c], &[]);
        let st = StmtUnits::build(&list, &[&buf], &[(13, 0, 0)]);
        let owed = [0u8; 30];
        let mut checked = 0;
        for skip in [SKIP_PLACEHOLDER, SKIP_EMPTY] {
            let forms = skip_forms(&list, &[&buf], Some(&st), skip, false);
            for kb in [[0u8, 0], [0, 1], [1, 0], [1, 1]] {
                let mut row = vec![ROW_SLOW; 3];
                st.rows(&mut row, &kb);
                assert!(!row.contains(&ROW_SLOW));
                for (pending, from, stmts) in [
                    (None, 0, true),
                    (Some(&owed[..]), 0, true),
                    (Some(&owed[..]), 1, true),
                    (None, 0, false),
                ] {
                    let opt = SendOptions {
                        batch_bytes: 0,
                        limit: u64::MAX,
                        skip,
                        partial_ok: skip == SKIP_EMPTY,
                        runs: false,
                        stretches: false,
                        pending,
                        server_id: 0,
                        heartbeat_crc: false,
                        stmts: stmts.then_some((&st, &kb[..])),
                        count_only: true,
                    };
                    let walked = counts(&send::walk(&list, &[&buf], &row, &[], from, &opt));
                    for f in [&forms[..], b"", &forms[..FORM_BYTES]] {
                        let s = count_with_forms(&list, &[&buf], &row, &[], from, &opt, f);
                        assert_eq!(
                            counts(&s),
                            walked,
                            "{skip} {kb:?} {row:?} {pending:?} {from}"
                        );
                    }
                    checked += usize::from(walked[0] == 3 && walked[10] > 0);
                }
            }
            assert_ne!(word(&forms, 3), Some(FORM_NONE)); // unit a's form is made
        }
        assert!(checked >= 4, "{checked}");
    }
}
