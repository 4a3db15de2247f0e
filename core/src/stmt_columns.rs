//! A segment's statement units by key as every stream's loops read them (`StmtUnits::rows`,
//! `StmtUnits::count`): per statement unit the set of its statements' keys, interned per segment
//! (the units of one set are answered alike: every key kept, none, some, or one asked of Python),
//! and each keyed statement's key in unit order, with where each unit's start there. Built once with the
//! segment's `StmtUnits`, read by every stream, which answers each set once and each unit by its
//! set: eight do-db streams over a realistic MIXED binlog each walked every statement unit's
//! pieces (GTID, BEGIN, context events, Query, COMMIT) for their row and again for their key
//! counts, over a third of their instructions beyond one keep-all stream's (callgrind, 431 MB).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::keep::{self, Keep};
use crate::rows::{ROW_KEEP, ROW_PARTIAL, ROW_SKIP, ROW_SLOW};
use crate::stmt_keys::KeyHasher;

/// Key sets of more than one key, by their keys (hashed as the keys' bytes are: `KeyHasher`).
type Interned = HashMap<Vec<u32>, u32, BuildHasherDefault<KeyHasher>>;

#[derive(Debug, Default)]
pub struct KeyColumns {
    /// (unit index, its key set) per statement unit by keys.
    units: Vec<(u32, u32)>,
    /// Per key set, where its keys start in `set_keys` (and after the last: their end).
    sets: Vec<u32>,
    /// Each key set's distinct key ids, ascending.
    set_keys: Vec<u32>,
    /// Per unit k, how many keyed statements the units before it hold (and after the last: all).
    before: Vec<u32>,
    /// Each keyed statement's key id, in order.
    keys: Vec<u32>,
}

impl KeyColumns {
    /// The columns of units given as their keyed statements' key ids, in order (None: not a
    /// statement unit by keys).
    pub fn build<U: IntoIterator<Item = u32>>(
        units: impl Iterator<Item = Option<U>>,
    ) -> KeyColumns {
        let mut cols = KeyColumns {
            sets: vec![0],
            ..Default::default()
        };
        // Sets of one key by that key's id (most units), the others by their keys.
        let (mut single, mut interned) = (Vec::new(), Interned::default());
        let mut set = Vec::new();
        for (k, unit) in units.enumerate() {
            cols.before.push(cols.keys.len() as u32);
            let Some(keys) = unit else {
                continue;
            };
            let start = cols.keys.len();
            cols.keys.extend(keys);
            let mine = &cols.keys[start..];
            let id = match mine.first() {
                // (a key id is under the statements met: dense ids, as `Keys` gives them)
                Some(&key) if mine.iter().all(|k| *k == key) && (key as usize) < start + 1 => {
                    let key = key as usize;
                    if single.len() <= key {
                        single.resize(key + 1, None);
                    }
                    let set = [key as u32];
                    *single[key].get_or_insert_with(|| cols.add_set(&set))
                }
                _ => {
                    set.clear();
                    set.extend_from_slice(mine);
                    set.sort_unstable();
                    set.dedup();
                    match interned.get(set.as_slice()) {
                        Some(&id) => id,
                        None => {
                            let id = cols.add_set(&set);
                            interned.insert(set.clone(), id);
                            id
                        }
                    }
                }
            };
            cols.units.push((k as u32, id));
        }
        cols.before.push(cols.keys.len() as u32);
        cols
    }

    /// A new key set's id.
    fn add_set(&mut self, keys: &[u32]) -> u32 {
        self.set_keys.extend_from_slice(keys);
        self.sets.push(self.set_keys.len() as u32);
        (self.sets.len() - 2) as u32
    }

    /// One stream's answers for the statement units `row` leaves to Python (ROW_SLOW), from its
    /// keep byte per key id: ROW_KEEP (every statement kept, or none to decide), ROW_SKIP (none
    /// kept), ROW_PARTIAL; a unit with a key asked of Python stays ROW_SLOW.
    pub fn rows(&self, row: &mut [u8], keep: &[u8]) {
        let answers: Vec<u8> = self
            .sets
            .windows(2)
            .map(|w| {
                let (mut kept, mut dropped) = (false, false);
                for &key in &self.set_keys[w[0] as usize..w[1] as usize] {
                    match keep::at(keep, key as usize) {
                        Keep::Keep => kept = true,
                        Keep::Drop => dropped = true,
                        Keep::Ask => return ROW_SLOW,
                    }
                }
                match (kept, dropped) {
                    (_, false) => ROW_KEEP,
                    (false, true) => ROW_SKIP,
                    (true, true) => ROW_PARTIAL,
                }
            })
            .collect();
        for &(k, set) in &self.units {
            let Some(code) = row.get_mut(k as usize) else {
                break;
            };
            if *code == ROW_SLOW {
                *code = answers[set as usize];
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
        // keys 1, 0 (the set of the fourth); key 0 (the set of the third); key 900 (past the ids
        // met: by its keys, and asked of every stream).
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
