//! A batch's events as the packets a real replica's IO thread reads (`--mysql-listen`): each
//! event behind a 0x00 byte in a packet of its own, with the positions the replica counts, in
//! one pass, for the batches that need nothing but framing. The master's endpoint
//! (`master/endpoint/server.py`) otherwise makes an Event per event in Python: over a real
//! MariaDB MIXED binlog that was two thirds of its CPU.

use crate::types::{
    ANNOTATE_ROWS, FORMAT_DESCRIPTION, HEADER_LEN, HEARTBEAT, HEARTBEAT_V2, MARIADB_GTID,
    MARIADB_GTID_LIST, ROTATE, STOP,
};

/// A packet of this payload length says "more of the payload follows" (the protocol's split).
const MAX_PAYLOAD: usize = 0xFF_FFFF;

/// What a framed batch leaves the stream's counters at (see `frame`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Framed {
    pub packets: Vec<u8>,
    /// The next packet's sequence id.
    pub seq: u8,
    /// Where the replica's IO thread counts itself in the master's binlog (`ReplicaCount.pos`),
    /// when the batch moved it.
    pub moved: Option<u64>,
    /// The highest sequence number of each MariaDB GTID domain sent (`ReplicaCount.has`).
    pub gtids: Vec<(u32, u64)>,
    /// The master's position after the last event with one, and the replica's count of it
    /// (`PositionKeeper.master_pos`, `.counted`: events sent unrenamed).
    pub master_pos: u64,
    pub counted: u64,
}

/// Frames `events` (a batch's whole events) starting at packet sequence id `seq`, leaving out
/// Annotate_rows events unless `annotate`, with the counters `ReplicaCount.events` and
/// `PositionKeeper.events` keep (starting at `master_pos`, `counted`). None where the batch
/// holds what those two treat apart (a Rotate, a Format_description, a Stop, a Gtid_list, a
/// heartbeat v2, an event the protocol splits over packets) or is not whole events: the caller
/// then takes the per-event way.
pub fn frame(
    events: &[u8],
    mut seq: u8,
    annotate: bool,
    mut master_pos: u64,
    mut counted: u64,
) -> Option<Framed> {
    let mut packets = Vec::with_capacity(events.len() + events.len() / 16);
    let mut gtids: Vec<(u32, u64)> = Vec::new();
    let mut moved = None;
    // The last event ReplicaCount would move the position to at the batch's end, unless a GTID
    // (which moves it at once) follows.
    let mut last: Option<u64> = None;
    let mut at = 0;
    while at < events.len() {
        let head = events.get(at..at + HEADER_LEN)?;
        let kind = head[4];
        let size = u32::from_le_bytes(head[9..13].try_into().ok()?) as usize;
        let log_pos = u32::from_le_bytes(head[13..17].try_into().ok()?) as u64;
        if size < HEADER_LEN || size + 1 >= MAX_PAYLOAD {
            return None;
        }
        let raw = events.get(at..at + size)?;
        at += size;
        match kind {
            ROTATE | FORMAT_DESCRIPTION | STOP | MARIADB_GTID_LIST | HEARTBEAT_V2 => return None,
            ANNOTATE_ROWS if !annotate => continue,
            _ => {}
        }
        let len = (size + 1) as u32;
        packets.extend_from_slice(&len.to_le_bytes()[..3]);
        packets.push(seq);
        packets.push(0);
        packets.extend_from_slice(raw);
        seq = seq.wrapping_add(1);
        if kind == HEARTBEAT {
            continue; // counted by neither: a heartbeat moves no position
        }
        if log_pos != 0 {
            counted = counted.saturating_add(size as u64).max(log_pos);
            master_pos = log_pos;
        }
        if kind == MARIADB_GTID {
            // seq_no (8 bytes) and domain_id (4) open the body.
            let body = raw.get(HEADER_LEN..HEADER_LEN + 12)?;
            let seq_no = u64::from_le_bytes(body[..8].try_into().ok()?);
            let domain = u32::from_le_bytes(body[8..12].try_into().ok()?);
            match gtids.iter_mut().find(|(d, _)| *d == domain) {
                Some(slot) => slot.1 = slot.1.max(seq_no),
                None => gtids.push((domain, seq_no)),
            }
            if log_pos != 0 {
                moved = Some(log_pos);
            }
            last = None;
        } else {
            last = Some(log_pos);
        }
    }
    if let Some(pos) = last.filter(|p| *p != 0) {
        moved = Some(pos);
    }
    Some(Framed {
        packets,
        seq,
        moved,
        gtids,
        master_pos,
        counted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: u8, log_pos: u32, body: &[u8]) -> Vec<u8> {
        crate::test_events::event_from(kind, 7, log_pos, body)
    }

    #[test]
    fn packets_carry_each_event_behind_a_zero_byte_in_sequence() {
        let gtid = event(MARIADB_GTID, 100, &[5, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0]);
        let query = event(2, 150, b"BEGIN");
        let annotate = event(ANNOTATE_ROWS, 170, b"x");
        let xid = event(16, 200, &[1; 8]);
        let batch = [gtid.clone(), query.clone(), annotate, xid.clone()].concat();
        let f = frame(&batch, 254, false, 80, 80).expect("plain events");
        let mut expected = Vec::new();
        for (seq, e) in [(254u8, &gtid), (255, &query), (0, &xid)] {
            expected.extend_from_slice(&((e.len() + 1) as u32).to_le_bytes()[..3]);
            expected.push(seq);
            expected.push(0);
            expected.extend_from_slice(e);
        }
        assert_eq!(f.packets, expected);
        assert_eq!(
            (f.seq, f.moved, f.gtids, f.master_pos),
            (1, Some(200), vec![(2, 5)], 200)
        );
        assert!(frame(&batch, 0, true, 80, 80).unwrap().packets.len() > expected.len());
    }

    #[test]
    fn what_the_per_event_way_treats_apart_is_left_to_it() {
        for kind in [
            ROTATE,
            FORMAT_DESCRIPTION,
            STOP,
            MARIADB_GTID_LIST,
            HEARTBEAT_V2,
        ] {
            assert_eq!(frame(&event(kind, 10, &[0; 8]), 0, true, 0, 0), None);
        }
        let whole = event(2, 10, b"x");
        assert_eq!(frame(&whole[..whole.len() - 1], 0, true, 0, 0), None);
        // A heartbeat moves nothing; a last event without a position leaves the GTID's.
        let gtid = event(MARIADB_GTID, 100, &[1; 13]);
        let f = frame(
            &[gtid, event(HEARTBEAT, 500, b"bin.1"), event(2, 0, b"q")].concat(),
            0,
            true,
            0,
            0,
        )
        .unwrap();
        assert_eq!((f.moved, f.master_pos), (Some(100), 100));
    }
}
