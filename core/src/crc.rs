//! CRC32 checks over many events in one pass. Binlog events average about 60 bytes, below the
//! 128 bytes where crc32fast's SIMD folding starts, so checking each event's CRC on its own runs
//! at table speed. A run of back-to-back events is checked instead with one SIMD CRC over all
//! of its bytes: a correct event's CRC over its own bytes (stored CRC included) is always the
//! residue 0x2144DF1C, and CRC32 is linear, so the CRC of the run is fixed by the event sizes
//! alone (zlib's crc32_combine, one carry-less multiply per event). A mismatch says that some
//! event of the run is bad; the caller then checks event by event to name it. And the CRC32 of
//! a made event from its template's tables (`Template`).

use std::sync::OnceLock;

use crate::le::u32_at;
use crate::types::{HEADER_LEN, LOG_EVENT_BINLOG_IN_USE_F};

/// CRC32 (zlib's) over any bytes followed by their own CRC32, little-endian.
pub const RESIDUE: u32 = 0x2144_DF1C;
const POLY: u32 = 0xEDB8_8320;
/// x^(8n) mod P is tabulated for events up to this size; larger ones are computed.
const TABLE_SIZES: usize = 1 << 16;

struct Tables {
    /// The byte-wise CRC table (one zero byte fed through the register).
    byte: [u32; 256],
    /// x^(8n) mod P in zlib's reflected form, n < TABLE_SIZES.
    xpow: Vec<u32>,
    clmul: bool,
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut byte = [0u32; 256];
        for (i, slot) in byte.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            *slot = c;
        }
        let mut xpow = Vec::with_capacity(TABLE_SIZES);
        let mut p = 1u32 << 31; // x^0
        for _ in 0..TABLE_SIZES {
            xpow.push(p);
            p = (p >> 8) ^ byte[(p & 0xff) as usize];
        }
        Tables {
            byte,
            xpow,
            clmul: clmul_available(),
        }
    })
}

#[cfg(target_arch = "x86_64")]
fn clmul_available() -> bool {
    std::arch::is_x86_feature_detected!("pclmulqdq") && std::arch::is_x86_feature_detected!("sse2")
}

#[cfg(not(target_arch = "x86_64"))]
fn clmul_available() -> bool {
    false
}

