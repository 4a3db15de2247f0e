//! `simulate --verify`'s expectation of a slave's relay logs, from the full stream's units and the
//! slave's own answers per unit (`rows`, statement rows): a unit its rules keep whole is relayed
//! as it is; a unit they skip whole leaves what its skip policy sends for it (`skip_forms`, the
//! one maker of those forms) as the slave relays that (`relay::placeholder_unit`: a MariaDB
//! placeholder unit's framing, its placeholders dropped; a MySQL one's with its GTID's
//! transaction_length counting what is left, `skip_forms::relayed_placeholders`; an empty
//! transaction as it came; nothing under the heartbeat policy). Any other unit (control events, a unit kept in part or not answered, a form
//! the core does not make) ends the run: the caller's Python reference takes it.

use crate::relay::placeholder_unit;
use crate::rows::{ROW_KEEP, ROW_SKIP};
use crate::scan::{Unit, F_MARIADB_GTID};
use crate::skip_forms::{self, SKIP_EMPTY, SKIP_HEARTBEAT, SKIP_PLACEHOLDER};
use crate::stmt_units::{StmtUnits, ALWAYS};
use crate::tally::pieces_of;
use crate::unit_list::{ListedUnit, UnitList};

/// What slaves of one rule set relay of a run of units, one entry per skip policy asked for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Relayed {
    /// Per policy, the pieces its relay log holds for the run, in order: (part, start, end) of
    /// a part's buffer, or of the policy's `forms` where part is FORMS.
    pub pieces: Vec<Vec<(u32, usize, usize)>>,
    /// Per policy, the forms of the skipped units, back to back.
    pub forms: Vec<Vec<u8>>,
    /// Per policy, the bytes of its pieces.
    pub len: Vec<usize>,
    /// Per policy, the units of the run that leave something in its relay log.
    pub units: Vec<u64>,
    /// The first unit not answered (`to` when every one was).
    pub next: usize,
}

/// The part of a piece that lies in the policy's `forms`.
pub const FORMS: u32 = u32::MAX;

impl Relayed {
    /// Policy p's bytes (its pieces, `bufs` the parts' buffers) into `out`, `len[p]` bytes long.
    pub fn fill(&self, p: usize, bufs: &[&[u8]], out: &mut [u8]) {
        let mut at = 0;
        for &(part, a, b) in &self.pieces[p] {
            let src = match part {
                FORMS => &self.forms[p][a..b],
                _ => &bufs[part as usize][a..b],
            };
            out[at..at + src.len()].copy_from_slice(src);
            at += src.len();
        }
    }

    /// Adds a piece to policy p's, joined to the last one where they meet.
    fn push(&mut self, p: usize, part: u32, a: usize, b: usize) {
        self.len[p] += b - a;
        match self.pieces[p].last_mut() {
            Some(last) if last.0 == part && last.2 == a => last.2 = b,
            _ => self.pieces[p].push((part, a, b)),
        }
    }
}

