//! Lone statements' classes (`UnitList.lone_queries` for spark_jobs' LoneUnits): a GTID-and-one-
//! statement unit's kind and the tables it updates under its default database, numbered by value
//! across segments. A DDL-heavy binlog's texts are each met once (`ALTER TABLE scratch_3_5 ADD
//! COLUMN c17 INT`, then `... c18 ...`) where their classes repeat: numbered here as the core reads
//! them, Python meets each class once, not each text (8,400 of the DDL-heavy pass's 16,870).

use std::collections::{HashMap, HashSet};
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

/// Classes numbered from 0 in the order first met. A text whose class is not the core's to say
/// (no facts, CTEs, renames, tables only read, or a kind in `declined`: those Python reads the
/// whole parse of) is remembered as declined, by text, so that a DDL workload's repeated CREATE
/// and DROP TABLE are read once. Both stay bounded: past CLASSES_MAX classes a new one is
/// declined (the caller's keys are full by then too), and the declined texts are forgotten past
/// DECLINED_MAX of them or DECLINED_BYTES of text.
#[derive(Debug, Default)]
pub struct LoneClasses {
    declined_kinds: Vec<String>,
    ids: HashMap<Vec<u8>, u32, Hasher>,
    classes: Vec<Class>,
    declined: HashSet<Vec<u8>, Hasher>,
    declined_bytes: usize,
}

pub const CLASSES_MAX: usize = 1 << 16;
pub const DECLINED_MAX: usize = 1 << 16;
pub const DECLINED_BYTES: usize = 4 << 20;

/// `bytes` appended to `key` after its length (keys of parts that cannot run into each other).
fn put(key: &mut Vec<u8>, bytes: &[u8]) {
    key.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    key.extend_from_slice(bytes);
}

impl LoneClasses {
    pub fn new(declined_kinds: Vec<String>) -> Self {
        LoneClasses {
            declined_kinds,
            ..Default::default()
        }
    }

    /// The class number of statement `sql` under default database `db`, or None: declined.
    pub fn class_of(&mut self, db: &[u8], sql: &[u8]) -> Option<u32> {
        let mut text = Vec::with_capacity(4 + db.len() + sql.len());
        put(&mut text, db);
        text.extend_from_slice(sql);
        if self.declined.contains(&text) {
            return None;
        }
        let found =
            facts::class(sql).filter(|(kind, _)| !self.declined_kinds.iter().any(|d| d == kind));
        let Some((kind, updated)) = found else {
            self.decline(text);
            return None;
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
        if self.classes.len() >= CLASSES_MAX {
            return None;
        }
        let id = self.classes.len() as u32;
        self.ids.insert(key, id);
        self.classes.push(Class { kind, tables });
        Some(id)
    }

    fn decline(&mut self, text: Vec<u8>) {
        if self.declined.len() >= DECLINED_MAX || self.declined_bytes + text.len() > DECLINED_BYTES
        {
            self.declined.clear();
            self.declined_bytes = 0;
        }
        self.declined_bytes += text.len();
        self.declined.insert(text);
    }

    /// Class `id`, numbered before.
    pub fn get(&self, id: u32) -> Option<&Class> {
        self.classes.get(id as usize)
    }

    /// The classes numbered so far.
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
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
    fn a_declined_kind_or_no_facts_is_declined_and_remembered() {
        let mut c = classes();
        let create = b"CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)";
        assert_eq!(c.class_of(b"db1", create), None);
        assert_eq!(c.class_of(b"db1", create), None);
        assert_eq!(c.declined.len(), 1);
        assert_eq!(c.class_of(b"db1", b"no statement at all ("), None);
        assert!(c.is_empty());
    }

    #[test]
    fn declined_texts_stay_bounded() {
        let mut c = classes();
        for k in 0..DECLINED_MAX + 10 {
            let sql = format!("DROP TABLE IF EXISTS t{k}");
            assert_eq!(c.class_of(b"db", sql.as_bytes()), None);
        }
        assert!(c.declined.len() <= DECLINED_MAX);
        assert!(c.declined_bytes <= DECLINED_BYTES);
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
