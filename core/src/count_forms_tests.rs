use super::*;

/// A list of complete fast MariaDB units, one of each body's length (a GTID, Rows-like events, an
/// XID), and their bytes.
fn fast_units(bodies: &[usize], crc: bool) -> (Vec<u8>, UnitList) {
    use crate::skip_forms::test_event;
    use crate::types::{MARIADB_GTID, XID};
    let (mut buf, mut units) = (Vec::new(), Vec::new());
    for &body in bodies {
        let start = buf.len();
        buf.extend(test_event(1, MARIADB_GTID, &[0u8; 19], 9, crc));
        let gtid_size = (buf.len() - start) as u32;
        for k in 0..body {
            let kind = if k % 2 == 0 { 19 } else { 30 };
            buf.extend(test_event(1, kind, &[1u8; 30], 9, crc));
        }
        let last = buf.len();
        buf.extend(test_event(1, XID, &[5u8; 8], 9, crc));
        units.push(ListedUnit {
            start: start as u32,
            end: buf.len() as u32,
            last: last as u32,
            events: body as u32 + 2,
            flags: F_COMPLETE | F_MARIADB_GTID | F_FAST,
            gtid_size,
            tabled: true,
            ..Default::default()
        });
    }
    let mut list = UnitList::default();
    list.units = units;
    (buf, list)
}

/// A complete fast MariaDB unit's forms are made from its record (`recorded`), as `skipped` makes
/// them from its bytes: the count reads no byte of it, here none readable.
#[test]
fn fast_mariadb_units_are_formed_from_their_records_alone() {
    for crc in [false, true] {
        let (buf, list) = fast_units(&[1, 3, 6], crc);
        let policies = [(SKIP_PLACEHOLDER, crc), (SKIP_EMPTY, crc)];
        let unread = vec![0u8; buf.len()];
        let made = policies.map(|p| Forms::make_many(&list, &[&unread], None, &[p]).remove(0));
        for (f, (skip, _)) in made.iter().zip(policies) {
            let n = list.units.len();
            let want = list.units.iter().fold((0, 0, 0), |s, u| {
                let f = skip_forms::skipped(u, &buf, skip, crc, false, None, None).unwrap();
                (s.0 + f.bytes, s.1 + f.events, s.2 + f.placeholders)
            });
            assert_eq!(f.made_until(0, n, false), n, "{skip} {crc}");
            assert_eq!(f.at(n), <[u64; 3]>::from(want), "{skip} {crc}");
        }
    }
}

