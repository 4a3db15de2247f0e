//! The events the skip forms make up: the COMMIT or BEGIN Query of an empty transaction, dated and
//! numbered as its GTID (`made_query`), and the CRC32 of each made event (a RAND placeholder, a made
//! Query) from tables. zlib's CRC32 is affine in the message: for messages of one
//! length, crc(a ^ b) = crc(a) ^ crc(b) ^ crc(zeros). A made event differs from its fixed
//! template only in a few bytes (a placeholder: its log_pos and the replaced event's size and
//! type; a made Query: the GTID's timestamp, server_id and log_pos), so its CRC is the
//! template's XORed with one table entry per such byte: 9 loads (a placeholder) or 12 in place
//! of a CRC over 35 or 39 bytes. The master's placeholder stream of the 500 MB sysbench MIXED
//! binlog makes 3.1 million placeholders, whose CRCs were 30 ms of its 0.4 CPU s (perf).

use std::sync::OnceLock;

use super::{BEGIN_BODY, COMMIT_BODY, RAND_BODY, SKIP_REPLICATION_F};
use crate::crc::Template;
use crate::types::{HEADER_LEN, QUERY, RAND};

/// A Query the filter makes up (`body`: COMMIT_BODY, BEGIN_BODY), dated and numbered as the
/// GTID event `gtid` (TransactionFilter's `_empty_transaction`: it has no master position of
/// its own), appended to `out`; returns its size.
pub(crate) fn made_query(gtid: &[u8], body: &[u8], crc: bool, out: &mut Vec<u8>) -> usize {
    let (at, size) = (out.len(), made_query_len(body, crc));
    out.resize(at + size, 0);
    made_query_into(gtid, body, crc, &mut out[at..]);
    size
}

/// `made_query` into `out`, of its size; its CRC from the template's tables (`made_crc`).
pub(crate) fn made_query_into(gtid: &[u8], body: &[u8], crc: bool, out: &mut [u8]) {
    let end = HEADER_LEN + body.len();
    out[..4].copy_from_slice(&gtid[..4]); // timestamp
    out[4] = QUERY;
    out[5..9].copy_from_slice(&gtid[5..9]); // server_id
    let size = out.len() as u32;
    out[9..13].copy_from_slice(&size.to_le_bytes());
    out[13..17].copy_from_slice(&gtid[13..17]); // log_pos
    out[17..19].fill(0);
    out[HEADER_LEN..end].copy_from_slice(body);
    if crc {
        let event = &out[..end];
        let c = query(body).and_then(|t| t.crc(event));
        let c = c.unwrap_or_else(|| crc32fast::hash(event));
        out[end..end + 4].copy_from_slice(&c.to_le_bytes());
    }
}

/// The size of a `made_query` of `body`.
pub(crate) fn made_query_len(body: &[u8], crc: bool) -> usize {
    HEADER_LEN + body.len() + if crc { 4 } else { 0 }
}

/// A RAND placeholder's CRC tables: the template's CRC with zeros where placeholders differ,
/// and per such byte what its value adds (`Template`): the log_pos (4 bytes), the replaced
/// event's size (the low 4 bytes of its u64 seed: an event's size is a u32, the high 4 are 0)
/// and its type (the low byte of the second seed). 9 loads, from one table block.
struct RandTables {
    base: u32,
    tables: [[u32; 256]; 9],
}

fn rand_tables() -> &'static RandTables {
    static T: OnceLock<RandTables> = OnceLock::new();
    T.get_or_init(|| {
        let size = (HEADER_LEN + RAND_BODY + 4) as u32;
        let mut t = vec![0u8; HEADER_LEN + RAND_BODY];
        t[4] = RAND;
        t[9..13].copy_from_slice(&size.to_le_bytes());
        t[17..19].copy_from_slice(&SKIP_REPLICATION_F.to_le_bytes());
        let at: Vec<usize> = (13..17)
            .chain(HEADER_LEN..HEADER_LEN + 4)
            .chain([HEADER_LEN + 8])
            .collect();
        let template = Template::new(&t, &at);
        let mut tables = [[0u32; 256]; 9];
        tables.copy_from_slice(&template.tables);
        RandTables {
            base: template.base,
            tables,
        }
    })
}

