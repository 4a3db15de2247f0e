//! The placeholder policy's form (`skip_forms`): a unit's framing and kept events as they are,
//! every other event a RAND placeholder of the same log_pos, and for a gRPC slave that asked for
//! them (DumpRequest.placeholder_runs) each run of placeholders in a row as one that counts them.

use super::{made_crc, Form, RAND_BODY, SKIP_REPLICATION_F};
use crate::le::u32_at;
use crate::types::{HEADER_LEN, MARIADB_GTID, PLACEHOLDER_RUN, RAND, XID};
use crate::unit_list::ListedUnit;

/// The unit (`raw`, at `base` in its buffer) with its GTID, its XID and the events inside
/// `kept` (ranges of the buffer, in order) as they are, every other event a RAND of the same
/// log_pos: timestamp 0, server_id 0, LOG_EVENT_SKIP_REPLICATION_F, the event's size and type
/// as seeds (skip_policy.placeholder). A MariaDB GTID has no transaction_length to rewrite.
/// `skipped`: every byte is the policy's (a skipped unit), else only the placeholders'.
/// `runs`: placeholders in a row are written as one (`Run`); the Form still counts each.
pub(super) fn placeholders(
    raw: &[u8],
    base: usize,
    kept: &[(usize, usize)],
    skipped: bool,
    crc: bool,
    runs: bool,
    mut out: Option<&mut Vec<u8>>,
) -> Option<Form> {
    let rand = rand_len(crc);
    let mut form = Form::default();
    let (mut p, mut r) = (0, 0);
    let mut run = Run {
        runs,
        ..Run::default()
    };
    while p < raw.len() {
        let size = u32_at(raw, p + 9)? as usize;
        let kind = *raw.get(p + 4)?;
        let event = raw.get(p..p.checked_add(size)?)?;
        if size < HEADER_LEN {
            return None;
        }
        let at = base + p;
        while r < kept.len() && kept[r].1 <= at {
            r += 1;
        }
        let inside = kept.get(r).is_some_and(|&(a, b)| a <= at && at + size <= b);
        if kind == MARIADB_GTID || kind == XID || inside {
            if let Some(out) = out.as_deref_mut() {
                run.ends_at(event);
                run.flush(crc, out);
                out.extend_from_slice(event);
            }
            if skipped {
                form.bytes += size as u64;
                form.events += 1;
            } else {
                form.kept_bytes += size as u64;
                form.kept_events += 1;
            }
        } else {
            if let Some(out) = out.as_deref_mut() {
                let log_pos = [event[13], event[14], event[15], event[16]];
                run.add(log_pos, size as u32, kind);
                if !runs {
                    run.flush(crc, out); // (each as it comes: a run of one, whatever its type)
                }
            }
            form.bytes += rand as u64;
            form.events += 1;
            form.placeholders += 1;
        }
        p += size;
    }
    if let Some(out) = out {
        run.flush(crc, out);
    }
    Some(form)
}

/// A RAND placeholder's size with (`crc`) or without its CRC32.
pub(super) fn rand_len(crc: bool) -> usize {
    HEADER_LEN + RAND_BODY + if crc { 4 } else { 0 }
}

/// A skipped MariaDB unit framed at its ends only, for a slave that asked for runs: its GTID
/// (and its BEGIN, the one piece of `kept` before its body), one run for its body, and the event
/// that ends it (an XID, or `kept`'s last piece), made from the unit's record and those events
/// without reading the body: a dozen headers per sysbench transaction, each a cache miss, were
/// most of the master's CPU in a do-db slave's placeholder stream. What `placeholders` makes
/// of the unit, or None where the record does not say so (it then reads the unit).
pub(super) fn framed_run(
    raw: &[u8],
    u: &ListedUnit,
    kept: &[(usize, usize)],
    crc: bool,
    out: &mut Vec<u8>,
) -> Option<Form> {
    let (head, tail, mut run, form) = framed(raw, u, kept, crc)?;
    out.extend_from_slice(&raw[..head]);
    run.flush(crc, out);
    out.extend_from_slice(tail);
    Some(form)
}

