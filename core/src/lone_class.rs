//! Lone statements' classes (`UnitList.lone_queries` for spark_jobs' LoneUnits): a GTID-and-one-
//! statement unit's kind and the tables it updates under its default database, numbered by value
//! across segments. A DDL-heavy binlog's texts are each met once (`ALTER TABLE scratch_3_5 ADD
//! COLUMN c17 INT`, then `... c18 ...`) where their classes repeat: numbered here as the core reads
//! them, Python meets each class once, not each text (8,400 of the DDL-heavy pass's 16,870). A text
//! whose class Python reads from its whole parse (a CREATE or DROP TABLE, which the schema model
//! replays by its parse) is numbered by its text, in the same numbers: its CREATE and DROP TABLE
//! repeat. Python answers each number once (`resolved`: the caller's key, its code, how its units
//! replay), and the units of an answered number are answered here (`LoneQueries`' fast way).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::facts::{self, lex::QName};
use crate::stmt_keys::KeyHasher;

/// One class: the statement's kind (the `rules.statement_info.Kind` value) and the tables it
/// updates, each named by a database (the unit's default where the text gives none) and a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    pub kind: &'static str,
    pub tables: Vec<(Vec<u8>, Vec<u8>)>,
}

type Hasher = BuildHasherDefault<KeyHasher>;

/// Classes and declined texts numbered from 0 in the order first met, in one sequence. A text
/// whose class is not the core's to say (no facts, CTEs, renames, tables only read, or a kind in
/// `declined`: those Python reads the whole parse of) is numbered by its text (and default
/// database), so that a DDL workload's repeated CREATE and DROP TABLE are read once. Both stay
/// bounded: past CLASSES_MAX classes a new one is not numbered (the caller's keys are full by
/// then too), nor a new text past DECLINED_MAX texts or DECLINED_BYTES of them (Python then reads
/// it by its text, as it reads any unit without a number).
#[derive(Debug, Default)]
pub struct LoneClasses {
    declined_kinds: Vec<String>,
    ids: HashMap<Vec<u8>, u32, Hasher>,
    /// By number: its class, or None for a declined text's number.
    numbered: Vec<Option<Class>>,
    classes: usize,
    declined: HashMap<Vec<u8>, u32, Hasher>,
    declined_bytes: usize,
}

pub const CLASSES_MAX: usize = 1 << 16;
pub const DECLINED_MAX: usize = 1 << 16;
pub const DECLINED_BYTES: usize = 4 << 20;

/// `resolved` (`LoneQueries` of `UnitList.lone_queries`): three u32 (little-endian) a number, the
/// caller's key of its units, the code their class is written with, and these flags.
/// LONE_RESOLVED: the number is answered (else its units go to Python, as LoneQuery records);
/// LONE_REPLAY: its units are replayed by their number (its text is the number's: a declined text);
/// LONE_DEFER: each of its units is replayed with its own text (an ALTER TABLE of a class).
pub const LONE_RESOLVED: u32 = 1;
pub const LONE_REPLAY: u32 = 2;
pub const LONE_DEFER: u32 = 4;

/// `bytes` appended to `key` after its length (keys of parts that cannot run into each other).
fn put(key: &mut Vec<u8>, bytes: &[u8]) {
    key.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    key.extend_from_slice(bytes);
}

