//! rows.rs's tests: the marks of a rule group's lone units, and the masks they are found by.

use super::*;

#[test]
fn mark_classes_finds_slow_units_on_either_side_of_a_word() {
    // Slow units at a word's first and last byte, past a whole word of others, in the tail
    // after the last whole word; every other code (SKIP, PARTIAL, KEEP) passed over.
    let slow = [0usize, 7, 8, 15, 24, 37, 38];
    let mut row: Vec<u8> = (0..39)
        .map(|k| [ROW_SKIP, ROW_PARTIAL, ROW_KEEP][k % 3])
        .collect();
    for k in slow {
        row[k] = ROW_SLOW;
    }
    let classes: Vec<u8> = (0..39u32).flat_map(|k| (k % 2).to_le_bytes()).collect();
    let before = row.clone();
    let left = mark_classes(&mut row, 0, &classes, &[ROW_KEEP, 0xFF]);
    assert_eq!(left, vec![7, 15, 37]); // class 1, not decided
    for k in 0..39 {
        let want = if slow.contains(&k) && k % 2 == 0 {
            ROW_KEEP
        } else {
            before[k]
        };
        assert_eq!(row[k], want, "unit {k}");
    }
    assert_eq!(
        mark_classes(&mut row, 16, &classes, &[ROW_SKIP, 0xFF]),
        vec![37]
    );
}

#[test]
fn mark_classes_finds_slow_units_across_sixty_four_answer_masks() {
    // Slow units at each mask's first and last answer, from `at` inside a mask, to a short
    // last one; class 0 decided, class 1 not.
    let slow = [0usize, 62, 63, 64, 127, 128, 191, 192, 200];
    let mut row = vec![ROW_KEEP; 201];
    for k in slow {
        row[k] = ROW_SLOW;
    }
    let classes: Vec<u8> = (0..201u32).flat_map(|k| (k % 2).to_le_bytes()).collect();
    let left = mark_classes(&mut row, 63, &classes, &[ROW_SKIP, 0xFF]);
    assert_eq!(left, vec![63, 127, 191]);
    for (k, answer) in row.iter().enumerate() {
        let want = match k {
            0 | 62 => ROW_SLOW, // (before `at`)
            _ if slow.contains(&k) && k % 2 == 0 => ROW_SKIP,
            _ if slow.contains(&k) => ROW_SLOW,
            _ => ROW_KEEP,
        };
        assert_eq!(*answer, want, "unit {k}");
    }
}

#[test]
fn slow_mask_flags_each_slow_answer_of_sixty_four() {
    for at in 0..64 {
        for code in [ROW_SKIP, ROW_PARTIAL, ROW_KEEP, ROW_SLOW] {
            let mut chunk = [ROW_KEEP; 64];
            chunk[at] = code;
            chunk[(at + 17) % 64] = ROW_SLOW;
            let want = u64::from(code == ROW_SLOW) << at | 1 << ((at + 17) % 64);
            assert_eq!(slow_mask(&chunk), want, "at {at}, code {code}");
        }
    }
}

#[test]
fn mark_classes_sets_the_decided_classes_and_returns_the_rest() {
    // Units: class 0 (KEEP), 1 (not decided), LEFT, STAYS, 0 again but not slow, 2 (past
    // `codes`), 0 before `at`, then one past `classes` (unread).
    let classes: Vec<u8> = [0u32, 0, 1, CLASS_LEFT, CLASS_STAYS, 0, 2]
        .iter()
        .flat_map(|c| c.to_le_bytes())
        .collect();
    let mut row = [
        ROW_SLOW, ROW_SLOW, ROW_SLOW, ROW_SLOW, ROW_SLOW, ROW_SKIP, ROW_SLOW, ROW_SLOW,
    ];
    let left = mark_classes(&mut row, 1, &classes, &[ROW_KEEP, 0xFF]);
    assert_eq!(left, vec![2, 3, 6, 7]);
    assert_eq!(
        row,
        [ROW_SLOW, ROW_KEEP, ROW_SLOW, ROW_SLOW, ROW_SLOW, ROW_SKIP, ROW_SLOW, ROW_SLOW]
    );
}

#[test]
fn mark_slow_sets_the_slow_units_and_says_which_where_not_all() {
    let units: Vec<u8> = [1u32, 3, 4, 9]
        .iter()
        .flat_map(|k| k.to_le_bytes())
        .collect();
    let mut row = [ROW_SLOW; 6];
    assert_eq!(mark_slow(&mut row, &units[..12], ROW_SKIP), None);
    assert_eq!(
        row,
        [ROW_SLOW, ROW_SKIP, ROW_SLOW, ROW_SKIP, ROW_SKIP, ROW_SLOW]
    );
    let mut row = [ROW_SLOW, ROW_SLOW, ROW_SLOW, ROW_KEEP, ROW_SLOW, ROW_SLOW];
    let set = mark_slow(&mut row, &units, ROW_KEEP);
    assert_eq!(
        set,
        Some([1u32, 4].iter().flat_map(|k| k.to_le_bytes()).collect())
    );
    assert_eq!(
        row,
        [ROW_SLOW, ROW_KEEP, ROW_SLOW, ROW_KEEP, ROW_KEEP, ROW_SLOW]
    );
}

/// Each slave's answer per unit is the one its keep bytes give the unit's tables, whatever
/// the other slaves: units drawn with a known answer per slave (all its tables kept, some,
/// none, one not given, not fast), up to 130 slaves (three words of lanes).
#[test]
fn each_slave_is_answered_by_its_own_keep_bytes() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    for _ in 0..50 {
        let slaves = 1 + next(130) as usize;
        let names = 1 + next(40) as usize;
        // Each slave keeps a drawn set of the name ids below `given[s]`; past it, not given.
        let given: Vec<usize> = (0..slaves)
            .map(|_| next(names as u64 + 1) as usize)
            .collect();
        let keeps: Vec<Vec<u8>> = given
            .iter()
            .map(|g| (0..*g).map(|_| next(3) as u8).collect())
            .collect();
        let (mut tids, mut bounds, mut want) = (Vec::new(), Vec::new(), vec![Vec::new(); slaves]);
        for _ in 0..next(700) {
            if next(10) == 0 {
                bounds.extend([u32::MAX, u32::MAX]);
                want.iter_mut().for_each(|w| w.push(ROW_SLOW));
                continue;
            }
            let lo = tids.len() as u32;
            let ids: Vec<usize> = (0..next(5)).map(|_| next(names as u64) as usize).collect();
            tids.extend(ids.iter().map(|id| *id as u32));
            bounds.extend([lo, tids.len() as u32]);
            for (s, w) in want.iter_mut().enumerate() {
                let answers: Vec<Option<bool>> = ids
                    .iter()
                    .map(|id| keeps[s].get(*id).map(|k| *k != KEEP_DROP))
                    .collect();
                w.push(if answers.contains(&None) {
                    ROW_SLOW
                } else if answers.iter().all(|a| *a == Some(true)) {
                    ROW_KEEP
                } else if answers.contains(&Some(true)) {
                    ROW_PARTIAL
                } else {
                    ROW_SKIP
                });
            }
        }
        let refs: Vec<&[u8]> = keeps.iter().map(Vec::as_slice).collect();
        assert_eq!(rows_many(&tids, &bounds, &refs, None), want);
    }
}
