//! Split's routing walk (issue #40): the fast MariaDB ROW units of one scanned buffer cut into
//! one copy per output in a single pass, each output's keep bytes indexed by the scanner's name
//! ids (the decisions stay in Python: rules.decider.TableKeeps). A copy is the unit whole, the
//! unit without its statements whose tables the output does not keep (`unit_cut::cut`), or
//! nothing; bytes as the source holds them (the series writer renumbers them), as split's
//! `encode_unit` of the reference path's events gives them. Also the GTID events a series'
//! next GTID state needs from a run of whole units (`gtid_marks`). Statement units (MariaDB's
//! default MIXED format: a GTID, Queries with their context events, an XID) are routed the same
//! way by their statements' keys (`StmtRoute`), each key answered up front per output in Python.
//! Fast MySQL ROW units (GTID, BEGIN, statements, XID) too, their copies made by `split_mysql`
//! (transaction_length, by schema the BEGIN's default database).

use crate::hops::events;
use crate::le::u32_at;
use crate::scan::{Unit, F_COMPLETE, F_FAST, F_MARIADB_GTID};
use crate::sent::Sent;
use crate::split_mysql::{is_mysql_unit, MysqlRoute};
use crate::stmt_units::{StmtUnits, ALWAYS};
use crate::types::*;
use crate::unit_cut::{answer, body_start, cut};

/// What `route` wrote: per output its bytes as pieces (ranges of the buffer, part 0, and the
/// partly kept units' bytes: `Sent::fill` copies them into its bytes once) and each unit's end
/// (plus that output's base).
pub struct Routed {
    /// The first unit not handled (Python routes it).
    pub next: usize,
    pub outs: Vec<Sent>,
    pub ends: Vec<Vec<u64>>,
    /// Units written to no counted output (by --map without an unassigned output: the units
    /// Python's Router counts as dropped, whether or not the rest's keep took them).
    pub none: u64,
}

enum Copy {
    Whole,
    Part(Vec<u8>),
    Nothing,
}

const ROUTED: u32 = F_FAST | F_COMPLETE;

/// Statement units routed by their keys: the scan's statement units (`StmtUnits::build_part`),
/// one keep byte per key id for each output (the keys answered up front), and whether a framing
/// Query may be copied as it is.
pub struct StmtRoute<'a> {
    pub units: &'a StmtUnits,
    pub keeps: Vec<&'a [u8]>,
    /// By schema it may not: Python gives a copy's framing the output's schema as default
    /// database (`_retarget`).
    pub framing: bool,
}

impl StmtRoute<'_> {
    /// Each output's copy of statement unit k, `u` (as TransactionFilter(empty_transactions=DROP)
    /// cuts it: the GTID and XID always, each Query with its context events by its key's answer,
    /// nothing when no Query is kept), or false when Python must route it.
    fn copies(&self, buf: &[u8], k: usize, copies: &mut Vec<Copy>) -> bool {
        let Some(pieces) = self.units.of(k) else {
            return false;
        };
        // No output yet (by schema, before a table or a keyed statement made one): nothing to
        // answer with, and a unit routed to no output would be lost. Python routes it (a
        // statement of no default database: to the unassigned output).
        if self.keeps.is_empty() {
            return false;
        }
        if !self.framing
            && pieces
                .iter()
                .any(|p| p.key == ALWAYS && buf.get(p.start() + 4) == Some(&QUERY))
        {
            return false;
        }
        for keep in &self.keeps {
            // KEEP_ASK: Python routes the unit (by schema, a statement of no default
            // database goes to the unassigned output, which the walk does not write).
            let Some((content, kept)) = self.units.answer(k, keep) else {
                return false;
            };
            copies.push(if kept == content {
                Copy::Whole
            } else if kept == 0 {
                Copy::Nothing
            } else {
                match self.units.partial(k, buf, keep) {
                    Some((bytes, _)) => Copy::Part(bytes),
                    None => return false,
                }
            });
        }
        true
    }
}

