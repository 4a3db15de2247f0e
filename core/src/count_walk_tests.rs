use super::*;
use crate::rows::{ROW_KEEP, ROW_PARTIAL, ROW_SKIP, ROW_SLOW};
use crate::skip_forms::SKIP_PLACEHOLDER;
use crate::tally::tests::unit;

fn counts(s: &Sent) -> [u64; 16] {
    [
        s.pending.map_or(u64::MAX, |k| k as u64),
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

/// Five statement units: two of two statements, kept in part by some key bytes.
fn segment() -> (UnitList, Vec<u8>, StmtUnits) {
    let mut buf = Vec::new();
    let (a, _) = unit(&mut buf, &["UPDATE t SET a=1", "INSERT INTO u VALUES (1)"]);
    let (b, _) = unit(&mut buf, &["UPDATE t SET a=2", "UPDATE t SET a=3"]);
    let (c, _) = unit(&mut buf, &["INSERT INTO u VALUES (2)"]);
    let (d, _) = unit(&mut buf, &["UPDATE t SET a=4"]);
    let (e, _) = unit(&mut buf, &["INSERT INTO u VALUES (3)", "UPDATE t SET a=5"]);
    let mut list = UnitList::default();
    list.add(b"f", 0, &[a, b, c, d, e], &[], &[]);
    let st = StmtUnits::build(&list, &[&buf], &[(13, 0, 0)]);
    (list, buf, st)
}

fn options<'a>(
    skip: u8,
    pending: Option<&'a [u8]>,
    stmts: Option<(&'a StmtUnits, &'a [u8])>,
) -> SendOptions<'a> {
    SendOptions {
        batch_bytes: 0,
        limit: u64::MAX,
        skip,
        partial_ok: skip != SKIP_PLACEHOLDER,
        runs: false,
        stretches: false,
        pending,
        server_id: 0,
        heartbeat_crc: false,
        stmts,
        count_only: true,
        relay: false,
    }
}

/// One stream counted by runs (`count_many`) from `from`, as `opt` says.
fn counted(
    list: &UnitList,
    buf: &[u8],
    st: &StmtUnits,
    row: &[u8],
    from: usize,
    opt: &SendOptions,
) -> Sent {
    let job = Job {
        row,
        keep: &[],
        stmt_keep: opt.stmts.map(|(_, k)| k),
        skip: opt.skip,
        partial_ok: opt.partial_ok,
        crc: opt.heartbeat_crc,
        owed: opt.pending.map_or(0, <[u8]>::len),
    };
    let made = [(SKIP_PLACEHOLDER, false), (SKIP_EMPTY, false)]
        .map(|p| Forms::make_many(list, &[buf], Some(st), &[p]).remove(0));
    let forms: Vec<&Forms> = made.iter().collect();
    let mut got = count_many(list, &[buf], Some(st), &[job], (&[from], 0), &forms);
    got.pop().map(|c| c.sent).unwrap_or_default()
}

const POLICIES: [u8; 3] = [SKIP_HEARTBEAT, SKIP_PLACEHOLDER, SKIP_EMPTY];

#[test]
fn counting_by_runs_counts_as_the_send_walk_unit_by_unit() {
    let (list, buf, st) = segment();
    let owed = [0u8; 30];
    let mut checked = 0;
    for skip in POLICIES {
        for kb in [[0u8, 0], [0, 1], [1, 0], [1, 1]] {
            let row = list
                .rows_many(&[&[]], Some((st.columns(), &[Some(&kb[..])])))
                .remove(0);
            assert!(!row.contains(&ROW_SLOW));
            let mut ends_slow = row.clone();
            ends_slow[4] = ROW_SLOW; // (the walk stops there, a Heartbeat still owed)
            for (row, pending, from, stmts) in [
                (&ends_slow, None, 0, true),
                (&row, None, 0, true),
                (&row, Some(&owed[..]), 0, true),
                (&row, Some(&owed[..]), 1, true),
                (&row, None, 0, false),
            ] {
                let opt = options(skip, pending, stmts.then_some((&st, &kb[..])));
                let by_units = counts(&send::walk(&list, &[&buf], row, &[], from, &opt));
                let by_runs = counts(&counted(&list, &buf, &st, row, from, &opt));
                assert_eq!(
                    by_runs, by_units,
                    "{skip} {kb:?} {row:?} {pending:?} {from}"
                );
                checked += usize::from(by_units[1] == 5 && by_units[4] > 1);
            }
        }
    }
    assert!(checked >= 8, "{checked}");
}

