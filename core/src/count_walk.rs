//! The send walk's count mode (`experiment`, shadow candidates, `UnitList.count_many`): what
//! `send::walk` would send each of many streams of a segment, counted, never assembled, in one
//! call, time bucket by time bucket. A run of units kept whole costs its two ends, and the runs
//! skipped whole between them nothing more: the list's sums (`UnitList::sums`) and, under the
//! placeholder and empty-transaction policies, the sums of each unit's form (`count_forms::Forms`,
//! made once per segment and policy for every stream, not once per stream: 64 candidates each
//! walked every skipped unit's form), less the kept runs'; each stretch of a row read once for
//! every stream of it (`Stretches`). Units kept in part and a unit no form is made for go through
//! the send walk's count mode (`send::walk`, `count_only`).

use std::collections::HashMap;

use crate::count_forms::Forms;
use crate::rows::{ROW_KEEP as KEEP, ROW_SKIP as SKIP};
use crate::send::{self, run_end, SendOptions};
use crate::sent::Sent;
use crate::skip_forms::{SKIP_EMPTY, SKIP_HEARTBEAT};
use crate::stmt_units::StmtUnits;
use crate::unit_list::{Sums, UnitList};

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
/// has none is walked unit by unit where it skips). Jobs of one row (the same answers: a rule
/// group's slaves under each skip policy) are walked one after another, and each stretch of
/// their row is read once for all of them (`Stretches`).
pub fn count_many(
    plan: &UnitList,
    bufs: &[&[u8]],
    st: Option<&StmtUnits>,
    jobs: &[Job],
    (starts, carry): (&[usize], usize),
    forms: &[&Forms],
) -> Vec<Counted> {
    let form_of = |job: &Job| {
        forms
            .iter()
            .position(|f| (f.skip, f.crc) == (job.skip, job.crc))
    };
    // (jobs by row, in the order first met: a row is one slice, its rule group's, for all of them)
    let mut by_row: Vec<(&[u8], Vec<usize>)> = Vec::new();
    for (k, job) in jobs.iter().enumerate() {
        match by_row
            .iter_mut()
            .find(|(row, _)| std::ptr::eq(*row, job.row))
        {
            Some((_, same)) => same.push(k),
            None => by_row.push((job.row, vec![k])),
        }
    }
    let mut out: Vec<Option<Counted>> = jobs.iter().map(|_| None).collect();
    for (_, same) in by_row {
        // (the forms its jobs read; a heartbeat job's none)
        let mut used: Vec<usize> = Vec::new();
        for &k in &same {
            let f = form_of(&jobs[k]).filter(|_| jobs[k].skip != SKIP_HEARTBEAT);
            if let Some(f) = f.filter(|f| !used.contains(f)) {
                used.push(f);
            }
        }
        // (past FORMS_MAX forms, which skip policies do not make, each job reads its own)
        let fits = used.len() <= FORMS_MAX;
        let mut read = Stretches::new(
            used.iter().filter(|_| fits).map(|&f| forms[f]).collect(),
            fits && same.len() > 1,
        );
        for k in same {
            let job = &jobs[k];
            let f = form_of(job).map(|f| forms[f]);
            let mine = f.filter(|_| job.skip != SKIP_HEARTBEAT);
            let mut own = (!fits).then(|| Stretches::new(mine.into_iter().collect(), false));
            let read = own.as_mut().unwrap_or(&mut read);
            out[k] = Some(count_job(plan, bufs, st, job, (starts, carry), f, read));
        }
    }
    out.into_iter().flatten().collect()
}

/// What `stretch` read of one row from a unit up to a limit, for every job of the row: its end,
/// the list's units, bytes and events of the runs kept in it, the runs kept that start past its
/// first unit and the Heartbeats' bytes before them (without checksums), and per form of
/// `Stretches::forms` the kept runs' forms (bytes, events, placeholders).
#[derive(Clone, Copy)]
struct Stretched {
    p: usize,
    kept: [u64; 3],
    starts: u64,
    heartbeat_bytes: u64,
    formed: [[u64; 3]; FORMS_MAX],
}

/// The forms a row's jobs read at most: two policies, each with and without checksums.
const FORMS_MAX: usize = 4;

/// One row's stretches (`Stretched`) for its jobs, each read once by (first unit, limit) where
/// the row has more than one job (`shared`): a rule group's slaves under three skip policies
/// walk the same stretches, which were a count's hottest loop read three times.
struct Stretches<'a> {
    forms: Vec<&'a Forms>,
    shared: bool,
    known: HashMap<(usize, usize, usize), Stretched>,
}

