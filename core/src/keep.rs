//! The keep vocabulary: the one byte each compiled walk reads per table name id (`keep`,
//! `keeps`), per statement key id (`stmt_keep`, `stmt_keeps`) and per unit Python answered
//! beforehand (`assemble`'s `answers`). The one definition of these codes: Python reads them
//! from the module (`_core.KEEP_DROP`, ...), no Python module writes the numbers itself.

/// Not kept: a table's events, a statement, a unit answered beforehand (emptied, or skipped as
/// the walk's options say) are dropped.
pub const KEEP_DROP: u8 = 0;
/// Kept.
pub const KEEP_KEEP: u8 = 1;
/// Not answered: an id the walk was given no answer for (every walk takes its keys' answers
/// up front, so only a short array or a hostile caller says it); the walk stops at the unit and
/// Python decides it.
pub const KEEP_ASK: u8 = 2;
/// Not the walk's to decide: the walk stops at the unit and Python decides it itself (split: a
/// statement routed by schema; `assemble`'s `answers`: a unit Python did not answer
/// beforehand, which the walk decides by its statement keys where it may, else stops at).
pub const KEEP_PYTHON: u8 = 3;

/// A keep byte read (`at`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    Drop,
    Keep,
    Ask,
    Python,
}

/// The answer of id `id` in `keep`: an id past its end is not answered yet (`Ask`), a byte
/// outside the vocabulary is Python's to decide.
#[inline]
pub fn at(keep: &[u8], id: usize) -> Keep {
    match keep.get(id) {
        Some(&KEEP_DROP) => Keep::Drop,
        Some(&KEEP_KEEP) => Keep::Keep,
        None | Some(&KEEP_ASK) => Keep::Ask,
        Some(_) => Keep::Python,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_code() {
        let keep = [KEEP_DROP, KEEP_KEEP, KEEP_ASK, KEEP_PYTHON, 9];
        let read: Vec<Keep> = (0..6).map(|i| at(&keep, i)).collect();
        let want = [
            Keep::Drop,
            Keep::Keep,
            Keep::Ask,
            Keep::Python,
            Keep::Python,
            Keep::Ask,
        ];
        assert_eq!(read, want);
    }
}
