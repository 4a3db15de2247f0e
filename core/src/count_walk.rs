//! The send walk's count mode (`experiment`, shadow candidates, `UnitList.count_many`): what
//! `send::walk` would send each of many streams of a segment, counted, never assembled, in one
//! call, time bucket by time bucket. A run of units kept whole costs its two ends, and the runs
//! skipped whole between them nothing more: the list's sums (`UnitList::sums`) and, under the
//! placeholder and empty-transaction policies, the sums of each unit's form (`Forms`, made once
//! per segment and policy for every stream, not once per stream: 64 candidates each walked every
//! skipped unit's form), less the kept runs'. Units kept in part and a unit no form is made for
//! go through the send walk's count mode (`send::walk`, `count_only`).

use std::sync::{Arc, Mutex};

use crate::rows::{ROW_KEEP as KEEP, ROW_SKIP as SKIP};
use crate::scan::{F_COMPLETE, F_FAST, F_MARIADB_GTID};
use crate::send::{self, run_end, SendOptions};
use crate::sent::{prefetch, Sent};
use crate::skip_forms::{self, SKIP_EMPTY, SKIP_HEARTBEAT, SKIP_PLACEHOLDER};
use crate::stmt_units::{StmtUnits, ALWAYS};
use crate::unit_list::{ListedUnit, UnitList};

/// Every unit's form if skipped whole under one skip policy, as sums from the list's start
/// (n + 1): bytes, events and placeholders (`Sum`), the units no form is made for (`none`), and
/// (placeholders) the statement units, whose framing is their keys' to say. Counts are u32 (as a
/// file's offsets), and the two that stay 0 in most segments take no memory until one is not
/// (`Zeros`): the arrays are written fresh per segment; their pages faulting in cost a third.
pub struct Forms {
    pub skip: u8,
    pub crc: bool,
    sums: Vec<Sum>,
    zeros: [Zeros; 2], // (`none`, `statements`)
}

/// The forms of the units before one (`Forms`): bytes, events, placeholders; one record a unit.
type Sum = (u64, u32, u32);

/// Sums from the list's start that are 0 until some unit adds to them: empty until then.
#[derive(Default)]
struct Zeros(Vec<u32>);

impl Zeros {
    /// Both columns of `Forms::zeros` given their sums before unit k.
    fn push_both(zeros: &mut [Zeros; 2], k: usize, sums: [u64; 2]) {
        for (Zeros(z), sum) in zeros.iter_mut().zip(sums) {
            if sum != 0 && z.is_empty() {
                z.resize(k, 0);
            }
            if !z.is_empty() {
                z.push(sum as u32);
            }
        }
    }
}

/// How many units ahead of the one whose form it makes `Forms::make` asks for the bytes of
/// (each unit's first bytes wait on memory otherwise: the segment's pages are in no cache).
const AHEAD: usize = 16;
/// The units whose forms under the empty-transaction policy are made from their records alone
/// (under the placeholder policy, the fast ones among them).
const MARIADB: u32 = F_COMPLETE | F_MARIADB_GTID;