/// What `experiment` did per time bucket before the count walk took them all in one call: one
/// walk per bucket, the Heartbeat owed at a bucket's end owed into the next as `carry` bytes.
fn by_buckets(
    list: &UnitList,
    bufs: &[&[u8]],
    st: &StmtUnits,
    job: &Job,
    starts: &[usize],
) -> Counted {
    let (mut total, mut reads, mut sents) = (Sent::default(), Vec::new(), Vec::new());
    let carry = [0u8; 25];
    let mut owed = (job.owed > 0).then(|| vec![0u8; job.owed]);
    for (b, &a) in starts.iter().enumerate() {
        let end = starts.get(b + 1).copied().unwrap_or(job.row.len());
        let mut opt = options(job.skip, owed.as_deref(), st_of(st, job));
        (opt.partial_ok, opt.heartbeat_crc) = (job.partial_ok, job.crc);
        let s = send::walk(list, bufs, &job.row[..end], job.keep, a, &opt);
        assert_eq!(s.next, end);
        if s.pending.is_some() {
            owed = Some(carry.to_vec());
        } else if s.pending_done {
            owed = None;
        }
        reads.push(s.read_bytes);
        sents.push(s.sent_bytes + s.heartbeat_bytes + s.skip_bytes);
        total.pending = s.pending;
        total.add(&s);
        total.pending_done |= b == 0 && s.pending_done;
        total.next = s.next;
    }
    Counted {
        sent: total,
        read_by_bucket: reads,
        sent_by_bucket: sents,
    }
}

fn st_of<'a>(st: &'a StmtUnits, job: &Job<'a>) -> Option<(&'a StmtUnits, &'a [u8])> {
    job.stmt_keep.map(|k| (st, k))
}

#[test]
fn every_stream_is_counted_in_one_call_bucket_by_bucket() {
    let (list, buf, st) = segment();
    let mut rows = Vec::new();
    for kb in [[0u8, 0], [0, 1], [1, 0], [1, 1]] {
        let row = list
            .rows_many(&[&[]], Some((st.columns(), &[Some(&kb[..])])))
            .remove(0);
        rows.push((row, kb));
    }
    rows.push((
        vec![ROW_SKIP, ROW_SKIP, ROW_KEEP, ROW_SKIP, ROW_SKIP],
        [0, 0],
    ));
    let mut jobs = Vec::new();
    for (row, kb) in &rows {
        for skip in POLICIES {
            for owed in [0, 25] {
                jobs.push(Job {
                    row,
                    keep: &[],
                    stmt_keep: Some(kb),
                    skip,
                    partial_ok: skip != SKIP_PLACEHOLDER,
                    crc: false,
                    owed,
                });
            }
        }
    }
    assert!(rows.iter().any(|(r, _)| r.contains(&ROW_PARTIAL)));
    let policies = [(SKIP_PLACEHOLDER, false), (SKIP_EMPTY, false)];
    // (both policies' forms made in one read of the records)
    let made = Forms::make_many(&list, &[&buf], Some(&st), &policies);
    let forms: Vec<&Forms> = made.iter().collect();
    for starts in [&[0usize][..], &[0, 2], &[0, 1, 3, 4]] {
        for given in [&forms[..], &[]] {
            let got = count_many(&list, &[&buf], Some(&st), &jobs, (starts, 25), given);
            for (job, c) in jobs.iter().zip(&got) {
                let want = by_buckets(&list, &[&buf], &st, job, starts);
                let what = format!("{:?} {} {} {starts:?}", job.row, job.skip, job.owed);
                assert_eq!(counts(&c.sent), counts(&want.sent), "{what}");
                assert_eq!(c.sent.pending, want.sent.pending, "{what}");
                assert_eq!(c.read_by_bucket, want.read_by_bucket, "{what}");
                assert_eq!(c.sent_by_bucket, want.sent_by_bucket, "{what}");
            }
        }
    }
}

