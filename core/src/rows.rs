//! A slave's answer per unit of a segment (the ROW_ codes), from its keep byte per table name and
//! per statement key: many at once over one read of the units (`rows_many`).

use crate::keep::{KEEP_DROP, KEEP_KEEP};
use crate::le::u32_at;
use crate::stmt_columns::KeyColumns;

/// A stream's answer per unit (`rows`), the one definition of these codes: Python reads them
/// from the module (`_core.ROW_SKIP`, ...), `send::walk` acts on them.
pub const ROW_SKIP: u8 = 0; // no table kept
pub const ROW_PARTIAL: u8 = 1; // some kept
pub const ROW_KEEP: u8 = 2; // every table kept, or none to decide
pub const ROW_SLOW: u8 = 3; // not a fast unit, or a table whose answer is not given

// `rows_many` computes the codes from these values.
/// `code` for each unit of `units` (u32 indices, little-endian) whose answer in `row` is
/// ROW_SLOW; None when that was every one of them, else the indices it set (u32 bytes). A
/// stream's GTID-and-one-statement units answered alike (a default database's plain statements,
/// `StatementAnswers.row`), thousands per segment of a MIXED binlog, set in one call, not by a
/// Python loop per unit.
pub fn mark_slow(row: &mut [u8], units: &[u8], code: u8) -> Option<Vec<u8>> {
    let mut set: Option<Vec<u8>> = None;
    for (n, k) in units.chunks_exact(4).enumerate() {
        let at = u32::from_le_bytes([k[0], k[1], k[2], k[3]]) as usize;
        match row.get_mut(at).filter(|a| **a == ROW_SLOW) {
            Some(answer) => {
                *answer = code;
                if let Some(set) = set.as_mut() {
                    set.extend_from_slice(k);
                }
            }
            None if set.is_none() => set = Some(units[..4 * n].to_vec()),
            None => {}
        }
    }
    set
}

/// A unit's class no one has read yet (`mark_classes`), one a rule group decides on its own
/// (LEFT), one that stays ROW_SLOW (a control unit, or one the input ends inside).
pub const CLASS_UNREAD: u32 = u32::MAX;
pub const CLASS_LEFT: u32 = u32::MAX - 1;
pub const CLASS_STAYS: u32 = u32::MAX - 2;

/// Each unit from `at` whose answer in `row` is ROW_SLOW set to its class's code (`classes`: a
/// u32 per unit, little-endian; `codes`: a byte per class, 0xFF not decided), where it has one;
/// the others (class unread or LEFT, or a code not decided) returned in order, for Python. A
/// rule group's lone statements answered by class (spark_jobs' RuleGroup.mark): one call per
/// group and buffer, not a Python step per unit and group (48 groups x 11,000 DDL units).
pub fn mark_classes(row: &mut [u8], at: usize, classes: &[u8], codes: &[u8]) -> Vec<u32> {
    let mut left = Vec::new();
    for_each_slow(row, at, |row, slow| {
        let class = u32_at(classes, 4 * slow).unwrap_or(CLASS_UNREAD);
        if class == CLASS_STAYS {
            return;
        }
        match codes.get(class as usize).filter(|c| **c != 0xFF) {
            Some(&code) if class < CLASS_STAYS => row[slow] = code,
            _ => left.push(slow as u32),
        }
    });
    left
}

/// `f(row, k)` for each unit k from `at` whose answer is ROW_SLOW, in order (`f` may change
/// answers at k and after it only), sixty-four answers at a time (`slow_mask`), its bits taken in
/// turn: a buffer's slow units lie some fifty answers apart in a DDL-heavy binlog, for each of 48
/// rule groups (a word and then a byte at a time cost some ninety instructions per slow unit).
fn for_each_slow(row: &mut [u8], at: usize, mut f: impl FnMut(&mut [u8], usize)) {
    let mut base = at;
    while base < row.len() {
        let end = (base + 64).min(row.len());
        let mut mask = match <&[u8; 64]>::try_from(&row[base..end]) {
            Ok(chunk) => slow_mask(chunk),
            Err(_) => {
                let mut chunk = [ROW_SKIP; 64]; // (the row's last answers)
                chunk[..end - base].copy_from_slice(&row[base..end]);
                slow_mask(&chunk)
            }
        };
        while mask != 0 {
            f(row, base + mask.trailing_zeros() as usize);
            mask &= mask - 1;
        }
        base = end;
    }
}

