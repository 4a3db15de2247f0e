//! Tests of the MySQL skip forms (`skip_forms/mysql.rs`): GTIDs of 5.6, 5.7 and 8.0 (with and
//! without the original commit timestamp), with and without CRC32s, row units, lone statements
//! and statement units, and the units the walk leaves to the per-unit way.

use super::*;
use crate::scan::{F_COMPLETE, F_FAST, F_MYSQL_GTID, F_PAYLOAD};
use crate::skip_forms::{skipped, SKIP_EMPTY, SKIP_PLACEHOLDER};
use crate::trx_length::put_packed;
use crate::types::{GTID_TAGGED, RAND, TABLE_MAP};

/// The GTID layouts a MySQL server writes.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// 5.6: flags, sid, gno.
    V56,
    /// 5.7: + lt_type 2, last_committed, sequence_number.
    V57,
    /// 8.0: + immediate commit timestamp, transaction_length, server version.
    V80(u64),
    /// 8.0 on a replica: + the original commit timestamp (the immediate one's top bit set).
    V80Original(u64),
}

fn event(kind: u8, body: &[u8], log_pos: u32, crc: bool) -> Vec<u8> {
    crate::skip_forms::test_event(1_700_000_000, kind, body, log_pos, crc)
}

fn gtid_body(layout: Layout) -> Vec<u8> {
    let mut b = vec![1u8];
    b.extend_from_slice(&[0xab; 16]);
    b.extend_from_slice(&42i64.to_le_bytes());
    let length = match layout {
        Layout::V56 => return b,
        Layout::V57 => None,
        Layout::V80(n) | Layout::V80Original(n) => Some(n),
    };
    b.push(2);
    b.extend_from_slice(&41i64.to_le_bytes());
    b.extend_from_slice(&42i64.to_le_bytes());
    if let Some(n) = length {
        let mut ts = 0x1234_5678u64.to_le_bytes()[..7].to_vec();
        if matches!(layout, Layout::V80Original(_)) {
            ts[6] |= 0x80;
            b.extend_from_slice(&ts);
            b.extend_from_slice(&0x1111_2222u64.to_le_bytes()[..7]);
        } else {
            b.extend_from_slice(&ts);
        }
        put_packed(n, &mut b);
        b.extend_from_slice(&80036u32.to_le_bytes());
    }
    b
}

fn query(sql: &str, log_pos: u32, crc: bool) -> Vec<u8> {
    let mut body = vec![0u8; 13];
    body[11] = 3; // status variables: 3 bytes
    body[8] = 2; // db "db"
    body.extend_from_slice(&[0, 0, 0]);
    body.extend_from_slice(b"db\0");
    body.extend_from_slice(sql.as_bytes());
    event(QUERY, &body, log_pos, crc)
}

/// A unit of `events` after a GTID of `layout`, its record (flags `flags`, `lo` 0 for a fast
/// row unit), the GTID's transaction_length right for the unit as the server wrote it.
fn unit(
    layout: Layout,
    events: &[Vec<u8>],
    crc: bool,
    flags: u32,
    lo: u32,
) -> (Vec<u8>, ListedUnit) {
    let rest: usize = events.iter().map(Vec::len).sum();
    let mut gtid = event(GTID, &gtid_body(layout), 100, crc);
    if let Some(g) = Gtid::read(&gtid, crc) {
        let mut fixed = Vec::new();
        g.put(rest as u64, &mut fixed);
        gtid = fixed;
    }
    let mut raw = gtid.clone();
    for e in events {
        raw.extend_from_slice(e);
    }
    let u = ListedUnit {
        start: 0,
        end: raw.len() as u32,
        events: events.len() as u32 + 1,
        flags: F_COMPLETE | F_MYSQL_GTID | flags,
        gtid_size: gtid.len() as u32,
        tabled: lo != u32::MAX,
        ..Default::default()
    };
    (raw, u)
}

fn row_unit(layout: Layout, crc: bool) -> (Vec<u8>, ListedUnit) {
    let events = [
        query("BEGIN", 150, crc),
        event(TABLE_MAP, &[1; 30], 200, crc),
        event(30, &[2; 300], 530, crc),
        event(XID, &[3; 8], 560, crc),
    ];
    unit(layout, &events, crc, F_FAST, 0)
}

/// The events of `out`, as (offset, size, type).
fn tiles(out: &[u8]) -> Vec<(usize, usize, u8)> {
    events(out, 0).expect("the form hops as events")
}

