//! The Heartbeat events the master sends for skipped stretches (MySQL's
//! Binlog_sender::send_heartbeat_event: timestamp 0, the master's server_id, log_pos = the
//! position, the file name as the body, a CRC32 when the binlog has them), and their making in
//! bulk: a do-db slave of eight schemas is sent one before nearly every unit it keeps.

use crate::crc::{seal, Template};
use crate::types::{HEADER_LEN, HEARTBEAT};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Where log_pos lies in an event's header.
const LOG_POS_AT: usize = 13;

/// Appends a Heartbeat event for position (file, pos).
pub fn heartbeat(file: &[u8], pos: u64, server_id: u32, crc: bool, out: &mut Vec<u8>) {
    let at = out.len();
    let size = HEADER_LEN + file.len() + if crc { 4 } else { 0 };
    out.extend_from_slice(&0u32.to_le_bytes());
    out.push(HEARTBEAT);
    out.extend_from_slice(&server_id.to_le_bytes());
    out.extend_from_slice(&(size as u32).to_le_bytes());
    out.extend_from_slice(&(pos as u32).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(file);
    seal(out, at, crc);
}

/// For messages of one length, what each byte of log_pos adds to their CRC32: CRC32 is affine
/// over GF(2), so crc(m) = crc(m with log_pos 0) ^ t[0][p0] ^ t[1][p1] ^ t[2][p2] ^ t[3][p3].
type PosTables = [[u32; 256]; 4];

/// The tables for messages of `len` bytes, made once per length (a file name's) and kept.
fn pos_tables(len: usize) -> Arc<PosTables> {
    static MADE: OnceLock<Mutex<HashMap<usize, Arc<PosTables>>>> = OnceLock::new();
    let made = MADE.get_or_init(Default::default);
    let mut made = made.lock().unwrap_or_else(|e| e.into_inner());
    made.entry(len)
        .or_insert_with(|| {
            let at: Vec<usize> = (LOG_POS_AT..LOG_POS_AT + 4).collect();
            let mut t = [[0u32; 256]; 4];
            t.copy_from_slice(&Template::new(&vec![0u8; len], &at).tables);
            Arc::new(t)
        })
        .clone()
}

/// Makes the Heartbeats of one file and server_id, as `heartbeat` does, from a template: the
/// event with log_pos 0 and its CRC, to which only log_pos's bytes are added. About a tenth of
/// the CPU of a do-db stream went to Heartbeats, most of it their CRC32 over 40 bytes each.
pub struct Heartbeats {
    template: Vec<u8>,
    base: u32,
    tables: Option<Arc<PosTables>>,
}

impl Heartbeats {
    pub fn new(file: &[u8], server_id: u32, crc: bool) -> Heartbeats {
        let mut template = Vec::with_capacity(HEADER_LEN + file.len() + 4);
        heartbeat(file, 0, server_id, false, &mut template);
        if crc {
            let size = (template.len() + 4) as u32;
            template[9..13].copy_from_slice(&size.to_le_bytes());
        }
        let (base, tables) = if crc {
            (crc32fast::hash(&template), Some(pos_tables(template.len())))
        } else {
            (0, None)
        };
        Heartbeats {
            template,
            base,
            tables,
        }
    }

    /// Appends the Heartbeat for `pos`; returns its size.
    pub fn append(&self, pos: u64, out: &mut Vec<u8>) -> usize {
        let at = out.len();
        let p = (pos as u32).to_le_bytes();
        out.extend_from_slice(&self.template);
        out[at + LOG_POS_AT..at + LOG_POS_AT + 4].copy_from_slice(&p);
        if let Some(t) = &self.tables {
            let c = self.base
                ^ t[0][p[0] as usize]
                ^ t[1][p[1] as usize]
                ^ t[2][p[2] as usize]
                ^ t[3][p[3] as usize];
            out.extend_from_slice(&c.to_le_bytes());
        }
        out.len() - at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_from_the_template_as_made_whole() {
        let mut next = crate::test_events::xorshift(7);
        for _ in 0..2000 {
            let name_len = (next() % 300) as usize;
            let file: Vec<u8> = (0..name_len).map(|_| next() as u8).collect();
            let server_id = next() as u32;
            let crc = !next().is_multiple_of(4);
            let maker = Heartbeats::new(&file, server_id, crc);
            for _ in 0..8 {
                let pos = match next() % 4 {
                    0 => next() & 0xff,
                    1 => u32::MAX as u64 - (next() & 0xff),
                    _ => next(),
                };
                let (mut whole, mut fast) = (b"x".to_vec(), b"x".to_vec());
                heartbeat(&file, pos, server_id, crc, &mut whole);
                assert_eq!(maker.append(pos, &mut fast), whole.len() - 1);
                assert_eq!(fast, whole, "pos {pos} name {name_len} crc {crc}");
            }
        }
    }
}
