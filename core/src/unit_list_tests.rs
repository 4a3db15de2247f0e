//! unit_list's tests.

use super::*;

/// `tally_names` counts each fast unit's Table_maps once per range that holds it, whether the
/// ranges cover most units (the list's totals less the gaps) or few.
#[test]
fn tally_names_counts_the_table_maps_of_the_ranges() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m.max(1)
    };
    for _ in 0..200 {
        let names = 1 + next(12) as u32;
        let (mut units, mut tables) = (Vec::new(), Vec::new());
        for k in 0..next(60) as usize {
            let lo = tables.len() as u32;
            tables.extend((0..next(4)).map(|_| next(names as u64) as u32));
            let fast = if next(6) == 0 { 0 } else { F_FAST };
            let (start, end) = (10 * k, 10 * k + 10);
            let hi = tables.len() as u32;
            units.push(Unit {
                start,
                end,
                flags: fast,
                tables_lo: lo,
                tables_hi: hi,
                ..Default::default()
            });
        }
        let mut list = UnitList::default();
        list.add(b"f", 0, &units, &tables, &[]);
        let n = units.len();
        let mut ranges = Vec::new();
        let mut at = 0;
        while at < n {
            let (i, j) = (
                at + next(3) as usize,
                at + next(3) as usize + next(40) as usize,
            );
            let (i, j) = (i.min(n), j.min(n).max(i.min(n)));
            ranges.push((i, j));
            at = j + 1;
        }
        let mut want = vec![0u32; names as usize];
        for &(i, j) in &ranges {
            for k in i..j {
                for id in list.tables(k) {
                    want[*id as usize] += 1;
                }
            }
        }
        let mut got = vec![0u32; names as usize];
        list.tally_names(&ranges, &mut got);
        assert_eq!(got, want, "ranges {ranges:?}");
    }
}

/// `heap_bytes` counts every unit's record, name ids and bounds, and what streams read of the
/// list later (the sums a count walk makes, the name totals).
#[test]
fn heap_bytes_counts_the_records_and_what_is_read_later() {
    let units: Vec<Unit> = (0..1000)
        .map(|k| Unit {
            start: 10 * k,
            end: 10 * k + 10,
            flags: F_FAST,
            tables_lo: k as u32,
            tables_hi: k as u32 + 1,
            ..Default::default()
        })
        .collect();
    let mut list = UnitList::default();
    list.add(b"f", 0, &units, &(0..1000).collect::<Vec<u32>>(), &[]);
    let listed = list.heap_bytes();
    assert!(listed >= 1000 * (std::mem::size_of::<ListedUnit>() + 3 * 4));
    list.sums();
    list.tally_names(&[(0, 1000)], &mut vec![0u32; 1000]);
    assert!(list.heap_bytes() >= listed + 1000 * (2 * 8 + 4));
}

/// Each unit's record reads back what the scanner said of it: its offsets, events, kind, flags,
/// GTID event's size, last event, GTID and Table_maps, in 32 bytes a unit.
#[test]
fn a_listed_unit_reads_back_the_scanned_unit() {
    assert_eq!(std::mem::size_of::<ListedUnit>(), 32);
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m.max(1)
    };
    for _ in 0..100 {
        let (mut list, mut want) = (UnitList::default(), Vec::new());
        for part in 0..1 + next(3) as u32 {
            let (mut units, mut tables, mut at) = (Vec::new(), Vec::new(), next(100) as usize);
            for _ in 0..next(50) {
                let lo = tables.len() as u32;
                tables.extend((0..next(3)).map(|_| next(9) as u32));
                let size = 1 + next(u32::MAX as u64 / 200) as usize;
                let gtid = (next(2) as u32, next(3) as u32, next(u64::MAX));
                let u = Unit {
                    start: at,
                    end: at + size,
                    last: at + next(size as u64) as usize,
                    events: next(u32::MAX as u64) as u32,
                    kind: next(3) as u8,
                    flags: next(1 << 13) as u32,
                    gtid_size: next(u32::MAX as u64) as u32,
                    tables_lo: lo,
                    tables_hi: tables.len() as u32,
                    gtid_domain: gtid.0,
                    gtid_server: gtid.1,
                    gtid_seq: gtid.2,
                    ..Default::default()
                };
                at += size;
                units.push(u);
            }
            let ids: Vec<Vec<u32>> = units
                .iter()
                .map(|u| tables[u.tables_lo as usize..u.tables_hi as usize].to_vec())
                .collect();
            assert_eq!(list.add(b"f", 7, &units, &tables, &[]), units.len());
            want.extend(units.into_iter().zip(ids).map(|(u, ids)| (part, u, ids)));
        }
        for (k, (part, u, ids)) in want.iter().enumerate() {
            let l = &list.units[k];
            let got = (
                l.part,
                l.start(),
                l.end(),
                l.last(),
                l.events,
                l.kind,
                l.flags,
            );
            assert_eq!(
                got,
                (*part, u.start, u.end, u.last, u.events, u.kind, u.flags)
            );
            assert_eq!(l.gtid_size, u.gtid_size);
            let gtid = (u.gtid_domain, u.gtid_server, u.gtid_seq);
            assert_eq!(list.gtid_of(k), Some(gtid));
            let fast = u.flags & F_FAST != 0;
            assert_eq!(list.tables(k), if fast { &ids[..] } else { &[] });
            let mariadb = u.flags & F_MARIADB_GTID != 0;
            assert_eq!(list.gtid(k), mariadb.then_some(gtid));
        }
        assert_eq!(list.gtid_of(want.len()), None);
    }
}

/// A unit whose offsets in its part's buffer do not fit 32 bits is not listed, nor any after it.
#[test]
fn a_unit_past_4_gib_of_its_buffer_is_not_listed() {
    let unit = |start: usize, end: usize| Unit {
        start,
        end,
        last: start,
        ..Default::default()
    };
    let big = u32::MAX as usize;
    let units = [unit(0, 10), unit(10, big + 1), unit(big + 1, big + 9)];
    let mut list = UnitList::default();
    assert_eq!(list.add(b"f", 0, &units, &[], &[]), 1);
    assert_eq!(list.units.len(), 1);
}

/// Every unit reads back what was pushed for it, and a source's consecutive seq_nos (or one
/// seq repeated) take one run whatever their number.
#[test]
fn a_units_gtid_reads_back_and_a_source_in_order_is_one_run() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m.max(1)
    };
    for _ in 0..300 {
        let (mut gtids, mut want) = (crate::unit_gtids::UnitGtids::default(), Vec::new());
        let mut g = (next(3) as u32, next(3) as u32, next(1 << 40));
        for k in 0..next(200) as u32 {
            match next(10) {
                0 => g = (next(3) as u32, next(3) as u32, next(u64::MAX)),
                1 => g.2 = g.2.wrapping_add(next(4)),
                2 => {}
                _ => g.2 = g.2.wrapping_add(1),
            }
            gtids.push(k, g.0, g.1, g.2);
            want.push(g);
        }
        let got: Vec<_> = (0..want.len()).map(|k| gtids.get(k).unwrap()).collect();
        assert_eq!(got, want);
    }
    let mut one = crate::unit_gtids::UnitGtids::default();
    for k in 0..100_000u32 {
        one.push(k, 1, 7, 500 + u64::from(k));
    }
    assert_eq!(one.sources().count(), 1);
    assert_eq!(one.get(99_999), Some((1, 7, 100_499)));
}