impl Forms {
    /// The forms of every unit of `plan` under each of `policies` (skip code, checksums), in one
    /// read of its records (not one per policy: a live pass meets them out of every cache), each
    /// unit's read off its record where `recorded` makes it, else off its first and
    /// last events, asked for AHEAD units ahead: under the empty-transaction policy, no MariaDB
    /// unit's (a walk for both policies asked for every statement unit's bytes, and summed the
    /// statement units no empty-transaction count reads). `st`: the list's statement units by key
    /// (a statement unit is framed by the pieces every stream keeps, what
    /// `StmtUnits::kept_ranges` gives a stream keeping none).
    pub fn make_many(
        plan: &UnitList,
        bufs: &[&[u8]],
        st: Option<&StmtUnits>,
        policies: &[(u8, bool)],
    ) -> Vec<Forms> {
        // (none read: `recorded`'s, and a statement unit `form` frames by its record)
        let unread = |a: &ListedUnit, skip: u8| {
            a.flags & MARIADB == MARIADB
                && (skip == SKIP_EMPTY || a.flags & F_FAST != 0 || !a.tabled)
        };
        let n = plan.units.len();
        let mut made: Vec<_> = (policies.iter())
            .map(|&(skip, crc)| Forms {
                skip,
                crc,
                sums: Vec::with_capacity(n + 1),
                zeros: [Zeros::default(), Zeros::default()],
            })
            .collect();
        // (per policy: the sums so far, and those of `none` and `statements`)
        let mut at = vec![(Sum::default(), [0u64; 2]); policies.len()];
        let mut scratch = Vec::new();
        for (k, u) in plan.units.iter().enumerate() {
            // (a form is read off the unit's record, its first event and its last)
            let ahead = (plan.units.get(k + AHEAD))
                .filter(|a| policies.iter().any(|&(skip, _)| !unread(a, skip)));
            if let Some(a) = ahead {
                let buf = bufs.get(a.part as usize).copied().unwrap_or_default();
                for at in [a.start(), a.last()] {
                    prefetch(buf.get(at..(at + 32).min(a.end())).unwrap_or_default());
                }
            }
            for ((f, (sum, rare)), &policy) in made.iter_mut().zip(&mut at).zip(policies) {
                if *rare != [0; 2] {
                    // (both 0: neither was ever other, the sums only grow; `Zeros` stay empty)
                    Zeros::push_both(&mut f.zeros, k, *rare);
                }
                f.sums.push(*sum);
                let got = recorded(u, bufs, policy)
                    .or_else(|| form(k, u, bufs, st, policy, &mut scratch));
                match got {
                    Some((b, e, p)) => *sum = (sum.0 + b, sum.1 + e as u32, sum.2 + p as u32),
                    None => rare[0] += 1,
                }
                // (the empty-transaction policy frames a statement unit as any other: `framed_all`)
                rare[1] += u64::from(policy.0 != SKIP_EMPTY && !u.tabled);
            }
        }
        for (f, (sum, rare)) in made.iter_mut().zip(at) {
            f.sums.push(sum);
            Zeros::push_both(&mut f.zeros, n, rare);
        }
        made
    }

    /// The end of the longest run of units from i, up to j, whose forms are made (and framed:
    /// `framed_all`, else no statement unit among them).
    fn made_until(&self, i: usize, j: usize, framed_all: bool) -> usize {
        let hi = j.min(self.sums.len().saturating_sub(1)).max(i);
        // (the last unit up to which a sum is still its value at i; an empty one is 0 throughout)
        let to = |z: &Zeros| {
            z.0.get(i..=hi)
                .map_or(hi, |s| i + s.partition_point(|&x| x == s[0]) - 1)
        };
        let framed = (!framed_all).then(|| to(&self.zeros[1]));
        to(&self.zeros[0]).min(framed.unwrap_or(hi))
    }

    /// The forms of units 0..k: bytes, events, placeholders.
    fn at(&self, k: usize) -> [u64; 3] {
        let (b, e, p) = self.sums[k];
        [b, e.into(), p.into()]
    }
}

/// What `form` makes of unit `u` where its record alone says it, reading no byte of the unit
/// (its head, and under the placeholder policy its end, were a cache miss per unit and policy):
/// the empty transaction of a complete unit a MariaDB GTID opens (`gtid_size`: the scanner read
/// it off that event's header), the placeholders of a complete fast MariaDB unit (its GTID,
/// Table_maps, Rows and annotations, an XID: the scanner's fast shape). None: `form` reads it.
#[inline(always)]
fn recorded(u: &ListedUnit, bufs: &[&[u8]], (skip, crc): (u8, bool)) -> Option<(u64, u64, u64)> {
    let len = u.end().checked_sub(u.start())?;
    if u.flags & MARIADB != MARIADB || bufs.get(u.part as usize)?.len() < u.end() {
        return None; // (bounds only: no byte read)
    }
    let f = match skip {
        SKIP_EMPTY => skip_forms::empty_counts(len, u.gtid_size as usize, crc),
        SKIP_PLACEHOLDER if u.flags & F_FAST != 0 && u.tabled => {
            skip_forms::recorded_placeholders(u, crc)
        }
        _ => None,
    }?;
    Some((f.bytes, f.events, f.placeholders))
}

