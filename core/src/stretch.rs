//! Stretches: skipped units in a row that a placeholder or empty-transaction stream sends a gRPC
//! slave that asked for them (DumpRequest.skip_stretches) as one event holding what the slave
//! relays of each: under the placeholder policy its GTID and its XID, under the empty-transaction
//! policy its GTID alone, which the slave closes with the COMMIT the master would have made
//! (`skip_forms::made_query` of COMMIT_BODY, one function for both). The send walk makes them (`Stretch`),
//! the scanner takes one for a unit of its own and counts what it stands for, and the slave's
//! relay run writes its inner events (`inner`).
//!
//! A do-db slave of eight schemas skips seven units in eight; under these policies each was two or
//! three events on the wire (a GTID, a run of placeholders or a made COMMIT, an XID), each scanned,
//! grouped and relayed apart on the slave: on the 500 MB sysbench MIXED binlog 1.5 million events
//! beyond the heartbeat stream's 0.5 million. A stretch is one event.

use crate::crc::seal;
use crate::hops;
use crate::le::{u32_at, u64_at};
use crate::types::LOG_EVENT_SKIP_REPLICATION_F as SKIP_REPLICATION_F;
use crate::types::{is_placeholder, stretch_kind, COMMIT_BODY, HEADER_LEN, MARIADB_GTID, QUERY};
use crate::types::{EMPTY_STRETCH, PLACEHOLDER_STRETCH, RAND, XID};

/// A stretch's head: a RAND of server_id 0 flagged LOG_EVENT_SKIP_REPLICATION_F (a placeholder
/// to any reader that does not know stretches), dated as its first unit and at its last event's
/// log_pos, whose seeds are the placeholders its units stand for and its kind
/// (PLACEHOLDER_STRETCH, EMPTY_STRETCH); its inner events follow, then its CRC32 where the
/// binlog has them.
pub(crate) const HEAD: usize = HEADER_LEN + 16;

/// The size of the unit that opens `inner` when it is a framing pair: a MariaDB GTID and the
/// event that closes its group, an XID or the COMMIT the empty-transaction policy makes
/// (`skip_forms`' empty form, byte for byte); else None. `crc_len`: the events' checksum length.
pub fn framing_pair(inner: &[u8], crc_len: usize) -> Option<usize> {
    let g = u32_at(inner, 9)? as usize;
    if *inner.get(4)? != MARIADB_GTID || g < HEADER_LEN + 13 + crc_len {
        return None;
    }
    let end = inner.get(g..)?;
    let size = u32_at(end, 9)? as usize;
    let closes = match *end.get(4)? {
        XID => size == HEADER_LEN + 8 + crc_len,
        QUERY => {
            size == HEADER_LEN + COMMIT_BODY.len() + crc_len
                && end.get(HEADER_LEN..HEADER_LEN + COMMIT_BODY.len()) == Some(COMMIT_BODY)
        }
        _ => false,
    };
    (closes && size <= end.len()).then_some(g + size)
}

/// The stretch at buf[at..at + size] (`crc_len`: the checksum length of its events and its
/// own): the range of its inner units, how many, the placeholders they stand for, and whether
/// each is a GTID the slave closes with a COMMIT; None unless it is one, its units all framing
/// pairs (PLACEHOLDER_STRETCH) or MariaDB GTIDs (EMPTY_STRETCH) that fill it.
pub fn inner(buf: &[u8], at: usize, size: usize, crc_len: usize) -> Option<Inner> {
    let commits = stretch_kind(buf, at)? == EMPTY_STRETCH;
    let event = buf.get(at..at.checked_add(size)?)?;
    let inner = event.get(HEAD..size.checked_sub(crc_len)?)?;
    let (mut p, mut units) = (0, 0u64);
    while p < inner.len() {
        p += match commits {
            true => gtid(&inner[p..], crc_len)?,
            false => framing_pair(&inner[p..], crc_len)?,
        };
        units += 1;
    }
    (units > 0).then(|| Inner {
        range: (at + HEAD, at + HEAD + inner.len()),
        units,
        placeholders: u64_at(buf, at + HEADER_LEN).unwrap_or(0),
        commits,
    })
}

/// The size of the MariaDB GTID that opens `inner`, else None.
fn gtid(inner: &[u8], crc_len: usize) -> Option<usize> {
    let g = u32_at(inner, 9)? as usize;
    (*inner.get(4)? == MARIADB_GTID && g >= HEADER_LEN + 13 + crc_len && g <= inner.len())
        .then_some(g)
}

/// A stretch's inner units (see `inner`): `commits`, each a GTID to close with a COMMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inner {
    pub range: (usize, usize),
    pub units: u64,
    pub placeholders: u64,
    pub commits: bool,
}

/// The stretch the send walk is making in its own bytes: where its head is, its kind, its units,
/// the placeholders they stand for, and its last event's log_pos (the stretch's own).
#[derive(Debug, Default)]
pub struct Stretch {
    at: Option<usize>,
    commits: bool,
    units: u64,
    placeholders: u64,
    log_pos: [u8; 4],
}