/// Unit `u` (index k) skipped whole under `skip`, as the slave relays it, appended to `out`;
/// false where the core does not make it (`out` then as it was).
fn relayed_form(
    k: usize,
    u: &ListedUnit,
    buf: &[u8],
    st: Option<&StmtUnits>,
    skip: u8,
    crc: bool,
    out: &mut Vec<u8>,
) -> bool {
    let mariadb = u.flags & F_MARIADB_GTID != 0;
    match skip {
        SKIP_HEARTBEAT => true,
        SKIP_EMPTY => {
            let at = out.len();
            let made = skip_forms::skipped(u, buf, SKIP_EMPTY, crc, false, None, Some(out));
            out.truncate(if made.is_some() { out.len() } else { at });
            made.is_some()
        }
        SKIP_PLACEHOLDER => {
            // A statement unit's framing is the pieces every stream keeps (count_walk::form).
            let framing: Option<Vec<(usize, usize)>> = match st.and_then(|st| pieces_of(st, k)) {
                Some(pieces) if !u.tabled => Some(
                    pieces
                        .iter()
                        .filter(|p| p.key == ALWAYS)
                        .map(|p| (p.start(), p.end()))
                        .collect(),
                ),
                _ => None,
            };
            let mut sent = Vec::new();
            let Some(form) = skip_forms::skipped(
                u,
                buf,
                SKIP_PLACEHOLDER,
                crc,
                false,
                framing.as_deref(),
                Some(&mut sent),
            ) else {
                return false;
            };
            if !mariadb {
                // A MySQL unit: its framing with the GTID's transaction_length rewritten again
                // (the slave's `_without_placeholders`).
                let at = out.len();
                let made = skip_forms::relayed_placeholders(&sent, crc, out);
                out.truncate(if made.is_some() { out.len() } else { at });
                return made.is_some();
            }
            // The unit the master sent, as the slave's relay run reads it.
            let unit = Unit {
                start: 0,
                end: sent.len(),
                events: form.events as u32,
                kind: u.kind,
                flags: u.flags,
                gtid_size: u.gtid_size,
                ..Unit::default()
            };
            match placeholder_unit(&sent, &unit) {
                Some(p) => {
                    out.extend_from_slice(&sent[p.gtid.0..p.gtid.1]);
                    out.extend_from_slice(&sent[p.xid.0..p.xid.1]);
                    true
                }
                None => false,
            }
        }
        _ => false,
    }
}

