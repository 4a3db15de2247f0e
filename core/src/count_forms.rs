//! The skipped units' forms a count walk sums (`count_walk`): per skip policy, every unit's form
//! if skipped whole, as sums from the list's start (`Forms`), made once per segment and policy
//! for every stream (`Forms::make_many`), into the arrays of the forms dropped before (`spare`),
//! and held by the list while a count reads them (`FormsCache`).

use std::mem::size_of;
use std::sync::{Arc, Mutex};

use crate::scan::{F_COMPLETE, F_FAST, F_MARIADB_GTID};
use crate::sent::prefetch;
use crate::skip_forms::{self, SKIP_EMPTY, SKIP_PLACEHOLDER};
use crate::stmt_units::{Piece, StmtUnits, ALWAYS};
use crate::unit_list::{ListedUnit, UnitList};

/// Every unit's form if skipped whole under one skip policy, as sums from the list's start
/// (n + 1): bytes, events and placeholders (`Sum`), the units no form is made for (`none`), and
/// (placeholders) the statement units, whose framing is their keys' to say. Counts are u32 (as a
/// file's offsets), and the two that stay 0 in most segments take no memory until one is not
/// (`Zeros`).
pub struct Forms {
    pub skip: u8,
    pub crc: bool,
    sums: Vec<Sum>,
    zeros: [Zeros; 2], // (`none`, `statements`)
}

/// The forms of the units before one (`Forms`): bytes, events, placeholders; one record a unit.
type Sum = (u64, u32, u32);

/// Sums from the list's start that are 0 until some unit adds to them: empty until then.
#[derive(Default)]
struct Zeros(Vec<u32>);

impl Zeros {
    /// Both columns of `Forms::zeros` given their sums before unit k of n.
    fn push_both(zeros: &mut [Zeros; 2], (k, n): (usize, usize), sums: [u64; 2]) {
        for (Zeros(z), sum) in zeros.iter_mut().zip(sums) {
            if sum != 0 && z.is_empty() {
                // (its whole length at once: grown unit by unit, it was reallocated)
                z.reserve_exact(n + 1);
                z.resize(k, 0);
            }
            if !z.is_empty() {
                z.push(sum as u32);
            }
        }
    }
}

/// How many units ahead of the one whose form it makes `Forms::make` asks for the bytes of
/// (each unit's first bytes wait on memory otherwise: the segment's pages are in no cache).
const AHEAD: usize = 16;
/// The units whose forms under the empty-transaction policy are made from their records alone
/// (under the placeholder policy, the fast ones among them).
const MARIADB: u32 = F_COMPLETE | F_MARIADB_GTID;

impl Forms {
    /// The forms of every unit of `plan` under each of `policies` (skip code, checksums), one
    /// policy after another (`make`). `st`: the list's statement units by key (a statement unit
    /// is framed by the pieces every stream keeps, what `StmtUnits::kept_ranges` gives a stream
    /// keeping none).
    pub fn make_many(
        plan: &UnitList,
        bufs: &[&[u8]],
        st: Option<&StmtUnits>,
        policies: &[(u8, bool)],
    ) -> Vec<Forms> {
        // (One read of the records per policy, not one for all: with the policies' running sums
        // in a vector, each unit's sums were loaded from what the unit before stored, field by
        // field, and perf put a third of the loop on that load; a policy's own sums stay in
        // registers, and its second read of the records finds them in cache. A placeholder
        // policy's forms of a 24,000-unit segment, warm: 403 us, then 128 us.)
        policies
            .iter()
            .map(|&policy| Forms::make(plan, bufs, st, policy))
            .collect()
    }

