//! Stretches: skipped units in a row that a placeholder or empty-transaction stream sends a gRPC
//! slave that asked for them (DumpRequest.skip_stretches) as one event holding what the slave
//! relays of each: under the placeholder policy its GTID and its XID, under the empty-transaction
//! policy its GTID alone, which the slave closes with the COMMIT the master would have made
//! (`skip_forms::empty_commit`, one function for both, which the relay run hands `unpack`: it
//! sits above this module). The send walk makes them (`Stretch`),
//! the scanner takes one for a unit of its own and counts what it stands for (`inner`), and the
//! slave's relay run writes its inner events (`unpack`).
//!
//! A do-db slave of eight schemas skips seven units in eight; under these policies each was two or
//! three events on the wire (a GTID, a run of placeholders or a made COMMIT, an XID), each scanned,
//! grouped and relayed apart on the slave: on the 500 MB sysbench MIXED binlog 1.5 million events
//! beyond the heartbeat stream's 0.5 million. A stretch is one event, and its inner events are
//! packed: skipped units in a row differ from each other in a few bytes (the date, log_pos, the
//! GTID's sequence number, the XID), so each is sent as those bytes alone (`pack`).

use crate::le::{u32_at, u64_at};
use crate::types::LOG_EVENT_SKIP_REPLICATION_F as SKIP_REPLICATION_F;
use crate::types::{is_placeholder, stretch_kind, COMMIT_BODY, HEADER_LEN, MARIADB_GTID, QUERY};
use crate::types::{EMPTY_STRETCH, PLACEHOLDER_STRETCH, RAND, XID};

/// A stretch's head: a RAND of server_id 0 flagged LOG_EVENT_SKIP_REPLICATION_F (a placeholder
/// to any reader that does not know stretches), dated as its first unit and at its last event's
/// log_pos, whose seeds are the placeholders its units stand for and its kind
/// (PLACEHOLDER_STRETCH, EMPTY_STRETCH); its packed inner events follow, then its CRC32 where the
/// binlog has them.
pub(crate) const HEAD: usize = HEADER_LEN + 16;

/// How an inner event is packed, the tag byte before it. RAW: the event whole. DIFF: the event is
/// its place's last (a unit's GTID, or the event that closes it) but for some bytes before its
/// checksum: a mask of those bytes (bit i of byte k: byte 8k + i), those bytes in order, then its
/// checksum as the binlog had it (never made again: the master may not have checked it). A DIFF
/// never changes an event's type or size (`fixed_kept`): the RAW event it follows was checked
/// (a GTID, an XID), so it is one.
const RAW: u8 = 0;
const DIFF: u8 = 1;

/// Whether `ev` is a MariaDB GTID event (`crc_len`: the checksum length).
fn is_gtid(ev: &[u8], crc_len: usize) -> bool {
    ev.get(4) == Some(&MARIADB_GTID) && ev.len() >= HEADER_LEN + 13 + crc_len
}

/// Whether `ev` closes a skipped unit as a stretch holds it: Some(false) for an XID, Some(true)
/// for the COMMIT the empty-transaction policy makes (`skip_forms`' empty form, byte for byte,
/// which a slave makes again, so never packed), else None.
fn closes(ev: &[u8], crc_len: usize) -> Option<bool> {
    match ev.get(4) {
        Some(&XID) if ev.len() == HEADER_LEN + 8 + crc_len => Some(false),
        Some(&QUERY)
            if ev.len() == HEADER_LEN + COMMIT_BODY.len() + crc_len
                && ev.get(HEADER_LEN..HEADER_LEN + COMMIT_BODY.len()) == Some(COMMIT_BODY) =>
        {
            Some(true)
        }
        _ => None,
    }
}

/// The most bytes before its checksum an event may have to be packed as a DIFF (its mask one
/// word); a longer one (an XA transaction's GTID) is RAW.
const DIFF_MAX: usize = 64;

