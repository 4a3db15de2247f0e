//! A segment's statement units by key as every stream's loops read them (rows::rows_many,
//! send's `KeyColumns::count`): whether each unit is one, and each keyed statement's key id in unit
//! order, with where each unit's start there. Built once with the segment's `StmtUnits`, read by
//! every stream: eight do-db streams over a realistic MIXED binlog each walked every statement
//! unit's pieces (GTID, BEGIN, context events, Query, COMMIT) for their row and again for their
//! key counts, over a third of their instructions beyond one keep-all stream's (callgrind, 431
//! MB). (Interning each unit's set of keys, to answer each set once per stream, cost more to
//! build than eight streams saved: most units there are transactions of several statements.)

#[derive(Debug, Default)]
pub struct KeyColumns {
    /// Per unit, whether it is a statement unit by keys.
    keyed: Vec<bool>,
    /// Per unit k, how many keyed statements the units before it hold (and after the last: all).
    before: Vec<u32>,
    /// Each keyed statement's key id, in order.
    keys: Vec<u32>,
}

impl KeyColumns {
    /// The heap bytes of the columns.
    pub fn heap_bytes(&self) -> usize {
        self.keyed.capacity() + (self.before.capacity() + self.keys.capacity()) * size_of::<u32>()
    }

    /// The columns of units given as their keyed statements' key ids, in order (None: not a
    /// statement unit by keys).
    pub fn build<U: IntoIterator<Item = u32>>(
        units: impl Iterator<Item = Option<U>>,
    ) -> KeyColumns {
        let mut cols = KeyColumns::default();
        for unit in units {
            cols.before.push(cols.keys.len() as u32);
            cols.keyed.push(unit.is_some());
            if let Some(keys) = unit {
                cols.keys.extend(keys);
            }
        }
        cols.before.push(cols.keys.len() as u32);
        cols
    }

    /// The key ids of unit k's keyed statements, in order; None when it is not a statement unit
    /// by keys.
    #[inline]
    pub fn keys_of(&self, k: usize) -> Option<&[u32]> {
        if !*self.keyed.get(k)? {
            return None;
        }
        let (a, b) = (*self.before.get(k)?, *self.before.get(k + 1)?);
        self.keys.get(a as usize..b as usize)
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

    #[test]
    fn keys_and_counts_are_the_units_keys() {
        // Not keyed; framing only; one key twice; keys 0 and 1; key 2; keys 1, 3; keys 1, 0;
        // key 0; key 900 (past every count).
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
        let read: Vec<Option<&[u32]>> = (0..10).map(|k| cols.keys_of(k)).collect();
        assert_eq!(read[..9], units);
        assert_eq!(read[9], None);
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
