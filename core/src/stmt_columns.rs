//! A segment's statement units by key as every stream's loops read them (`StmtUnits::rows`,
//! `StmtUnits::count`): the statement units' indices, and each keyed statement's key id in unit
//! order, with where each unit's start there. Built once with the segment's `StmtUnits`, read by
//! every stream: eight do-db streams over a realistic MIXED binlog each walked every statement
//! unit's pieces (GTID, BEGIN, context events, Query, COMMIT) for their row and again for their
//! key counts, over a third of their instructions beyond one keep-all stream's (callgrind, 431
//! MB). (Interning each unit's set of keys, to answer each set once per stream, cost more to
//! build than eight streams saved: most units there are transactions of several statements.)

use crate::keep::{self, Keep};
use crate::rows::{ROW_KEEP, ROW_PARTIAL, ROW_SKIP, ROW_SLOW};

#[derive(Debug, Default)]
pub struct KeyColumns {
    /// The statement units by keys, by index.
    units: Vec<u32>,
    /// Per unit k, how many keyed statements the units before it hold (and after the last: all).
    before: Vec<u32>,
    /// Each keyed statement's key id, in order.
    keys: Vec<u32>,
}

impl KeyColumns {
    /// The heap bytes of the columns.
    pub fn heap_bytes(&self) -> usize {
        (self.units.capacity() + self.before.capacity() + self.keys.capacity()) * size_of::<u32>()
    }

    /// The columns of units given as their keyed statements' key ids, in order (None: not a
    /// statement unit by keys).
    pub fn build<U: IntoIterator<Item = u32>>(
        units: impl Iterator<Item = Option<U>>,
    ) -> KeyColumns {
        let mut cols = KeyColumns::default();
        for (k, unit) in units.enumerate() {
            cols.before.push(cols.keys.len() as u32);
            if let Some(keys) = unit {
                cols.keys.extend(keys);
                cols.units.push(k as u32);
            }
        }
        cols.before.push(cols.keys.len() as u32);
        cols
    }

    /// One stream's answers for the statement units `row` leaves to Python (ROW_SLOW), from its
    /// keep byte per key id: ROW_KEEP (every statement kept, or none to decide), ROW_SKIP (none
    /// kept), ROW_PARTIAL; a unit with a key asked of Python stays ROW_SLOW.
    pub fn rows(&self, row: &mut [u8], keep: &[u8]) {
        for &k in &self.units {
            let Some(code) = row.get_mut(k as usize) else {
                break;
            };
            let (Some(&a), Some(&b)) =
                (self.before.get(k as usize), self.before.get(k as usize + 1))
            else {
                break;
            };
            if *code != ROW_SLOW {
                continue;
            }
            let (mut kept, mut dropped, mut asked) = (false, false, false);
            for &key in &self.keys[a as usize..b as usize] {
                match keep::at(keep, key as usize) {
                    Keep::Keep => kept = true,
                    Keep::Drop => dropped = true,
                    Keep::Ask => {
                        asked = true;
                        break;
                    }
                }
            }
            if !asked {
                *code = match (kept, dropped) {
                    (_, false) => ROW_KEEP, // (every statement kept, or none to decide)
                    (false, true) => ROW_SKIP,
                    (true, true) => ROW_PARTIAL,
                };
            }
        }
    }

    /// Adds the keyed statements of units i..j to `counts` (one per key id).
    pub fn count(&self, i: usize, j: usize, counts: &mut [u32]) {
        let last = self.before.len().saturating_sub(1);
        let (Some(&a), Some(&b)) = (self.before.get(i.min(last)), self.before.get(j.min(last)))
        else {
            return;
        };
        for &key in self.keys.get(a as usize..b as usize).unwrap_or_default() {
            if let Some(c) = counts.get_mut(key as usize) {
                *c += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition the columns are held to: each unit's keys read one by one.
    fn by_keys(units: &[Option<&[u32]>], row: &mut [u8], keep: &[u8]) {
        for (code, unit) in row.iter_mut().zip(units) {
            let Some(keys) = unit else {
                continue;
            };
            let answers: Vec<Keep> = keys.iter().map(|k| keep::at(keep, *k as usize)).collect();
            if *code != ROW_SLOW || answers.contains(&Keep::Ask) {
                continue;
            }
            let kept = answers.iter().filter(|a| **a == Keep::Keep).count();
            *code = match kept {
                _ if kept == answers.len() => ROW_KEEP,
                0 => ROW_SKIP,
                _ => ROW_PARTIAL,
            };
        }
    }

    #[test]
    fn rows_and_counts_are_the_keys_read_one_by_one() {
        // Not keyed; framing only; one key twice; keys 0 and 1; key 2 (asked); keys 1, 3;
        // keys 1, 0; key 0; key 900 (past every keep: asked).
        let units: [Option<&[u32]>; 9] = [
            None,
            Some(&[]),
            Some(&[0, 0]),
            Some(&[0, 1]),
            Some(&[2]),
            Some(&[1, 3]),
            Some(&[1, 0]),
            Some(&[0]),
            Some(&[900]),
        ];
        let cols = KeyColumns::build(units.iter().map(|u| u.map(|keys| keys.iter().copied())));
        for keep in [
            [1u8, 1, 1, 1],
            [0, 0, 2, 0],
            [1, 0, 2, 1],
            [0, 1, 1, 0],
            [1, 1, 0, 9],
        ] {
            let mixed = [ROW_SLOW, ROW_KEEP, ROW_SLOW, ROW_SKIP, ROW_SLOW, ROW_SLOW];
            // (rows longer and shorter than the units)
            for start in [vec![ROW_SLOW; 10], mixed.to_vec()] {
                let (mut got, mut want) = (start.clone(), start);
                cols.rows(&mut got, &keep);
                by_keys(&units, &mut want, &keep);
                assert_eq!(got, want, "keep {keep:?}");
            }
        }
        for (i, j) in [(0, 9), (1, 3), (3, 4), (2, 2), (4, 2), (5, 99), (99, 100)] {
            let (mut got, mut want) = ([0u32; 4], [0u32; 4]);
            cols.count(i, j, &mut got);
            for keys in units.iter().take(j).skip(i).flatten() {
                for key in *keys {
                    if let Some(c) = want.get_mut(*key as usize) {
                        *c += 1;
                    }
                }
            }
            assert_eq!(got, want, "units {i}..{j}");
        }
    }
}
