//! Statement keys interned (`Keys`): each distinct (kind, updated table, default database) of
//! the DML statements `stmt::dml_shape` recognises gets one id in the buffer read (a segment, a
//! scan: `stmt_units::StmtUnits`), and each is listed with the statement it was first met in, for
//! Python to answer up front (by the key's bytes, once across buffers: `rules.keep_table`).

use std::collections::HashMap;

use crate::stmt::Shape;

/// A key met for the first time: its id, its bytes (what the key is, across scanners and
/// segments, whose ids differ), and the statement it was met in (default database, text), for
/// Python to decide.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub id: u32,
    pub key: Vec<u8>,
    pub db: Vec<u8>,
    pub sql: Vec<u8>,
}

/// The hash of a key's bytes, eight at a time (a MIXED binlog interns a key per Query: SipHash,
/// the std default, cost a tenth of the statement units' read). Not proof against chosen
/// collisions, as scan::Fnv for the table names: a hostile binlog can only slow its own read.
#[derive(Default)]
pub struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let h = self.0;
        h ^ (h >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            h = (h.rotate_left(5) ^ w).wrapping_mul(K);
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59))
                .wrapping_mul(K);
        }
        self.0 = h;
    }
}

/// The keys interned so far, by their bytes.
#[derive(Debug, Default)]
pub struct Keys {
    map: HashMap<Vec<u8>, u32, std::hash::BuildHasherDefault<KeyHasher>>,
    /// Every key interned, in id order.
    pub new: Vec<NewKey>,
}

impl Keys {
    /// The id of the key of (default database `db`, statement `sql` of shape `shape`), interned
    /// (and queued in `new`) the first time.
    pub fn id(&mut self, db: &[u8], sql: &[u8], shape: &Shape, scratch: &mut Vec<u8>) -> u32 {
        scratch.clear();
        scratch.push(shape.kind);
        match &shape.db {
            Some(q) => {
                scratch.push(1);
                scratch.extend_from_slice(&(q.len() as u32).to_le_bytes());
                scratch.extend_from_slice(q);
            }
            None => scratch.push(0),
        }
        scratch.extend_from_slice(&(shape.table.len() as u32).to_le_bytes());
        scratch.extend_from_slice(&shape.table);
        scratch.extend_from_slice(db);
        if let Some(id) = self.map.get(scratch.as_slice()) {
            return *id;
        }
        let id = self.map.len() as u32;
        self.map.insert(scratch.clone(), id);
        self.new.push(NewKey {
            id,
            key: scratch.clone(),
            db: db.to_vec(),
            sql: sql.to_vec(),
        });
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stmt::dml_shape;

    #[test]
    fn keys_are_interned_once() {
        let mut keys = Keys::default();
        let mut scratch = Vec::new();
        let s = dml_shape(b"UPDATE t SET a=1").unwrap();
        let a = keys.id(b"db", b"UPDATE t SET a=1", &s, &mut scratch);
        let b = keys.id(b"db", b"UPDATE t SET a=2", &s, &mut scratch);
        let c = keys.id(b"db2", b"UPDATE t SET a=2", &s, &mut scratch);
        assert_eq!((a, b, c), (0, 0, 1));
        assert_eq!(keys.new.len(), 2);
    }
}
