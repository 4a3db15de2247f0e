//! A unit list's MySQL GTIDs as runs: the untagged GTIDs (source uuid, gno) of a range of units,
//! consecutive gnos of one source taken together. A stream adds what it sent to its executed
//! set one run at a time, and a start by GTID set asks whether a segment holds a GTID it has
//! one run at a time, instead of decoding one GTID event per unit in Python (a MySQL binlog of
//! 200 MB streamed at 140 MB/s, every second of it there). A tagged GTID (MySQL 8.4+'s
//! Gtid_tagged_log_event, a body in MySQL's serialization format) is left to the caller's
//! decoder: its unit is named, not read.

use crate::scan::{F_COMPLETE, F_MYSQL_GTID, F_TAGGED_GTID};
use crate::types::HEADER_LEN;
use crate::unit_list::UnitList;

/// The gnos first..=last of one source (its 16-byte uuid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GtidRun {
    pub sid: [u8; 16],
    pub first: i64,
    pub last: i64,
}

/// `mysql_gtids`' answer: the runs in the order the units hold them, and the units whose GTID
/// the caller decodes (tagged, or too short to read here).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MysqlGtids {
    pub runs: Vec<GtidRun>,
    pub tagged: Vec<usize>,
}

/// The MySQL GTIDs of the complete units among list.units[start..stop] (`bufs`: the list's
/// parts' buffers). A Gtid_log_event's body is its flags byte, the source uuid, then the gno
/// (a signed 64-bit number, as MySQL's rpl_gno; the scan keeps it in `gtid_seq`). A unit that
/// is not complete holds no transaction a server would count as executed: a file's torn tail.
pub fn mysql_gtids(list: &UnitList, bufs: &[&[u8]], start: usize, stop: usize) -> MysqlGtids {
    let mut out = MysqlGtids::default();
    let stop = stop.min(list.units.len());
    for k in start.min(stop)..stop {
        let u = &list.units[k];
        if u.flags & F_COMPLETE == 0 || u.flags & (F_MYSQL_GTID | F_TAGGED_GTID) == 0 {
            continue;
        }
        let at = u.start() + HEADER_LEN + 1;
        let sid = bufs
            .get(u.part as usize)
            .and_then(|b| b.get(at..at + 16))
            .filter(|_| u.flags & F_TAGGED_GTID == 0);
        match sid.and_then(|s| <[u8; 16]>::try_from(s).ok()) {
            Some(sid) => out.push(sid, list.gtid_of(k).map_or(0, |g| g.2) as i64),
            None => out.tagged.push(k),
        }
    }
    out
}

/// The GTIDs of the events at `offsets` of `buf` (a series writer's block: each offset a unit's
/// first event, `split::gtid_marks`), the untagged MySQL ones as runs; `tagged` names the
/// offsets (by index) of every other event, which the caller reads: a tagged or anonymous
/// GTID, a MariaDB one (a Gtid_list keeps its last per domain and server, in order), one that
/// does not fit.
pub fn mysql_gtids_at(buf: &[u8], offsets: &[u64]) -> MysqlGtids {
    let mut out = MysqlGtids::default();
    for (k, &at) in offsets.iter().enumerate() {
        let at = at as usize;
        let size = crate::le::u32_at(buf, at + 9).map_or(0, |n| n as usize);
        let gno = (buf.get(at + 4) == Some(&crate::types::GTID) && size >= HEADER_LEN + 25)
            .then(|| crate::le::u64_at(buf, at + HEADER_LEN + 17))
            .flatten();
        let sid = buf.get(at + HEADER_LEN + 1..at + HEADER_LEN + 17);
        match (sid.and_then(|s| <[u8; 16]>::try_from(s).ok()), gno) {
            (Some(sid), Some(gno)) if at + size <= buf.len() => out.push(sid, gno as i64),
            _ => out.tagged.push(k),
        }
    }
    out
}

