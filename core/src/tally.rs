//! What a bandwidth experiment reports beside its totals, read off a UnitList in one pass each:
//! where binlog time crosses a bucket (an hour: which units fall in it), where it ends, the bytes
//! of each table's Table_map and Rows events and of each statement unit's statements (which
//! tables cost the bandwidth). Only the list's records and the statement units' pieces are
//! read; never a row image.

use std::collections::HashMap;

use crate::scan::{CONTROL, F_FAST};
use crate::stmt_units::{StmtUnits, ALWAYS};
use crate::unit_list::UnitList;

/// A buffer's bytes by table (`table_bytes`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TableBytes {
    /// Per name id: its Table_map events and the Rows events under the table their table id
    /// maps in the same unit.
    pub by_name: Vec<u64>,
    /// Per name id: its share of the envelopes of the fast units that write it (a unit's events
    /// but its Table_maps and Rows: GTID, BEGIN, annotations, XID), split evenly between the
    /// tables the unit's Table_maps name, in their order, the bytes a division leaves to the
    /// first (`statement_tables.share_envelope`).
    pub envelope: Vec<u64>,
    /// The fast units' bytes but their tables' (`by_name`), and of those the envelopes shared
    /// out (`envelope`); the rest stays the framing of units that write no table.
    pub framing: u64,
    pub shared: u64,
    /// The bytes of the units that are not fast.
    pub other: u64,
    /// (first unit, bucket) for each run of units whose first event's timestamp divided by the
    /// `seconds` asked is the same bucket; a unit whose timestamp is 0 (an artificial event)
    /// joins the run before it. (Read in the same walk: a second one waited on memory again for
    /// every unit's first bytes.)
    pub cuts: Vec<(usize, u32)>,
}

/// Bytes per table of the fast units (see `TableBytes`), name ids below `names`, and the
/// units' runs by `seconds` of binlog time: all from the list's records (the scanner's bytes per
/// Table_map and its time runs), no unit read (each unit's first bytes, and a unit of several
/// tables' every event, were a cache miss: a quarter of a small-transaction count).
pub fn table_bytes(plan: &UnitList, names: usize, seconds: u32) -> TableBytes {
    let mut t = TableBytes {
        by_name: vec![0u64; names],
        envelope: vec![0u64; names],
        ..TableBytes::default()
    };
    let seconds = seconds.max(1);
    for &(k, ts) in plan.times() {
        let bucket = ts / seconds;
        if t.cuts.last().map(|c| c.1) != Some(bucket) {
            t.cuts
                .push((if t.cuts.is_empty() { 0 } else { k as usize }, bucket));
        }
    }
    let mut written: Vec<u32> = Vec::new();
    for (k, u) in plan.units.iter().enumerate() {
        let size = u.end().saturating_sub(u.start()) as u64;
        if !u.tabled {
            t.other += size;
            continue;
        }
        // A fast unit is `GTID [BEGIN] {Annotate|Rows_query|Table_map|Rows}* XID`: its
        // Table_maps and Rows events are its tables' (a Rows event its table id's latest
        // Table_map's), the rest its envelope, shared between the tables it writes.
        let (tids, bytes) = plan.maps(k);
        let rows: u64 = bytes.iter().map(|&b| u64::from(b)).sum();
        let envelope = size.saturating_sub(rows);
        if let Some(&n) = tids.first().filter(|n| tids.iter().all(|m| m == *n)) {
            // (one table, as most units: no division)
            let known = (n as usize) < names;
            if known {
                t.by_name[n as usize] += rows;
                t.envelope[n as usize] += envelope;
                t.shared += envelope;
            }
            t.framing += if known { envelope } else { size };
            continue;
        }
        let mut counted = 0u64;
        written.clear();
        for (&n, &b) in tids.iter().zip(bytes) {
            if let Some(slot) = t.by_name.get_mut(n as usize) {
                *slot += u64::from(b);
                counted += u64::from(b);
                if !written.contains(&n) {
                    written.push(n);
                }
            }
        }
        t.framing += size.saturating_sub(counted);
        if written.is_empty() || envelope == 0 {
            continue;
        }
        share(envelope, written.iter().copied(), &mut t.envelope);
        t.shared += envelope;
    }
    t
}