/// Statement units of one statement each over two files (two Heartbeat sizes), `sizes` of them
/// in each: the list, and each file's bytes.
fn two_files(sizes: [usize; 2]) -> (UnitList, [Vec<u8>; 2]) {
    let (mut list, mut parts) = (UnitList::default(), [Vec::new(), Vec::new()]);
    for (p, file) in [&b"f"[..], b"a-longer-name"].into_iter().enumerate() {
        let sql = ["UPDATE t SET a=1", "INSERT INTO u VALUES (1)"];
        let units: Vec<_> = (0..sizes[p])
            .map(|k| unit(&mut parts[p], &[sql[k % 2]]).0)
            .collect();
        list.add(file, 0, &units, &[], &[]);
    }
    (list, parts)
}

/// Rows longer than a word of answers (`kept_runs` reads eight at a time), over two files (two
/// Heartbeat sizes): runs of every length, kept or skipped to a row's end, a bucket cut anywhere
/// (a word's edge, the files' seam, a run's inside), counted as the send walk counts them.
#[test]
fn long_rows_over_two_files_are_counted_as_the_send_walk_counts_them() {
    let (list, parts) = two_files([23, 32]);
    let bufs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let st = StmtUnits::build(&list, &bufs, &[(13, 0, 0), (13, 0, 0)]);
    let n = list.units.len();
    let mut rows = vec![vec![ROW_KEEP; n], vec![ROW_SKIP; n]];
    let mut seed = 7u64;
    for _ in 0..14 {
        let mut row = Vec::new();
        let mut answer = [ROW_KEEP, ROW_SKIP][seed as usize % 2];
        while row.len() < n {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = [1, 1, 2, 3, 5, 7, 8, 9, 16, 17][(seed >> 33) as usize % 10];
            row.extend(std::iter::repeat_n(answer, len.min(n - row.len())));
            answer = ROW_KEEP + ROW_SKIP - answer;
        }
        rows.push(row);
    }
    let mut jobs = Vec::new();
    for row in &rows {
        for (skip, owed, keys) in POLICIES.into_iter().flat_map(|s| {
            // (a placeholder job needs its statement units' keys: their framing is theirs to say)
            let keys = s == SKIP_PLACEHOLDER;
            [(s, 0, true), (s, 25, true), (s, 30, keys), (s, 0, keys)]
        }) {
            jobs.push(Job {
                row,
                keep: &[],
                stmt_keep: keys.then_some(&[0u8, 0][..]),
                skip,
                partial_ok: skip != SKIP_PLACEHOLDER,
                crc: false,
                owed,
            });
        }
    }
    let policies = [(SKIP_PLACEHOLDER, false), (SKIP_EMPTY, false)];
    let made = policies.map(|p| Forms::make_many(&list, &bufs, Some(&st), &[p]).remove(0));
    let forms: Vec<&Forms> = made.iter().collect();
    for starts in [&[0usize][..], &[0, 7, 8, 16, 23, 40], &[3, 22, 24, 31, 53]] {
        let got = count_many(&list, &bufs, Some(&st), &jobs, (starts, 25), &forms);
        for (job, c) in jobs.iter().zip(&got) {
            let want = by_buckets(&list, &bufs, &st, job, starts);
            let what = format!("{:?} {} {} {starts:?}", job.row, job.skip, job.owed);
            assert_eq!(counts(&c.sent), counts(&want.sent), "{what}");
            assert_eq!(c.read_by_bucket, want.read_by_bucket, "{what}");
            assert_eq!(c.sent_by_bucket, want.sent_by_bucket, "{what}");
        }
    }
}