impl MysqlGtids {
    /// One GTID: the last run's next gno of its source extends it, any other starts one.
    fn push(&mut self, sid: [u8; 16], gno: i64) {
        match self.runs.last_mut() {
            Some(run) if run.sid == sid && run.last.checked_add(1) == Some(gno) => run.last = gno,
            _ => self.runs.push(GtidRun {
                sid,
                first: gno,
                last: gno,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::{Unit, F_ANONYMOUS_GTID, F_MARIADB_GTID};

    /// A buffer of GTID units, each 61 bytes with `sid` at the body's second byte: (flags, sid
    /// byte, gno).
    fn list(units: &[(u32, u8, u64)]) -> (UnitList, Vec<u8>) {
        let mut buf = Vec::new();
        let mut scanned = Vec::new();
        for &(flags, sid, gno) in units {
            let start = buf.len();
            buf.extend_from_slice(&[0u8; HEADER_LEN + 1]);
            buf.extend_from_slice(&[sid; 16]);
            buf.extend_from_slice(&gno.to_le_bytes());
            buf.resize(start + 61, 0);
            scanned.push(Unit {
                start,
                end: buf.len(),
                flags,
                gtid_seq: gno,
                ..Default::default()
            });
        }
        let mut l = UnitList::default();
        l.add(b"f", 0, &scanned, &[], &[]);
        (l, buf)
    }

    const GTID: u32 = F_COMPLETE | F_MYSQL_GTID;

    /// The runs found, as (the source's first byte, first gno, last gno).
    fn runs(got: &MysqlGtids) -> Vec<(u8, i64, i64)> {
        got.runs
            .iter()
            .map(|r| (r.sid[0], r.first, r.last))
            .collect()
    }

    #[test]
    fn consecutive_gnos_of_one_source_are_one_run() {
        let (l, buf) = list(&[
            (GTID, 1, 5),
            (GTID, 1, 6),
            (GTID, 1, 7),
            (GTID, 2, 8),
            (GTID, 1, 9),
        ]);
        let got = mysql_gtids(&l, &[&buf], 0, 99);
        assert_eq!(runs(&got), vec![(1, 5, 7), (2, 8, 8), (1, 9, 9)]);
        assert!(got.tagged.is_empty());
    }

    #[test]
    fn a_gap_or_a_step_back_starts_a_run() {
        let (l, buf) = list(&[(GTID, 1, 5), (GTID, 1, 7), (GTID, 1, 6), (GTID, 1, 6)]);
        assert_eq!(
            runs(&mysql_gtids(&l, &[&buf], 0, 4)),
            vec![(1, 5, 5), (1, 7, 7), (1, 6, 6), (1, 6, 6)]
        );
    }

    #[test]
    fn only_complete_untagged_mysql_gtids_are_read() {
        let tagged = F_COMPLETE | F_TAGGED_GTID;
        let (l, buf) = list(&[
            (GTID, 1, 1),
            (F_MYSQL_GTID, 1, 2),
            (F_COMPLETE | F_ANONYMOUS_GTID, 0, 0),
            (F_COMPLETE | F_MARIADB_GTID, 1, 3),
            (tagged, 1, 4),
            (GTID, 1, 5),
        ]);
        let got = mysql_gtids(&l, &[&buf], 0, 6);
        assert_eq!(runs(&got), vec![(1, 1, 1), (1, 5, 5)]);
        assert_eq!(got.tagged, vec![4]);
    }

    #[test]
    fn a_range_is_clipped_and_a_short_buffer_is_left_to_the_caller() {
        let (l, buf) = list(&[(GTID, 1, 1), (GTID, 1, 2), (GTID, 1, 3)]);
        assert_eq!(mysql_gtids(&l, &[&buf], 1, 2).runs[0].first, 2);
        assert_eq!(mysql_gtids(&l, &[&buf], 5, 2), MysqlGtids::default());
        let short = &buf[..61 + HEADER_LEN + 8];
        assert_eq!(mysql_gtids(&l, &[short], 0, 3).tagged, vec![1, 2]);
        assert_eq!(mysql_gtids(&l, &[], 0, 3).tagged, vec![0, 1, 2]);
    }

    #[test]
    fn gtids_at_offsets_read_only_untagged_mysql_gtids() {
        let (_, mut buf) = list(&[(GTID, 1, 4), (GTID, 1, 5), (GTID, 2, 9)]);
        for k in 0..3 {
            buf[61 * k + 4] = crate::types::GTID;
            buf[61 * k + 9] = 61;
        }
        buf[61 * 2 + 4] = crate::types::ANONYMOUS_GTID;
        let got = mysql_gtids_at(&buf, &[0, 61, 122, 170]);
        assert_eq!(runs(&got), vec![(1, 4, 5)]);
        assert_eq!(
            got.tagged,
            vec![2, 3],
            "an anonymous GTID and one past the end"
        );
    }

    #[test]
    fn a_gno_at_the_top_ends_its_run() {
        let (l, buf) = list(&[(GTID, 1, i64::MAX as u64), (GTID, 1, 1 << 63)]);
        assert_eq!(
            runs(&mysql_gtids(&l, &[&buf], 0, 2)),
            vec![(1, i64::MAX, i64::MAX), (1, i64::MIN, i64::MIN)]
        );
    }
}
