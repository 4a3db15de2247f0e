//! A segment's statement units by key as every stream's loops read them (`StmtUnits::rows`,
//! `StmtUnits::count`): per statement unit its one key, where its statements share one (an
//! autocommit statement, a transaction over one table), and the key of each statement in unit
//! order, with where each unit's start. Built once with the segment's `StmtUnits`, read by every
//! stream: eight do-db streams over a realistic MIXED binlog each walked every statement unit's
//! pieces (GTID, BEGIN, context events, Query, COMMIT) for their row and again for their key
//! counts, over a third of their instructions beyond one keep-all stream's (callgrind, 431 MB).

use crate::keep::{self, Keep};
use crate::rows::{ROW_KEEP, ROW_PARTIAL, ROW_SKIP, ROW_SLOW};
use crate::stmt_units::{Piece, ALWAYS};

/// `KeyColumns::units`' key of a unit whose statements have keys of more than one id.
const MANY: u32 = u32::MAX - 1;
/// `KeyColumns::units`' key of a unit with no keyed statement (its framing alone).
const NONE: u32 = u32::MAX;

#[derive(Debug, Default)]
pub struct KeyColumns {
    /// (unit index, its statements' one key id, or MANY, or NONE) per statement unit by keys.
    units: Vec<(u32, u32)>,
    /// Per unit k, how many keyed statements the units before it hold (and after the last: all).
    before: Vec<u32>,
    /// Each keyed statement's key id, in order.
    keys: Vec<u32>,
}

impl KeyColumns {
    /// The columns of units with `bounds` into `pieces` (`StmtUnits`' own).
    pub fn build(bounds: &[(u32, u32)], pieces: &[Piece]) -> KeyColumns {
        let mut cols = KeyColumns {
            before: Vec::with_capacity(bounds.len() + 1),
            ..Default::default()
        };
        for (k, &(lo, hi)) in bounds.iter().enumerate() {
            cols.before.push(cols.keys.len() as u32);
            let Some(unit) = pieces.get(lo as usize..hi as usize) else {
                continue; // (lo == u32::MAX: not a statement unit by keys)
            };
            let mut one = NONE;
            for p in unit.iter().filter(|p| p.key != ALWAYS) {
                cols.keys.push(p.key);
                one = if one == NONE || one == p.key {
                    p.key
                } else {
                    MANY
                };
            }
            cols.units.push((k as u32, one));
        }
        cols.before.push(cols.keys.len() as u32);
        cols
    }

    /// One stream's answers for the statement units `row` leaves to Python (ROW_SLOW), from its
    /// keep byte per key id: ROW_KEEP (every statement kept, or none to decide), ROW_SKIP (none
    /// kept), ROW_PARTIAL; a unit with a key asked of Python stays ROW_SLOW. `many(k)`: unit k's
    /// (statements, statements kept), or None, where its statements' keys differ.
    pub fn rows(&self, row: &mut [u8], keep: &[u8], many: impl Fn(usize) -> Option<(u64, u64)>) {
        for &(k, one) in &self.units {
            let Some(code) = row.get_mut(k as usize) else {
                break;
            };
            if *code != ROW_SLOW {
                continue;
            }
            let answer = match one {
                NONE => Some(ROW_KEEP),
                MANY => many(k as usize).map(|(content, kept)| match kept {
                    _ if kept == content => ROW_KEEP,
                    0 => ROW_SKIP,
                    _ => ROW_PARTIAL,
                }),
                key => match keep::at(keep, key as usize) {
                    Keep::Keep => Some(ROW_KEEP),
                    Keep::Drop => Some(ROW_SKIP),
                    Keep::Ask => None,
                },
            };
            if let Some(answer) = answer {
                *code = answer;
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

    fn piece(key: u32) -> Piece {
        Piece {
            key,
            start: 0,
            end: 0,
            events: 1,
        }
    }

    /// The definition the columns are held to: each unit's pieces read one by one.
    fn by_pieces(bounds: &[(u32, u32)], pieces: &[Piece], row: &mut [u8], keep: &[u8]) {
        for (k, code) in row.iter_mut().enumerate() {
            let Some(&(lo, hi)) = bounds.get(k).filter(|b| b.0 != u32::MAX) else {
                continue;
            };
            let keyed = pieces[lo as usize..hi as usize]
                .iter()
                .filter(|p| p.key != ALWAYS);
            let answers: Vec<Keep> = keyed.map(|p| keep::at(keep, p.key as usize)).collect();
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
    fn rows_and_counts_are_the_pieces_read_one_by_one() {
        // Units: not keyed; framing only; one key twice; keys 0 and 1; key 2 (asked); keys 1, 3.
        let units: [&[u32]; 6] = [
            &[],
            &[ALWAYS, ALWAYS],
            &[ALWAYS, 0, 0, ALWAYS],
            &[0, 1],
            &[2],
            &[1, ALWAYS, 3],
        ];
        let (mut bounds, mut pieces) = (Vec::new(), Vec::new());
        for (k, keys) in units.iter().enumerate() {
            if k == 0 {
                bounds.push((u32::MAX, u32::MAX));
                continue;
            }
            let lo = pieces.len() as u32;
            pieces.extend(keys.iter().map(|&key| piece(key)));
            bounds.push((lo, pieces.len() as u32));
        }
        let cols = KeyColumns::build(&bounds, &pieces);
        let many = |keep: &[u8], k: usize| {
            let (lo, hi) = bounds[k];
            let keyed = pieces[lo as usize..hi as usize]
                .iter()
                .filter(|p| p.key != ALWAYS);
            let answers: Vec<Keep> = keyed.map(|p| keep::at(keep, p.key as usize)).collect();
            let kept = answers.iter().filter(|a| **a == Keep::Keep).count() as u64;
            (!answers.contains(&Keep::Ask)).then_some((answers.len() as u64, kept))
        };
        for keep in [
            [1u8, 1, 1, 1],
            [0, 0, 2, 0],
            [1, 0, 2, 1],
            [0, 1, 1, 0],
            [1, 1, 0, 9],
        ] {
            for start in [
                [ROW_SLOW; 7],
                [
                    ROW_SLOW, ROW_KEEP, ROW_SLOW, ROW_SKIP, ROW_SLOW, ROW_SLOW, ROW_SLOW,
                ],
            ] {
                let (mut got, mut want) = (start, start);
                cols.rows(&mut got, &keep, |k| many(&keep, k));
                by_pieces(&bounds, &pieces, &mut want, &keep);
                assert_eq!(got, want, "keep {keep:?}");
            }
        }
        for (i, j) in [(0, 6), (1, 3), (3, 4), (2, 2), (4, 2), (5, 99), (99, 100)] {
            let (mut got, mut want) = ([0u32; 4], [0u32; 4]);
            cols.count(i, j, &mut got);
            for &(lo, hi) in bounds
                .iter()
                .take(j.min(6))
                .skip(i)
                .filter(|b| b.0 != u32::MAX)
            {
                for p in &pieces[lo as usize..hi as usize] {
                    if let Some(c) = want.get_mut(p.key as usize) {
                        *c += 1;
                    }
                }
            }
            assert_eq!(got, want, "units {i}..{j}");
        }
    }
}