/// The bits a DIFF's mask may set for an event of `body` bytes before its checksum: none past
/// `body`, nor its type (byte 4) or size (bytes 9..13), which stay its RAW one's.
fn free_bits(body: usize) -> u64 {
    let within = if body >= 64 { !0 } else { (1u64 << body) - 1 };
    within & !0x1E10
}

/// Appends event `ev` to `own` packed against `last`, its place's event before it in the
/// stretch (none yet: empty), and makes it the last.
fn pack(last: &mut Vec<u8>, ev: &[u8], crc_len: usize, own: &mut Vec<u8>) {
    let body = ev.len() - crc_len;
    if last.len() == ev.len() && body <= DIFF_MAX {
        // One bit a byte that differs, eight bytes at a time: a byte's high bit set where any
        // of its bits is, gathered into the byte's bit of the mask.
        let (mut mask, mut changed, mut n) = (0u64, [0u8; DIFF_MAX], 0);
        for lo in (0..body).step_by(8) {
            let hi = (lo + 8).min(body);
            let x = word(&ev[lo..hi]) ^ word(&last[lo..hi]);
            const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
            let high = (((x & LOW7) + LOW7) | x) & !LOW7;
            let mut bits = (high >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
            mask |= bits << lo;
            while bits != 0 {
                changed[n] = ev[lo + bits.trailing_zeros() as usize];
                n += 1;
                bits &= bits - 1;
            }
        }
        if mask & !free_bits(body) == 0 {
            own.push(DIFF);
            own.extend_from_slice(&mask.to_le_bytes()[..body.div_ceil(8)]);
            own.extend_from_slice(&changed[..n]);
            own.extend_from_slice(&ev[body..]);
            last.copy_from_slice(ev);
            return;
        }
    }
    own.push(RAW);
    own.extend_from_slice(ev);
    last.clear();
    last.extend_from_slice(ev);
}

/// Up to eight bytes as a little-endian word (zeros past them).
#[inline]
fn word(b: &[u8]) -> u64 {
    match b.try_into() {
        Ok(eight) => u64::from_le_bytes(eight),
        Err(_) => b.iter().rev().fold(0, |w, &x| w << 8 | u64::from(x)),
    }
}

/// One packed inner event: its size and type unpacked, and its bytes whole (RAW) or its mask,
/// changed bytes and checksum (DIFF).
struct Packed<'a> {
    size: usize,
    ty: u8,
    raw: Option<&'a [u8]>,
    mask: u64,
    changed: &'a [u8],
    crc: &'a [u8],
}

/// Reads a stretch's packed inner events in order, each place against its last RAW event's type
/// and size.
struct Reader<'a> {
    inner: &'a [u8],
    p: usize,
    crc_len: usize,
    last: [(usize, u8); 2],
}

impl<'a> Reader<'a> {
    fn new(inner: &'a [u8], crc_len: usize) -> Self {
        Reader {
            inner,
            p: 0,
            crc_len,
            last: [(0, 0); 2],
        }
    }

    /// The next event, at `place` in its unit (0: its GTID, 1: its XID); None where the bytes
    /// are not one.
    #[inline]
    fn next(&mut self, place: usize) -> Option<Packed<'a>> {
        let rest = self.inner.get(self.p + 1..)?;
        if self.inner[self.p] == RAW {
            let size = u32_at(rest, 9)? as usize;
            let raw = rest
                .get(..size)
                .filter(|_| size >= HEADER_LEN + self.crc_len)?;
            self.p += 1 + size;
            self.last[place] = (size, raw[4]);
            return Some(Packed {
                size,
                ty: raw[4],
                raw: Some(raw),
                mask: 0,
                changed: &[],
                crc: &[],
            });
        }
        let (size, ty) = self.last[place];
        let body = size.wrapping_sub(self.crc_len);
        if self.inner[self.p] != DIFF || size == 0 || body > DIFF_MAX {
            return None;
        }
        let masks = body.div_ceil(8);
        let mask = word(rest.get(..masks)?);
        let n = mask.count_ones() as usize;
        let changed = rest
            .get(masks..masks + n)
            .filter(|_| mask & !free_bits(body) == 0)?;
        let crc = rest.get(masks + n..masks + n + self.crc_len)?;
        self.p += 1 + masks + n + self.crc_len;
        Some(Packed {
            size,
            ty,
            raw: None,
            mask,
            changed,
            crc,
        })
    }

    /// The next unit's events, checked: a GTID, and where `xid` its XID.
    #[inline]
    fn unit(&mut self, xid: bool) -> Option<(Packed<'a>, Option<Packed<'a>>)> {
        let g = self.next(0)?;
        if g.ty != MARIADB_GTID || g.size < HEADER_LEN + 13 + self.crc_len {
            return None;
        }
        if !xid {
            return Some((g, None));
        }
        let c = self.next(1)?;
        // (a DIFF is its RAW one's type and size: an XID)
        let ok = c
            .raw
            .map_or(c.ty == XID, |raw| closes(raw, self.crc_len) == Some(false));
        ok.then_some((g, Some(c)))
    }
}

