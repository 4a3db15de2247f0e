//! relay.rs's tests: the relay run over hand-made units.
use super::*;
use crate::scan::TRANSACTION;

/// A relay run and the bytes it copies.
struct Run {
    plan: RelayRun<'static>,
    out: Vec<u8>,
}

fn relay_run(buf: &[u8], units: &[Unit], tables: &[u32], keep: &[u8], from: usize) -> Run {
    let plan = relay_ranges(buf, units, tables, keep, from, None, None, None);
    let mut out = vec![0u8; plan.bytes as usize];
    plan.fill(buf, &mut out);
    Run { plan, out }
}

fn unit(start: usize, end: usize, kind: u8, flags: u32, tables: (u32, u32)) -> Unit {
    Unit {
        start,
        end,
        events: 2,
        kind,
        flags,
        tables_lo: tables.0,
        tables_hi: tables.1,
        last: start,
        ..Default::default()
    }
}

fn heartbeat(start: usize, end: usize) -> Unit {
    Unit {
        events: 1,
        ..unit(start, end, CONTROL, 0, (0, 0))
    }
}

#[test]
fn copies_kept_units_and_passes_heartbeats() {
    let mut buf: Vec<u8> = (0..100u8).collect();
    buf[10 + 4] = HEARTBEAT;
    buf[60 + 4] = HEARTBEAT_V2;
    let units = [
        unit(0, 10, TRANSACTION, F_FAST, (0, 1)),
        heartbeat(10, 30),
        unit(30, 45, TRANSACTION, F_FAST, (1, 3)),
        unit(45, 60, TRANSACTION, F_FAST, (3, 3)),
        heartbeat(60, 70),
        unit(70, 80, TRANSACTION, F_FAST, (3, 4)),
        unit(80, 90, TRANSACTION, 0, (4, 4)),
    ];
    let tables = [0, 1, 0, 2];
    let run = relay_run(&buf, &units, &tables, &[1, 1, 0], 0);
    assert_eq!(
        run.plan.next, 5,
        "the unit with table 2 (not kept) stops the run"
    );
    assert_eq!(run.plan.heartbeats, 2);
    assert_eq!(run.plan.units, 3);
    assert_eq!(run.plan.events, 6);
    let want: Vec<u8> = (0..10).chain(30..60).collect();
    assert_eq!(run.out, want);
    assert_eq!(run.plan.bytes, want.len() as u64);
    let run = relay_run(&buf, &units, &tables, &[1, 1, 1], 5);
    assert_eq!(
        (run.plan.next, run.plan.units, run.out.len()),
        (6, 1, 10),
        "stops at a unit not fast"
    );
    let run = relay_run(&buf, &units, &tables, &[1, 1, 2], 5);
    assert_eq!(
        (run.plan.next, run.plan.units),
        (5, 0),
        "an unknown answer stops"
    );
    assert!(run.out.is_empty());
}

fn event(kind: u8, server_id: u32, flags: u16, body: usize) -> Vec<u8> {
    let mut e = vec![0u8; HEADER_LEN + body];
    e[4] = kind;
    e[5..9].copy_from_slice(&server_id.to_le_bytes());
    let size = e.len() as u32;
    e[9..13].copy_from_slice(&size.to_le_bytes());
    e[17..19].copy_from_slice(&flags.to_le_bytes());
    e
}

/// The scanner's F_PLACEHOLDERS spares the walk over a unit's placeholders: the same answer
/// as the walk, which still answers a unit not flagged, and a flagged unit not ended by an
/// XID is no placeholder unit either way.
#[test]
fn a_flagged_placeholder_unit_is_relayed_as_the_walk_relays_it() {
    let placeholder = event(crate::types::RAND, 0, 0x8000, 16);
    let mut buf = vec![7u8; 5];
    for e in [
        event(MARIADB_GTID, 1, 0, 20),
        placeholder.clone(),
        placeholder.clone(),
    ] {
        buf.extend(e);
    }
    let last = buf.len();
    let mut ended = buf.clone();
    buf.extend(event(XID, 1, 0, 8));
    ended.extend(placeholder);
    for (bytes, want) in [(&buf, true), (&ended, false)] {
        let u = Unit {
            events: 4,
            flags: F_MARIADB_GTID | F_COMPLETE,
            gtid_size: (HEADER_LEN + 20) as u32,
            last,
            ..unit(5, bytes.len(), TRANSACTION, 0, (0, 0))
        };
        let walked = placeholder_unit(bytes, &u);
        let flagged = Unit {
            flags: u.flags | F_PLACEHOLDERS,
            ..u.clone()
        };
        assert_eq!(placeholder_unit(bytes, &flagged), walked);
        assert_eq!(walked.is_some(), want);
        if want {
            let p = walked.unwrap();
            assert_eq!((p.gtid, p.xid, p.holes), ((5, 44), (last, buf.len()), 2));
        }
    }
}