/// The CRC32 of a RAND placeholder (timestamp 0, server_id 0, its size with the CRC,
/// LOG_EVENT_SKIP_REPLICATION_F) at `log_pos` standing in for an event of `size` bytes and type
/// `kind`, over its 35 bytes before the CRC.
#[inline(always)]
pub(super) fn rand_crc(log_pos: [u8; 4], size: u32, kind: u8) -> u32 {
    let t = rand_tables();
    let s = size.to_le_bytes();
    let tb = &t.tables;
    t.base
        ^ tb[0][log_pos[0] as usize]
        ^ tb[1][log_pos[1] as usize]
        ^ tb[2][log_pos[2] as usize]
        ^ tb[3][log_pos[3] as usize]
        ^ tb[4][s[0] as usize]
        ^ tb[5][s[1] as usize]
        ^ tb[6][s[2] as usize]
        ^ tb[7][s[3] as usize]
        ^ tb[8][kind as usize]
}

/// A made Query of `body` (COMMIT_BODY, BEGIN_BODY) before its CRC; varying: the timestamp,
/// server_id and log_pos it takes from its GTID. None for another body.
pub(super) fn query(body: &[u8]) -> Option<&'static Template> {
    static COMMIT: OnceLock<Template> = OnceLock::new();
    static BEGIN: OnceLock<Template> = OnceLock::new();
    let slot = if body == COMMIT_BODY {
        &COMMIT
    } else if body == BEGIN_BODY {
        &BEGIN
    } else {
        return None;
    };
    Some(slot.get_or_init(|| {
        let size = (HEADER_LEN + body.len() + 4) as u32;
        let mut t = vec![0u8; HEADER_LEN];
        t[4] = QUERY;
        t[9..13].copy_from_slice(&size.to_le_bytes());
        t.extend_from_slice(body);
        let at: Vec<usize> = (0..4).chain(5..9).chain(13..17).collect();
        Template::new(&t, &at)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_events_crcs_from_tables_are_their_crcs() {
        let mut next = crate::test_events::xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let (a, b) = (next(), next());
            let mut gtid = a.to_le_bytes().to_vec();
            gtid.extend_from_slice(&b.to_le_bytes());
            gtid.extend_from_slice(&[0u8; 30]);
            for body in [COMMIT_BODY, BEGIN_BODY] {
                let mut out = vec![7u8; 3]; // (made after other bytes)
                super::super::made_query(&gtid, body, true, &mut out);
                let event = &out[3..out.len() - 4];
                assert_eq!(
                    query(body).unwrap().crc(event),
                    Some(crc32fast::hash(event))
                );
                assert_eq!(crc32fast::hash(&out[3..]), crate::crc::RESIDUE);
            }
            let mut rand_event = vec![0u8; HEADER_LEN + RAND_BODY];
            rand_event[4] = RAND;
            rand_event[9..13].copy_from_slice(&39u32.to_le_bytes());
            rand_event[13..17].copy_from_slice(&(a as u32).to_le_bytes());
            rand_event[17..19].copy_from_slice(&SKIP_REPLICATION_F.to_le_bytes());
            rand_event[19..23].copy_from_slice(&(b as u32).to_le_bytes());
            rand_event[27] = (a >> 40) as u8;
            let log_pos = (a as u32).to_le_bytes();
            assert_eq!(
                rand_crc(log_pos, b as u32, (a >> 40) as u8),
                crc32fast::hash(&rand_event)
            );
        }
        assert!(query(b"ROLLBACK").is_none());
    }
}
