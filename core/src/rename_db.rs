//! replicate-rewrite-db written into events, the one writer of renamed names (issue #80): the
//! compiled relay run's and `filter`'s assembly's units (`rename_unit`, for the names a map
//! gives), and every event Python renames (`rename_event`: `dumpfilter.codec.rename`, for the
//! MySQL-protocol endpoint's replicas, the units the walks leave to Python, and WL#2516's REWRITE
//! patterns, which rename a Table_map's table too). As a replica's applier renames (log_event.cc's
//! set_thd_db, Table_map_log_event::do_apply_event): a Query's (compressed or not: only its text
//! is compressed) or an Execute_load_query's default database and a Table_map's database, never a
//! name inside a statement's text. The event's size changes with the name; its log_pos stays the
//! master's and its CRC32 is made again. A name the map does not hold stops a unit's run there:
//! Python renames that unit and teaches the map its names (`dumpfilter.slave.receive`).

use std::collections::HashMap;

use crate::crc::crc32;
use crate::le::u32_at;
use crate::types::HEADER_LEN;

const QUERY: u8 = 2;
const EXECUTE_LOAD_QUERY: u8 = 18;
const TABLE_MAP: u8 = 19;
const QUERY_COMPRESSED: u8 = 165;

/// The renames of one slave's rules over the names met so far, and the format to read them with.
#[derive(Debug, Default)]
pub struct DbRenames {
    /// The master's database name -> the one the replica applies (itself where no rule renames).
    pub map: HashMap<Vec<u8>, Vec<u8>>,
    /// Post-header lengths of QUERY, EXECUTE_LOAD_QUERY and TABLE_MAP, and the checksum length.
    pub query_post: usize,
    pub load_post: usize,
    pub table_map_post: usize,
    pub crc_len: usize,
}

/// Why a unit cannot be renamed here: a name the map does not hold, or an event it cannot read.
#[derive(Debug, PartialEq, Eq)]
pub struct Declined;

/// Where an event's database name lies in it (its range), or None where it has none.
fn db_span(event: &[u8], r: &DbRenames) -> Result<Option<(usize, usize)>, Declined> {
    let body = HEADER_LEN;
    let span = match *event.get(4).ok_or(Declined)? {
        kind @ (QUERY | QUERY_COMPRESSED | EXECUTE_LOAD_QUERY) => {
            let len = *event.get(body + 8).ok_or(Declined)? as usize;
            let status = u16::from_le_bytes([
                *event.get(body + 11).ok_or(Declined)?,
                *event.get(body + 12).ok_or(Declined)?,
            ]) as usize;
            if len == 0 {
                return Ok(None);
            }
            let post = if kind == EXECUTE_LOAD_QUERY {
                r.load_post
            } else {
                r.query_post
            };
            let at = body + post + status;
            (at, at + len)
        }
        TABLE_MAP => {
            let at = body + r.table_map_post;
            let len = *event.get(at).ok_or(Declined)? as usize;
            (at + 1, at + 1 + len)
        }
        _ => return Ok(None),
    };
    if span.1 + r.crc_len > event.len() {
        return Err(Declined);
    }
    Ok(Some(span))
}

/// Appends `event` to `out` with its database name (at `span`) written as `db` and, a Table_map's,
/// its table as `table`; its size and checksum made again.
fn write_renamed(
    event: &[u8],
    (lo, hi): (usize, usize),
    db: &[u8],
    table: Option<&[u8]>,
    crc_len: usize,
    out: &mut Vec<u8>,
) -> Result<(), Declined> {
    let table_map = event[4] == TABLE_MAP;
    let mut rest = hi; // what follows the database name, as it is
    let e0 = out.len();
    out.extend_from_slice(&event[..lo]);
    out.extend_from_slice(db);
    if let Some(table) = table.filter(|_| table_map) {
        // NUL, the table's length, the table
        rest = hi + 2 + *event.get(hi + 1).ok_or(Declined)? as usize;
        if rest + crc_len > event.len() {
            return Err(Declined); // (the caller drops what was appended)
        }
        out.extend_from_slice(&[0, table.len() as u8]);
        out.extend_from_slice(table);
    }
    out.extend_from_slice(&event[rest..event.len() - crc_len]);
    out[e0 + if table_map { lo - 1 } else { HEADER_LEN + 8 }] = db.len() as u8;
    let new_size = out.len() - e0 + crc_len;
    out[e0 + 9..e0 + 13].copy_from_slice(&(new_size as u32).to_le_bytes());
    if crc_len == 4 {
        let c = crc32(&out[e0..]);
        out.extend_from_slice(&c.to_le_bytes());
    }
    Ok(())
}