#[test]
fn stops_at_other_control_units_and_bad_bounds() {
    let mut buf = vec![0u8; 40];
    buf[4] = crate::types::ROTATE;
    let units = [heartbeat(0, 20)];
    assert_eq!(relay_run(&buf, &units, &[], &[], 0).plan.next, 0);
    let units = [unit(0, 50, TRANSACTION, F_FAST, (0, 0))];
    assert_eq!(relay_run(&buf, &units, &[], &[], 0).plan.next, 0);
    let units = [unit(0, 20, TRANSACTION, F_FAST, (0, 9))];
    assert_eq!(relay_run(&buf, &units, &[], &[], 0).plan.next, 0);
    assert_eq!(relay_run(&buf, &units, &[], &[], 7).plan.next, 7);
}

/// A DDL the placeholder policy skipped (a standalone GTID and one placeholder, which nothing
/// closes) is relayed as `skip_forms::empty` makes its empty transaction; a unit whose GTID is
/// not standalone, or whose second event is no placeholder, is left to Python.
#[test]
fn a_skipped_ddl_placeholder_is_relayed_as_its_empty_transaction() {
    use crate::scan::F_STANDALONE;
    use crate::types::{MARIADB_FL_DDL, MARIADB_FL_STANDALONE};
    let mut gtid = event(MARIADB_GTID, 1, 0, 19);
    gtid[HEADER_LEN] = 42; // seq_no
    let crc = |e: &mut Vec<u8>| {
        let size = e.len() as u32 + 4;
        e[9..13].copy_from_slice(&size.to_le_bytes());
        let c = crc32fast::hash(e);
        e.extend(c.to_le_bytes());
    };
    for sealed in [false, true] {
        for (flags2, second, taken) in [
            (MARIADB_FL_STANDALONE | MARIADB_FL_DDL, 0x8000, true),
            (MARIADB_FL_STANDALONE | MARIADB_FL_DDL, 0, false), // (a RAND, not a placeholder)
            (0, 0x8000, false),
        ] {
            let mut g = gtid.clone();
            g[HEADER_LEN + 12] = flags2;
            let mut rand = event(crate::types::RAND, 0, second, 16);
            if sealed {
                crc(&mut g);
                crc(&mut rand);
            }
            let buf = [&g[..], &rand[..]].concat();
            let flags = F_MARIADB_GTID | if flags2 != 0 { F_STANDALONE } else { 0 };
            let u = Unit {
                gtid_size: g.len() as u32,
                ..unit(0, buf.len(), TRANSACTION, flags, (0, 0))
            };
            let crc_len = if sealed { 4 } else { 0 };
            let lone = Some(LoneFormat {
                query_post: 13,
                crc_len,
            });
            let plan = relay_ranges(&buf, &[u], &[], &[], 0, lone, None, None);
            assert_eq!(plan.next, usize::from(taken), "{flags2} {second}");
            if taken {
                let mut out = vec![0u8; plan.bytes as usize];
                plan.fill(&buf, &mut out);
                let mut want = Vec::new();
                crate::skip_forms::empty(&g, g.len(), sealed, None, Some(&mut want)).unwrap();
                assert_eq!(out, want);
                assert_eq!(out[HEADER_LEN + 12], 0, "FL_STANDALONE and FL_DDL cleared");
                let counted = (plan.units, plan.events, plan.placeholders);
                assert_eq!(counted, (1, 2, 1));
            }
        }
    }
}