/// Checks what every form holds: whole events, CRCs right, and a transaction_length (where
/// the GTID carries one) that counts the whole form.
fn check(out: &[u8], crc: bool, form: &Form) {
    assert_eq!(form.bytes as usize, out.len());
    let evs = tiles(out);
    assert_eq!(evs.len() as u64, form.events);
    if crc {
        for &(at, size, _) in &evs {
            assert_eq!(crc32fast::hash(&out[at..at + size]), crate::crc::RESIDUE);
        }
    }
    let g = Gtid::read(&out[..evs[0].1], crc).unwrap();
    if let Some((_, _, length)) = g.field {
        assert_eq!(
            length as usize,
            out.len(),
            "transaction_length is the form's"
        );
    }
}

const LAYOUTS: [Layout; 5] = [
    Layout::V56,
    Layout::V57,
    Layout::V80(1),
    Layout::V80(300),
    Layout::V80Original(70_000),
];

#[test]
fn a_row_units_placeholders_keep_gtid_begin_and_xid() {
    for crc in [false, true] {
        for layout in LAYOUTS {
            let (raw, u) = row_unit(layout, crc);
            let mut out = Vec::new();
            let form =
                skipped(&u, &raw, SKIP_PLACEHOLDER, crc, false, None, Some(&mut out)).unwrap();
            check(&out, crc, &form);
            assert_eq!((form.events, form.placeholders), (5, 2), "{layout:?}");
            let evs = tiles(&out);
            let kinds: Vec<u8> = evs.iter().map(|e| e.2).collect();
            assert_eq!(kinds, [GTID, QUERY, RAND, RAND, XID]);
            let g = u.gtid_size as usize;
            let begin = &raw[g..g + tiles(&raw[g..])[0].1];
            assert_eq!(
                &out[evs[1].0..evs[1].0 + evs[1].1],
                begin,
                "BEGIN as it was"
            );
            assert!(
                out.ends_with(&raw[raw.len() - evs[4].1..]),
                "the XID as it was"
            );
            let rand = &out[evs[3].0..];
            assert_eq!(
                u32_at(rand, 13),
                Some(530),
                "a placeholder has its event's log_pos"
            );
            assert_eq!(
                skipped(&u, &raw, SKIP_PLACEHOLDER, crc, false, None, None),
                Some(form),
                "counting gives the same sizes"
            );
            // The GTID but its transaction_length and size is the event it was.
            let sent_g = evs[0].1;
            assert_eq!(&out[..9], &raw[..9]);
            assert_eq!(&out[13..HEADER_LEN + 25], &raw[13..HEADER_LEN + 25]);
            if matches!(layout, Layout::V56 | Layout::V57) {
                assert_eq!(
                    &out[..sent_g],
                    &raw[..g],
                    "no transaction_length: as it was"
                );
            }
        }
    }
}

/// A skipped row unit sent as a run (`framed_run`, from the record without reading its body) is
/// the bytes the walk over its body makes of it with runs, and counts what a replica is sent.
#[test]
fn a_row_unit_framed_as_a_run_is_what_the_walk_over_its_body_makes() {
    for crc in [false, true] {
        for layout in LAYOUTS {
            let (raw, mut u) = row_unit(layout, crc);
            u.last = (raw.len() - tiles(&raw).last().unwrap().1) as u32;
            let (g, gtid) = formed_gtid(&u, &raw, crc).unwrap();
            let begin = [(g, g + tiles(&raw[g..])[0].1)];
            let rest = placeholders(&raw[g..], g, &begin, true, crc, false, None).unwrap();
            let mut walked = Vec::new();
            gtid.put(rest.bytes, &mut walked);
            placeholders(&raw[g..], g, &begin, true, crc, true, Some(&mut walked)).unwrap();
            let mut framed = Vec::new();
            let form = skipped(
                &u,
                &raw,
                SKIP_PLACEHOLDER,
                crc,
                true,
                None,
                Some(&mut framed),
            )
            .unwrap();
            assert_eq!(framed, walked, "{layout:?}");
            assert_eq!(framed.len(), walked.len());
            let kinds: Vec<u8> = tiles(&framed).iter().map(|e| e.2).collect();
            assert_eq!(kinds, [GTID, QUERY, RAND, XID], "one run for the body");
            let full = skipped(&u, &raw, SKIP_PLACEHOLDER, crc, false, None, None);
            assert_eq!(Some(form), full, "a replica's count");
            // A record whose last event is not where it says: the walk reads the unit.
            u.last -= 1;
            let mut out = Vec::new();
            let read = skipped(&u, &raw, SKIP_PLACEHOLDER, crc, true, None, Some(&mut out));
            assert_eq!((read, out), (full, walked));
        }
    }
}