/// The jobs of one row (a rule group's slaves under every skip policy, with and without the
/// Heartbeats' checksums) read each stretch of it once (`Stretches`), and each counts as it
/// counts alone and as the send walk counts it, over two files, cut into buckets anywhere.
#[test]
fn jobs_of_one_row_count_as_each_alone() {
    let (list, parts) = two_files([29, 35]);
    let bufs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let st = StmtUnits::build(&list, &bufs, &[(13, 0, 0), (13, 0, 0)]);
    let n = list.units.len();
    let rows: Vec<Vec<u8>> = (0..6u64)
        .map(|r| {
            let mut row = vec![ROW_SKIP; n];
            for (k, a) in row.iter_mut().enumerate() {
                // (isolated units kept, and runs of every length)
                let x = (k as u64 * 2654435761 + r * 40503) % 97;
                *a = match x {
                    0..=24 => ROW_KEEP,
                    _ if r == 5 && k % 9 < 4 => ROW_KEEP,
                    _ => ROW_SKIP,
                };
            }
            row
        })
        .collect();
    let keys = [0u8, 0]; // (no statement of a unit the row skips is kept by its key)
    let mut jobs = Vec::new();
    for row in &rows {
        for skip in POLICIES {
            // (checksums: the Heartbeats' only, which a stretch sums without them)
            for crc in [false, skip == SKIP_HEARTBEAT] {
                for owed in [0, 25] {
                    jobs.push(Job {
                        row,
                        keep: &[],
                        stmt_keep: Some(&keys[..]),
                        skip,
                        partial_ok: skip != SKIP_PLACEHOLDER,
                        crc,
                        owed,
                    });
                }
            }
        }
    }
    // (three policies made in one read of the records, each as made alone)
    let policies = [
        (SKIP_PLACEHOLDER, false),
        (SKIP_EMPTY, false),
        (SKIP_PLACEHOLDER, true),
    ];
    let made = Forms::make_many(&list, &bufs, Some(&st), &policies);
    for (f, p) in made.iter().zip(policies) {
        let alone = Forms::make_many(&list, &bufs, Some(&st), &[p]).remove(0);
        assert_eq!((f.skip, f.crc), p);
        assert!((0..=n).all(|k| f.at(k) == alone.at(k)), "{p:?}");
    }
    let forms: Vec<&Forms> = made.iter().collect();
    let mut shared = 0;
    for starts in [&[0usize][..], &[0, 8, 29, 40], &[5, 6, 31, 63]] {
        let got = count_many(&list, &bufs, Some(&st), &jobs, (starts, 25), &forms);
        for (job, c) in jobs.iter().zip(&got) {
            let what = format!(
                "{:?} {} {} {} {starts:?}",
                job.row, job.skip, job.crc, job.owed
            );
            let alone = count_many(
                &list,
                &bufs,
                Some(&st),
                std::slice::from_ref(job),
                (starts, 25),
                &forms,
            );
            let want = by_buckets(&list, &bufs, &st, job, starts);
            for (which, other) in [("alone", &alone[0]), ("send walk", &want)] {
                let what = format!("{what} against {which}");
                assert_eq!(counts(&c.sent), counts(&other.sent), "{what}");
                assert_eq!(c.read_by_bucket, other.read_by_bucket, "{what}");
                assert_eq!(c.sent_by_bucket, other.sent_by_bucket, "{what}");
            }
            shared += usize::from(c.sent.heartbeats > 1 || c.sent.placeholders > 1);
        }
    }
    assert!(shared > jobs.len(), "{shared}");
}

#[test]
fn a_unit_no_form_is_made_for_ends_the_run_it_stands_in() {
    let (list, buf, st) = segment();
    let row = [ROW_SKIP; 5];
    // Without statement keys a placeholder's statement unit is the send walk's own to frame.
    let opt = options(SKIP_PLACEHOLDER, None, None);
    let by_units = counts(&send::walk(&list, &[&buf], &row, &[], 0, &opt));
    let made = Forms::make_many(&list, &[&buf], Some(&st), &[(SKIP_PLACEHOLDER, false)]).remove(0);
    let job = Job {
        row: &row,
        keep: &[],
        stmt_keep: None,
        skip: SKIP_PLACEHOLDER,
        partial_ok: false,
        crc: false,
        owed: 0,
    };
    let got = count_many(&list, &[&buf], Some(&st), &[job], (&[0], 0), &[&made]);
    assert_eq!(counts(&got[0].sent), by_units);
}
