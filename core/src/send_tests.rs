//! The send walk's tests (`send.rs`): what it sends and counts of made-up units.

use super::*;
use crate::scan::F_FAST;
use crate::tally::tests::unit;
use crate::types::HEADER_LEN;

/// A skipped unit's form is made once, straight into what the walk sends, after the Heartbeat
/// it still owes; a form the walk cannot make (here a unit whose XID claims bytes it does not
/// hold: its placeholders are half made when that shows) ends the walk with nothing of it sent.
#[test]
fn forms_follow_the_owed_heartbeat_and_a_form_not_made_leaves_nothing() {
    let mut buf = Vec::new();
    let mut units = Vec::new();
    for statements in [
        &["UPDATE t SET a=1"][..],
        &["UPDATE t SET a=2", "DELETE FROM t"],
    ] {
        units.push(unit(&mut buf, statements).0);
    }
    let (cut, _) = unit(&mut buf, &["UPDATE t SET a=4"]);
    let xid = cut.end - (HEADER_LEN + 8);
    buf[xid + 9..xid + 13].copy_from_slice(&100u32.to_le_bytes());
    units.push(cut);
    for u in &mut units {
        u.flags |= F_FAST; // a row unit of no Table_map: its framing is its GTID and XID
    }
    let mut list = UnitList::default();
    list.add(b"f", 0, &units, &[], &[]);
    let owed = [7u8; 30];
    for (skip, made) in [(SKIP_PLACEHOLDER, 2), (SKIP_EMPTY, 3)] {
        let opt = SendOptions {
            batch_bytes: 0,
            limit: u64::MAX,
            skip,
            partial_ok: false,
            runs: false,
            stretches: false,
            pending: Some(&owed),
            server_id: 0,
            heartbeat_crc: false,
            stmts: None,
            count_only: false,
            relay: false,
        };
        let row = [SKIP; 3];
        let s = walk(&list, &[&buf], &row, &[], 0, &opt);
        let mut out = vec![0u8; s.out_len];
        s.fill(&[&buf], &mut out);
        let mut want = owed.to_vec();
        for u in &list.units[..made] {
            skip_forms::skipped(u, &buf, skip, false, false, None, Some(&mut want)).unwrap();
        }
        assert_eq!(s.next, made, "{skip}");
        assert_eq!(out, want, "{skip}");
        assert_eq!((s.heartbeats, s.skip_units), (1, made as u64), "{skip}");
        assert_eq!(
            s.skip_bytes + s.heartbeat_bytes,
            want.len() as u64,
            "{skip}"
        );
        let counted = walk(
            &list,
            &[&buf],
            &row,
            &[],
            0,
            &SendOptions {
                count_only: true,
                ..opt
            },
        );
        assert_eq!(
            (counted.next, counted.skip_bytes, counted.out_len),
            (s.next, s.skip_bytes, 0),
            "{skip}: counting makes nothing"
        );
    }
}

/// The relay mode (`relayed`, `simulate --verify`'s expectation of a slave's relay logs): a unit
/// kept as it is under every policy; a skipped one as nothing (heartbeat: no Heartbeat is
/// relayed), its GTID and XID (placeholder: the slave drops the placeholders) or its empty
/// transaction; every policy stops at the first unit one of them cannot answer (here a GTID and
/// one statement not flagged a DDL, whose placeholder form the slave's relay run does not take).
/// A skipped DDL (FL_STANDALONE, FL_DDL) is relayed under the placeholder policy as the slave's
/// relay run writes it: its empty transaction (`relay::skipped_ddl`).
#[test]
fn the_relay_mode_is_what_a_slave_relays_of_the_walk_under_each_policy() {
    let mut buf = Vec::new();
    let mut units = Vec::new();
    for sql in ["UPDATE t SET a=1", "UPDATE t SET a=2"] {
        let (mut u, _) = unit(&mut buf, &[sql]);
        u.flags |= F_FAST;
        units.push(u);
    }
    let start = buf.len();
    buf.extend(crate::test_events::event_from(162, 7, 0, &[0u8; 13]));
    let gtid_size = (buf.len() - start) as u32;
    let ddl = b"\0\0\0\0\0\0\0\0\0\0\0\0\0DROP TABLE t";
    buf.extend(crate::test_events::event_from(2, 7, 0, ddl));
    units.push(crate::scan::Unit {
        start,
        end: buf.len(),
        events: 2,
        gtid_size,
        flags: units[0].flags & !F_FAST,
        ..units[0]
    });
    let mut list = UnitList::default();
    list.add(b"f", 0, &units, &[], &[]);
    let (kept, skipped) = (&buf[units[0].start..units[0].end], &list.units[1]);
    let skips = [SKIP_HEARTBEAT, SKIP_PLACEHOLDER, SKIP_EMPTY];
    let answers = (&[KEEP, SKIP, SKIP][..], &[][..], None);
    let walks = relayed(&list, &[&buf], None, answers, 0, &skips, false);
    let out = |s: &Sent| {
        let mut out = vec![0u8; s.out_len];
        s.fill(&[&buf], &mut out);
        out
    };
    assert!(walks.iter().all(|s| s.next == 2), "the DDL is the caller's");
    assert_eq!(
        out(&walks[0]),
        kept,
        "heartbeat: nothing for the skipped unit"
    );
    let gtid = &buf[skipped.start()..skipped.start() + skipped.gtid_size as usize];
    let xid = &buf[skipped.end() - HEADER_LEN - 8..skipped.end()];
    assert_eq!(out(&walks[1]), [kept, gtid, xid].concat(), "placeholder");
    let mut empty = kept.to_vec();
    skip_forms::skipped(
        skipped,
        &buf,
        SKIP_EMPTY,
        false,
        false,
        None,
        Some(&mut empty),
    )
    .unwrap();
    assert_eq!(out(&walks[2]), empty, "empty transaction");
    let heartbeat = relayed(&list, &[&buf], None, answers, 0, &skips[..1], false);
    assert_eq!(
        heartbeat[0].next, 3,
        "alone, the heartbeat policy takes the DDL"
    );
    let mut ddl_buf = buf.clone();
    let standalone = crate::types::MARIADB_FL_STANDALONE | crate::types::MARIADB_FL_DDL;
    ddl_buf[start + HEADER_LEN + 12] = standalone;
    units[2].flags |= crate::scan::F_STANDALONE;
    let mut list = UnitList::default();
    list.add(b"f", 0, &units, &[], &[]);
    let walks = relayed(&list, &[&ddl_buf], None, answers, 0, &skips, false);
    assert!(
        walks.iter().all(|s| s.next == 3),
        "a DDL's forms are the walk's"
    );
    let mut want = [kept, gtid, xid].concat();
    let ddl = &ddl_buf[units[2].start..units[2].end];
    skip_forms::empty(ddl, gtid_size as usize, false, None, Some(&mut want)).unwrap();
    let mut placeholder = vec![0u8; walks[1].out_len];
    walks[1].fill(&[&ddl_buf], &mut placeholder);
    assert_eq!(
        placeholder, want,
        "placeholder: the DDL's empty transaction"
    );
}
