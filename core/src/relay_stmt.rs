//! The slave's answer for one statement unit by its keys (issue #43): a MIXED/STATEMENT
//! stream's kept transaction (a GTID, Queries with their context, an XID) goes to the relay log
//! as it came, without an Event per unit, when the slave's own rules keep every statement by its
//! key (`stmt_keys::Keys`, decided once per key in Python: `rules.statement_keys.StatementKeeps`).
//! `relay::relay_ranges` asks it for each unit it meets that is neither fast nor lone. A statement
//! its rules drop (a disagreement the slave's check reports) or a unit of any other shape is
//! Python's.

use crate::keep::{self, Keep};
use crate::scan::Unit;
use crate::stmt_keys::Keys;
use crate::stmt_units::walk;

/// The statement keys a relay run reads with: the interned keys, one keep byte per key id
/// (KEEP_KEEP kept), and the statements counted per key id so far (`uses`).
pub struct StatementKeeps<'a> {
    pub keys: &'a mut Keys,
    pub keep: &'a [u8],
    pub uses: Vec<u64>,
    pub statements: u64,
    ids: Vec<u32>,
    scratch: Vec<u8>,
}

/// What the keys say of one unit.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Every statement kept: relay it as it came.
    Kept,
    /// Not a statement unit the keys decide, or one with a statement its rules drop.
    Python,
    /// A key without an answer yet (queued in `Keys::new`): the run stops for Python to decide.
    NeedKeys,
}

impl<'a> StatementKeeps<'a> {
    pub fn new(keys: &'a mut Keys, keep: &'a [u8]) -> Self {
        StatementKeeps {
            keys,
            keep,
            uses: Vec::new(),
            statements: 0,
            ids: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The answer for unit `u` of `buf` (`query_post`, `crc_len`: the format in force); a kept
    /// unit's statements are counted per key.
    pub fn unit(&mut self, buf: &[u8], u: &Unit, query_post: usize, crc_len: usize) -> Step {
        let Some(pieces) = walk(
            buf,
            u.start,
            u.end,
            u.flags,
            u.gtid_size,
            u.events,
            query_post,
            crc_len,
        ) else {
            return Step::Python;
        };
        self.ids.clear();
        for (shape, _, _, _, db, sql) in pieces {
            if let (Some(shape), Some(db), Some(sql)) = (shape, db, sql) {
                let id = self.keys.id(&buf[db], &buf[sql], &shape, &mut self.scratch);
                self.ids.push(id);
            }
        }
        for id in &self.ids {
            match keep::at(self.keep, *id as usize) {
                Keep::Keep => {}
                Keep::Drop => return Step::Python,
                Keep::Ask | Keep::Python => return Step::NeedKeys,
            }
        }
        for id in &self.ids {
            let id = *id as usize;
            if self.uses.len() <= id {
                self.uses.resize(id + 1, 0);
            }
            self.uses[id] += 1;
        }
        self.statements += self.ids.len() as u64;
        Step::Kept
    }

    /// The statements counted per key id: (id, count) for each key used.
    pub fn key_uses(&self) -> Vec<(u32, u64)> {
        self.uses
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(id, n)| (id as u32, *n))
            .collect()
    }
}
