//! Events built for the core's unit tests (a header and a body, no CRC32), and their random inputs.

use crate::types::{HEADER_LEN, QUERY};

/// An event of type `t` with body `body` (no CRC32, the other header fields 0).
pub(crate) fn event(t: u8, body: &[u8]) -> Vec<u8> {
    let mut e = vec![0u8; HEADER_LEN];
    e[4] = t;
    let size = (HEADER_LEN + body.len()) as u32;
    e[9..13].copy_from_slice(&size.to_le_bytes());
    e.extend_from_slice(body);
    e
}

/// `event` from server `server`, with log_pos `log_pos`.
pub(crate) fn event_from(t: u8, server: u32, log_pos: u32, body: &[u8]) -> Vec<u8> {
    let mut e = event(t, body);
    e[5..9].copy_from_slice(&server.to_le_bytes());
    e[13..17].copy_from_slice(&log_pos.to_le_bytes());
    e
}

/// A xorshift generator seeded with `state`: the tests' random inputs, the same on every run.
pub(crate) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// A Query event: default database `db`, statement `sql`.
pub(crate) fn query(db: &str, sql: &str) -> Vec<u8> {
    let mut body = vec![0u8; 13];
    body[8] = db.len() as u8;
    body.extend_from_slice(db.as_bytes());
    body.push(0);
    body.extend_from_slice(sql.as_bytes());
    event(QUERY, &body)
}
