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
    list.add(b"f", 0, &units, &[]);
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