/// `envelope` shared out evenly among the slots `to` of `into`, the first taking what is left.
fn share(envelope: u64, to: impl ExactSizeIterator<Item = u32>, into: &mut [u64]) {
    let n = to.len() as u64;
    let (each, left) = match n {
        1 => (envelope, 0), // (most units write one table: no division)
        _ => (envelope / n.max(1), envelope % n.max(1)),
    };
    for (m, slot) in to.enumerate() {
        into[slot as usize] += each + if m == 0 { left } else { 0 };
    }
}

/// `statement_tables`' answer for units 0..n of a list: what the bytes of its statement units
/// decided by keys (`StmtUnits`) go to, per group of keys (see there), and the units it leaves.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct StatementTables {
    /// Per group: the bytes of its statements, each with the context events before it.
    pub payload: Vec<u64>,
    /// Per group: its share of the envelopes (GTID, framing Queries, XID) of the units whose
    /// first write of its table it made.
    pub envelope: Vec<u64>,
    /// The envelopes of units that write no table (none here: a unit by keys holds a statement).
    pub framing: u64,
    /// The control units' bytes.
    pub other: u64,
    /// Per key id: the index of the first piece (in `StmtUnits::pieces` order, the units' and
    /// their statements' order) of that key, u64::MAX where the key is not met in units 0..n.
    pub first: Vec<u64>,
    /// The units neither fast, nor control, nor decided by keys: read elsewhere (Python).
    pub left: Vec<u32>,
}

/// The bytes of the statement units among units 0..n of `plan` by table, as `experiment`'s bytes
/// by table count them (spark_jobs/tasks/statement_tables.py `_unit_tables`): each statement,
/// with the context events before it, under its key's group (`group_of`: key id -> group, a
/// group writing one table, `table_of`: group -> table id); each unit's envelope (its other
/// pieces: GTID, BEGIN, XID or COMMIT) split evenly between the tables it writes in the order
/// first written, each table's share under the group that first wrote it in the unit, the
/// bytes a division leaves to the first. A key without a group leaves its unit to Python.
pub fn statement_tables(
    plan: &UnitList,
    st: &StmtUnits,
    group_of: &[u32],
    table_of: &[u32],
    n: usize,
) -> StatementTables {
    let groups = table_of.len();
    let mut out = StatementTables {
        payload: vec![0; groups],
        envelope: vec![0; groups],
        first: vec![u64::MAX; st.keys.len()],
        ..Default::default()
    };
    let mut written: Vec<(u32, u32)> = Vec::new(); // (table, group) of one unit, in order
    for (k, u) in plan.units.iter().enumerate().take(n) {
        if u.flags & F_FAST != 0 {
            continue;
        }
        if u.kind == CONTROL {
            out.other += u.end().saturating_sub(u.start()) as u64;
            continue;
        }
        let Some(pieces) = st.of(k) else {
            out.left.push(k as u32);
            continue;
        };
        let known = pieces.iter().all(|p| {
            p.key == ALWAYS
                || group_of
                    .get(p.key as usize)
                    .is_some_and(|g| table_of.get(*g as usize).is_some())
        });
        if !known {
            out.left.push(k as u32);
            continue;
        }
        let lo = st.bounds[k].0 as u64;
        let mut envelope = 0u64;
        written.clear();
        for (m, p) in pieces.iter().enumerate() {
            let size = p.end().saturating_sub(p.start()) as u64;
            if p.key == ALWAYS {
                envelope += size;
                continue;
            }
            let g = group_of[p.key as usize];
            out.payload[g as usize] += size;
            if let Some(first) = out.first.get_mut(p.key as usize) {
                *first = (*first).min(lo + m as u64);
            }
            let table = table_of[g as usize];
            if !written.iter().any(|w| w.0 == table) {
                written.push((table, g));
            }
        }
        if written.is_empty() {
            out.framing += envelope;
            continue;
        }
        share(envelope, written.iter().map(|w| w.1), &mut out.envelope);
    }
    out
}

/// A group met among a list's statement units (`statement_groups`): its (caller's) id, its
/// statements' bytes, its envelope share, and the key id whose statement it was first met in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Met {
    pub group: u32,
    pub payload: u64,
    pub envelope: u64,
    pub key: u32,
}

