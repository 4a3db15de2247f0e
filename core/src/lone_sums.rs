//! A chunk's lone units' bytes summed by key in one loop (`UnitList.lone_sums`, for spark_jobs'
//! LoneUnits.tally): each GTID-and-one-statement unit of a key whose statements update tables
//! puts its statement under the key's group and its GTID event's bytes in equal shares under the
//! tables, as `statement_tables._unit_tables` splits one unit's (`share_envelope`); Python puts
//! each key in place once a chunk, at its first unit, and adds the sums at the chunk's end. A
//! DDL-heavy pass meets 16,870 such units and a few hundred keys: one Python step per key, not
//! per unit.

use crate::le::u32_at;
use crate::unit_list::UnitList;

/// A unit `lone_sums` leaves to Python, and whether its bytes were summed (its key met first
/// this chunk: Python puts the key in place) or not (Python reads it whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    pub unit: u32,
    pub summed: bool,
}

/// The units of `left` (indices into `list`, in order), each by its key (`key_of`: a u32 per unit,
/// little-endian; past the end, or a `rows::CLASS_*` value: none) and its key's number of tables
/// (`shares`: a u32 per key; 0: its statements update none, grouped by their text; past the end:
/// not known). A unit of a key with tables has its bytes added into `sums` (24 bytes a key, u64
/// little-endian: its statements' bytes, each table's share of the GTID events, and what the
/// divisions left over, which goes to the first table) and is returned, summed, only where its
/// key was not met this chunk (`met`: a byte per key, then set). Every other unit is returned,
/// not summed, in order. Err(key): a key whose sums or byte in `met` is past their end (nothing
/// added for the units from there on).
pub fn lone_sums(
    list: &UnitList,
    left: &[u32],
    key_of: &[u8],
    shares: &[u8],
    sums: &mut [u8],
    met: &mut [u8],
) -> Result<Vec<Left>, u32> {
    let mut out = Vec::new();
    for &k in left {
        let key = u32_at(key_of, 4 * k as usize).unwrap_or(u32::MAX);
        let tables = if key >= crate::rows::CLASS_STAYS {
            None
        } else {
            u32_at(shares, 4 * key as usize).filter(|&n| n != 0)
        };
        let (Some(tables), Some(u)) = (tables, list.units.get(k as usize)) else {
            out.push(Left {
                unit: k,
                summed: false,
            });
            continue;
        };
        let at = 24 * key as usize;
        let (Some(cell), Some(seen)) = (sums.get_mut(at..at + 24), met.get_mut(key as usize))
        else {
            return Err(key);
        };
        let gtid = u64::from(u.gtid_size);
        let size = (u.end() - u.start()) as u64;
        let tables = u64::from(tables);
        let add = |cell: &mut [u8], i: usize, more: u64| {
            let w = &mut cell[8 * i..8 * i + 8];
            let was = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            w.copy_from_slice(&was.wrapping_add(more).to_le_bytes());
        };
        add(cell, 0, size.saturating_sub(gtid));
        add(cell, 1, gtid / tables);
        add(cell, 2, gtid % tables);
        if *seen == 0 {
            *seen = 1;
            out.push(Left {
                unit: k,
                summed: true,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::{CLASS_LEFT, CLASS_UNREAD};
    use crate::unit_list::ListedUnit;

    fn list(units: &[(u32, u32)]) -> UnitList {
        let mut list = UnitList::default();
        let mut at = 0;
        for &(gtid, size) in units {
            list.units.push(ListedUnit {
                start: at,
                end: at + size,
                gtid_size: gtid,
                ..Default::default()
            });
            at += size;
        }
        list
    }

    fn words(values: &[u32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn sums_of(sums: &[u8], key: usize) -> [u64; 3] {
        let w = |i: usize| u64::from_le_bytes(sums[24 * key + 8 * i..][..8].try_into().unwrap());
        [w(0), w(1), w(2)]
    }

    #[test]
    fn units_of_a_known_key_are_summed_and_only_its_first_this_chunk_returned() {
        // units: key 0 (2 tables) twice, no key, key 3 (past the shares), key 2 (no tables), key 0
        let l = list(&[(42, 100), (43, 90), (40, 70), (42, 60), (42, 50), (0, 30)]);
        let key_of = words(&[0, 0, CLASS_LEFT, 3, 2, 0]);
        let shares = words(&[2, 1, 0]);
        let (mut sums, mut met) = (vec![0u8; 72], vec![0u8; 3]);
        let all: Vec<u32> = (0..6).collect();
        let got = lone_sums(&l, &all, &key_of, &shares, &mut sums, &mut met).unwrap();
        let left = |unit, summed| Left { unit, summed };
        assert_eq!(
            got,
            vec![
                left(0, true),
                left(2, false),
                left(3, false),
                left(4, false)
            ]
        );
        // (100-42 + 90-43 + 30-0; 21 + 21 + 0; 0 + 1 + 0)
        assert_eq!(sums_of(&sums, 0), [58 + 47 + 30, 21 + 21, 1]);
        assert_eq!(sums_of(&sums, 1), [0, 0, 0]);
        assert_eq!(sums_of(&sums, 2), [0, 0, 0]);
        assert_eq!(met, vec![1, 0, 0]);
        // The chunk's next buffer: key 0 met, nothing of it returned.
        let got = lone_sums(&l, &[1], &key_of, &shares, &mut sums, &mut met).unwrap();
        assert!(got.is_empty());
        assert_eq!(sums_of(&sums, 0)[0], 58 + 47 + 30 + 47);
    }

    #[test]
    fn a_unit_without_a_key_or_past_the_list_is_returned_unsummed() {
        let l = list(&[(42, 100)]);
        let key_of = words(&[CLASS_UNREAD]);
        let shares = words(&[1]);
        let (mut sums, mut met) = (vec![0u8; 24], vec![0u8; 1]);
        let got = lone_sums(&l, &[0, 5], &key_of, &shares, &mut sums, &mut met).unwrap();
        assert!(got.iter().all(|g| !g.summed) && got.len() == 2);
        assert_eq!(sums, vec![0u8; 24]);
    }

    #[test]
    fn a_key_past_the_sums_is_an_error() {
        let l = list(&[(42, 100), (42, 100)]);
        let key_of = words(&[0, 1]);
        let shares = words(&[1, 1]);
        let (mut sums, mut met) = (vec![0u8; 24], vec![0u8; 2]);
        assert_eq!(
            lone_sums(&l, &[0, 1], &key_of, &shares, &mut sums, &mut met),
            Err(1)
        );
        let (mut sums, mut met) = (vec![0u8; 48], vec![0u8; 1]);
        assert_eq!(
            lone_sums(&l, &[0, 1], &key_of, &shares, &mut sums, &mut met),
            Err(1)
        );
    }
}
