//! Event type codes, header flags and the event classes the scanner groups by (binlog v4:
//! MySQL 5.0-9.x, MariaDB 10.x-11.x). Mirrors `dumpfilter/codec/constants.py`.

pub const HEADER_LEN: usize = 19;

pub const START_V3: u8 = 1;
pub const QUERY: u8 = 2;
pub const STOP: u8 = 3;
pub const ROTATE: u8 = 4;
pub const INTVAR: u8 = 5;
pub const RAND: u8 = 13;
pub const USER_VAR: u8 = 14;
pub const FORMAT_DESCRIPTION: u8 = 15;
pub const XID: u8 = 16;
pub const EXECUTE_LOAD_QUERY: u8 = 18;
pub const TABLE_MAP: u8 = 19;
pub const INCIDENT: u8 = 26;
pub const HEARTBEAT: u8 = 27;
pub const IGNORABLE: u8 = 28;
pub const ROWS_QUERY: u8 = 29;
pub const GTID: u8 = 33;
pub const ANONYMOUS_GTID: u8 = 34;
pub const PREVIOUS_GTIDS: u8 = 35;
pub const XA_PREPARE: u8 = 38;
pub const TRANSACTION_PAYLOAD: u8 = 40;
pub const HEARTBEAT_V2: u8 = 41;
pub const GTID_TAGGED: u8 = 42;
pub const ANNOTATE_ROWS: u8 = 160;
pub const BINLOG_CHECKPOINT: u8 = 161;
pub const MARIADB_GTID: u8 = 162;
pub const MARIADB_GTID_LIST: u8 = 163;
pub const START_ENCRYPTION: u8 = 164;
pub const QUERY_COMPRESSED: u8 = 165;

pub const LOG_EVENT_BINLOG_IN_USE_F: u16 = 0x0001;
pub const LOG_EVENT_ARTIFICIAL_F: u16 = 0x0020;
/// LOG_EVENT_SKIP_REPLICATION_F: MaxScale binlogfilter's placeholders carry it.
pub const LOG_EVENT_SKIP_REPLICATION_F: u16 = 0x8000;
pub const LOG_EVENT_IGNORABLE_F: u16 = 0x0080;
pub const STMT_END_F: u16 = 0x0001;
pub const MARIADB_FL_STANDALONE: u8 = 0x01;
pub const MARIADB_FL_DDL: u8 = 0x20;

#[inline]
pub fn is_known(t: u8) -> bool {
    t <= 42 || (160..=171).contains(&t)
}

#[inline]
pub fn is_rows(t: u8) -> bool {
    matches!(t, 20..=25 | 30..=32 | 39 | 166..=171)
}

#[inline]
pub fn is_query(t: u8) -> bool {
    t == QUERY || t == QUERY_COMPRESSED || t == EXECUTE_LOAD_QUERY
}

#[inline]
pub fn is_gtid(t: u8) -> bool {
    matches!(t, GTID | ANONYMOUS_GTID | GTID_TAGGED | MARIADB_GTID)
}

/// Events that never belong to a transaction's content and are never filtered.
#[inline]
pub fn is_control(t: u8) -> bool {
    matches!(
        t,
        FORMAT_DESCRIPTION
            | ROTATE
            | STOP
            | PREVIOUS_GTIDS
            | MARIADB_GTID_LIST
            | BINLOG_CHECKPOINT
            | HEARTBEAT
            | HEARTBEAT_V2
            | INCIDENT
            | START_ENCRYPTION
            // No server writes one; a binlog server's filler (MaxScale's, --source-pos) is one.
            | IGNORABLE
    )
}

/// Whether the event at buf[at..] is a placeholder (`skip_policy.is_placeholder`): a RAND of
/// server_id 0 flagged LOG_EVENT_SKIP_REPLICATION_F. No server writes one (a source's
/// server_id is never 0), so a reader of statement context (a real RAND before its Query)
/// declines a unit that holds one.
pub fn is_placeholder(buf: &[u8], at: usize) -> bool {
    let flags = crate::le::u16_at(buf, at + 17).unwrap_or(0);
    buf.get(at + 4) == Some(&RAND)
        && crate::le::u32_at(buf, at + 5) == Some(0)
        && flags & LOG_EVENT_SKIP_REPLICATION_F != 0
}

/// The second seed of a placeholder that stands for a run of them (`skip_forms`, the send
/// walk's `runs`): 0, UNKNOWN_EVENT, a type no server writes; its first seed is the run's length.
pub const PLACEHOLDER_RUN: u64 = 0;

/// The COMMIT Query closing an emptied group (`skip_forms`, `stretch`): post-header (thread_id 1,
/// exec_time 0, no database, error 0, no status variables), the empty database's NUL, the text
/// (`encode.query_body("COMMIT", "")`).
pub const COMMIT_BODY: &[u8] = b"\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00COMMIT";

/// The second seed of a stretch's head (`stretch`): skipped units in a row as one event, for a
/// gRPC slave that asked for them, above any event type, so no placeholder's. PLACEHOLDER_STRETCH
/// holds each unit's GTID and XID; EMPTY_STRETCH each unit's GTID, which the slave closes with
/// the COMMIT the empty-transaction policy makes (`skip_forms::made_query`).
pub const PLACEHOLDER_STRETCH: u64 = 0x100;
pub const EMPTY_STRETCH: u64 = 0x101;

/// The kind of stretch the event at buf[at..] is marked as (a placeholder whose second seed is
/// PLACEHOLDER_STRETCH or EMPTY_STRETCH), else None; `stretch::inner` reads it whole.
pub fn stretch_kind(buf: &[u8], at: usize) -> Option<u64> {
    let kind = crate::le::u64_at(buf, at + HEADER_LEN + 8)?;
    (is_placeholder(buf, at) && matches!(kind, PLACEHOLDER_STRETCH | EMPTY_STRETCH)).then_some(kind)
}

/// The placeholders the event at buf[at..] stands for when it is a run of them (a placeholder
/// whose second seed is PLACEHOLDER_RUN: the gRPC wire of a slave that asked for runs, never a
/// binlog or a real replica's stream), else None.
pub fn placeholder_run(buf: &[u8], at: usize) -> Option<u64> {
    if !is_placeholder(buf, at) || crate::le::u64_at(buf, at + HEADER_LEN + 8)? != PLACEHOLDER_RUN {
        return None;
    }
    crate::le::u64_at(buf, at + HEADER_LEN)
}