/// `framed_form`'s counts of a complete fast MariaDB unit from its record alone (`count_forms::recorded`):
/// its GTID's size and its last event's offset, where `framed_form` would find a GTID, a body and
/// an XID at its end (the scanner's fast shape ends with one); None where it would not.
#[inline]
pub(crate) fn recorded(u: &ListedUnit, crc: bool) -> Option<Form> {
    let (g, tail) = (u.gtid_size as usize, u.end().checked_sub(u.last())?);
    let body = u.events.checked_sub(2).filter(|&n| n > 0)?;
    if g < HEADER_LEN || u.start() + g >= u.last() {
        return None;
    }
    Some(Form {
        bytes: (g + tail + body as usize * rand_len(crc)) as u64,
        events: u64::from(u.events),
        placeholders: u64::from(body),
        ..Form::default()
    })
}

/// What `framed_run` makes unit `u` (`raw`) of, where its record says so: the length of its
/// head, its tail, the run between them and the form's counts.
fn framed<'a>(
    raw: &'a [u8],
    u: &ListedUnit,
    kept: &[(usize, usize)],
    crc: bool,
) -> Option<(usize, &'a [u8], Run, Form)> {
    let (head, tail, body, form) = framed_form(raw, u, kept, crc)?;
    let run = Run::before(body, tail)?; // (a run of one: its own placeholder)
    Some((head, tail, run, form))
}

/// Unit `u` (`raw`) framed at its ends, where its record says so: the length of its head, its
/// tail, the events between them (one at least) and the form's counts. The counts are what
/// `placeholders` counts of it (`framed_run`'s shapes), from its record and those two events,
/// without reading its body: a count walk (`experiment`, shadow candidates) makes no bytes, and
/// every body event's header was a cache miss for each unit of a segment under the policy.
pub(super) fn framed_form<'a>(
    raw: &'a [u8],
    u: &ListedUnit,
    kept: &[(usize, usize)],
    crc: bool,
) -> Option<(usize, &'a [u8], u32, Form)> {
    let g = u.gtid_size as usize;
    let last = u.last().checked_sub(u.start())?;
    let tail = raw.get(last..)?;
    if g < HEADER_LEN || *raw.get(4)? != MARIADB_GTID || u32_at(tail, 9)? as usize != tail.len() {
        return None;
    }
    // Its head: the GTID, or the GTID and a BEGIN (one event, checked below); a statement
    // unit's framing pieces are its head (a MariaDB group's GTID is its BEGIN) and its end.
    let (head, framing) = match kept {
        [] if *tail.get(4)? == XID => (g, 2),
        [(a, b), (c, d)]
            if (*a == u.start() || *a == u.start() + g) && (*c, *d) == (u.last(), u.end()) =>
        {
            let head = b.checked_sub(u.start()).filter(|&h| h >= g)?;
            (head, if head == g { 2 } else { 3 })
        }
        _ => return None,
    };
    if head > g && head - g != u32_at(raw, g + 9)? as usize {
        return None;
    }
    let body = u.events.checked_sub(framing).filter(|&n| n > 0)?;
    if head >= last {
        return None;
    }
    let form = Form {
        bytes: (head + tail.len() + body as usize * rand_len(crc)) as u64,
        events: u64::from(u.events),
        placeholders: u64::from(body),
        ..Form::default()
    };
    Some((head, tail, body, form))
}

