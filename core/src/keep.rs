//! The keep vocabulary: the one byte each compiled walk reads per table name id (`keep`,
//! `keeps`), per statement key id (`stmt_keep`, `stmt_keeps`) and per unit Python answered
//! beforehand (`assemble`'s `answers`). The one definition of these codes: Python reads them
//! from the module (`_core.KEEP_DROP`, ...), no Python module writes the numbers itself.

/// Not kept: a table's events, a statement, a unit answered beforehand (emptied, or skipped as
/// the walk's options say) are dropped.
pub const KEEP_DROP: u8 = 0;
/// Kept.
pub const KEEP_KEEP: u8 = 1;
/// Ask: not the walk's to decide. The walk stops at the unit and Python decides it (a key its
/// consumer answers in Python: an impure decision, a gated INSERT ... SELECT, a split statement of
/// no one schema; a unit `assemble`'s `answers` leaves open, which the walk decides by its
/// statement keys where it may). Every walk takes its answers up front, so a key id past the end
/// of its array (a short array, a hostile caller) asks too.
pub const KEEP_ASK: u8 = 2;

/// A keep byte read (`at`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    Drop,
    Keep,
    Ask,
}

/// The answer of id `id` in `keep`: an id past its end, or a byte outside the vocabulary, asks.
#[inline]
pub fn at(keep: &[u8], id: usize) -> Keep {
    match keep.get(id) {
        Some(&KEEP_DROP) => Keep::Drop,
        Some(&KEEP_KEEP) => Keep::Keep,
        _ => Keep::Ask,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_code() {
        let keep = [KEEP_DROP, KEEP_KEEP, KEEP_ASK, 9];
        let read: Vec<Keep> = (0..5).map(|i| at(&keep, i)).collect();
        let want = [Keep::Drop, Keep::Keep, Keep::Ask, Keep::Ask, Keep::Ask];
        assert_eq!(read, want);
    }
}