/// One event (`post`: its kind's post-header length) with its database renamed `db` and, a
/// Table_map's, its table `table` (None: kept); None where it names no database or a name is
/// longer than a server writes (255 bytes), Err where it cannot be read.
pub fn rename_event(
    event: &[u8],
    db: &[u8],
    table: Option<&[u8]>,
    post: usize,
    crc_len: usize,
) -> Result<Option<Vec<u8>>, Declined> {
    if event.len() < HEADER_LEN + crc_len || u32_at(event, 9) != Some(event.len() as u32) {
        return Err(Declined);
    }
    let r = DbRenames {
        query_post: post,
        load_post: post,
        table_map_post: post,
        crc_len,
        ..DbRenames::default()
    };
    let Some(span) = db_span(event, &r)? else {
        return Ok(None);
    };
    if db.len() > 255 || table.is_some_and(|t| t.len() > 255) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(event.len() + db.len());
    write_renamed(event, span, db, table, crc_len, &mut out)?;
    Ok(Some(out))
}

/// The events of `unit` in turn: (offset, the event), or Declined where one is cut.
fn events(unit: &[u8]) -> impl Iterator<Item = Result<(usize, &[u8]), Declined>> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        if at == unit.len() {
            return None;
        }
        let size = u32_at(unit, at + 9).map_or(0, |s| s as usize);
        if size < HEADER_LEN || at + size > unit.len() {
            at = unit.len();
            return Some(Err(Declined));
        }
        let event = (at, &unit[at..at + size]);
        at += size;
        Some(Ok(event))
    })
}

/// The name `r.map` gives the database of `event` (at `span`), where it renames it.
fn renamed<'a>(
    event: &[u8],
    span: (usize, usize),
    r: &'a DbRenames,
) -> Result<Option<&'a [u8]>, Declined> {
    let new = r.map.get(&event[span.0..span.1]).ok_or(Declined)?;
    Ok((new.as_slice() != &event[span.0..span.1] && new.len() <= 255).then_some(new.as_slice()))
}

/// What `rename_unit` would do with `unit`: None where a database name it holds is not in the
/// map or an event is not read (a walk checks it before it takes a unit on: a unit it then
/// declines is Python's), else whether it renames any.
pub fn names_known(unit: &[u8], r: &DbRenames) -> Option<bool> {
    let mut renames = false;
    for e in events(unit) {
        let (_, event) = e.ok()?;
        if let Some(span) = db_span(event, r).ok()? {
            renames |= renamed(event, span, r).ok()?.is_some();
        }
    }
    Some(renames)
}

/// The unit `unit` (its events back to back) with each database name renamed as `r.map` says,
/// appended to `out`: Ok(events renamed), 0 (and nothing appended) where none is; Err where a
/// name is not in the map or an event cannot be read.
pub fn rename_unit(unit: &[u8], r: &DbRenames, out: &mut Vec<u8>) -> Result<u64, Declined> {
    let start = out.len();
    let done = rename_into(unit, r, out);
    if done.is_err() {
        out.truncate(start);
    }
    done
}