/// `statement_tables` under a caller's groups numbered across lists (`group_of`: a group per key
/// id, u32::MAX none; `table_of`: a table per group id): the groups met in units 0..n, each
/// once, in the order first met (ties to the lower key id), with the list's framing, control
/// and left units. The work is sized by the list's keys, not by every group the caller knows.
pub fn statement_groups(
    plan: &UnitList,
    st: &StmtUnits,
    group_of: &[u32],
    table_of: &[u32],
    n: usize,
) -> (Vec<Met>, StatementTables) {
    let mut local: HashMap<u32, u32> = HashMap::new(); // the caller's group -> a dense id here
    let mut groups: Vec<u32> = Vec::new(); // dense id -> the caller's group
    let dense: Vec<u32> = (0..st.keys.len())
        .map(|k| {
            match group_of
                .get(k)
                .filter(|g| table_of.get(**g as usize).is_some())
            {
                Some(&g) => *local.entry(g).or_insert_with(|| {
                    groups.push(g);
                    groups.len() as u32 - 1
                }),
                None => u32::MAX,
            }
        })
        .collect();
    let tables: Vec<u32> = groups.iter().map(|&g| table_of[g as usize]).collect();
    let mut t = statement_tables(plan, st, &dense, &tables, n);
    let mut first: Vec<(u64, u32)> = vec![(u64::MAX, u32::MAX); groups.len()];
    for (k, (&d, &at)) in dense.iter().zip(&t.first).enumerate() {
        if let Some(slot) = first.get_mut(d as usize) {
            *slot = (*slot).min((at, k as u32));
        }
    }
    let mut met: Vec<(u64, u32, u32)> = (first.iter().enumerate())
        .filter(|(_, f)| f.0 != u64::MAX)
        .map(|(d, &(at, k))| (at, k, d as u32))
        .collect();
    met.sort_unstable();
    let met = met
        .into_iter()
        .map(|(_, key, d)| Met {
            group: groups[d as usize],
            payload: t.payload[d as usize],
            envelope: t.envelope[d as usize],
            key,
        })
        .collect();
    (t.payload, t.envelope) = (Vec::new(), Vec::new());
    (met, t)
}