/// Skipped unit `u` (`raw`) as the stretch a placeholder walk makes for a gRPC slave that asked
/// for stretches holds it, where `framed_run` would make its form: its GTID and its XID, read
/// from its record, and the form's counts (the placeholders of the events between them). Made,
/// the form's run was dropped by the stretch, which copied the form and read it again
/// (`Stretch::take`). None where the form is not its GTID, a run and its XID.
pub(super) fn stretch_pair<'a>(
    raw: &'a [u8],
    u: &ListedUnit,
    kept: &[(usize, usize)],
    crc: bool,
) -> Option<(&'a [u8], &'a [u8], Form)> {
    let (head, tail, _, form) = framed(raw, u, kept, crc)?;
    let crc_len = if crc { 4 } else { 0 };
    let gtid = &raw[..head];
    let whole = u32_at(gtid, 9)? as usize == head && head >= HEADER_LEN + 13 + crc_len;
    let xid = tail[4] == XID && tail.len() == HEADER_LEN + 8 + crc_len;
    (whole && xid && head == u.gtid_size as usize).then_some((gtid, tail, form))
}

/// Placeholders in a row not yet written: how many, and the last one's log_pos and seeds. Under
/// the placeholder policy a skipped sysbench ROW transaction is a dozen placeholders, 2.8 times
/// the bytes of the stream's kept ones, and a slave drops every one (`Placeholder.relayed`): a
/// gRPC slave that asks for runs (DumpRequest.placeholder_runs) is sent each run as one
/// placeholder of the last one's log_pos whose seeds are the run's length and PLACEHOLDER_RUN,
/// and counts it as the run (`Scanner`'s `run_events`, `run_bytes`). A run of one stays the
/// placeholder itself, unless its event's type is PLACEHOLDER_RUN's (no server writes one).
#[derive(Default)]
pub(super) struct Run {
    runs: bool,
    count: u32,
    log_pos: [u8; 4],
    size: u32,
    kind: u8,
}

impl Run {
    /// A run of `count` placeholders (more than one) that ends where the event `next` starts;
    /// None where `next`'s log_pos is less than its size (the caller then reads the body).
    pub(super) fn before(count: u32, next: &[u8]) -> Option<Run> {
        let mut run = Run {
            runs: true,
            count,
            ..Run::default()
        };
        run.ends_at(next);
        (count > 1 && run.log_pos != [0; 4]).then_some(run)
    }

    fn add(&mut self, log_pos: [u8; 4], size: u32, kind: u8) {
        self.count += 1;
        (self.log_pos, self.size, self.kind) = (log_pos, size, kind);
    }

    /// A run of more than one, before `next`, ends where `next` starts by its own header (its
    /// log_pos less its size; the last placeholder's log_pos on a server's binlog): so
    /// `row_run` makes the same run from the XID alone.
    fn ends_at(&mut self, next: &[u8]) {
        if self.runs && self.count > 1 {
            if let Some(start) = u32_at(next, 13).and_then(|p| p.checked_sub(u32_at(next, 9)?)) {
                self.log_pos = start.to_le_bytes();
            }
        }
    }

    pub(super) fn flush(&mut self, crc: bool, out: &mut Vec<u8>) {
        let rand = rand_len(crc);
        let made = match self.count {
            0 => return,
            1 if !self.runs || u64::from(self.kind) != PLACEHOLDER_RUN => {
                placeholder(self.log_pos, self.size, self.kind, crc)
            }
            n => placeholder(self.log_pos, n, PLACEHOLDER_RUN as u8, crc),
        };
        out.extend_from_slice(&made[..rand]);
        self.count = 0;
    }
}

