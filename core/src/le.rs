//! Little-endian integers read from binlog bytes, bounds-checked: None past the end.

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
    buf.get(at..at + 8).map(|b| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        u64::from_le_bytes(a)
    })
}