/// Bit i set where answer i of `chunk` is ROW_SLOW: sixteen bytes compared at once, and their
/// mask taken (SSE2, which every x86-64 has).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn slow_mask(chunk: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };
    // SAFETY: SSE2 is part of the x86-64 baseline, and each load reads 16 of `chunk`'s 64 bytes.
    unsafe {
        let slow = _mm_set1_epi8(ROW_SLOW as i8);
        (0..4).fold(0u64, |mask, q| {
            let v = _mm_loadu_si128(chunk.as_ptr().add(16 * q).cast::<__m128i>());
            mask | u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, slow)) as u16) << (16 * q)
        })
    }
}

/// Bit i set where answer i of `chunk` is ROW_SLOW (the only code with both low bits set), eight
/// answers a word, each word's flags gathered into a byte by one multiply.
#[cfg(not(target_arch = "x86_64"))]
fn slow_mask(chunk: &[u8; 64]) -> u64 {
    const LOW: u64 = 0x0101_0101_0101_0101;
    (chunk.chunks_exact(8).enumerate()).fold(0u64, |mask, (j, w)| {
        let w = u64::from_le_bytes(w.try_into().unwrap_or_default());
        mask | ((w & (w >> 1) & LOW).wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * j)
    })
}

const _: () = assert!(ROW_SKIP == 0 && ROW_PARTIAL == 1 && ROW_KEEP == 2 && ROW_SLOW == 3);

/// Slaves decided at once by `rows_many`: one bit each in a word per name id.
const LANES: usize = 64;
/// Units answered per block before each slave's row takes its bytes of them.
const BLOCK: usize = 256;

/// What `rows_many` answers a segment's statement units by: their keys (stmt_columns), and per
/// slave its keep byte per key id (None: its statement units stay ROW_SLOW).
pub type StmtKeeps<'a> = (&'a KeyColumns, &'a [Option<&'a [u8]>]);

/// Each slave's answer per unit of a segment, one byte each: ROW_SKIP, ROW_PARTIAL, ROW_KEEP or
/// ROW_SLOW (what the master's stream, `SlaveStream._row`, works from). `bounds` holds (lo, hi)
/// per unit into `tids` (name ids of the fast units' Table_maps), lo = u32::MAX for a unit that
/// is not fast; `keeps` one keep byte per name id per slave (any byte but KEEP_DROP: kept);
/// `by_keys`: the statement units answered too, from each slave's keep byte per key id (KEEP_KEEP,
/// KEEP_DROP; any other byte, or none: asked of Python, ROW_SLOW). One read of the units for
/// every 64 slaves: per name id (key id), a word with one bit per slave (kept, and known: an id
/// past a slave's keep bytes is not given), ANDed and ORed over each unit's Table_maps (keys).
/// `experiment --candidates` with 64 rule sets walked the units 64 times (a seventh of its CPU),
/// and its 48 rule groups each read a realistic MIXED segment's statement keys again (a quarter
/// of the shadow pass's instructions).
pub fn rows_many(
    tids: &[u32],
    bounds: &[u32],
    keeps: &[&[u8]],
    by_keys: Option<StmtKeeps<'_>>,
) -> Vec<Vec<u8>> {
    let units = bounds.len() / 2;
    let mut out: Vec<Vec<u8>> = keeps
        .iter()
        .map(|_| Vec::with_capacity(units + 8))
        .collect();
    for (lane0, group) in keeps.chunks(LANES).enumerate() {
        let (kept, known) = lanes(group.iter().map(|k| Some(*k)), |k| k != KEEP_DROP, |_| true);
        let stmts = by_keys.map(|(cols, keeps)| {
            let group = keeps.iter().skip(lane0 * LANES).take(group.len());
            let (kept, known) = lanes(
                group.clone().copied(),
                |k| k == KEEP_KEEP,
                |k| k == KEEP_KEEP || k == KEEP_DROP,
            );
            let on = group
                .enumerate()
                .fold(0u64, |on, (s, k)| on | u64::from(k.is_some()) << s);
            (cols, kept, known, on)
        });
        // Per unit of a block: the slaves that keep all its tables (statements), any of them,
        // and know them all; a unit that is neither fast nor a statement unit is known by none.
        let (mut all, mut any, mut sure) = ([0u64; BLOCK], [0u64; BLOCK], [0u64; BLOCK]);
        for (b, block) in bounds.chunks(2 * BLOCK).enumerate() {
            let n = block.len() / 2;
            for (k, lh) in block.chunks_exact(2).enumerate() {
                let (lo, hi) = (lh[0] as usize, lh[1] as usize);
                (all[k], any[k], sure[k]) = if lh[0] != u32::MAX && lo <= hi && hi <= tids.len() {
                    fold(&tids[lo..hi], &kept, &known)
                } else {
                    let keyed = stmts.as_ref().and_then(|(cols, kept, known, on)| {
                        let (a, y, s) = fold(cols.keys_of(b * BLOCK + k)?, kept, known);
                        Some((a, y, s & on))
                    });
                    keyed.unwrap_or((0, 0, 0))
                };
            }
            let rows = &mut out[lane0 * LANES..lane0 * LANES + group.len()];
            // Eight units at a time: each slave's bit of their words as a byte (`columns`), and
            // its eight codes made at once, a byte each of one word (what the block's last eight
            // make past n is cut off: the rows have room for it). Slave by slave and unit by
            // unit, 48 rule groups' rows were a seventh of a count's instructions.
            let (at, eights) = (rows.first().map_or(0, Vec::len), n.div_ceil(8) * 8);
            for row in rows.iter_mut() {
                row.resize(at + eights, 0);
            }
            let (mut a, mut y, mut z) = ([0u8; LANES], [0u8; LANES], [0u8; LANES]);
            for c in (0..eights).step_by(8) {
                columns(&all[c..c + 8], group.len(), &mut a);
                columns(&any[c..c + 8], group.len(), &mut y);
                columns(&sure[c..c + 8], group.len(), &mut z);
                for (s, row) in rows.iter_mut().enumerate() {
                    let [a, y, z] = [a[s], y[s], z[s]];
                    let codes = code(SPREAD[a as usize], SPREAD[y as usize], SPREAD[z as usize]);
                    row[at + c..at + c + 8].copy_from_slice(&codes.to_le_bytes());
                }
            }
            for row in rows.iter_mut() {
                row.truncate(at + n);
            }
        }
    }
    out
}

