//! The master's per-table flag words (WL#2387's FILTER_BINLOG_SEND_F): for each (db, table), one
//! bit per slave (rule group and policy), computed once by the Python rule engine and cached
//! here, so that a stream's per-segment answers are bit tests over this map. Thrown away as a
//! whole when slaves or their rules change (a new generation).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::scan::Fnv;

/// A word: bit i (limb i / 64, bit i % 64) set when slave bit i keeps the table.
pub type Word = Vec<u64>;

#[derive(Default)]
pub struct FlagWords {
    words: HashMap<Vec<u8>, Word, BuildHasherDefault<Fnv>>,
    /// Bumped at every `clear`: a word computed before it must not be stored after it.
    pub generation: u64,
    /// Words computed (cache misses) since the start.
    pub computed: u64,
}

/// The map's key for (db, table): the database's length first, so no pair of names collides.
pub fn key(db: &[u8], table: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + db.len() + table.len());
    k.extend_from_slice(&(db.len() as u32).to_le_bytes());
    k.extend_from_slice(db);
    k.extend_from_slice(table);
    k
}

/// A word from its little-endian bytes (Python's `int.to_bytes(n, "little")`).
pub fn word_from_le(bytes: &[u8]) -> Word {
    bytes
        .chunks(8)
        .map(|c| {
            let mut limb = [0u8; 8];
            limb[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(limb)
        })
        .collect()
}

/// Whether `bit` is set in `word` (bits past its end are clear).
pub fn has_bit(word: &[u64], bit: usize) -> bool {
    word.get(bit / 64)
        .is_some_and(|limb| limb >> (bit % 64) & 1 == 1)
}

impl FlagWords {
    pub fn get(&self, key: &[u8]) -> Option<&Word> {
        self.words.get(key)
    }

    /// Stores a word computed during generation `generation`; false (not stored) when the words
    /// were cleared meanwhile.
    pub fn insert(&mut self, key: Vec<u8>, word: Word, generation: u64) -> bool {
        if generation != self.generation {
            return false;
        }
        self.computed += 1;
        self.words.insert(key, word);
        true
    }

    pub fn clear(&mut self) {
        self.words.clear();
        self.generation += 1;
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_answer_per_bit_and_die_with_their_generation() {
        let mut w = FlagWords::default();
        let k = key(b"db1", b"t1");
        assert_ne!(key(b"db1", b"t1"), key(b"db1t", b"1"));
        let word = word_from_le(&[0b0000_0101, 0, 0, 0, 0, 0, 0, 0, 0x01]); // bits 0, 2 and 64
        assert!(w.insert(k.clone(), word, 0));
        let got = w.get(&k).unwrap();
        assert!(has_bit(got, 0) && !has_bit(got, 1) && has_bit(got, 2) && has_bit(got, 64));
        assert!(!has_bit(got, 65) && !has_bit(got, 1000));
        let stale = w.generation;
        w.clear();
        assert!(w.get(&k).is_none() && w.is_empty());
        assert!(
            !w.insert(k.clone(), vec![1], stale),
            "a word of an older generation is not stored"
        );
        assert_eq!(w.computed, 1);
    }
}