/// Routes units[from..] while each is a complete fast MariaDB unit, or with `mysql` a complete
/// fast MySQL one (`split_mysql`), with at least one Table_map whose name ids every keep answers
/// (KEEP_DROP or KEEP_KEEP) and whose copies need no STMT_END_F moved: the units Python's Router
/// would cut with TransactionFilter(empty_transactions=DROP). A unit without tables (it goes to
/// the unassigned output) or anything else stops the walk there; with `stmt`, MariaDB statement
/// units by their keys too (`StmtRoute::copies`).
#[allow(clippy::too_many_arguments)]
pub fn route(
    buf: &[u8],
    units: &[Unit],
    tables: &[u32],
    keeps: &[&[u8]],
    counted: &[bool],
    bases: &[u64],
    from: usize,
    stmt: Option<&StmtRoute>,
    mysql: Option<&MysqlRoute>,
) -> Routed {
    let n = keeps.len();
    let mut outs: Vec<Sent> = (0..n).map(|_| Sent::default()).collect();
    let mut ends: Vec<Vec<u64>> = vec![Vec::new(); n];
    let mut copies: Vec<Copy> = Vec::with_capacity(n);
    let mut none = 0u64;
    let mut i = from;
    'units: while i < units.len() {
        let u = &units[i];
        copies.clear();
        if u.end > buf.len() {
            break;
        }
        let mariadb = u.flags & F_MARIADB_GTID != 0;
        let my = mysql.filter(|_| !mariadb && is_mysql_unit(u.flags));
        let by_keys = u.flags & ROUTED != ROUTED || !(mariadb || my.is_some());
        if by_keys {
            let taken = stmt
                .is_some_and(|st| u.flags & F_MARIADB_GTID != 0 && st.copies(buf, i, &mut copies));
            if !taken {
                break;
            }
        } else {
            let (lo, hi) = (u.tables_lo as usize, u.tables_hi as usize);
            if lo >= hi || hi > tables.len() {
                break;
            }
            let ids = &tables[lo..hi];
            // A MySQL unit's BEGIN is framing: kept with its GTID (`unit_cut::cut`).
            if my.is_some() && body_start(buf, u.start, u.gtid_size, u.end, u.flags).is_none() {
                break;
            }
            let crc = my.is_some_and(|m| m.crc);
            for (o, keep) in keeps.iter().enumerate() {
                let Some((all, nothing)) = answer(ids, keep) else {
                    break 'units;
                };
                let mut copy = match (all, nothing) {
                    (true, _) => Copy::Whole,
                    (_, true) => Copy::Nothing,
                    // (None: a statement partly kept, whose STMT_END_F would move)
                    _ => match cut(buf, u, ids, keep, crc) {
                        Some((bytes, _)) => Copy::Part(bytes),
                        None => break 'units,
                    },
                };
                // A MySQL copy's BEGIN may take the output's schema (`MysqlRoute::copy`).
                let bytes = match &copy {
                    Copy::Part(bytes) => &bytes[..],
                    _ => &buf[u.start..u.end],
                };
                match my.filter(|_| !nothing).map(|m| m.copy(bytes, o)) {
                    Some(None) => break 'units,
                    Some(Some(Some(made))) => copy = Copy::Part(made),
                    _ => {}
                }
                copies.push(copy);
            }
        }
        let mut written = false; // to a counted output
        for (o, copy) in copies.drain(..).enumerate() {
            match copy {
                Copy::Whole => outs[o].buf_piece(0, u.start, u.end), // a run of units: one piece
                Copy::Part(bytes) => outs[o].own_piece(&bytes),
                Copy::Nothing => continue,
            }
            ends[o].push(bases.get(o).copied().unwrap_or(0) + outs[o].out_len as u64);
            written |= counted.get(o).copied().unwrap_or(true);
        }
        none += !written as u64;
        i += 1;
    }
    Routed {
        next: i,
        outs,
        ends,
        none,
    }
}

/// Offsets in buf[start..stop] (whole events back to back) of the GTID events a series' next
/// GTID state needs, in the order the series writer's tracker takes them: every MySQL GTID
/// event, and of MariaDB's the last of each (domain, server_id), placed where the pair first
/// appears (a Gtid_list keeps the last seq_no of each pair, in insertion order). Stops at an
/// event that does not fit.
pub fn gtid_marks(buf: &[u8], start: usize, stop: usize) -> Vec<u64> {
    let mut out = Vec::new();
    // Where each MariaDB (domain, server_id) was placed in `out`, and the last GTID's.
    let mut placed: std::collections::HashMap<(u32, u32), usize> = Default::default();
    let mut prev: Option<((u32, u32), usize)> = None;
    for (at, _) in events(buf, start, stop) {
        let t = buf[at + 4];
        if t == MARIADB_GTID {
            let server = u32_at(buf, at + 5).unwrap_or(0);
            let domain = u32_at(buf, at + HEADER_LEN + 8).unwrap_or(0);
            let pair = (domain, server);
            // (a run of one pair's GTIDs, the common case, hashes its pair once)
            let slot = match prev {
                Some((p, slot)) if p == pair => slot,
                _ => *placed.entry(pair).or_insert_with(|| {
                    out.push(0);
                    out.len() - 1
                }),
            };
            out[slot] = at as u64;
            prev = Some((pair, slot));
        } else if matches!(t, GTID | ANONYMOUS_GTID | GTID_TAGGED) {
            out.push(at as u64);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(t: u8, server: u32, body: &[u8]) -> Vec<u8> {
        crate::test_events::event_from(t, server, 0, body)
    }

    fn mariadb_gtid(server: u32, seq: u64, domain: u32) -> Vec<u8> {
        let mut body = seq.to_le_bytes().to_vec();
        body.extend_from_slice(&domain.to_le_bytes());
        body.push(0);
        event(MARIADB_GTID, server, &body)
    }

    #[test]
    fn gtid_marks_keep_the_last_of_each_pair_where_it_first_appears() {
        let mut buf = Vec::new();
        let mut offsets = Vec::new();
        for (server, seq, domain) in [(1, 5, 0), (2, 3, 0), (1, 6, 0), (1, 1, 7)] {
            offsets.push(buf.len() as u64);
            buf.extend(mariadb_gtid(server, seq, domain));
            buf.extend(event(XID, server, &[0; 8]));
        }
        let marks = gtid_marks(&buf, 0, buf.len());
        assert_eq!(marks, vec![offsets[2], offsets[1], offsets[3]]);
        assert_eq!(gtid_marks(&buf, 0, buf.len() - 1).len(), 3); // the last XID does not fit
    }

    #[test]
    fn gtid_marks_keep_every_mysql_gtid() {
        let mut buf = event(GTID, 1, &[0; 20]);
        buf.extend(event(GTID, 1, &[0; 20]));
        assert_eq!(
            gtid_marks(&buf, 0, buf.len()),
            vec![0, (HEADER_LEN + 20) as u64]
        );
    }

    #[test]
    fn route_stops_at_a_unit_it_does_not_take() {
        let units = vec![Unit::default()];
        let r = route(
            &[],
            &units,
            &[],
            &[&[1u8][..]],
            &[true],
            &[0],
            0,
            None,
            None,
        );
        assert_eq!(r.next, 0);
        assert!(r.outs[0].pieces.is_empty() && r.outs[0].out_len == 0);
    }
}
