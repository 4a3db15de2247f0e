//! A segment's statement units by key as every stream's loops read them (`StmtUnits::rows`,
//! `StmtUnits::count`): the statement units' indices, and each keyed statement's key id in unit
//! order, with where each unit's start there. Built once with the segment's `StmtUnits`, read by
//! every stream: eight do-db streams over a realistic MIXED binlog each walked every statement
//! unit's pieces (GTID, BEGIN, context events, Query, COMMIT) for their row and again for their
//! key counts, over a third of their instructions beyond one keep-all stream's (callgrind, 431
//! MB). (Interning each unit's set of keys, to answer each set once per stream, cost more to
//! build than eight streams saved: most units there are transactions of several statements.)

use crate::keep::{KEEP_DROP, KEEP_KEEP};
use crate::rows::ROW_SLOW;

/// Rows answered at once by `KeyColumns::rows`: one bit each in a word per key id.
const LANES: usize = 64;
/// Statement units answered per block before each row takes its bytes of them.
const BLOCK: usize = 256;

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

    /// Each row's answers for the statement units it leaves to Python (ROW_SLOW), from its keep
    /// byte per key id (`keeps`, one per row): ROW_KEEP (every statement kept, or none to
    /// decide), ROW_SKIP (none kept), ROW_PARTIAL; a unit with a key asked of Python (a byte
    /// neither KEEP_KEEP nor KEEP_DROP, or none) stays ROW_SLOW. One read of the units' keys for
    /// every 64 rows, as rows::rows_many reads Table_maps: per key id, a word with one bit per row
    /// (kept, and known), ANDed and ORed over each unit's keys. `experiment`'s 48 rule groups
    /// (33 distinct answers) read a realistic MIXED segment's statement units once each, a ninth
    /// of the shadow pass's instructions.
    pub fn rows<R: AsMut<[u8]>>(&self, rows: &mut [R], keeps: &[&[u8]]) {
        for (group, keeps) in rows.chunks_mut(LANES).zip(keeps.chunks(LANES)) {
            let width = keeps.iter().map(|k| k.len()).max().unwrap_or(0);
            let (mut kept, mut known) = (vec![0u64; width], vec![0u64; width]);
            for (s, keep) in keeps.iter().enumerate() {
                for (id, k) in keep.iter().enumerate() {
                    kept[id] |= u64::from(*k == KEEP_KEEP) << s;
                    known[id] |= u64::from(*k == KEEP_KEEP || *k == KEEP_DROP) << s;
                }
            }
            // Per unit of a block: the rows that keep all its statements, any of them, and know
            // them all.
            let (mut all, mut any, mut sure) = ([0u64; BLOCK], [0u64; BLOCK], [0u64; BLOCK]);
            for block in self.units.chunks(BLOCK) {
                for (j, &k) in block.iter().enumerate() {
                    let (a, b) = (self.before[k as usize], self.before[k as usize + 1]);
                    let (mut x, mut y, mut z) = (!0u64, 0u64, !0u64);
                    for &key in &self.keys[a as usize..b as usize] {
                        match (kept.get(key as usize), known.get(key as usize)) {
                            (Some(w), Some(m)) => (x, y, z) = (x & w, y | w, z & m),
                            _ => z = 0,
                        }
                    }
                    (all[j], any[j], sure[j]) = (x, y, z);
                }
                for (s, row) in group.iter_mut().enumerate() {
                    let row = row.as_mut();
                    for (j, &k) in block.iter().enumerate() {
                        let Some(code) = row.get_mut(k as usize) else {
                            break;
                        };
                        // Without a branch (the codes' values are fixed: rows.rs): KEEP = 2 where
                        // all are kept (or none to decide), else PARTIAL = 1 where any is, else
                        // SKIP = 0; SLOW = 3 where not known.
                        let (a, y, z) = ((all[j] >> s) & 1, (any[j] >> s) & 1, (sure[j] >> s) & 1);
                        let answer = ((a << 1) | (y & !a) | (3 * (1 - z))) as u8;
                        *code = if *code == ROW_SLOW { answer } else { *code };
                    }
                }
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
    use crate::keep::{self, Keep};
    use crate::rows::{ROW_KEEP, ROW_PARTIAL, ROW_SKIP};

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
        let keeps = [
            [1u8, 1, 1, 1],
            [0, 0, 2, 0],
            [1, 0, 2, 1],
            [0, 1, 1, 0],
            [1, 1, 0, 9],
        ];
        let mixed = [ROW_SLOW, ROW_KEEP, ROW_SLOW, ROW_SKIP, ROW_SLOW, ROW_SLOW];
        // (rows longer and shorter than the units; each keep alone, and 70 rows at once: two
        // words of lanes)
        for start in [vec![ROW_SLOW; 10], mixed.to_vec()] {
            for many in [1, 70] {
                for first in 0..keeps.len() {
                    let refs: Vec<&[u8]> = (first..first + many).map(|i| &keeps[i % 5][..]).collect();
                    let mut got = vec![start.clone(); many];
                    cols.rows(&mut got, &refs);
                    for (got, keep) in got.iter().zip(&refs) {
                        let mut want = start.clone();
                        by_keys(&units, &mut want, keep);
                        assert_eq!(*got, want, "keep {keep:?}");
                    }
                }
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

    /// Each row is answered by its own keep bytes, whatever the other rows: drawn units (up to
    /// five keys each, of up to 40), drawn keep bytes (keep, drop, ask, short), up to 130 rows.
    #[test]
    fn each_row_is_answered_by_its_own_keep_bytes() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..50 {
            let keys = 1 + next(40);
            let units: Vec<Option<Vec<u32>>> = (0..next(700))
                .map(|_| (next(5) > 0).then(|| (0..next(6)).map(|_| next(keys) as u32).collect()))
                .collect();
            let cols = KeyColumns::build(units.iter().map(|u| u.clone()));
            let units: Vec<Option<&[u32]>> = units.iter().map(|u| u.as_deref()).collect();
            let keeps: Vec<Vec<u8>> = (0..1 + next(130))
                .map(|_| (0..next(keys + 1)).map(|_| [0, 1, 1, 2][next(4) as usize]).collect())
                .collect();
            let start: Vec<u8> = (0..units.len()).map(|_| [ROW_SLOW, ROW_SLOW, ROW_KEEP][next(3) as usize]).collect();
            let refs: Vec<&[u8]> = keeps.iter().map(Vec::as_slice).collect();
            let mut got = vec![start.clone(); keeps.len()];
            cols.rows(&mut got, &refs);
            for (got, keep) in got.iter().zip(&refs) {
                let mut want = start.clone();
                by_keys(&units, &mut want, keep);
                assert_eq!(*got, want);
            }
        }
    }
}