#[test]
fn an_empty_transaction_is_the_gtid_its_begin_and_its_xid() {
    for crc in [false, true] {
        for layout in LAYOUTS {
            let (raw, u) = row_unit(layout, crc);
            let mut out = Vec::new();
            let form = skipped(&u, &raw, SKIP_EMPTY, crc, false, None, Some(&mut out)).unwrap();
            check(&out, crc, &form);
            let evs = tiles(&out);
            let g = u.gtid_size as usize;
            let begin = tiles(&raw[g..])[0].1;
            assert_eq!(
                &out[evs[1].0..],
                [&raw[g..g + begin], &raw[raw.len() - evs[2].1..]].concat()
            );
            assert_eq!(
                skipped(&u, &raw, SKIP_EMPTY, crc, false, None, None),
                Some(form)
            );
        }
    }
}

#[test]
fn a_skipped_ddl_is_framed_by_a_begin_and_a_commit_made_up() {
    for crc in [false, true] {
        let ddl = [query("DROP TABLE t", 400, crc)];
        let (raw, u) = unit(Layout::V80(1), &ddl, crc, 0, u32::MAX);
        let mut out = Vec::new();
        let form = skipped(&u, &raw, SKIP_EMPTY, crc, false, None, Some(&mut out)).unwrap();
        check(&out, crc, &form);
        let evs = tiles(&out);
        for (k, text) in [(1, &b"BEGIN"[..]), (2, &b"COMMIT"[..])] {
            let (at, size, kind) = evs[k];
            let q = &out[at..at + size - if crc { 4 } else { 0 }];
            assert_eq!(kind, QUERY);
            assert!(q.ends_with(text));
            assert_eq!(u32_at(q, 13), Some(100), "dated and numbered as the GTID");
            assert_eq!(&q[5..9], &raw[5..9]);
        }
        let mut out = Vec::new();
        let form = skipped(&u, &raw, SKIP_PLACEHOLDER, crc, false, None, Some(&mut out)).unwrap();
        check(&out, crc, &form);
        assert_eq!((form.events, form.placeholders), (2, 1));
        // The slave relays the GTID alone as the empty transaction of a GTID.
        let mut relayed = Vec::new();
        relayed_placeholders(&out, crc, &mut relayed).unwrap();
        let mut empty = Vec::new();
        skipped(&u, &raw, SKIP_EMPTY, crc, false, None, Some(&mut empty)).unwrap();
        assert_eq!(relayed, empty);
    }
}

#[test]
fn a_statement_units_framing_is_its_keys_and_its_begin_read_as_text() {
    let crc = true;
    let events = [
        query("BEGIN", 150, crc),
        event(crate::types::INTVAR, &[5; 9], 180, crc),
        query("INSERT INTO t VALUES (1)", 250, crc),
        query("COMMIT", 300, crc),
    ];
    let (raw, u) = unit(Layout::V80(9), &events, crc, 0, u32::MAX);
    let offsets: Vec<usize> = tiles(&raw).iter().map(|e| e.0).collect();
    let framing = [(0, offsets[2]), (offsets[4], raw.len())];
    assert_eq!(
        skipped(&u, &raw, SKIP_PLACEHOLDER, crc, false, None, None),
        None,
        "without its framing"
    );
    let mut out = Vec::new();
    let form = skipped(
        &u,
        &raw,
        SKIP_PLACEHOLDER,
        crc,
        false,
        Some(&framing),
        Some(&mut out),
    )
    .unwrap();
    check(&out, crc, &form);
    assert_eq!(form.placeholders, 2);
    let mut out = Vec::new();
    let form = skipped(&u, &raw, SKIP_EMPTY, crc, false, None, Some(&mut out)).unwrap();
    check(&out, crc, &form);
    let evs = tiles(&out);
    assert_eq!(
        &out[evs[1].0..evs[2].0],
        &raw[offsets[1]..offsets[2]],
        "its own BEGIN"
    );
    assert!(out.ends_with(b"COMMIT") || out[..out.len() - 4].ends_with(b"COMMIT"));
    assert_eq!(u32_at(&out, evs[2].0 + 13), Some(100), "a COMMIT made up");
}