    /// The forms of every unit of `plan` under one policy: each unit's read off its record where
    /// `recorded` makes it, else off its first and last events, asked for AHEAD units ahead
    /// (under the empty-transaction policy, no MariaDB unit's: a walk for both policies asked for
    /// every statement unit's bytes, and summed the statement units no empty-transaction count
    /// reads).
    fn make(plan: &UnitList, bufs: &[&[u8]], st: Option<&StmtUnits>, policy: (u8, bool)) -> Forms {
        let skip = policy.0;
        // (none read: `recorded`'s, and a statement unit `form` frames by its record)
        let unread = |a: &ListedUnit| {
            a.flags & MARIADB == MARIADB
                && (skip == SKIP_EMPTY || a.flags & F_FAST != 0 || !a.tabled)
        };
        let n = plan.units.len();
        let mut sums = spare(n + 1);
        let mut zeros = [Zeros::default(), Zeros::default()];
        // (the sums so far, and those of `none` and `statements`)
        let (mut bytes, mut events, mut holes) = (0u64, 0u32, 0u32);
        let mut rare = [0u64; 2];
        let mut scratch = Vec::new();
        for (k, u) in plan.units.iter().enumerate() {
            // (a form is read off the unit's record, its first event and its last)
            if let Some(a) = plan.units.get(k + AHEAD).filter(|a| !unread(a)) {
                let buf = bufs.get(a.part as usize).copied().unwrap_or_default();
                for at in [a.start(), a.last()] {
                    prefetch(buf.get(at..(at + 32).min(a.end())).unwrap_or_default());
                }
            }
            if rare != [0; 2] {
                // (both 0: neither was ever other, the sums only grow; `Zeros` stay empty)
                Zeros::push_both(&mut zeros, (k, n), rare);
            }
            sums.push((bytes, events, holes));
            let got =
                recorded(u, bufs, policy).or_else(|| form(k, u, bufs, st, policy, &mut scratch));
            match got {
                Some((b, e, p)) => {
                    bytes += b;
                    events += e as u32;
                    holes += p as u32;
                }
                None => rare[0] += 1,
            }
            // (the empty-transaction policy frames a statement unit as any other: `framed_all`)
            rare[1] += u64::from(skip != SKIP_EMPTY && !u.tabled);
        }
        sums.push((bytes, events, holes));
        Zeros::push_both(&mut zeros, (n, n), rare);
        Forms {
            skip,
            crc: policy.1,
            sums,
            zeros,
        }
    }

    /// The end of the longest run of units from i, up to j, whose forms are made (and framed:
    /// `framed_all`, else no statement unit among them).
    pub(crate) fn made_until(&self, i: usize, j: usize, framed_all: bool) -> usize {
        let hi = j.min(self.sums.len().saturating_sub(1)).max(i);
        // (the last unit up to which a sum is still its value at i; an empty one is 0 throughout)
        let to = |z: &Zeros| {
            z.0.get(i..=hi)
                .map_or(hi, |s| i + s.partition_point(|&x| x == s[0]) - 1)
        };
        let framed = (!framed_all).then(|| to(&self.zeros[1]));
        to(&self.zeros[0]).min(framed.unwrap_or(hi))
    }

    /// The forms of units 0..k: bytes, events, placeholders.
    pub(crate) fn at(&self, k: usize) -> [u64; 3] {
        let (b, e, p) = self.sums[k];
        [b, e.into(), p.into()]
    }
}

/// Arrays of forms dropped, kept for the next ones made (`spare`): a pass makes two a segment,
/// and each new one was pages the kernel mapped and zeroed again (about 90 minor faults a 24,000-
/// unit segment and policy: a small-transaction pass's forms took 15,800 and 73 ms, 190 and 40 ms
/// with these). At most SPARE_MAX of at most SPARE_BYTES each: a few megabytes, whatever the
/// segments.
static SPARE: Mutex<Vec<Vec<Sum>>> = Mutex::new(Vec::new());
const SPARE_MAX: usize = 8;
const SPARE_BYTES: usize = 4 << 20;

/// An empty array for `n` forms: a spare one where one is kept, else a new one.
fn spare(n: usize) -> Vec<Sum> {
    let kept = SPARE.lock().unwrap_or_else(|e| e.into_inner()).pop();
    let mut sums = kept.unwrap_or_default();
    sums.clear();
    sums.reserve(n);
    sums
}

impl Drop for Forms {
    fn drop(&mut self) {
        let sums = std::mem::take(&mut self.sums);
        if sums.capacity() * size_of::<Sum>() <= SPARE_BYTES {
            let mut kept = SPARE.lock().unwrap_or_else(|e| e.into_inner());
            if kept.len() < SPARE_MAX {
                kept.push(sums);
            }
        }
    }
}

/// What `form` makes of unit `u` where its record alone says it, reading no byte of the unit
/// (its head, and under the placeholder policy its end, were a cache miss per unit and policy):
/// the empty transaction of a complete unit a MariaDB GTID opens (`gtid_size`: the scanner read
/// it off that event's header), the placeholders of a complete fast MariaDB unit (its GTID,
/// Table_maps, Rows and annotations, an XID: the scanner's fast shape). None: `form` reads it.
#[inline(always)]
fn recorded(u: &ListedUnit, bufs: &[&[u8]], (skip, crc): (u8, bool)) -> Option<(u64, u64, u64)> {
    let len = u.end().checked_sub(u.start())?;
    if u.flags & MARIADB != MARIADB || bufs.get(u.part as usize)?.len() < u.end() {
        return None; // (bounds only: no byte read)
    }
    let f = match skip {
        SKIP_EMPTY => skip_forms::empty_counts(len, u.gtid_size as usize, crc),
        SKIP_PLACEHOLDER if u.flags & F_FAST != 0 && u.tabled => {
            skip_forms::recorded_placeholders(u, crc)
        }
        _ => None,
    }?;
    Some((f.bytes, f.events, f.placeholders))
}

