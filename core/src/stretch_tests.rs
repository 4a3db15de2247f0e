//! Tests of `stretch`: stretches made from the skip forms the send walk makes (`skip_forms`),
//! read back as the slave's scanner and relay run read them.

use crate::le::u32_at;
use crate::scan::{RunCount, F_COMPLETE, F_MARIADB_GTID};
use crate::skip_forms::{
    empty_transactions, is_placeholder, made_query, skipped, stretch_unit, test_event, Form,
};
use crate::skip_forms::{SKIP_EMPTY, SKIP_PLACEHOLDER};
use crate::stretch::{inner, Stretch, HEAD};
use crate::types::{COMMIT_BODY, MARIADB_GTID, QUERY, XID};
use crate::unit_list::ListedUnit;

/// A MariaDB unit at log_pos `pos`: a GTID, `body` rows-like events, an XID (or, `ddl`, a
/// standalone GTID and one Query).
fn unit(pos: u32, body: usize, ddl: bool, crc: bool) -> (Vec<u8>, ListedUnit) {
    let mut gtid = vec![0u8; 19];
    gtid[..8].copy_from_slice(&u64::from(pos).to_le_bytes());
    gtid[12] = if ddl { 1 } else { 0 };
    let mut raw = test_event(pos, MARIADB_GTID, &gtid, pos, crc);
    let g = raw.len();
    let n = if ddl { 1 } else { body };
    for k in 0..n {
        raw.extend(test_event(
            pos,
            if ddl { QUERY } else { 30 },
            &[k as u8; 40],
            pos + 1 + k as u32,
            crc,
        ));
    }
    let last = raw.len();
    if !ddl {
        raw.extend(test_event(pos, XID, &[5; 8], pos + 99, crc));
    }
    let u = ListedUnit {
        start: 0,
        end: raw.len() as u32,
        last: if ddl { g } else { last } as u32,
        events: (n + if ddl { 1 } else { 2 }) as u32,
        flags: F_COMPLETE | F_MARIADB_GTID,
        gtid_size: g as u32,
        tabled: true,
        ..Default::default()
    };
    (raw, u)
}

/// Unit u's form under `skip` (as the walk makes it, runs on) and its counts.
fn form(u: &(Vec<u8>, ListedUnit), skip: u8, crc: bool) -> (Vec<u8>, Form) {
    let mut out = Vec::new();
    let f = skipped(&u.1, &u.0, skip, crc, true, None, Some(&mut out)).unwrap();
    (out, f)
}

/// The events of `bytes` that are not placeholders, as the slave relays a placeholder unit.
fn relayed(bytes: &[u8]) -> Vec<u8> {
    let (mut out, mut p) = (Vec::new(), 0);
    while p < bytes.len() {
        let size = u32_at(bytes, p + 9).unwrap() as usize;
        if !is_placeholder(bytes, p) {
            out.extend_from_slice(&bytes[p..p + size]);
        }
        p += size;
    }
    out
}

