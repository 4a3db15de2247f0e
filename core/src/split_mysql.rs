//! Split's copies of a fast MySQL unit (a GTID or Anonymous_GTID, a plain BEGIN, statements of
//! Table_maps and rows events, an XID): the bytes Python's Router gives each output of it
//! (`spark_jobs/tasks/routing.py`). A copy cut at its statements keeps the BEGIN with the GTID
//! (framing) and its GTID's transaction_length counts what is left (TransactionFilter's
//! `fix_transaction_length`). By schema, a copy's BEGIN whose default database is another
//! schema's takes the output's (`Router._retarget`, `with_default_db`: db_len and db replaced,
//! status variables as they were, size and CRC redone), and its transaction_length is fixed
//! again. Whole copies otherwise keep their bytes, transaction_length included. Anything that does
//! not read as Python reads it is declined (None): the Router routes that unit.

use crate::hops::head_end;
use crate::le::{u16_at, u32_at};
use crate::rename_db::rename_event;
use crate::scan::{F_ANONYMOUS_GTID, F_HAS_FDE, F_MYSQL_GTID, F_PAYLOAD, F_TAGGED_GTID};
use crate::trx_length::with_length;
use crate::types::HEADER_LEN;

/// How a scan's MySQL units are copied: whether events carry a CRC32, the Query post-header's
/// length (the scanner's Format_description), and by schema each output's schema (None: by
/// --map, no copy's default database changes).
pub struct MysqlRoute<'a> {
    pub crc: bool,
    pub query_post: usize,
    pub schemas: Option<Vec<&'a [u8]>>,
}

/// Whether `flags` are a MySQL unit's this module copies (a MySQL or anonymous GTID; no tagged
/// GTID, Transaction_payload or Format_description inside).
pub fn is_mysql_unit(flags: u32) -> bool {
    flags & (F_MYSQL_GTID | F_ANONYMOUS_GTID) != 0
        && flags & (F_TAGGED_GTID | F_PAYLOAD | F_HAS_FDE) == 0
}

impl MysqlRoute<'_> {
    fn crc_len(&self) -> usize {
        usize::from(self.crc) * 4
    }

    /// Where the Query event `ev`'s default database lies (start, length), or None where its
    /// post-header does not read.
    fn db_at(&self, ev: &[u8]) -> Option<(usize, usize)> {
        if self.query_post < 13 {
            return None;
        }
        let db_len = *ev.get(HEADER_LEN + 8)? as usize;
        let status = u16_at(ev, HEADER_LEN + 11)? as usize;
        let start = HEADER_LEN + self.query_post + status;
        (start + db_len <= ev.len().checked_sub(self.crc_len())?).then_some((start, db_len))
    }

    /// The schema output `o`'s copy gives its BEGIN `begin` where `_retarget` changes it (its
    /// default database non-empty and another one), Some(None) where it stays, None: declined.
    fn retarget(&self, begin: &[u8], o: usize) -> Option<Option<&[u8]>> {
        let Some(schemas) = &self.schemas else {
            return Some(None);
        };
        let schema = *schemas.get(o)?;
        let (at, len) = self.db_at(begin)?;
        let db = &begin[at..at + len];
        Some((!db.is_empty() && db != schema).then_some(schema))
    }

    /// Output `o`'s copy of `joined` (a GTID event, a BEGIN, then the rest, its GTID's
    /// transaction_length counting them: a whole unit, or one `unit_cut::cut` cut): None where
    /// it is declined, Some(None) where its bytes stay as they are, else its bytes with the
    /// BEGIN's default database the output's schema and transaction_length fixed again.
    pub fn copy(&self, joined: &[u8], o: usize) -> Option<Option<Vec<u8>>> {
        let g = u32_at(joined, 9)? as usize;
        let b = head_end(joined, g, joined.len())?;
        let Some(db) = self.retarget(&joined[g..b], o)? else {
            return Some(None);
        };
        let mut made = Vec::with_capacity(joined.len() + db.len());
        made.extend_from_slice(&joined[..g]);
        // `with_default_db`: db_len and db replaced, size and CRC redone (rename_db's writer)
        made.extend(rename_event(&joined[g..b], db, None, self.query_post, self.crc_len()).ok()??);
        made.extend_from_slice(&joined[b..]);
        Some(Some(with_length(&made, self.crc)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::QUERY;

    fn begin(db: &[u8], crc: bool) -> Vec<u8> {
        let mut e = vec![0u8; HEADER_LEN];
        e[4] = QUERY;
        e.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 0, db.len() as u8, 0, 0, 2, 0]);
        e.extend_from_slice(&[0xAA, 0xBB]); // status variables
        e.extend_from_slice(db);
        e.push(0);
        e.extend_from_slice(b"BEGIN");
        let size = (e.len() + if crc { 4 } else { 0 }) as u32;
        e[9..13].copy_from_slice(&size.to_le_bytes());
        crate::crc::seal(&mut e, 0, crc);
        e
    }

    #[test]
    fn retarget_names_the_schema_and_the_renamed_begin_is_resealed() {
        let r = MysqlRoute {
            crc: true,
            query_post: 13,
            schemas: Some(vec![b"db1", b"db22"]),
        };
        let ev = begin(b"db1", true);
        assert_eq!(r.retarget(&ev, 0), Some(None));
        assert_eq!(r.retarget(&ev, 1), Some(Some(&b"db22"[..])));
        assert_eq!(r.retarget(&begin(b"", true), 1), Some(None)); // no database: kept
        assert_eq!(r.retarget(&ev, 2), None); // no such output: declined
        assert_eq!(
            rename_event(&ev, b"db22", None, 13, 4),
            Ok(Some(begin(b"db22", true)))
        );
        let maps = MysqlRoute { schemas: None, ..r };
        assert_eq!(maps.retarget(&ev, 5), Some(None));
        let plain = rename_event(&begin(b"a_long_db", false), b"", None, 13, 0);
        assert_eq!(plain, Ok(Some(begin(b"", false))));
    }
}
