//! A MySQL GTID event's transaction_length, read and made anew (`with_length`). MySQL's rule
//! that bites: from 8.0.2 a Gtid_log_event carries the byte length of its whole transaction,
//! the GTID event included (`transaction_length`, a packed integer after the commit
//! timestamps; control_events.h). A reader of the stream takes the transaction's size from it
//! (a replica's applier and its relay log, mysqlbinlog), so a group whose events the master
//! changed must carry its new length. The field's own width (1, 3, 4 or 9 bytes) changes with
//! the value, and the GTID event's size with it: the length is sought as
//! `fix_transaction_length` seeks it (at most four rewrites from the event's own value), so
//! that where two lengths would both be right the same one is chosen. A GTID whose value is 0
//! or absent (5.6 and 5.7 GTIDs, 8.0.1) is sent as it is.

use crate::crc::seal;
use crate::le::{packed, u32_at};
use crate::types::HEADER_LEN;

/// A MySQL GTID event (header, body and CRC) and its transaction_length field: (start, end,
/// value) in the event's bytes; None where the event carries none or 0 (nothing is rewritten).
pub(crate) struct Gtid<'a> {
    pub(crate) raw: &'a [u8],
    crc_len: usize,
    pub(crate) field: Option<(usize, usize, u64)>,
}

impl<'a> Gtid<'a> {
    /// The GTID event `raw`, read as `codec.gtid.decode_mysql_gtid` reads its body: flags,
    /// source uuid, gno (25 bytes); from 5.7 the logical timestamps (lt_type 2, last_committed,
    /// sequence_number); from 8.0.1 the immediate commit timestamp (7 bytes, whose top bit says
    /// the original one follows, 7 more); then, if the body goes on, the transaction_length. None
    /// where Python's reading would fail (a body under 25 bytes, a packed integer that does not
    /// read or runs past the body).
    pub(crate) fn read(raw: &'a [u8], crc: bool) -> Option<Gtid<'a>> {
        let crc_len = if crc { 4 } else { 0 };
        let body = raw.get(HEADER_LEN..raw.len().checked_sub(crc_len)?)?;
        if body.len() < 25 {
            return None;
        }
        let mut field = None;
        if body.len() > 25 && body[25] == 2 && body.len() >= 42 + 7 {
            let at = if body[48] & 0x80 != 0 { 56 } else { 49 };
            if body.len() > at {
                let (value, end) = packed(body, at)?;
                if value != 0 {
                    field = Some((HEADER_LEN + at, HEADER_LEN + end, value));
                }
            }
        }
        Some(Gtid {
            raw,
            crc_len,
            field,
        })
    }

    /// The transaction_length and its width once the events after the GTID are `rest` bytes
    /// (`fix_transaction_length`'s loop: the wanted length from the event's present size, at
    /// most four times), or None where nothing is rewritten.
    pub(crate) fn fixed(&self, rest: u64) -> Option<(u64, usize)> {
        let (start, end, value) = self.field?;
        let base = (self.raw.len() - (end - start)) as u64;
        let (mut length, mut width) = (value, end - start);
        for _ in 0..4 {
            let wanted = rest + base + width as u64;
            if length == wanted {
                break;
            }
            length = wanted;
            width = packed_len(wanted);
        }
        Some((length, width))
    }

    /// The event's size once the events after it are `rest` bytes.
    pub(crate) fn len(&self, rest: u64) -> usize {
        match (self.fixed(rest), self.field) {
            (Some((_, width)), Some((start, end, _))) => self.raw.len() - (end - start) + width,
            _ => self.raw.len(),
        }
    }

    /// The event, its transaction_length for `rest` bytes after it, appended to `out`: the
    /// header as it was but for the size, a fresh CRC (`Event.with_body`).
    pub(crate) fn put(&self, rest: u64, out: &mut Vec<u8>) {
        let (Some((length, _)), Some((start, end, value))) = (self.fixed(rest), self.field) else {
            out.extend_from_slice(self.raw);
            return;
        };
        if length == value {
            out.extend_from_slice(self.raw);
            return;
        }
        let at = out.len();
        out.extend_from_slice(&self.raw[..start]);
        put_packed(length, out);
        out.extend_from_slice(&self.raw[end..self.raw.len() - self.crc_len]);
        let size = (out.len() - at + self.crc_len) as u32;
        out[at + 9..at + 13].copy_from_slice(&size.to_le_bytes());
        seal(out, at, self.crc_len != 0);
    }
}

/// The width of `value` packed (`codec.packing.encode_lenenc`).
fn packed_len(value: u64) -> usize {
    match value {
        0..=0xfa => 1,
        0xfb..=0xffff => 3,
        0x1_0000..=0xff_ffff => 4,
        _ => 9,
    }
}

pub(crate) fn put_packed(value: u64, out: &mut Vec<u8>) {
    let bytes = value.to_le_bytes();
    match packed_len(value) {
        1 => out.push(value as u8),
        3 => {
            out.push(0xfc);
            out.extend_from_slice(&bytes[..2]);
        }
        4 => {
            out.push(0xfd);
            out.extend_from_slice(&bytes[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&bytes);
        }
    }
}

/// `joined`, a MySQL unit's GTID event and the events kept of the unit, with the GTID's
/// transaction_length counting them (`fix_transaction_length`); None where the GTID does not
/// read as Python reads it.
pub(crate) fn with_length(joined: &[u8], crc: bool) -> Option<Vec<u8>> {
    let g = u32_at(joined, 9)? as usize;
    let gtid = Gtid::read(joined.get(..g)?, crc)?;
    let mut out = Vec::with_capacity(joined.len() + 8);
    gtid.put((joined.len() - g) as u64, &mut out);
    out.extend_from_slice(&joined[g..]);
    Some(out)
}