/// The RAND placeholder of an event of `size` bytes and type `kind` at `log_pos`: timestamp 0,
/// server_id 0, LOG_EVENT_SKIP_REPLICATION_F, the size and type as two u64 seeds, and (`crc`)
/// its CRC32 from the placeholder's tables (`made_crc::rand_crc`); its first 35 bytes, or all
/// 39 with `crc`. Made whole on the stack and appended in one copy: the placeholder stream of
/// the 500 MB sysbench ROW binlog makes about 6 million of them per slave, each appended field
/// by field (eight appends) and sealed through the general template's 13 table loads.
#[inline(always)]
pub(super) fn placeholder(
    log_pos: [u8; 4],
    size: u32,
    kind: u8,
    crc: bool,
) -> [u8; HEADER_LEN + RAND_BODY + 4] {
    let mut e = [0u8; HEADER_LEN + RAND_BODY + 4];
    e[4] = RAND;
    e[9..13].copy_from_slice(&(rand_len(crc) as u32).to_le_bytes());
    e[13..17].copy_from_slice(&log_pos);
    e[17..19].copy_from_slice(&SKIP_REPLICATION_F.to_le_bytes());
    e[19..23].copy_from_slice(&size.to_le_bytes());
    e[27] = kind;
    if crc {
        let c = made_crc::rand_crc(log_pos, size, kind);
        e[35..39].copy_from_slice(&c.to_le_bytes());
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skip_forms::test_unit;
    use crate::types::QUERY;

    #[test]
    fn a_made_placeholder_is_its_fields_sealed_by_its_crc() {
        for (log_pos, size, kind) in [(4u32, 19u32, 2u8), (0xdead_beef, 1 << 30, 0), (150, 53, 19)]
        {
            let made = placeholder(log_pos.to_le_bytes(), size, kind, true);
            let mut rand = [0u8; HEADER_LEN + RAND_BODY];
            rand[4] = RAND;
            rand[9..13].copy_from_slice(&39u32.to_le_bytes());
            rand[13..17].copy_from_slice(&log_pos.to_le_bytes());
            rand[17..19].copy_from_slice(&SKIP_REPLICATION_F.to_le_bytes());
            rand[19..23].copy_from_slice(&size.to_le_bytes());
            rand[27] = kind;
            assert_eq!(&made[..35], &rand[..]);
            assert_eq!(crc32fast::hash(&made), crate::crc::RESIDUE);
        }
    }

    /// A count walk's form (no bytes made) is read from the record where it says so, and is
    /// the form made: row units of one to three body events, a statement unit by its framing.
    #[test]
    fn a_counted_form_is_the_made_forms_counts() {
        for crc in [false, true] {
            let rows = [[0u8; 40], [1; 40], [2; 40]];
            for body in 1..4 {
                let events: Vec<_> = (0..body)
                    .map(|k| (30, &rows[k][..], 150 + k as u32))
                    .collect();
                let (raw, u) = test_unit(0, &events, 400, true, crc);
                let mut made = Vec::new();
                let form = super::super::skipped(
                    &u,
                    &raw,
                    super::super::SKIP_PLACEHOLDER,
                    crc,
                    false,
                    None,
                    Some(&mut made),
                );
                assert_eq!(form.map(|f| f.bytes as usize), Some(made.len()));
                assert_eq!(framed_form(&raw, &u, &[], crc).map(|f| f.3), form, "{body}");
                assert_eq!(
                    super::super::skipped(
                        &u,
                        &raw,
                        super::super::SKIP_PLACEHOLDER,
                        crc,
                        false,
                        None,
                        None
                    ),
                    form
                );
            }
            // A statement unit: its GTID and XID kept by its keys, its BEGIN and statements
            // placeholders; not framed at its ends (a piece inside its body), the walk's.
            let statements = [200, 201, 202].map(|log_pos| (QUERY, &[2u8; 30][..], log_pos));
            let (raw, u) = test_unit(0, &statements, 400, false, crc);
            let (g, last) = (u.gtid_size as usize, u.last());
            let inner = (g + 10, last);
            for kept in [
                vec![(0, g), (last, raw.len())],
                vec![(0, g), inner, (last, raw.len())],
            ] {
                let mut made = Vec::new();
                let walk = placeholders(&raw, 0, &kept, true, crc, false, Some(&mut made));
                let counted = super::super::skipped(
                    &u,
                    &raw,
                    super::super::SKIP_PLACEHOLDER,
                    crc,
                    false,
                    Some(&kept),
                    None,
                );
                assert_eq!(counted, walk);
                assert_eq!(framed_form(&raw, &u, &kept, crc).is_some(), kept.len() == 2);
            }
        }
    }
}