impl Stretch {
    /// Takes the form `form` made for a skipped unit, standing for `holes` placeholders: its
    /// events other than placeholders join the stretch in `own` (opened here) when they are a
    /// framing pair; its GTID alone when they are a GTID and the COMMIT the empty-transaction
    /// policy makes (`commits`: the walk made it so, and the slave makes it again). Otherwise,
    /// or where the stretch open is of the other kind, nothing is written and the unit is sent
    /// as its form.
    pub fn take(
        &mut self,
        form: &[u8],
        holes: u64,
        commits: bool,
        crc_len: usize,
        own: &mut Vec<u8>,
    ) -> bool {
        if self.at.is_some() && self.commits != commits {
            return false;
        }
        let at = own.len();
        if self.at.is_none() {
            own.resize(at + HEAD, 0);
        }
        let unit = own.len();
        // (no placeholders to leave out, as the empty-transaction policy's forms: one copy)
        let mut walk = hops::events(form, if holes == 0 { form.len() } else { 0 }, form.len());
        if holes == 0 {
            own.extend_from_slice(form);
        }
        for (p, size) in walk.by_ref() {
            if !is_placeholder(form, p) {
                own.extend_from_slice(&form[p..p + size]);
            }
        }
        let made = &own[unit..];
        let closing = u32_at(made, 9).unwrap_or(0) as usize;
        let commit = made.get(closing + 4) == Some(&QUERY);
        if walk.at != form.len()
            || framing_pair(made, crc_len) != Some(made.len())
            || commit != commits
        {
            own.truncate(at);
            return false;
        }
        self.log_pos
            .copy_from_slice(&made[closing + 13..closing + 17]);
        if commits {
            own.truncate(unit + closing); // (the slave makes it again: its GTID's date and position)
        }
        self.at.get_or_insert(at);
        self.commits = commits;
        self.units += 1;
        self.placeholders += holes;
        true
    }

    /// Takes a skipped unit straight from the binlog (`skip_forms::stretch_unit`): its GTID
    /// `gtid` and its XID `xid`, standing for `holes` placeholders, or its GTID alone (None: the
    /// slave closes it with a COMMIT), what `take` takes of its form; false, nothing written,
    /// where they are not a MariaDB GTID and an XID (`crc_len`: their checksum length) or the
    /// open stretch is of the other kind.
    pub fn take_unit(
        &mut self,
        gtid: &[u8],
        xid: Option<&[u8]>,
        holes: u64,
        crc_len: usize,
        own: &mut Vec<u8>,
    ) -> bool {
        let whole = |ev: &[u8]| u32_at(ev, 9) == Some(ev.len() as u32);
        let commits = xid.is_none();
        let closing = xid.unwrap_or(gtid);
        if self.at.is_some() && self.commits != commits
            || gtid.get(4) != Some(&MARIADB_GTID)
            || gtid.len() < HEADER_LEN + 13 + crc_len
            || !whole(gtid)
            || xid.is_some_and(|x| x[4] != XID || x.len() != HEADER_LEN + 8 + crc_len || !whole(x))
        {
            return false;
        }
        let at = own.len();
        if self.at.is_none() {
            own.resize(at + HEAD, 0);
        }
        own.extend_from_slice(gtid);
        own.extend_from_slice(xid.unwrap_or_default());
        // (the COMMIT a slave makes has its GTID's log_pos)
        self.log_pos.copy_from_slice(&closing[13..17]);
        self.at.get_or_insert(at);
        self.commits = commits;
        self.units += 1;
        self.placeholders += holes;
        true
    }

    /// Closes the open stretch, if any: its head written and its CRC32 (`crc`) sealed in `own`;
    /// returns its span there. A placeholder stretch of one unit without placeholders (an empty
    /// transaction of the binlog's) is that unit itself, without a head.
    pub fn close(&mut self, own: &mut Vec<u8>, crc: bool) -> Option<(usize, usize)> {
        let at = self.at.take()?;
        let (units, holes) = (
            std::mem::take(&mut self.units),
            std::mem::take(&mut self.placeholders),
        );
        if units == 1 && holes == 0 && !self.commits {
            own.drain(at..at + HEAD);
            return Some((at, own.len()));
        }
        let kind = if self.commits {
            EMPTY_STRETCH
        } else {
            PLACEHOLDER_STRETCH
        };
        let size = own.len() - at + if crc { 4 } else { 0 };
        let (head, inner) = own[at..].split_at_mut(HEAD);
        head[..4].copy_from_slice(&inner[..4]); // dated as its first unit (a batch's date)
        head[4] = RAND;
        head[5..9].fill(0);
        head[9..13].copy_from_slice(&(size as u32).to_le_bytes());
        head[13..17].copy_from_slice(&self.log_pos);
        head[17..19].copy_from_slice(&SKIP_REPLICATION_F.to_le_bytes());
        head[19..27].copy_from_slice(&holes.to_le_bytes());
        head[27..35].copy_from_slice(&kind.to_le_bytes());
        seal(own, at, crc);
        Some((at, own.len()))
    }
}