/// What `send::walk` sends for unit k (`u`) of `plan` skipped whole under `skip` (see
/// skip_forms::skipped): (bytes, events, placeholders), None where it cannot make it.
fn form(
    k: usize,
    u: &ListedUnit,
    bufs: &[&[u8]],
    st: Option<&StmtUnits>,
    (skip, crc): (u8, bool),
    scratch: &mut Vec<(usize, usize)>,
) -> Option<(u64, u64, u64)> {
    let framing = match st.and_then(|st| st.of(k)) {
        Some(pieces) if skip == SKIP_PLACEHOLDER && !u.tabled => {
            scratch.clear();
            let always = pieces.iter().filter(|p| p.key == ALWAYS);
            scratch.extend(always.map(|p| (p.start(), p.end())));
            Some(scratch.as_slice())
        }
        _ => None,
    };
    let buf = bufs.get(u.part as usize).filter(|b| b.len() >= u.end())?;
    // A MariaDB statement unit its keys frame by its GTID alone and its last event (the GTID is
    // its BEGIN) is formed as a fast unit is, off its record: its two events are not read.
    let ends = [
        (u.start(), u.start() + u.gtid_size as usize),
        (u.last(), u.end()),
    ];
    let f = match u.flags & MARIADB == MARIADB && framing == Some(&ends[..]) {
        true => skip_forms::recorded_placeholders(u, crc),
        false => skip_forms::skipped(u, buf, skip, crc, false, framing, None),
    }?;
    Some((f.bytes, f.events, f.placeholders))
}

/// One stream counted: its answer per unit (`row`, from `UnitList::rows`), keep bytes per name
/// id, statement keep bytes per key id (None: its statement units are not decided by key), and
/// its walk's policy (`skip`, `partial_ok`, the Heartbeats' checksum), with the size of a
/// Heartbeat it still owes from before the segment (0: none).
pub struct Job<'a> {
    pub row: &'a [u8],
    pub keep: &'a [u8],
    pub stmt_keep: Option<&'a [u8]>,
    pub skip: u8,
    pub partial_ok: bool,
    pub crc: bool,
    pub owed: usize,
}

/// What one stream is sent of the segment (`sent`: `next` the first unit not counted, `pending`
/// the unit whose Heartbeat it still owes), and per time bucket the bytes it read and was sent
/// (Heartbeats and skip forms included).
pub struct Counted {
    pub sent: Sent,
    pub read_by_bucket: Vec<u64>,
    pub sent_by_bucket: Vec<u64>,
}

/// Every job over the units of `plan` from `starts[0]`, bucket by bucket (`starts`: the first
/// unit of each, ascending; the walk is cut where each ends, as `experiment` cut it per bucket: a
/// Heartbeat owed at a bucket's end is owed into the next as one of `carry` bytes). `st` the
/// list's statement units by key, `forms` those made for it (`Forms::make`; a job whose policy
/// has none is walked unit by unit where it skips).
pub fn count_many(
    plan: &UnitList,
    bufs: &[&[u8]],
    st: Option<&StmtUnits>,
    jobs: &[Job],
    (starts, carry): (&[usize], usize),
    forms: &[&Forms],
) -> Vec<Counted> {
    jobs.iter()
        .map(|job| {
            let f = forms
                .iter()
                .find(|f| (f.skip, f.crc) == (job.skip, job.crc));
            count_job(plan, bufs, st, job, (starts, carry), f.copied())
        })
        .collect()
}

/// Zero bytes standing for a Heartbeat owed, handed to `send::walk` (only its length is read).
const OWED: [u8; 1024] = [0; 1024];