#[test]
fn a_stretch_holds_what_the_slave_relays_and_counts_what_a_replica_is_sent() {
    for crc in [false, true] {
        let crc_len = if crc { 4 } else { 0 };
        for skip in [SKIP_PLACEHOLDER, SKIP_EMPTY] {
            let units: Vec<_> = (1..4)
                .map(|k| unit(1000 * k, k as usize + 1, false, crc))
                .collect();
            let (mut stretch, mut own) = (Stretch::default(), vec![0xAA; 3]);
            let (mut want, mut events, mut bytes) = (Vec::new(), 0, 0);
            let (commits, mut forms) = (skip == SKIP_EMPTY, Vec::new());
            for u in &units {
                let (made, f) = form(u, skip, crc);
                assert!(stretch.take(&made, f.placeholders, commits, crc_len, &mut own));
                let g = u.1.gtid_size as usize;
                if commits {
                    // Its GTID alone: the COMMIT a slave makes again from it is the walk's.
                    let mut again = made[..g].to_vec();
                    made_query(&made[..g], COMMIT_BODY, crc, &mut again);
                    assert_eq!(again, made);
                    want.extend_from_slice(&made[..g]);
                } else {
                    want.extend(relayed(&made));
                }
                (events, bytes) = (events + f.events, bytes + f.bytes);
                forms.extend(made);
            }
            let (at, end) = stretch.close(&mut own, crc).unwrap();
            assert_eq!((at, end), (3, own.len()));
            assert_eq!(u32_at(&own, at + 9), Some((end - at) as u32));
            // At its last event's log_pos: an XID's, or the made COMMIT's (its GTID's).
            let last = if skip == SKIP_EMPTY { 3000 } else { 3099 };
            assert_eq!(u32_at(&own, at + 13), Some(last));
            if crc {
                assert_eq!(crc32fast::hash(&own[at..]), crate::crc::RESIDUE);
            }
            let got = inner(&own, at, end - at, crc_len).unwrap();
            assert_eq!(&own[got.range.0..got.range.1], &want[..]);
            assert_eq!((got.units, got.commits), (3, commits));
            if commits {
                // What the slave relays: each GTID and its COMMIT, the walk's forms.
                let gtids = &own[got.range.0..got.range.1];
                let mut relayed = vec![0; forms.len()];
                empty_transactions(gtids, crc, &mut relayed);
                assert_eq!(relayed, forms);
            }
            let mut count = RunCount::default();
            count.stretch(got, end - at, crc_len);
            assert_eq!(count.events + 1, events, "{skip}: a replica's events");
            assert_eq!(
                count.bytes + (end - at) as i64,
                bytes as i64,
                "{skip}: a replica's bytes"
            );
            assert_eq!(count.placeholders, got.placeholders);
            assert_eq!(got.placeholders > 0, skip == SKIP_PLACEHOLDER);
        }
    }
}

#[test]
fn a_lone_unit_is_a_stretch_unless_nothing_is_saved_and_others_are_left_out() {
    let crc_len = 4;
    let (made, f) = form(&unit(500, 2, false, true), SKIP_EMPTY, true);
    let g = made.len() - (19 + COMMIT_BODY.len() + 4);
    let (mut stretch, mut own) = (Stretch::default(), Vec::new());
    assert!(stretch.take(&made, f.placeholders, true, crc_len, &mut own));
    assert_eq!(stretch.close(&mut own, true), Some((0, HEAD + g + 4)));
    assert_eq!(
        &own[HEAD..HEAD + g],
        &made[..g],
        "its GTID, shorter than GTID and COMMIT"
    );
    assert_eq!(stretch.close(&mut own, true), None, "closed once");
    // An empty transaction of the binlog's (GTID, XID) under the placeholder policy: itself.
    let (gtid_xid, _) = form(&unit(550, 0, false, true), SKIP_PLACEHOLDER, true);
    let mut alone = Vec::new();
    assert!(stretch.take(&gtid_xid, 0, false, crc_len, &mut alone));
    assert_eq!(stretch.close(&mut alone, true), Some((0, gtid_xid.len())));
    assert_eq!(alone, gtid_xid);
    // A skipped DDL under the placeholder policy (a GTID and its placeholder) is not a
    // framing pair, nor a form of the other kind's in an open stretch: each goes as its form.
    let (ddl, d) = form(&unit(600, 0, true, true), SKIP_PLACEHOLDER, true);
    let mut open = Stretch::default();
    let mut bytes = Vec::new();
    assert!(!open.take(&ddl, d.placeholders, false, crc_len, &mut bytes));
    assert!(bytes.is_empty());
    assert!(open.take(&gtid_xid, 0, false, crc_len, &mut bytes));
    let before = bytes.clone();
    assert!(!open.take(&ddl, d.placeholders, false, crc_len, &mut bytes));
    assert!(!open.take(&made, 0, true, crc_len, &mut bytes));
    assert!(
        !open.take(&gtid_xid, 0, true, crc_len, &mut bytes),
        "not a COMMIT"
    );
    assert_eq!(bytes, before);
}