/// The stretch at buf[at..at + size] (`crc_len`: the checksum length of its events and its
/// own): the range of its packed units, how many, the bytes of their events unpacked, the
/// placeholders they stand for, and whether each is a GTID the slave closes with a COMMIT; None
/// unless it is one, its units all a GTID and its XID (PLACEHOLDER_STRETCH) or a GTID
/// (EMPTY_STRETCH), packed whole, that fill it.
pub fn inner(buf: &[u8], at: usize, size: usize, crc_len: usize) -> Option<Inner> {
    walk(buf, at, size, crc_len, None)
}

/// `inner`, and the events the stretch stands for appended to `out`: each unit's GTID and XID
/// as the binlog had them, or each GTID and the COMMIT `commit` makes of it
/// (`skip_forms::empty_commit`: its GTID's header, whether there are checksums, `out`). None,
/// and nothing appended, where it is not a stretch.
pub fn unpack(
    buf: &[u8],
    at: usize,
    size: usize,
    crc_len: usize,
    out: &mut Vec<u8>,
    commit: fn(&[u8], bool, &mut Vec<u8>),
) -> Option<Inner> {
    let from = out.len();
    let st = walk(buf, at, size, crc_len, Some((out, commit)));
    if st.is_none() {
        out.truncate(from);
    }
    st
}

/// Where `walk` unpacks a stretch, and what makes each COMMIT of an empty-transaction one.
type Unpacking<'o> = (&'o mut Vec<u8>, fn(&[u8], bool, &mut Vec<u8>));

/// Reads the stretch at buf[at..at + size] whole (`inner`), unpacking it where `out` is given.
fn walk(
    buf: &[u8],
    at: usize,
    size: usize,
    crc_len: usize,
    mut out: Option<Unpacking<'_>>,
) -> Option<Inner> {
    let commits = stretch_kind(buf, at)? == EMPTY_STRETCH;
    let event = buf.get(at..at.checked_add(size)?)?;
    let inner = event.get(HEAD..size.checked_sub(crc_len)?)?;
    let mut r = Reader::new(inner, crc_len);
    let (mut units, mut bytes) = (0u64, 0u64);
    let mut last = [0usize; 2]; // where each place's last event starts in `out`
    while r.p < inner.len() {
        let (g, c) = r.unit(!commits)?;
        bytes += (g.size + c.as_ref().map_or(0, |c| c.size)) as u64;
        units += 1;
        let Some((out, commit)) = out.as_mut() else {
            continue;
        };
        for (e, from) in [Some(g), c].into_iter().flatten().zip(last.iter_mut()) {
            let to = out.len();
            match e.raw {
                Some(raw) => out.extend_from_slice(raw),
                None => {
                    out.extend_from_within(*from..*from + e.size);
                    let (mut m, mut changed) = (e.mask, e.changed.iter());
                    while m != 0 {
                        out[to + m.trailing_zeros() as usize] = *changed.next()?;
                        m &= m - 1;
                    }
                    out[to + e.size - crc_len..to + e.size].copy_from_slice(e.crc);
                }
            }
            *from = to;
        }
        if commits {
            let mut gtid = [0u8; HEADER_LEN];
            gtid.copy_from_slice(&out[last[0]..last[0] + HEADER_LEN]);
            commit(&gtid, crc_len != 0, out);
        }
    }
    (units > 0).then(|| Inner {
        range: (at + HEAD, at + HEAD + inner.len()),
        units,
        bytes,
        placeholders: u64_at(buf, at + HEADER_LEN).unwrap_or(0),
        commits,
    })
}