fn count_job(
    plan: &UnitList,
    bufs: &[&[u8]],
    st: Option<&StmtUnits>,
    job: &Job,
    (starts, carry): (&[usize], usize),
    forms: Option<&Forms>,
) -> Counted {
    let sums = plan.sums();
    let n = job.row.len().min(plan.units.len());
    let inside = sums
        .part_end
        .iter()
        .enumerate()
        .all(|(p, end)| bufs.get(p).is_some_and(|b| *end <= b.len()));
    // Runs are taken whole where the sums stand for the units; else unit by unit.
    let whole = sums.sound && inside;
    let stmts = st.zip(job.stmt_keep);
    let opt = SendOptions {
        limit: u64::MAX,
        skip: job.skip,
        partial_ok: job.partial_ok,
        heartbeat_crc: job.crc,
        stmts,
        count_only: true,
        ..SendOptions::default()
    };
    // A statement unit's framing is its keys' to say: without them, the walk's own answer.
    let framed_all = stmts.is_some() || job.skip == SKIP_EMPTY;
    let mut s = Sent::default();
    // A Heartbeat's size is its file name's: the one part's for a segment of one file (the
    // unit's record, read for its part, was a cache miss at each stretch's end for every job).
    let one_file = (plan.parts.len() == 1).then(|| plan.heartbeat_len(0, job.crc));
    let heartbeat_len = |k: usize| one_file.unwrap_or_else(|| plan.heartbeat_len(k, job.crc));
    // The Heartbeat owed before a unit: given (its size: the caller's, or owed at a cut or
    // before a unit the send walk takes) or a skipped unit's (`owed`).
    let (mut given, mut owed) = ((job.owed > 0).then_some(job.owed), None::<usize>);
    let (mut read_by_bucket, mut sent_by_bucket) = (Vec::new(), Vec::new());
    let mut i = starts.first().map_or(n, |a| (*a).min(n));
    'buckets: for (b, _) in starts.iter().enumerate() {
        let end = starts.get(b + 1).map_or(n, |e| (*e).min(n));
        if b > 0 && owed.take().is_some() {
            given = Some(carry); // (the walk was cut here: the Heartbeat is owed into the next)
        }
        let (read0, sent0) = (s.read_bytes, sent_total(&s));
        while i < end {
            let row = &job.row[..end];
            // A stretch of units kept whole, Heartbeat stretches and made forms (`stretch`): its
            // kept runs at their two ends, its skipped units the rest (6.6 million runs of the
            // DDL-heavy count took 65 instructions each, one by one). A Heartbeat is sent before
            // each kept run a skipped unit precedes, owed after the last, and what is owed before
            // the stretch is sent before a first unit kept or formed, else replaced.
            let formed = forms.filter(|_| job.skip != SKIP_HEARTBEAT);
            let mut kept = [0u64; 6]; // (units, the list's bytes and events, the forms')
            let edge = |t: usize, start: bool| {
                let mut add = |q: usize, x: u64| match start {
                    true => kept[q] = kept[q].wrapping_sub(x),
                    false => kept[q] = kept[q].wrapping_add(x),
                };
                add(0, t as u64);
                add(1, sums.bytes[t]);
                add(2, sums.events[t]);
                if let Some(f) = formed {
                    f.at(t).into_iter().zip(3..).for_each(|(x, q)| add(q, x));
                } else if start && t > i {
                    s.heartbeats += 1;
                    s.heartbeat_bytes += heartbeat_len(t - 1) as u64;
                }
            };
            let limit = match forms {
                _ if !whole => None,
                _ if job.skip == SKIP_HEARTBEAT => Some(end),
                Some(f) => Some(f.made_until(i, end, framed_all)),
                None => Some(i), // (a run kept whole alone)
            };
            let p = limit.map_or(i, |limit| stretch(row, i, limit, edge));
            if p > i {
                let owed_len = given.take().or(owed.take().map(heartbeat_len));
                if let Some(len) = owed_len.filter(|_| formed.is_some() || row[i] == KEEP) {
                    s.heartbeats += 1;
                    s.heartbeat_bytes += len as u64;
                }
                let skipped = (p - i) as u64 - kept[0];
                (s.kept, s.skipped) = (s.kept + kept[0], s.skipped + skipped);
                (s.sent_bytes, s.sent_events) = (s.sent_bytes + kept[1], s.sent_events + kept[2]);
                if let Some(f) = formed {
                    let ([b, e, h], [b0, e0, h0]) = (f.at(p), f.at(i));
                    s.skip_units += skipped;
                    s.skip_bytes += b - b0 - kept[3];
                    s.skip_events += e - e0 - kept[4];
                    s.placeholders += h - h0 - kept[5];
                } else {
                    (given, owed) = (None, (row[p - 1] == SKIP).then_some(p - 1));
                }
                s.read_bytes += sums.bytes[p] - sums.bytes[i];
                s.read_events += sums.events[p] - sums.events[i];
                i = p;
                continue;
            }
            // Units i.. by the send walk itself, with the Heartbeat still owed: a run of units
            // kept in part, or unit i alone where its form is the walk's to make. (A Heartbeat
            // stretch is counted above: a send walk's call per stretch cost a heartbeat job 8x
            // its time.)
            let alone = !whole || (row[i] == SKIP && forms.is_some());
            let j = if alone { i + 1 } else { run_end(row, i) };
            let len = given.or(owed.map(heartbeat_len));
            let one = SendOptions {
                pending: len.map(|len| &OWED[..len.min(OWED.len())]),
                ..opt
            };
            let t = send::walk(plan, bufs, &job.row[..j], job.keep, i, &one);
            if t.next == i {
                break 'buckets;
            }
            if t.pending_done {
                (given, owed) = (None, None);
            }
            owed = t.pending.or(owed);
            s.add(&t);
            i = t.next;
        }
        read_by_bucket.push(s.read_bytes - read0);
        sent_by_bucket.push(sent_total(&s) - sent0);
    }
    s.next = i;
    s.pending = owed;
    // The caller's Heartbeat is sent or replaced by the first unit counted, whatever it is.
    s.pending_done = job.owed > 0 && i > starts.first().map_or(n, |a| (*a).min(n));
    Counted {
        sent: s,
        read_by_bucket,
        sent_by_bucket,
    }
}