impl<'a> Stretches<'a> {
    fn new(forms: Vec<&'a Forms>, shared: bool) -> Self {
        let known = HashMap::new();
        Stretches {
            forms,
            shared,
            known,
        }
    }

    /// The stretch of `row` from unit i up to `limit` (see `stretch`). `heartbeat_len`: a
    /// Heartbeat's size (no checksum) before unit t.
    fn read(
        &mut self,
        row: &[u8],
        sums: &Sums,
        (i, limit): (usize, usize),
        heartbeat_len: impl Fn(usize) -> usize,
    ) -> Stretched {
        if let Some(got) = self.known.get(&(i, limit, row.len())) {
            return *got;
        }
        let f = &self.forms;
        let got = match f.len() {
            0 => measure(row, sums, (i, limit), [], heartbeat_len),
            1 => measure(row, sums, (i, limit), [f[0]], heartbeat_len),
            2 => measure(row, sums, (i, limit), [f[0], f[1]], heartbeat_len),
            3 => measure(row, sums, (i, limit), [f[0], f[1], f[2]], heartbeat_len),
            _ => measure(
                row,
                sums,
                (i, limit),
                [f[0], f[1], f[2], f[3]],
                heartbeat_len,
            ),
        };
        if self.shared {
            if self.known.len() >= STRETCHES_KEPT {
                self.known.clear(); // (memory stays bounded: read again past it)
            }
            self.known.insert((i, limit, row.len()), got);
        }
        got
    }
}

/// `Stretches::read` for N forms (a count's hottest loop: its sums kept in registers, one
/// specialization per number of forms).
fn measure<const N: usize>(
    row: &[u8],
    sums: &Sums,
    (i, limit): (usize, usize),
    forms: [&Forms; N],
    heartbeat_len: impl Fn(usize) -> usize,
) -> Stretched {
    let (mut kept, mut formed) = ([0u64; 3], [[0u64; 3]; N]);
    let (mut starts, mut heartbeat_bytes) = (0u64, 0u64);
    let p = stretch(row, i, limit, |t, start| {
        let add = |x: &mut u64, v: u64| match start {
            true => *x = x.wrapping_sub(v),
            false => *x = x.wrapping_add(v),
        };
        add(&mut kept[0], t as u64);
        add(&mut kept[1], sums.bytes[t]);
        add(&mut kept[2], sums.events[t]);
        for (f, sums) in forms.iter().zip(&mut formed) {
            f.at(t).into_iter().zip(sums).for_each(|(v, x)| add(x, v));
        }
        if start && t > i {
            starts += 1;
            heartbeat_bytes += heartbeat_len(t - 1) as u64;
        }
    });
    let mut got = Stretched {
        p,
        kept,
        starts,
        heartbeat_bytes,
        formed: [[0; 3]; FORMS_MAX],
    };
    got.formed[..N].copy_from_slice(&formed);
    got
}

/// The stretches of a row `Stretches` keeps at most.
const STRETCHES_KEPT: usize = 1 << 14;

/// Zero bytes standing for a Heartbeat owed, handed to `send::walk` (only its length is read).
const OWED: [u8; 1024] = [0; 1024];

fn count_job(
    plan: &UnitList,
    bufs: &[&[u8]],
    st: Option<&StmtUnits>,
    job: &Job,
    (starts, carry): (&[usize], usize),
    forms: Option<&Forms>,
    read: &mut Stretches,
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
    let one_plain = (plan.parts.len() == 1).then(|| plan.heartbeat_len(0, false));
    let heartbeat_plain = |k: usize| one_plain.unwrap_or_else(|| plan.heartbeat_len(k, false));
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
            let limit = match forms {
                _ if !whole => None,
                _ if job.skip == SKIP_HEARTBEAT => Some(end),
                Some(f) => Some(f.made_until(i, end, framed_all)),
                None => Some(i), // (a run kept whole alone)
            };
            // (units, the list's bytes and events, the job's forms': the row's stretch, read once
            // for its jobs)
            let mut kept = [0u64; 6];
            let p = match limit {
                Some(limit) => {
                    let got = read.read(row, sums, (i, limit), heartbeat_plain);
                    kept[..3].copy_from_slice(&got.kept);
                    if let Some(f) = formed {
                        // (count_many gives each job a read that holds its form)
                        let slot = read.forms.iter().position(|g| std::ptr::eq(*g, f));
                        kept[3..].copy_from_slice(&got.formed[slot.unwrap_or_default()]);
                    } else {
                        s.heartbeats += got.starts;
                        s.heartbeat_bytes +=
                            got.heartbeat_bytes + if job.crc { 4 * got.starts } else { 0 };
                    }
                    got.p
                }
                None => i,
            };
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