#[test]
fn the_relay_of_a_placeholder_form_counts_its_framing() {
    for layout in LAYOUTS {
        let (raw, u) = row_unit(layout, true);
        let mut sent = Vec::new();
        skipped(
            &u,
            &raw,
            SKIP_PLACEHOLDER,
            true,
            false,
            None,
            Some(&mut sent),
        )
        .unwrap();
        let mut relayed = Vec::new();
        relayed_placeholders(&sent, true, &mut relayed).unwrap();
        let evs = tiles(&relayed);
        assert_eq!(
            evs.iter().map(|e| e.2).collect::<Vec<_>>(),
            [GTID, QUERY, XID]
        );
        let form = Form {
            bytes: relayed.len() as u64,
            events: 3,
            ..Form::default()
        };
        check(&relayed, true, &form);
    }
}

#[test]
fn a_transaction_length_changes_width_with_its_value() {
    // Written for the unit's 500-odd bytes (a 3-byte field), the empty transaction is under
    // 251 bytes: a 1-byte field, and the GTID is smaller by what the field lost.
    let (raw, u) = row_unit(Layout::V80Original(70_000), false);
    assert!(raw.len() > 0xfb);
    let mut out = Vec::new();
    skipped(&u, &raw, SKIP_EMPTY, false, false, None, Some(&mut out)).unwrap();
    let g = tiles(&out)[0].1;
    assert_eq!(
        g + 2,
        u.gtid_size as usize,
        "a 3-byte field became a 1-byte one"
    );
    assert_eq!(
        Gtid::read(&out[..g], false).unwrap().field.unwrap().2,
        out.len() as u64
    );
    // The value sought from the GTID's own, as fix_transaction_length seeks it: where both 249
    // (one byte) and 251 (three) count the transaction, a GTID saying 251 keeps 251.
    let gtid = event(GTID, &gtid_body(Layout::V80(251)), 1, false);
    let g = Gtid::read(&gtid, false).unwrap();
    let rest = 251 - gtid.len() as u64;
    assert_eq!(g.fixed(rest), Some((251, 3)));
    let gtid = event(GTID, &gtid_body(Layout::V80(1)), 1, false);
    let g = Gtid::read(&gtid, false).unwrap();
    assert_eq!(g.fixed(249 - gtid.len() as u64), Some((249, 1)));
}

#[test]
fn what_the_walk_cannot_make_is_left_to_the_caller() {
    let (raw, u) = row_unit(Layout::V80(1), true);
    for flags in [F_PAYLOAD, crate::scan::F_HAS_FDE] {
        let odd = ListedUnit {
            flags: u.flags | flags,
            ..u.clone()
        };
        assert_eq!(
            skipped(&odd, &raw, SKIP_EMPTY, true, false, None, None),
            None
        );
    }
    let cut = ListedUnit {
        flags: u.flags & !F_COMPLETE,
        ..u.clone()
    };
    assert_eq!(
        skipped(&cut, &raw, SKIP_EMPTY, true, false, None, None),
        None
    );
    let mut tagged = raw.clone();
    tagged[4] = GTID_TAGGED;
    assert_eq!(
        skipped(&u, &tagged, SKIP_EMPTY, true, false, None, None),
        None
    );
    // A transaction_length that does not read (0xfb is no packed integer's first byte).
    let mut body = gtid_body(Layout::V80(1));
    body[49] = 0xfb;
    let mut bad = event(GTID, &body, 100, true);
    bad.extend_from_slice(&raw[u.gtid_size as usize..]);
    let bad_u = ListedUnit {
        end: bad.len() as u32,
        ..u.clone()
    };
    assert_eq!(
        skipped(&bad_u, &bad, SKIP_PLACEHOLDER, true, false, None, None),
        None
    );
    // A GTID body shorter than flags, sid and gno.
    let mut short = event(GTID, &[1u8; 20], 100, true);
    short.extend_from_slice(&raw[u.gtid_size as usize..]);
    let short_u = ListedUnit {
        end: short.len() as u32,
        ..u.clone()
    };
    assert_eq!(
        skipped(&short_u, &short, SKIP_EMPTY, true, false, None, None),
        None
    );
    // A statement unit without its framing, a second event whose verb is not ASCII.
    let odd = [query("BEGİN", 150, true), query("COMMIT", 200, true)];
    let (raw, u) = unit(Layout::V80(1), &odd, true, 0, u32::MAX);
    assert_eq!(skipped(&u, &raw, SKIP_EMPTY, true, false, None, None), None);
    assert_eq!(
        skipped(&u, &raw, SKIP_PLACEHOLDER, true, false, None, None),
        None
    );
}