/// The end p of the stretch from unit i of `row` that `count_job` counts by runs (answers ROW_KEEP
/// or ROW_SKIP up to `limit`, or a run kept from i), calling `edge(t, true)` at the start t of each
/// run kept in it and `edge(t, false)` at its end, eight answers to a word (outside i..p: SKIP).
fn stretch(row: &[u8], i: usize, limit: usize, mut edge: impl FnMut(usize, bool)) -> usize {
    let limit = match row[i] {
        KEEP => limit.max(run_end(row, i)),
        _ => limit,
    };
    let mut p = i;
    while p + 8 <= limit
        && u64::from_le_bytes(row[p..p + 8].try_into().unwrap_or([1; 8])) & !PLAIN == 0
    {
        p += 8;
    }
    while p < limit && row[p] & !PLAIN as u8 == 0 {
        p += 1;
    }
    let (row, mut t, mut last) = (&row[..p], i, 0u64);
    while t <= p {
        let mut w = [SKIP; 8];
        let now = u64::from_le_bytes(match row.get(t..t + 8) {
            Some(eight) => eight.try_into().unwrap_or(w),
            None => {
                w[..p - t].copy_from_slice(&row[t..]);
                w
            }
        });
        let before = now << 8 | last >> 56; // (bit 1 of a byte: ROW_KEEP)
        for (mut edges, start) in [(now & !before, true), (before & !now, false)] {
            while edges != 0 {
                edge(t + edges.trailing_zeros() as usize / 8, start);
                edges &= edges - 1;
            }
        }
        (t, last) = (t + 8, now);
    }
    p
}

/// Eight answers ROW_KEEP or ROW_SKIP have no bit outside this word's.
const PLAIN: u64 = u64::from_ne_bytes([KEEP | SKIP; 8]);

/// Every byte a walk sent: master events, Heartbeats, skip forms.
fn sent_total(s: &Sent) -> u64 {
    s.sent_bytes + s.heartbeat_bytes + s.skip_bytes
}

#[cfg(test)]
#[path = "count_walk_tests.rs"]
mod tests;

/// The skipped units' forms a list has made, per policy (made at the first count under it, kept
/// for its later counts until `clear`: a buffer's count walks each slave the compiled walk leaves
/// to Python apart; counted in the list's `held_bytes`, so that the master's kept segments stay
/// within their budget).
#[derive(Default)]
pub struct FormsCache(Mutex<Vec<Arc<Forms>>>);

impl FormsCache {
    /// The forms under each of `policies` (placeholder and empty-transaction ones only), the
    /// missing ones made in one read of the units (`Forms::make_many`).
    pub fn get(
        &self,
        list: &UnitList,
        bufs: &[&[u8]],
        st: Option<&StmtUnits>,
        policies: &[(u8, bool)],
    ) -> Vec<Arc<Forms>> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut missing: Vec<(u8, bool)> = Vec::new();
        for &p in policies {
            let formed = matches!(p.0, SKIP_PLACEHOLDER | SKIP_EMPTY);
            if formed && !held.iter().any(|f| (f.skip, f.crc) == p) && !missing.contains(&p) {
                missing.push(p);
            }
        }
        if !missing.is_empty() {
            let made = Forms::make_many(list, bufs, st, &missing);
            held.extend(made.into_iter().map(Arc::new));
        }
        held.clone()
    }

    /// Every form dropped (`UnitList.forget_forms`).
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The bytes its forms hold (a kept segment's `held_bytes`).
    pub fn heap_bytes(&self) -> usize {
        let held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let zeros = |f: &Forms| f.zeros.iter().map(|z| z.0.capacity() * 4).sum::<usize>();
        held.iter()
            .map(|f| f.sums.capacity() * std::mem::size_of::<Sum>() + zeros(f))
            .sum()
    }
}
