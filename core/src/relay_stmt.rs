//! The slave's relay run over statement units (issue #43): a MIXED/STATEMENT stream's kept
//! transactions (a GTID, Queries, an XID) copied to the relay log as they came, without an Event
//! per unit, when the slave's own rules keep every statement by its key (`stmt_keys::Keys`, decided
//! once per key in Python: `rules.statement_keys.StatementKeeps`), as `relay::relay_ranges` copies
//! the fast units whose tables they keep. A unit with a statement its rules drop (a disagreement
//! the slave's check reports) or any other unit ends the run: Python takes it.

use crate::keep::{self, Keep};
use crate::relay::{is_lone_heartbeat, RelayRun};
use crate::scan::Unit;
use crate::stmt_keys::Keys;
use crate::stmt_units::walk;

/// A statement relay run: the run (`RelayRun`: ranges, counts; `lone` unused), whether it stopped
/// at a key without an answer (new keys queued in `Keys::new`), and the statements per key used.
#[derive(Debug, Default)]
pub struct StmtRelay {
    pub run: RelayRun,
    pub need_keys: bool,
    pub key_uses: Vec<(u32, u64)>,
    pub statements: u64,
}

/// The statement units from `from` on whose every statement `stmt_keep` keeps (one byte per key
/// id of `keys`: KEEP_KEEP kept), and the lone Heartbeats between them, up to the first other unit.
#[allow(clippy::too_many_arguments)]
pub fn relay_statements(
    buf: &[u8],
    units: &[Unit],
    from: usize,
    query_post: usize,
    crc_len: usize,
    keys: &mut Keys,
    stmt_keep: &[u8],
) -> StmtRelay {
    let mut out = StmtRelay::default();
    let mut uses: Vec<u64> = Vec::new();
    let mut scratch = Vec::new();
    let mut ids: Vec<u32> = Vec::new();
    let mut i = from;
    'units: while i < units.len() {
        let u = &units[i];
        if u.start > u.end || u.end > buf.len() {
            break;
        }
        if is_lone_heartbeat(buf, u) {
            out.run.heartbeats += 1;
            i += 1;
            continue;
        }
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
            break;
        };
        ids.clear();
        for (shape, _, _, _, db, sql) in pieces {
            if let (Some(shape), Some(db), Some(sql)) = (shape, db, sql) {
                let id = keys.id(&buf[db], &buf[sql], &shape, &mut scratch);
                ids.push(id);
            }
        }
        for id in &ids {
            match keep::at(stmt_keep, *id as usize) {
                Keep::Keep => {}
                Keep::Drop => break 'units,
                Keep::Ask | Keep::Python => {
                    out.need_keys = true;
                    break 'units;
                }
            }
        }
        for id in &ids {
            let id = *id as usize;
            if uses.len() <= id {
                uses.resize(id + 1, 0);
            }
            uses[id] += 1;
        }
        out.statements += ids.len() as u64;
        let run = &mut out.run;
        match run.ranges.last_mut() {
            Some(last) if last.1 == u.start => last.1 = u.end,
            _ => run.ranges.push((u.start, u.end)),
        }
        run.units += 1;
        run.events += u.events as u64;
        run.bytes += (u.end - u.start) as u64;
        i += 1;
    }
    out.run.next = i;
    out.key_uses = uses
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(id, n)| (id as u32, *n))
        .collect();
    out
}