/// Eight units' codes from a slave's bits (0 or 1 in each byte of the words): without a branch
/// (the codes' values are fixed above), KEEP = 2 where all their tables are kept, else PARTIAL
/// = 1 where any is, else SKIP = 0; SLOW = 3 where one is not known.
#[inline(always)]
fn code(all: u64, any: u64, sure: u64) -> u64 {
    (all << 1) | (any & !all) | (3 * (sure ^ 0x0101_0101_0101_0101))
}

/// Bit j of a byte spread to byte j (0 or 1) of a word.
const SPREAD: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut x = 0;
    while x < 256 {
        let mut j = 0;
        while j < 8 {
            table[x] |= ((x as u64 >> j) & 1) << (8 * j);
            j += 1;
        }
        x += 1;
    }
    table
};

/// For eight units' words (one bit per slave), each of the first `slaves` slaves' bits as a
/// byte of `out` (bit j: unit j): an 8 x 8 bit transpose of each byte of the words.
#[inline(always)]
fn columns(words: &[u64], slaves: usize, out: &mut [u8; LANES]) {
    for b in 0..slaves.div_ceil(8) {
        // Byte j: byte b of unit j's word (slaves 8b..8b+7), transposed so that byte i holds
        // slave 8b+i's bit of each unit (Hacker's Delight's transpose8: 2x2, 4x4, 8x8 blocks).
        let byte = |j: usize| ((words[j] >> (8 * b)) & 0xFF) << (8 * j);
        let mut x = byte(0) | byte(1) | byte(2) | byte(3) | byte(4) | byte(5) | byte(6) | byte(7);
        let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
        x ^= t ^ (t << 7);
        let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
        x ^= t ^ (t << 14);
        let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
        x ^= t ^ (t << 28);
        out[8 * b..8 * b + 8].copy_from_slice(&x.to_le_bytes());
    }
}

/// Per id, a word with one bit per slave of `group`: whether `kept` and `known` hold of its byte
/// (a slave without bytes, or an id past them: neither).
fn lanes<'a>(
    group: impl Iterator<Item = Option<&'a [u8]>>,
    kept: impl Fn(u8) -> bool,
    known: impl Fn(u8) -> bool,
) -> (Vec<u64>, Vec<u64>) {
    let (mut w, mut m) = (Vec::new(), Vec::new());
    for (s, keep) in group.enumerate() {
        let keep = keep.unwrap_or_default();
        if keep.len() > w.len() {
            w.resize(keep.len(), 0);
            m.resize(keep.len(), 0);
        }
        for (id, k) in keep.iter().enumerate() {
            w[id] |= u64::from(kept(*k)) << s;
            m[id] |= u64::from(known(*k)) << s;
        }
    }
    (w, m)
}

/// The slaves that keep every id of `ids`, any of them, and know them all.
#[inline]
fn fold(ids: &[u32], kept: &[u64], known: &[u64]) -> (u64, u64, u64) {
    let (mut a, mut y, mut s) = (!0u64, 0u64, !0u64);
    for id in ids {
        match (kept.get(*id as usize), known.get(*id as usize)) {
            (Some(w), Some(m)) => {
                a &= w;
                y |= w;
                s &= m;
            }
            _ => s = 0,
        }
    }
    (a, y, s)
}

#[cfg(test)]
#[path = "rows_tests.rs"]
mod tests;