/// What `send::walk` sends for unit k (`u`) of `plan` skipped whole under `skip` (see
/// skip_forms::skipped): (bytes, events, placeholders), None where it cannot make it.
fn form(
    k: usize,
    u: &ListedUnit,
    bufs: &[&[u8]],
    st: Option<&StmtUnits>,
    (skip, crc): (u8, bool),
    scratch: &mut Vec<(usize, usize)>,
) -> Option<(u64, u64, u64)> {
    let pieces = st.and_then(|st| st.of(k));
    let pieces = pieces.filter(|_| skip == SKIP_PLACEHOLDER && !u.tabled);
    let buf = bufs.get(u.part as usize).filter(|b| b.len() >= u.end())?;
    // A MariaDB statement unit its keys frame by its GTID alone and its last event (the GTID is
    // its BEGIN) is formed as a fast unit is, off its record: its two events are not read (nor
    // its framing gathered: most of a MIXED binlog's units are such).
    let ends = [
        (u.start(), u.start() + u.gtid_size as usize),
        (u.last(), u.end()),
    ];
    let f = match pieces {
        Some(pieces) if u.flags & MARIADB == MARIADB && framed_by(pieces, &ends) => {
            skip_forms::recorded_placeholders(u, crc)
        }
        Some(pieces) => {
            scratch.clear();
            let always = pieces.iter().filter(|p| p.key == ALWAYS);
            scratch.extend(always.map(|p| (p.start(), p.end())));
            skip_forms::skipped(u, buf, skip, crc, false, Some(scratch.as_slice()), None)
        }
        None => skip_forms::skipped(u, buf, skip, crc, false, None, None),
    }?;
    Some((f.bytes, f.events, f.placeholders))
}

/// Whether a statement unit's pieces every stream keeps (ALWAYS) are `ends`, in order.
fn framed_by(pieces: &[Piece], ends: &[(usize, usize)]) -> bool {
    let always = pieces.iter().filter(|p| p.key == ALWAYS);
    always
        .map(|p| (p.start(), p.end()))
        .eq(ends.iter().copied())
}

#[cfg(test)]
#[path = "count_forms_tests.rs"]
mod tests;

/// The skipped units' forms a list has made, per policy (made at the first count under it, kept
/// for its later counts until `clear`: a buffer's count walks each slave the compiled walk leaves
/// to Python apart; counted in the list's `held_bytes`, so that the master's kept segments stay
/// within their budget).
#[derive(Default)]
pub struct FormsCache(Mutex<Vec<Arc<Forms>>>);

impl FormsCache {
    /// The forms under each of `policies` (placeholder and empty-transaction ones only), the
    /// missing ones made in one read of the units (`Forms::make_many`).
    pub fn get(
        &self,
        list: &UnitList,
        bufs: &[&[u8]],
        st: Option<&StmtUnits>,
        policies: &[(u8, bool)],
    ) -> Vec<Arc<Forms>> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut missing: Vec<(u8, bool)> = Vec::new();
        for &p in policies {
            let formed = matches!(p.0, SKIP_PLACEHOLDER | SKIP_EMPTY);
            if formed && !held.iter().any(|f| (f.skip, f.crc) == p) && !missing.contains(&p) {
                missing.push(p);
            }
        }
        if !missing.is_empty() {
            let made = Forms::make_many(list, bufs, st, &missing);
            held.extend(made.into_iter().map(Arc::new));
        }
        held.clone()
    }

    /// Every form dropped (`UnitList.forget_forms`).
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The bytes its forms hold (a kept segment's `held_bytes`).
    pub fn heap_bytes(&self) -> usize {
        let held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let zeros = |f: &Forms| f.zeros.iter().map(|z| z.0.capacity() * 4).sum::<usize>();
        held.iter()
            .map(|f| f.sums.capacity() * std::mem::size_of::<Sum>() + zeros(f))
            .sum()
    }
}