/// What a slave with answers `row` (one per unit of `plan`: ROW_KEEP, ROW_SKIP, ...) relays of
/// units[from..to] under each skip policy of `skips` (`skip_forms::SKIP_*`; `crc`: the events
/// carry checksums), until the first unit it cannot answer under every one of them. `st`: the
/// list's statement units, whose framing a skipped statement unit keeps under the placeholder
/// policy.
#[allow(clippy::too_many_arguments)]
pub fn relayed(
    plan: &UnitList,
    bufs: &[&[u8]],
    st: Option<&StmtUnits>,
    row: &[u8],
    from: usize,
    to: usize,
    skips: &[u8],
    crc: bool,
) -> Relayed {
    let n = skips.len();
    let mut r = Relayed {
        pieces: vec![Vec::new(); n],
        forms: vec![Vec::new(); n],
        len: vec![0; n],
        units: vec![0; n],
        next: from,
    };
    let to = to.min(row.len()).min(plan.units.len());
    let mut i = from;
    while i < to {
        let u = &plan.units[i];
        if bufs
            .get(u.part as usize)
            .and_then(|b| b.get(u.start()..u.end()))
            .is_none()
        {
            break;
        }
        let buf = bufs[u.part as usize];
        match row[i] {
            ROW_KEEP => {
                for p in 0..n {
                    r.push(p, u.part, u.start(), u.end());
                    r.units[p] += 1;
                }
            }
            ROW_SKIP => {
                let marks: Vec<usize> = r.forms.iter().map(Vec::len).collect();
                let all = r
                    .forms
                    .iter_mut()
                    .zip(skips)
                    .all(|(out, skip)| relayed_form(i, u, buf, st, *skip, crc, out));
                if !all {
                    for (out, at) in r.forms.iter_mut().zip(marks) {
                        out.truncate(at);
                    }
                    break;
                }
                for (p, at) in marks.into_iter().enumerate() {
                    let end = r.forms[p].len();
                    if end > at {
                        r.push(p, FORMS, at, end);
                    }
                    r.units[p] += u64::from(skips[p] != SKIP_HEARTBEAT);
                }
            }
            _ => break,
        }
        i += 1;
    }
    r.next = i;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::{F_COMPLETE, TRANSACTION};
    use crate::types::{HEADER_LEN, MARIADB_GTID, QUERY, XID};

    fn event(kind: u8, body: &[u8], log_pos: u32) -> Vec<u8> {
        crate::test_events::event_from(kind, 7, log_pos, body)
    }

    /// Two row units (GTID, a Table_map, a Rows event, XID) and a lone statement, in one list.
    fn list() -> (Vec<u8>, UnitList, usize) {
        let mut buf = Vec::new();
        let mut units = Vec::new();
        for n in 0..3u32 {
            let start = buf.len();
            let gtid = event(MARIADB_GTID, &[0; 19], 100 * n + 10);
            let gtid_size = gtid.len() as u32;
            buf.extend(gtid);
            let events = if n == 2 {
                buf.extend(event(
                    QUERY,
                    b"\0\0\0\0\0\0\0\0\0\0\0\0\0DROP TABLE t",
                    100 * n + 60,
                ));
                2
            } else {
                buf.extend(event(19, &[1; 12], 100 * n + 40));
                buf.extend(event(30, &[2; 20], 100 * n + 70));
                buf.extend(event(XID, &[3; 8], 100 * n + 90));
                4
            };
            units.push(Unit {
                start,
                end: buf.len(),
                events,
                kind: TRANSACTION,
                flags: F_COMPLETE | F_MARIADB_GTID | if n < 2 { crate::scan::F_FAST } else { 0 },
                gtid_size,
                tables_lo: n.min(1),
                tables_hi: (n + 1).min(2),
                ..Unit::default()
            });
        }
        let mut plan = UnitList::default();
        plan.add(b"f", 0, &units, &[0, 1]);
        (buf, plan, units[1].start)
    }

    /// Policy p's bytes of `r`.
    fn out(r: &Relayed, p: usize, buf: &[u8]) -> Vec<u8> {
        let mut out = vec![0; r.len[p]];
        r.fill(p, &[buf], &mut out);
        out
    }

    #[test]
    fn kept_units_as_they_are_skipped_ones_as_each_policy_relays_them() {
        let (buf, plan, second) = list();
        let row = [ROW_KEEP, ROW_SKIP, ROW_SKIP];
        let skips = [SKIP_HEARTBEAT, SKIP_PLACEHOLDER, SKIP_EMPTY];
        let r = relayed(&plan, &[&buf], None, &row, 0, 3, &skips, false);
        assert_eq!(
            r.next, 2,
            "a skipped DDL under the placeholder policy is the caller's"
        );
        assert_eq!(r.units, [1, 2, 2]);
        let first = &buf[..second];
        assert_eq!(
            out(&r, 0, &buf),
            first,
            "heartbeat: nothing for the skipped unit"
        );
        let gtid = &buf[second..second + 19 + HEADER_LEN];
        let end = plan.units[1].end();
        let xid = &buf[end - HEADER_LEN - 8..end];
        assert_eq!(
            out(&r, 1, &buf),
            [first, gtid, xid].concat(),
            "placeholder: its framing"
        );
        let mut empty = Vec::new();
        skip_forms::skipped(
            &plan.units[1],
            &buf,
            SKIP_EMPTY,
            false,
            false,
            None,
            Some(&mut empty),
        )
        .unwrap();
        assert_eq!(
            out(&r, 2, &buf),
            [first, &empty[..]].concat(),
            "empty-transaction: its GTID and a COMMIT"
        );
        let r = relayed(
            &plan,
            &[&buf],
            None,
            &row,
            2,
            3,
            &[SKIP_HEARTBEAT, SKIP_EMPTY],
            false,
        );
        assert_eq!((r.next, r.units.as_slice()), (3, &[0u64, 1][..]));
        let r = relayed(
            &plan,
            &[&buf],
            None,
            &[ROW_KEEP, 1, ROW_KEEP],
            0,
            3,
            &[SKIP_HEARTBEAT],
            false,
        );
        assert_eq!(
            (r.next, out(&r, 0, &buf).len()),
            (1, second),
            "a unit kept in part ends the run"
        );
    }
}