/// A MariaDB statement unit (its GTID, its statements, an XID: no BEGIN, the GTID is its
/// BEGIN) skipped under the placeholder policy is formed (`form`) from its record and the pieces
/// its keys always keep, as `skipped` makes it from its bytes: the count reads no byte of it, here none
/// readable. One opened by a BEGIN as well is read (the pieces do not say it is one event), and
/// so is one its pieces frame otherwise.
#[test]
fn mariadb_statement_units_are_formed_from_their_records_and_pieces() {
    use crate::scan::Unit;
    use crate::test_events::{event, query};
    use crate::types::{MARIADB_GTID, XID};
    let mut buf = Vec::new();
    let mut units = Vec::new();
    for (statements, begin) in [(1, false), (2, false), (3, false), (2, true)] {
        let start = buf.len();
        buf.extend(event(MARIADB_GTID, &[0u8; 13]));
        let gtid_size = (buf.len() - start) as u32;
        if begin {
            buf.extend(query("db1", "BEGIN"));
        }
        for k in 0..statements {
            buf.extend(query("db1", &format!("UPDATE t SET a={k}")));
        }
        let last = buf.len();
        buf.extend(event(XID, &[0u8; 8]));
        units.push(Unit {
            start,
            end: buf.len(),
            last,
            events: statements + 2 + u32::from(begin),
            kind: 1,
            flags: F_COMPLETE | F_MARIADB_GTID,
            gtid_size,
            ..Default::default()
        });
    }
    let mut list = UnitList::default();
    list.add(b"f", 0, &units, &[], &[]);
    let mut st = StmtUnits::build(&list, &[&buf], &[(13, 0, 0)]);
    // Unit 1 framed by pieces that end it with its last statement and its XID, unit 2 by its GTID
    // and its first statement: neither is its GTID alone and its last event, so both are read.
    let (lo, hi) = (st.bounds[1].1 as usize, st.bounds[2].0 as usize);
    st.pieces[lo - 1].start = st.pieces[lo - 2].start;
    st.pieces[hi].end = st.pieces[hi + 1].end;
    let policy = (SKIP_PLACEHOLDER, false);
    let reference = |k: usize, u: &ListedUnit| {
        let always: Vec<(usize, usize)> = st
            .of(k)
            .unwrap()
            .iter()
            .filter(|p| p.key == ALWAYS)
            .map(|p| (p.start(), p.end()))
            .collect();
        let f = skip_forms::skipped(u, &buf, SKIP_PLACEHOLDER, false, false, Some(&always), None);
        f.map(|f| (f.bytes, f.events, f.placeholders))
    };
    let (unread, mut scratch) = (vec![0u8; buf.len()], Vec::new());
    for (k, u) in list.units.iter().enumerate() {
        let want = reference(k, u);
        assert!(want.is_some_and(|f| f.2 > 0), "{k}");
        assert_eq!(
            form(k, u, &[&buf], Some(&st), policy, &mut scratch),
            want,
            "{k}"
        );
        // (the first from its record alone; the others read: their zeros make no form)
        let unread = form(k, u, &[&unread], Some(&st), policy, &mut scratch);
        assert_eq!(unread, if k == 0 { want } else { None }, "{k}");
    }
    // (a unit its record does not say a MariaDB GTID opens: not formed off it, nor by `skipped`)
    let mysql = ListedUnit {
        flags: F_COMPLETE,
        ..list.units[0]
    };
    assert_eq!(
        form(0, &mysql, &[&buf], Some(&st), policy, &mut scratch),
        None
    );
    let made = Forms::make_many(&list, &[&buf], Some(&st), &[policy]).remove(0);
    let want = (0..list.units.len()).fold([0, 0, 0], |s, k| {
        let f = reference(k, &list.units[k]).unwrap();
        [s[0] + f.0, s[1] + f.1, s[2] + f.2]
    });
    assert_eq!(made.at(list.units.len()), want);
}

/// Forms are made into the arrays of forms dropped before (`spare`), whatever those held: the
/// same sums as into new ones; and the arrays kept stay within SPARE_MAX of SPARE_BYTES each.
#[test]
fn forms_made_into_spare_arrays_are_the_same_and_spares_stay_bounded() {
    let (buf, list) = fast_units(&[1, 2, 5], true);
    let policies = [(SKIP_PLACEHOLDER, true), (SKIP_EMPTY, true)];
    let first = Forms::make_many(&list, &[&buf], None, &policies);
    let want: Vec<[u64; 3]> = first.iter().map(|f| f.at(list.units.len())).collect();
    drop(first);
    // (spares full of other sums, longer than the list: each made again from its start)
    for _ in 0..SPARE_MAX + 3 {
        drop(Forms {
            skip: SKIP_EMPTY,
            crc: true,
            sums: vec![(7, 7, 7); 64],
            zeros: [Zeros::default(), Zeros::default()],
        });
    }
    drop(Forms {
        skip: SKIP_EMPTY,
        crc: true,
        sums: Vec::with_capacity(SPARE_BYTES / size_of::<Sum>() + 1),
        zeros: [Zeros::default(), Zeros::default()],
    });
    let again = Forms::make_many(&list, &[&buf], None, &policies);
    for (f, want) in again.iter().zip(&want) {
        assert_eq!(f.sums.len(), list.units.len() + 1);
        assert_eq!(f.at(0), [0, 0, 0]);
        assert_eq!(f.at(list.units.len()), *want);
    }
    let kept = SPARE.lock().unwrap_or_else(|e| e.into_inner());
    assert!(kept.len() <= SPARE_MAX);
    assert!(kept
        .iter()
        .all(|s| s.capacity() * size_of::<Sum>() <= SPARE_BYTES));
}
