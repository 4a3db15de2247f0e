//! rename_db.rs's tests: units and events renamed by hand-made names.
use super::*;

fn event(kind: u8, body: &[u8], crc: bool) -> Vec<u8> {
    let size = HEADER_LEN + body.len() + if crc { 4 } else { 0 };
    let mut e = vec![0u8; HEADER_LEN];
    e[4] = kind;
    e[9..13].copy_from_slice(&(size as u32).to_le_bytes());
    e[13..17].copy_from_slice(&777u32.to_le_bytes());
    e.extend_from_slice(body);
    if crc {
        let c = crc32fast::hash(&e);
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

/// `unit` renamed as `Renamer` and `write` rename it: the events renamed and the bytes.
fn rename_unit(unit: &[u8], r: &DbRenames) -> Result<(u64, Vec<u8>), Declined> {
    let mut renamer = Renamer::new(r);
    renamer.unit(unit, (0, unit.len()))?;
    let made = renamer.made(unit, (0, unit.len()));
    Ok((renamer.edits.len() as u64, made))
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
        let want = [
            query(b"crm_rw", b"UPDATE crm.t SET a=1", crc),
            table_map(b"crm_rw", b"t", crc),
            event(30, b"rows", crc),
        ]
        .concat();
        assert_eq!(rename_unit(&unit, &renames(crc)), Ok((2, want)));
    }
}

#[test]
fn units_in_a_row_are_written_at_once_names_growing_and_shrinking() {
    let mut r = renames(true);
    r.map.insert(b"logs_archive".to_vec(), b"l".to_vec());
    let units = [
        vec![query(b"", b"BEGIN", true), table_map(b"crm", b"t", true)],
        vec![table_map(b"shop", b"t", true), event(30, b"rows", true)],
        vec![
            query(b"logs_archive", b"DELETE FROM x", true),
            table_map(b"crm", b"u", true),
            query(b"shop", b"SELECT 1", true),
            table_map(b"logs_archive", b"t", true),
        ],
    ];
    let buf = units.concat().concat();
    let mut renamer = Renamer::new(&r);
    let mut at = 0;
    let mut renamed = vec![];
    for unit in &units {
        let len = unit.concat().len();
        let before = renamer.edits.len();
        renamed.push(
            renamer
                .unit(&buf, (at, at + len))
                .map(|()| renamer.edits.len() - before),
        );
        at += len;
    }
    assert_eq!(renamed, [Ok(1), Ok(0), Ok(3)]);
    let want = [
        query(b"", b"BEGIN", true),
        table_map(b"crm_rw", b"t", true),
        table_map(b"shop", b"t", true),
        event(30, b"rows", true),
        query(b"l", b"DELETE FROM x", true),
        table_map(b"crm_rw", b"u", true),
        query(b"shop", b"SELECT 1", true),
        table_map(b"l", b"t", true),
    ]
    .concat();
    assert_eq!(renamer.made(&buf, (0, buf.len())), want);
}

#[test]
fn a_unit_no_rule_renames_is_left_alone_and_an_unknown_name_declines() {
    let unit = [
        query(b"shop", b"UPDATE t SET a=1", true),
        table_map(b"shop", b"t", true),
    ]
    .concat();
    assert_eq!(rename_unit(&unit, &renames(true)), Ok((0, unit.clone())));
    let unknown = [
        table_map(b"crm", b"t", true),
        query(b"logs", b"UPDATE t SET a=1", true),
    ]
    .concat();
    let r = renames(true);
    let mut renamer = Renamer::new(&r);
    assert_eq!(renamer.unit(&unknown, (0, unknown.len())), Err(Declined));
    assert!(renamer.edits.is_empty(), "a unit declined leaves no edit");
    let none = query(b"", b"BEGIN", true);
    assert_eq!(rename_unit(&none, &renames(true)), Ok((0, none.clone())));
    let cut = &unit[..unit.len() - 1];
    assert_eq!(rename_unit(cut, &renames(true)), Err(Declined));
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
                let c = crc32fast::hash(&e);
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