/// Number `n`'s entry of `resolved` (key, code, flags), or None: not answered (past its end, or
/// without LONE_RESOLVED).
pub fn resolved_at(resolved: &[u8], n: u32) -> Option<(u32, u32, u32)> {
    let at = 12 * n as usize;
    let word = |k: usize| {
        let w = resolved.get(at + 4 * k..at + 4 * k + 4)?;
        Some(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
    };
    let (key, code, flags) = (word(0)?, word(1)?, word(2)?);
    (flags & LONE_RESOLVED != 0).then_some((key, code, flags))
}

impl LoneClasses {
    pub fn new(declined_kinds: Vec<String>) -> Self {
        LoneClasses {
            declined_kinds,
            ..Default::default()
        }
    }

    /// The number of statement `sql` under default database `db`: its class's, or its text's
    /// where its class is declined; None where neither is numbered (past the bounds).
    pub fn class_of(&mut self, db: &[u8], sql: &[u8]) -> Option<u32> {
        let mut text = Vec::with_capacity(4 + db.len() + sql.len());
        put(&mut text, db);
        text.extend_from_slice(sql);
        if let Some(&n) = self.declined.get(&text) {
            return Some(n);
        }
        let found =
            facts::class(sql).filter(|(kind, _)| !self.declined_kinds.iter().any(|d| d == kind));
        let Some((kind, updated)) = found else {
            return self.decline(text);
        };
        let tables: Vec<(Vec<u8>, Vec<u8>)> = updated
            .into_iter()
            .map(|(table_db, name): QName| (table_db.unwrap_or_else(|| db.to_vec()), name))
            .collect();
        let mut key = Vec::with_capacity(64);
        put(&mut key, kind.as_bytes());
        put(&mut key, db);
        for (table_db, name) in &tables {
            put(&mut key, table_db);
            put(&mut key, name);
        }
        if let Some(&id) = self.ids.get(&key) {
            return Some(id);
        }
        if self.classes >= CLASSES_MAX {
            return None;
        }
        let id = self.numbered.len() as u32;
        self.ids.insert(key, id);
        self.numbered.push(Some(Class { kind, tables }));
        self.classes += 1;
        Some(id)
    }

    fn decline(&mut self, text: Vec<u8>) -> Option<u32> {
        if self.declined.len() >= DECLINED_MAX || self.declined_bytes + text.len() > DECLINED_BYTES
        {
            return None;
        }
        let id = self.numbered.len() as u32;
        self.declined_bytes += text.len();
        self.declined.insert(text, id);
        self.numbered.push(None);
        Some(id)
    }

    /// Class `id`, numbered before; None for a declined text's number.
    pub fn get(&self, id: u32) -> Option<&Class> {
        self.numbered.get(id as usize)?.as_ref()
    }

    /// The numbers given so far (classes and declined texts).
    pub fn len(&self) -> usize {
        self.numbered.len()
    }

    pub fn is_empty(&self) -> bool {
        self.numbered.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes() -> LoneClasses {
        LoneClasses::new(vec!["CREATE_TABLE".into(), "DROP_TABLE".into()])
    }

    #[test]
    fn texts_of_one_table_and_kind_are_one_class() {
        let mut c = classes();
        let a = c.class_of(b"db1", b"ALTER TABLE scratch_3_5 ADD COLUMN c17 INT");
        let b = c.class_of(b"db1", b"ALTER TABLE scratch_3_5 ADD COLUMN c18 INT");
        assert!(a.is_some());
        assert_eq!(a, b);
        let got = c.get(a.unwrap()).unwrap();
        assert_eq!(got.kind, "ALTER_TABLE");
        assert_eq!(got.tables, vec![(b"db1".to_vec(), b"scratch_3_5".to_vec())]);
    }

    #[test]
    fn the_default_database_tables_and_kind_each_part_classes() {
        let mut c = classes();
        let base = c.class_of(b"db1", b"ALTER TABLE t ADD COLUMN c INT");
        let other_db = c.class_of(b"db2", b"ALTER TABLE t ADD COLUMN c INT");
        let qualified = c.class_of(b"db2", b"ALTER TABLE db1.t ADD COLUMN c INT");
        let other_table = c.class_of(b"db1", b"ALTER TABLE u ADD COLUMN c INT");
        let index = c.class_of(b"db1", b"CREATE INDEX i1 ON t (v)");
        let all = [base, other_db, qualified, other_table, index];
        assert!(all.iter().all(Option::is_some));
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(c.len(), 5);
        // (the same table named qualified and by the default database: the same class)
        assert_eq!(
            c.class_of(b"db1", b"ALTER TABLE db1.t ADD COLUMN d INT"),
            base
        );
    }

    #[test]
    fn a_declined_text_is_numbered_by_its_text_in_the_same_numbers() {
        let mut c = classes();
        let alter = c.class_of(b"db1", b"ALTER TABLE t ADD COLUMN c INT");
        let create = b"CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)";
        let n = c.class_of(b"db1", create);
        assert_eq!(alter, Some(0));
        assert_eq!(n, Some(1));
        assert_eq!(c.class_of(b"db1", create), n); // (met again: the same number, not read again)
        assert_eq!(c.get(1), None); // (no class of the core's: Python reads its parse)
        assert!(c.get(0).is_some());
        // (another default database, or another text: another number)
        assert_eq!(c.class_of(b"db2", create), Some(2));
        assert_eq!(c.class_of(b"db1", b"no statement at all ("), Some(3));
        assert_eq!(c.class_of(b"db1", b"no statement at all ("), Some(3));
        assert_eq!(c.len(), 4);
        assert_eq!(c.classes, 1);
    }

    #[test]
    fn declined_texts_stay_bounded_and_those_past_the_bound_are_not_numbered() {
        let mut c = classes();
        for k in 0..DECLINED_MAX + 10 {
            let sql = format!("DROP TABLE IF EXISTS t{k}");
            let got = c.class_of(b"db", sql.as_bytes());
            assert_eq!(got.is_some(), k < DECLINED_MAX, "{k}");
        }
        assert_eq!(c.declined.len(), DECLINED_MAX);
        assert!(c.declined_bytes <= DECLINED_BYTES);
        // (those numbered keep their numbers; classes are still numbered)
        assert_eq!(c.class_of(b"db", b"DROP TABLE IF EXISTS t7"), Some(7));
        assert!(c
            .class_of(b"db", b"ALTER TABLE t ADD COLUMN c INT")
            .is_some());
        let mut big = classes();
        let long = format!(
            "DROP TABLE IF EXISTS t /* {} */",
            "x".repeat(DECLINED_BYTES)
        );
        assert_eq!(big.class_of(b"db", long.as_bytes()), None);
        assert!(big.is_empty());
    }

    #[test]
    fn a_resolved_entry_is_read_only_with_its_flag() {
        let mut resolved = Vec::new();
        for (key, code, flags) in [
            (7u32, 3u32, LONE_RESOLVED | LONE_REPLAY),
            (9, 4, 0),
            (2, 1, LONE_RESOLVED),
        ] {
            for w in [key, code, flags] {
                resolved.extend_from_slice(&w.to_le_bytes());
            }
        }
        assert_eq!(
            resolved_at(&resolved, 0),
            Some((7, 3, LONE_RESOLVED | LONE_REPLAY))
        );
        assert_eq!(resolved_at(&resolved, 1), None);
        assert_eq!(resolved_at(&resolved, 2), Some((2, 1, LONE_RESOLVED)));
        assert_eq!(resolved_at(&resolved, 3), None);
        assert_eq!(resolved_at(&resolved[..30], 2), None);
    }

    #[test]
    fn classes_past_the_cap_are_declined() {
        let mut c = classes();
        for k in 0..CLASSES_MAX {
            assert!(c
                .class_of(
                    b"db",
                    format!("ALTER TABLE t{k} ADD COLUMN c INT").as_bytes()
                )
                .is_some());
        }
        assert_eq!(
            c.class_of(b"db", b"ALTER TABLE past ADD COLUMN c INT"),
            None
        );
        assert_eq!(
            c.class_of(b"db", b"ALTER TABLE t0 ADD COLUMN d INT"),
            Some(0)
        );
    }
}
