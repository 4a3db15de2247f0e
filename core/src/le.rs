//! Little-endian integers read from binlog bytes, fixed-width and packed (length-encoded),
//! bounds-checked: None past the end.

#[inline]
pub fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    buf.get(at..at + 2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
}

#[inline]
pub fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    buf.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

#[inline]
pub fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    buf.get(at..at + 8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// A packed (length-encoded) integer at body[at..]: its value and where it ends; None where it
/// does not read (0xfb, 0xff, or past the body).
pub fn packed(body: &[u8], at: usize) -> Option<(u64, usize)> {
    let first = *body.get(at)?;
    let n = match first {
        0..=0xfa => return Some((u64::from(first), at + 1)),
        0xfc => 2,
        0xfd => 3,
        0xfe => 8,
        _ => return None,
    };
    let bytes = body.get(at + 1..at + 1 + n)?;
    let mut word = [0u8; 8];
    word[..n].copy_from_slice(bytes);
    Some((u64::from_le_bytes(word), at + 1 + n))
}