/// A stretch's inner units (see `inner`): `bytes`, their events' unpacked; `commits`, each a
/// GTID to close with a COMMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inner {
    pub range: (usize, usize),
    pub units: u64,
    pub bytes: u64,
    pub placeholders: u64,
    pub commits: bool,
}

/// The stretch the send walk is making in its own bytes: where its head is, its kind, its units,
/// the placeholders they stand for, its last event's log_pos (the stretch's own), and each
/// place's last event, which the next is packed against.
#[derive(Debug, Default)]
pub struct Stretch {
    at: Option<usize>,
    commits: bool,
    units: u64,
    placeholders: u64,
    log_pos: [u8; 4],
    last: [Vec<u8>; 2],
}

impl Stretch {
    /// Takes the form `form` made for a skipped unit, standing for `holes` placeholders: when
    /// its events other than placeholders are a GTID and an XID, they join the stretch in `own`
    /// (opened here); when they are a GTID and the COMMIT the empty-transaction policy makes
    /// (`commits`: the walk made it so, and the slave makes it again), its GTID alone.
    /// Otherwise, or where the stretch open is of the other kind, nothing is written and the
    /// unit is sent as its form.
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
        let (mut pair, mut n, mut p) = ([(0, 0); 2], 0, 0);
        while let Some(size) = u32_at(form, p + 9).map(|s| s as usize) {
            if size < HEADER_LEN || p + size > form.len() {
                break;
            }
            if !is_placeholder(form, p) {
                if n == 2 {
                    return false;
                }
                pair[n] = (p, p + size);
                n += 1;
            }
            p += size;
        }
        if p != form.len() || n != 2 {
            return false;
        }
        let (g, c) = (&form[pair[0].0..pair[0].1], &form[pair[1].0..pair[1].1]);
        if !is_gtid(g, crc_len) || closes(c, crc_len) != Some(commits) {
            return false;
        }
        self.log_pos.copy_from_slice(&c[13..17]);
        let at = own.len();
        if self.at.is_none() {
            own.resize(at + HEAD, 0);
        }
        pack(&mut self.last[0], g, crc_len, own);
        if !commits {
            pack(&mut self.last[1], c, crc_len, own);
        } // (else the slave makes it again: its GTID's date and position)
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
        for last in &mut self.last {
            last.clear();
        }
        if units == 1 && holes == 0 && !self.commits {
            own.drain(at..at + HEAD + 1); // (its head and its GTID's tag: both events are RAW)
            let g = u32_at(own, at + 9).unwrap_or(0) as usize;
            own.remove(at + g);
            return Some((at, own.len()));
        }
        let kind = if self.commits {
            EMPTY_STRETCH
        } else {
            PLACEHOLDER_STRETCH
        };
        let size = own.len() - at + if crc { 4 } else { 0 };
        let (head, inner) = own[at..].split_at_mut(HEAD);
        head[..4].copy_from_slice(&inner[1..5]); // dated as its first unit (RAW: a batch's date)
        head[4] = RAND;
        head[5..9].fill(0);
        head[9..13].copy_from_slice(&(size as u32).to_le_bytes());
        head[13..17].copy_from_slice(&self.log_pos);
        head[17..19].copy_from_slice(&SKIP_REPLICATION_F.to_le_bytes());
        head[19..27].copy_from_slice(&holes.to_le_bytes());
        head[27..35].copy_from_slice(&kind.to_le_bytes());
        if crc {
            let sealed = crc32fast::hash(&own[at..]);
            own.extend_from_slice(&sealed.to_le_bytes());
        }
        Some((at, own.len()))
    }
}