#[test]
fn inner_declines_what_is_not_a_whole_stretch() {
    let units: Vec<_> = (1..3).map(|k| unit(100 * k, 2, false, true)).collect();
    let (mut stretch, mut own) = (Stretch::default(), Vec::new());
    for u in &units {
        let (made, f) = form(u, SKIP_PLACEHOLDER, true);
        assert!(stretch.take(&made, f.placeholders, false, 4, &mut own));
    }
    let (at, end) = stretch.close(&mut own, true).unwrap();
    assert!(inner(&own, at, end - at, 4).is_some());
    assert!(
        inner(&own, at, end - at, 0).is_none(),
        "another checksum length"
    );
    for cut in 1..end - at {
        // (cut at a unit's end, what is left reads as a stretch: the scanner's CRC check
        // refuses it first)
        if let Some(got) = inner(&own, at, end - at - cut, 4) {
            assert!(got.units < 2 && got.range.1 <= end - cut, "cut by {cut}");
        }
    }
    // Any single byte of an inner event changed: still whole (`inner` leaves the CRC to the
    // scanner), or refused; never another unit count or a range out of the stretch.
    for k in HEAD..end - at - 4 {
        let mut bad = own.clone();
        bad[at + k] ^= 0x5A;
        if let Some(got) = inner(&bad, at, end - at, 4) {
            assert_eq!(
                (got.units, got.range),
                (2, (at + HEAD, end - 4)),
                "byte {k}"
            );
        }
    }
    let mut not_marked = own.clone();
    not_marked[at + 28] = 0; // (the second seed 0x100 made 0: a run)
    assert!(inner(&not_marked, at, end - at, 4).is_none());
    let mut empty = own[..at + HEAD].to_vec();
    empty.extend_from_slice(&[0; 4]);
    assert!(inner(&empty, at, HEAD + 4, 4).is_none(), "no units");
}

#[test]
fn a_unit_taken_from_its_record_is_the_stretch_its_form_makes() {
    for crc in [false, true] {
        let crc_len = if crc { 4 } else { 0 };
        let units: Vec<_> = (2..5)
            .map(|k| unit(1000 * k, k as usize, false, crc))
            .collect();
        for skip in [SKIP_PLACEHOLDER, SKIP_EMPTY] {
            let (mut by_form, mut by_record) = (Stretch::default(), Stretch::default());
            let (mut a, mut b) = (vec![7u8], vec![7u8]);
            for u in &units {
                let (made, f) = form(u, skip, crc);
                let commits = skip == SKIP_EMPTY;
                assert!(by_form.take(&made, f.placeholders, commits, crc_len, &mut a));
                let got = stretch_unit(&u.1, &u.0, skip, crc, None).unwrap();
                assert_eq!(got.form, f, "the counts of its form");
                let holes = got.form.placeholders;
                assert!(by_record.take_unit(got.gtid, got.xid, holes, crc_len, &mut b));
            }
            assert_eq!(by_form.close(&mut a, crc), by_record.close(&mut b, crc));
            assert_eq!(a, b, "{skip}: the same stretch, byte for byte");
        }
        // A statement unit: only where its framing pieces are its GTID and its XID.
        let (raw, mut u) = unit(5000, 3, false, crc);
        u.tabled = false;
        let (g, last) = (u.gtid_size as usize, u.last());
        assert!(stretch_unit(
            &u,
            &raw,
            SKIP_PLACEHOLDER,
            crc,
            Some(&[(0, g), (last, raw.len())])
        )
        .is_some());
        assert!(
            stretch_unit(&u, &raw, SKIP_PLACEHOLDER, crc, None).is_none(),
            "its framing unknown"
        );
        let three = [(0, g), (g, g + 59 + crc_len), (last, raw.len())];
        assert!(stretch_unit(&u, &raw, SKIP_PLACEHOLDER, crc, Some(&three)).is_none());
        // A run of one (its own placeholder) or none: its form, made (the empty-transaction
        // policy's, the GTID and a COMMIT, whatever the unit held).
        for body in [0, 1] {
            let u = unit(7000, body, false, crc);
            assert!(stretch_unit(&u.1, &u.0, SKIP_PLACEHOLDER, crc, None).is_none());
            assert!(stretch_unit(&u.1, &u.0, SKIP_EMPTY, crc, None).is_some());
        }
        // A skipped DDL (a GTID and its Query) has no XID.
        let ddl = unit(6000, 0, true, crc);
        assert!(stretch_unit(&ddl.1, &ddl.0, SKIP_PLACEHOLDER, crc, None).is_none());
        // Under the empty-transaction policy its GTID is rewritten (no longer standalone).
        assert!(stretch_unit(&ddl.1, &ddl.0, SKIP_EMPTY, crc, None).is_none());
    }
}