/// `met` (`statement_groups`') added into the caller's running sums by group (`sums`: 16 bytes a
/// group, its statements' bytes and its envelopes' share, u64 little-endian), and kept only where
/// the caller has something to put in place: a group its sums had not met (its statements' bytes
/// were 0), or its first envelope share. A chunk's later segments meet the same few hundred
/// groups; the caller then reads few of them, not every one a segment. Err(group): a group past
/// the sums' end (none added).
pub fn add_into(met: &mut Vec<Met>, sums: &mut [u8]) -> Result<(), u32> {
    if let Some(past) = met
        .iter()
        .find(|m| 16 * (m.group as usize) + 16 > sums.len())
    {
        return Err(past.group);
    }
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    met.retain(|m| {
        let cell = &mut sums[16 * m.group as usize..][..16];
        let (payload, envelope) = (word(&cell[..8]), word(&cell[8..]));
        cell[..8].copy_from_slice(&payload.wrapping_add(m.payload).to_le_bytes());
        cell[8..].copy_from_slice(&envelope.wrapping_add(m.envelope).to_le_bytes());
        payload == 0 || (envelope == 0 && m.envelope > 0)
    });
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::scan::{Unit, F_COMPLETE, F_MARIADB_GTID};
    use crate::test_events::{event, query};
    use crate::types::{INTVAR, TABLE_MAP, XID};

    /// A statement unit: GTID, BEGIN, the statements (an INTVAR before the second), XID.
    pub(crate) fn unit(buf: &mut Vec<u8>, statements: &[&str]) -> (Unit, Vec<usize>) {
        let start = buf.len();
        buf.extend(event(162, &[0u8; 13]));
        let gtid = buf.len() - start;
        buf.extend(query("db1", "BEGIN"));
        let mut sizes = Vec::new();
        for (k, sql) in statements.iter().enumerate() {
            let at = buf.len();
            if k == 1 {
                buf.extend(event(INTVAR, &[0u8; 9]));
            }
            buf.extend(query("db1", sql));
            sizes.push(buf.len() - at);
        }
        buf.extend(event(XID, &[0u8; 8]));
        let events = 3 + statements.len() as u32 + u32::from(statements.len() > 1);
        let u = Unit {
            start,
            end: buf.len(),
            events,
            kind: 1,
            flags: F_COMPLETE | F_MARIADB_GTID,
            gtid_size: gtid as u32,
            ..Default::default()
        };
        (u, sizes)
    }

    /// A fast row unit writing tables `names` (one Table_map and one Rows event each, ids 1..),
    /// after a GTID and an annotation of `note` bytes, ended by an XID; with each Table_map's
    /// bytes and its Rows event's, as the scanner records them, and the unit's envelope.
    fn row_unit(buf: &mut Vec<u8>, names: &[u32], note: usize) -> (Unit, Vec<u32>, u64) {
        let start = buf.len();
        buf.extend(event(162, &[0u8; 13]));
        buf.extend(event(crate::types::ANNOTATE_ROWS, &vec![b'x'; note]));
        let mut bytes = Vec::new();
        for (k, _) in names.iter().enumerate() {
            let id = [k as u8 + 1, 0, 0, 0, 0, 0];
            let map = event(TABLE_MAP, &[&id[..], &[0u8; 10]].concat());
            let rows = event(30, &[&id[..], &[1u8; 20]].concat());
            bytes.push((map.len() + rows.len()) as u32);
            buf.extend([map, rows].concat());
        }
        let payload: u64 = bytes.iter().map(|&b| u64::from(b)).sum();
        let last = buf.len();
        buf.extend(event(XID, &[0u8; 8]));
        let u = Unit {
            start,
            end: buf.len(),
            last,
            events: 3 + 2 * names.len() as u32,
            kind: 1,
            flags: F_COMPLETE | F_MARIADB_GTID | crate::scan::F_FAST,
            gtid_size: 32,
            ..Default::default()
        };
        (u, bytes, (buf.len() - start) as u64 - payload)
    }

    /// A row unit's envelope (its events but Table_maps and Rows) is split evenly between the
    /// distinct tables its Table_maps name, in order, the division's remainder to the first; a
    /// unit that names none leaves its envelope in the framing.
    #[test]
    fn row_units_share_their_envelopes_between_their_tables() {
        let mut buf = Vec::new();
        let (a, a_bytes, ea) = row_unit(&mut buf, &[2, 0, 2, 1], 7);
        let (b, b_bytes, eb) = row_unit(&mut buf, &[1], 11);
        let (c, _, ec) = row_unit(&mut buf, &[], 5);
        let mut list = UnitList::default();
        let (mut a, mut b) = (a, b);
        (a.tables_lo, a.tables_hi, b.tables_lo, b.tables_hi) = (0, 4, 4, 5);
        list.add(
            b"f",
            0,
            &[a, b, c],
            &[2, 0, 2, 1, 1],
            &[a_bytes, b_bytes].concat(),
        );
        let t = table_bytes(&list, 3, 60);
        assert_ne!(ea % 3, 0, "a remainder to give");
        let each = ea / 3;
        assert_eq!(t.envelope, vec![each, each + eb, each + ea % 3]);
        assert_eq!(t.shared, ea + eb);
        assert_eq!(t.framing, ea + eb + ec);
        assert_eq!(t.by_name.iter().sum::<u64>() + t.framing, buf.len() as u64);
    }

    #[test]
    fn statement_units_by_table_with_their_envelopes() {
        let mut buf = Vec::new();
        let (a, a_sizes) = unit(&mut buf, &["UPDATE t SET a=1", "INSERT INTO u VALUES (1)"]);
        let (b, b_sizes) = unit(&mut buf, &["UPDATE t SET a=2", "UPDATE t SET a=3"]);
        let control = Unit {
            start: buf.len(),
            end: buf.len() + 40,
            events: 1,
            kind: CONTROL,
            ..Default::default()
        };
        buf.extend(event(4, &[0u8; 21])); // a Rotate
        let mut list = UnitList::default();
        list.add(b"f", 0, &[a.clone(), b.clone(), control], &[], &[]);
        let st = StmtUnits::build(&list, &[&buf], &[(13, 0, 0)]);
        // Keys: UPDATE t, INSERT u; key 0 in group 0 (table 0), key 1 in group 1 (table 1).
        assert_eq!((st.units, st.keys.len()), (2, 2));
        let t = statement_tables(&list, &st, &[0, 1], &[0, 1], 3);
        let envelope =
            |u: &Unit, sizes: &[usize]| (u.end - u.start - sizes.iter().sum::<usize>()) as u64;
        let (ea, eb) = (envelope(&a, &a_sizes), envelope(&b, &b_sizes));
        assert_eq!(
            t.payload,
            vec![
                (a_sizes[0] + b_sizes[0] + b_sizes[1]) as u64,
                a_sizes[1] as u64
            ]
        );
        assert_eq!(t.envelope, vec![ea / 2 + ea % 2 + eb, ea / 2]);
        assert_eq!((t.framing, t.other, t.left.len()), (0, 40, 0));
        // Pieces: GTID, BEGIN, then the first statement of each key.
        assert_eq!(t.first, vec![2, 3]);
        // Both keys in one group of one table: unit a's envelope all to it.
        let one = statement_tables(&list, &st, &[0, 0], &[0], 3);
        assert_eq!(one.envelope, vec![ea + eb]);
        // Groups numbered by the caller (7 and 3, tables 0 and 1 of four): met in first order.
        let (met, rest) = statement_groups(&list, &st, &[7, 3], &[9, 9, 9, 1, 9, 9, 9, 0], 3);
        let want = |group, d: usize, key| Met {
            group,
            payload: t.payload[d],
            envelope: t.envelope[d],
            key,
        };
        assert_eq!(met, vec![want(7, 0, 0), want(3, 1, 1)]);
        assert_eq!((rest.framing, rest.other, rest.left.len()), (0, 40, 0));
        // Two keys in one group: met once, from the first key.
        let (met, _) = statement_groups(&list, &st, &[5, 5], &[0, 0, 0, 0, 0, 0], 3);
        assert_eq!(
            met.iter().map(|m| (m.group, m.key)).collect::<Vec<_>>(),
            vec![(5, 0)]
        );
        // A group past `table_of` (or u32::MAX) is none: its units left to Python.
        let (met, rest) = statement_groups(&list, &st, &[0, u32::MAX], &[0], 3);
        assert_eq!((met.len(), rest.left), (1, vec![0]));
        // A key without a group leaves its units to Python.
        let left = statement_tables(&list, &st, &[0], &[0], 3);
        assert_eq!(
            (left.left, left.payload),
            (vec![0], vec![(b_sizes[0] + b_sizes[1]) as u64])
        );
    }

    /// `add_into` adds each group met into its cell and keeps the groups the sums had not met,
    /// or met without an envelope share that now has one; a group past the end adds nothing.
    #[test]
    fn met_groups_are_added_into_the_sums_and_kept_where_new() {
        let met = |group, payload, envelope| Met {
            group,
            payload,
            envelope,
            key: group,
        };
        let cell = |sums: &[u8], g: usize| {
            let w = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
            (
                w(&sums[16 * g..16 * g + 8]),
                w(&sums[16 * g + 8..16 * g + 16]),
            )
        };
        let mut sums = vec![0u8; 16 * 4];
        let mut first = vec![met(2, 10, 0), met(0, 5, 3)];
        add_into(&mut first, &mut sums).unwrap();
        assert_eq!(first, vec![met(2, 10, 0), met(0, 5, 3)]); // (both new)
        let mut second = vec![met(0, 1, 1), met(2, 4, 6), met(3, 7, 0), met(2, 1, 0)];
        add_into(&mut second, &mut sums).unwrap();
        // (0 met with a share before: not again; 2's first share; 3 new; 2 again: not)
        assert_eq!(second, vec![met(2, 4, 6), met(3, 7, 0)]);
        assert_eq!(cell(&sums, 0), (6, 4));
        assert_eq!(cell(&sums, 1), (0, 0));
        assert_eq!(cell(&sums, 2), (15, 6));
        assert_eq!(cell(&sums, 3), (7, 0));
        let before = sums.clone();
        let mut past = vec![met(1, 1, 1), met(4, 1, 1)];
        assert_eq!(add_into(&mut past, &mut sums), Err(4));
        assert_eq!(sums, before);
    }
}