/// a * b mod P, both in zlib's reflected form (bit 31 is x^0): zlib's multmodp, bit by bit.
pub fn multmodp_soft(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0u32;
    while m != 0 {
        if a & m != 0 {
            p ^= b;
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// r * x^32 mod P: four zero bytes fed through the register.
#[inline]
fn times_x32(t: &Tables, mut r: u32) -> u32 {
    for _ in 0..4 {
        r = (r >> 8) ^ t.byte[(r & 0xff) as usize];
    }
    r
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "pclmulqdq,sse2")]
unsafe fn clmul64(a: u32, b: u32) -> u64 {
    use std::arch::x86_64::*;
    let p = _mm_clmulepi64_si128(_mm_cvtsi32_si128(a as i32), _mm_cvtsi32_si128(b as i32), 0);
    _mm_cvtsi128_si64(p) as u64
}

/// a * b mod P with one carry-less multiply: the reflected product, shifted left once, holds
/// x^0..x^31 in its high half and x^32..x^63 in its low half, which four zero bytes reduce.
#[inline]
fn multmodp(t: &Tables, a: u32, b: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if t.clmul {
        // SAFETY: the CPU has pclmulqdq and sse2 (checked once, at table set-up).
        let p = unsafe { clmul64(a, b) } << 1;
        return (p >> 32) as u32 ^ times_x32(t, p as u32);
    }
    let _ = t;
    multmodp_soft(a, b)
}

/// The CRC32 of out[at..] (an event made whole but for it), appended when the binlog carries them.
pub(crate) fn seal(out: &mut Vec<u8>, at: usize, crc: bool) {
    if crc {
        let c = crc32fast::hash(&out[at..]);
        out.extend_from_slice(&c.to_le_bytes());
    }
}

/// x^(8n) mod P.
#[cfg(test)]
fn xpow8(t: &Tables, n: usize) -> u32 {
    if let Some(p) = t.xpow.get(n) {
        return *p;
    }
    // Square-and-multiply over the table's largest power for the rest.
    let (q, r) = (n / (TABLE_SIZES - 1), n % (TABLE_SIZES - 1));
    let step = t.xpow[TABLE_SIZES - 1];
    let mut acc = t.xpow[r];
    for _ in 0..q {
        acc = multmodp(t, step, acc);
    }
    acc
}

/// Whether one CRC over a run of events is faster here than one per event.
pub fn batch_available() -> bool {
    tables().clmul
}

/// A run of back-to-back events whose CRCs are checked together: `add` each event's end in
/// order (while it `fits`), then `check` the bytes of the run.
///
/// With R the residue, T the run's length and e_i each event's end in the run, a run of right
/// events has crc(run) = R * sum_i x^(8(T - e_i)) (mod P). Multiplied by x^(8(M - T)) for a
/// fixed M >= T, that is R * sum_i x^(8(M - e_i)): one table load and one XOR per event, and no
/// chain of multiplies from event to event.
#[derive(Debug, Default, Clone, Copy)]
pub struct Run {
    pub start: usize,
    pub end: usize,
    /// sum_i x^(8(M - e_i)) over the events added.
    sum: u32,
    /// An event that did not fit was added: the run fails its check.
    spoiled: bool,
}

impl Run {
    pub fn at(pos: usize) -> Self {
        Run {
            start: pos,
            end: pos,
            sum: 0,
            spoiled: false,
        }
    }

    /// Whether an event ending at buffer offset `end` can join the run.
    #[inline]
    pub fn fits(&self, end: usize) -> bool {
        end.wrapping_sub(self.start) < RUN_MAX
    }

    /// Appends an event that ends at buffer offset `end` (`fits(end)` must hold; otherwise the
    /// event is ignored and `check` fails).
    #[inline]
    pub fn add(&mut self, end: usize) {
        let t = tables();
        // checked: an event past the run's reach (or before its start) spoils the run; a wrapping
        // subtraction here panicked in debug builds.
        match (RUN_MAX - 1)
            .checked_sub(end.wrapping_sub(self.start))
            .and_then(|i| t.xpow.get(i))
        {
            Some(p) if self.fits(end) => self.sum ^= *p,
            _ => self.spoiled = true,
        }
        self.end = end;
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// Whether every event of the run (buf[start..end]) has its right CRC; true for no events.
    pub fn check(&self, buf: &[u8]) -> bool {
        let t = tables();
        if self.spoiled {
            return false;
        }
        match buf.get(self.start..self.end) {
            Some(bytes) if !bytes.is_empty() => {
                let len = bytes.len();
                let Some(shift) = t.xpow.get(RUN_MAX - 1 - len) else {
                    return false;
                };
                multmodp(t, crc32fast::hash(bytes), *shift) == multmodp(t, RESIDUE, self.sum)
            }
            Some(_) => true,
            None => false,
        }
    }
}

/// M - 1 in the comment above: runs end within this many bytes of their start.
pub const RUN_MAX: usize = 1 << 13;

/// Whether the event's stored CRC (its last four bytes) matches the bytes before it.
#[inline]
pub fn crc_ok(event: &[u8]) -> bool {
    let n = event.len();
    n >= 4 && u32_at(event, n - 4) == Some(crc32fast::hash(&event[..n - 4]))
}

/// The FDE's CRC: the server computes it with LOG_EVENT_BINLOG_IN_USE_F cleared (it sets the flag
/// when it opens the file and clears it in place on close without recomputing the CRC).
pub fn fde_crc_ok(event: &[u8]) -> bool {
    let n = event.len();
    if n < HEADER_LEN + 4 {
        return false;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&event[..17]);
    h.update(&[event[17] & !(LOG_EVENT_BINLOG_IN_USE_F as u8)]);
    h.update(&event[18..n - 4]);
    u32_at(event, n - 4) == Some(h.finalize())
}

/// A made event's fixed bytes and the positions where events made from it differ (zlib's CRC32
/// is affine in the message: for messages of one length, crc(a ^ b) = crc(a) ^ crc(b) ^
/// crc(zeros)): the skip forms' made events (`skip_forms::made_crc`), the Heartbeats' log_pos.
pub(crate) struct Template {
    len: usize,
    /// The CRC of the template with zeros at the varying positions.
    pub(crate) base: u32,
    at: Vec<usize>,
    /// Per varying position, what a byte value there adds to the CRC.
    pub(crate) tables: Vec<[u32; 256]>,
}

impl Template {
    pub(crate) fn new(template: &[u8], at: &[usize]) -> Self {
        let zeros = vec![0u8; template.len()];
        let zero = crc32fast::hash(&zeros);
        let mut fixed = template.to_vec();
        for &p in at {
            fixed[p] = 0;
        }
        let tables = at
            .iter()
            .map(|&p| {
                let mut table = [0u32; 256];
                let mut one = zeros.clone();
                for (v, slot) in table.iter_mut().enumerate() {
                    one[p] = v as u8;
                    *slot = crc32fast::hash(&one) ^ zero;
                }
                table
            })
            .collect();
        Template {
            len: template.len(),
            base: crc32fast::hash(&fixed),
            at: at.to_vec(),
            tables,
        }
    }

    /// The CRC32 of `event`, made from this template (its other bytes are the template's);
    /// None for an event of another length.
    pub(crate) fn crc(&self, event: &[u8]) -> Option<u32> {
        if event.len() != self.len {
            return None;
        }
        let mut c = self.base;
        for (table, &p) in self.tables.iter().zip(&self.at) {
            c ^= table[event[p] as usize];
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(len: usize, seed: u32) -> Vec<u8> {
        let mut e: Vec<u8> = (0..len)
            .map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(seed) as u8)
            .collect();
        let c = crc32fast::hash(&e);
        e.extend_from_slice(&c.to_le_bytes());
        e
    }

    #[test]
    fn residue_of_any_bytes_and_their_crc() {
        for n in [0usize, 1, 15, 19, 63, 200, 5000] {
            assert_eq!(crc32fast::hash(&event(n, 7)), RESIDUE);
        }
    }

    #[test]
    fn carry_less_multiply_agrees_with_zlibs() {
        let t = tables();
        let mut next = crate::test_events::xorshift(0x1234_5678);
        for _ in 0..10_000 {
            let (x, y) = (next() as u32, next() as u32);
            assert_eq!(multmodp(t, x, y), multmodp_soft(x, y));
        }
        for n in [0usize, 1, 65_534, 65_535, 65_536, 200_000] {
            // x^(8n) by feeding n zero bytes
            let mut p = 1u32 << 31;
            for _ in 0..n {
                p = (p >> 8) ^ t.byte[(p & 0xff) as usize];
            }
            assert_eq!(xpow8(t, n), p, "n = {n}");
        }
    }

    #[test]
    fn a_run_checks_every_event_and_finds_a_flipped_bit() {
        let mut buf = vec![0u8; 3];
        let mut run = Run::at(3);
        // Ends all over the run, the last one RUN_MAX - 1 bytes in (the largest run there is).
        let sizes = [19usize, 40, 63, 63, 1000, 300, 255, 256, 257, 4000, 25];
        let last = RUN_MAX - 1 - sizes.iter().map(|n| n + 4).sum::<usize>() - 4;
        for (k, n) in sizes.iter().chain([last].iter()).enumerate() {
            let e = event(*n, k as u32);
            buf.extend_from_slice(&e);
            assert!(run.fits(buf.len()));
            run.add(buf.len());
        }
        assert_eq!(buf.len() - 3, RUN_MAX - 1);
        assert!(run.check(&buf));
        for at in [3usize, 30, 500, 2000, 5000, buf.len() - 1] {
            let mut bad = buf.clone();
            bad[at] ^= 0x10;
            assert!(!run.check(&bad), "flip at {at}");
        }
        assert!(Run::at(5).check(&buf));
        // An event that does not fit makes the run fail rather than pass unchecked.
        let mut too_far = Run::at(3);
        too_far.add(3 + RUN_MAX + 10);
        assert!(!too_far.check(&buf));
    }
}