fn rename_into(unit: &[u8], r: &DbRenames, out: &mut Vec<u8>) -> Result<u64, Declined> {
    let mut renamed_events = 0u64;
    let mut copied = 0usize; // bytes of `unit` already in `out` (once the first rename is met)
    for e in events(unit) {
        let (at, event) = e?;
        let Some(span) = db_span(event, r)? else {
            continue;
        };
        if let Some(new) = renamed(event, span, r)? {
            out.extend_from_slice(&unit[copied..at]);
            write_renamed(event, span, new, None, r.crc_len, out)?;
            copied = at + event.len();
            renamed_events += 1;
        }
    }
    if renamed_events > 0 {
        out.extend_from_slice(&unit[copied..]);
    }
    Ok(renamed_events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: u8, body: &[u8], crc: bool) -> Vec<u8> {
        let size = HEADER_LEN + body.len() + if crc { 4 } else { 0 };
        let mut e = vec![0u8; HEADER_LEN];
        e[4] = kind;
        e[9..13].copy_from_slice(&(size as u32).to_le_bytes());
        e[13..17].copy_from_slice(&777u32.to_le_bytes());
        e.extend_from_slice(body);
        if crc {
            let c = crc32(&e);
            e.extend_from_slice(&c.to_le_bytes());
        }
        e
    }

    fn query(db: &[u8], sql: &[u8], crc: bool) -> Vec<u8> {
        let mut body = vec![0u8; 13];
        body[8] = db.len() as u8;
        body[11] = 2; // two bytes of status variables
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(db);
        body.push(0);
        body.extend_from_slice(sql);
        event(QUERY, &body, crc)
    }

    fn table_map(db: &[u8], table: &[u8], crc: bool) -> Vec<u8> {
        let mut body = vec![1u8, 0, 0, 0, 0, 0, 0, 0, db.len() as u8];
        body.extend_from_slice(db);
        body.extend_from_slice(&[0, table.len() as u8]);
        body.extend_from_slice(table);
        body.extend_from_slice(&[0, 1, 3]);
        event(TABLE_MAP, &body, crc)
    }

    fn renames(crc: bool) -> DbRenames {
        let mut map = HashMap::new();
        map.insert(b"crm".to_vec(), b"crm_rw".to_vec());
        map.insert(b"shop".to_vec(), b"shop".to_vec());
        DbRenames {
            map,
            query_post: 13,
            load_post: 26,
            table_map_post: 8,
            crc_len: if crc { 4 } else { 0 },
        }
    }

    #[test]
    fn renames_the_default_database_and_the_table_map_database_only() {
        for crc in [false, true] {
            let unit = [
                query(b"crm", b"UPDATE crm.t SET a=1", crc),
                table_map(b"crm", b"t", crc),
                event(30, b"rows", crc),
            ]
            .concat();
            let mut out = Vec::new();
            assert_eq!(rename_unit(&unit, &renames(crc), &mut out), Ok(2));
            let want = [
                query(b"crm_rw", b"UPDATE crm.t SET a=1", crc),
                table_map(b"crm_rw", b"t", crc),
                event(30, b"rows", crc),
            ]
            .concat();
            assert_eq!(out, want);
        }
    }

    #[test]
    fn a_unit_no_rule_renames_is_left_alone_and_an_unknown_name_declines() {
        let unit = [
            query(b"shop", b"UPDATE t SET a=1", true),
            table_map(b"shop", b"t", true),
        ]
        .concat();
        let mut out = vec![9u8];
        assert_eq!(rename_unit(&unit, &renames(true), &mut out), Ok(0));
        assert_eq!(out, vec![9u8]);
        let unknown = [
            table_map(b"shop", b"t", true),
            query(b"logs", b"UPDATE t SET a=1", true),
        ]
        .concat();
        assert_eq!(
            rename_unit(&unknown, &renames(true), &mut out),
            Err(Declined)
        );
        assert_eq!(out, vec![9u8]);
        assert_eq!(
            (
                names_known(&unit, &renames(true)),
                names_known(&unknown, &renames(true))
            ),
            (Some(false), None)
        );
        let none = query(b"", b"BEGIN", true);
        assert_eq!(rename_unit(&none, &renames(true), &mut out), Ok(0));
    }

    #[test]
    fn one_event_is_renamed_a_table_maps_table_too() {
        for crc in [false, true] {
            let crc_len = if crc { 4 } else { 0 };
            let e = rename_event(
                &table_map(b"db5", b"t3", crc),
                b"db7",
                Some(b"t_long"),
                8,
                crc_len,
            );
            assert_eq!(e, Ok(Some(table_map(b"db7", b"t_long", crc))));
            let compressed = |db: &[u8]| {
                let mut e = query(db, b"x", false);
                e[4] = QUERY_COMPRESSED; // (its text is compressed, its database is not)
                if crc {
                    let size = e.len() as u32 + 4;
                    e[9..13].copy_from_slice(&size.to_le_bytes());
                    let c = crc32(&e);
                    e.extend_from_slice(&c.to_le_bytes());
                }
                e
            };
            let got = rename_event(&compressed(b"crm"), b"crm_rw", Some(b"t"), 13, crc_len);
            assert_eq!(got, Ok(Some(compressed(b"crm_rw"))));
        }
        assert_eq!(
            rename_event(&query(b"", b"BEGIN", true), b"x", None, 13, 4),
            Ok(None)
        );
        assert_eq!(rename_event(&[0u8; 10], b"x", None, 13, 4), Err(Declined));
    }
}
