//! A Query event's text, read from the raw bytes (the default database, the SQL, MariaDB's
//! compressed form), and the statement words the grouping and the filters ask about: BEGIN,
//! COMMIT and their kin, a statement's first keyword, whether it is plain.

use std::borrow::Cow;
use std::ops::Range;

use crate::format::Format;
use crate::le::u16_at;
use crate::payload::mariadb_uncompress;
use crate::scan::ScanError;
use crate::types::*;

/// The default database and SQL text (ranges of `raw`, CRC excluded) of the plain QUERY event at
/// raw[q..], which runs to the end of `raw` (the one event after a unit's GTID): what
/// `codec.event.query_text` reads. None for another type or lengths that do not add up.
/// The QUERY post-header: thread_id u32, exec_time u32, db_len u8, error_code u16,
/// status_vars_len u16 (13 bytes), then the status variables, the db, a NUL, the SQL.
pub fn query_ranges(
    raw: &[u8],
    q: usize,
    query_post: usize,
    crc_len: usize,
) -> Option<(Range<usize>, Range<usize>)> {
    if *raw.get(q + 4)? != QUERY || q + HEADER_LEN + 13 > raw.len() {
        return None;
    }
    let db_len = raw[q + HEADER_LEN + 8] as usize;
    let status_len = u16_at(raw, q + HEADER_LEN + 11)? as usize;
    let db_start = q + HEADER_LEN + query_post + status_len;
    let stop = raw.len().checked_sub(crc_len)?;
    if db_start + db_len + 1 > stop {
        return None;
    }
    Some((db_start..db_start + db_len, db_start + db_len + 1..stop))
}

/// The SQL text of a Query (or Query_compressed, Execute_load_query) event, decompressed.
pub fn query_sql<'a>(
    buf: &'a [u8],
    pos: usize,
    nxt: usize,
    t: u8,
    fmt: &Format,
) -> Result<Cow<'a, [u8]>, ScanError> {
    let end = nxt.saturating_sub(fmt.checksum_len);
    let Some(sql_at) = sql_start(buf, pos, t, fmt) else {
        return Ok(Cow::Borrowed(&[]));
    };
    if sql_at >= end || pos + 32 > nxt {
        return Ok(Cow::Borrowed(&[]));
    }
    let sql = &buf[sql_at..end];
    if t == QUERY_COMPRESSED {
        return mariadb_uncompress(sql)
            .map(Cow::Owned)
            .map_err(|m| ScanError::binlog(format!("Query_compressed event: {m}"), pos as u64));
    }
    Ok(Cow::Borrowed(sql))
}

/// Whether the event is a plain `BEGIN` Query, read from the raw bytes: what opens a MySQL
/// transaction (the sql text is exactly `BEGIN`).
pub fn is_begin_event(buf: &[u8], pos: usize, nxt: usize, fmt: &Format) -> bool {
    let Some(sql_at) = sql_start(buf, pos, QUERY, fmt) else {
        return false;
    };
    sql_at + 5 + fmt.checksum_len == nxt && buf.get(sql_at..sql_at + 5) == Some(b"BEGIN")
}

/// Where the SQL text of the Query-type event (type `t`) at buf[pos..] starts: after the header,
/// the post-header, the status variables and the NUL-terminated default database. None when the
/// post-header's db_len or status_vars_len lie past the buffer.
fn sql_start(buf: &[u8], pos: usize, t: u8, fmt: &Format) -> Option<usize> {
    let db_len = *buf.get(pos + HEADER_LEN + 8)? as usize;
    let status_len = u16_at(buf, pos + HEADER_LEN + 11)? as usize;
    Some(pos + HEADER_LEN + fmt.post_header_len(t) as usize + status_len + db_len + 1)
}

#[inline]
fn is_space(b: u8) -> bool {
    // Python's str.isspace() over ASCII: what statement_verb() and str.split() skip.
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x1c..=0x1f)
}

/// The statement's first keyword, skipping leading blanks and /* comments */ (statement_verb).
pub fn statement_verb(sql: &[u8]) -> &[u8] {
    let mut s = sql;
    loop {
        while let Some((&b, rest)) = s.split_first() {
            if !is_space(b) {
                break;
            }
            s = rest;
        }
        if s.starts_with(b"/*") {
            match s.windows(2).skip(2).position(|w| w == b"*/") {
                Some(i) => s = &s[i + 4..],
                None => return &[],
            }
        } else {
            break;
        }
    }
    // Letters as Python's str.isalpha() sees the text decoded with surrogateescape: a valid UTF-8
    // letter continues the word, a byte that does not decode (a surrogate there) ends it.
    let mut end = 0;
    while end < s.len() {
        let b = s[end];
        if b.is_ascii_alphabetic() || b == b'_' {
            end += 1;
            continue;
        }
        if b < 0x80 {
            break;
        }
        let len = match b {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => break,
        };
        match s
            .get(end..end + len)
            .and_then(|c| std::str::from_utf8(c).ok())
            .and_then(|c| c.chars().next())
        {
            Some(c) if c.is_alphabetic() => end += len,
            _ => break,
        }
    }
    &s[..end]
}

/// The second whitespace-separated token of the text (str.split()[1]), if any.
fn second_token(sql: &[u8]) -> Option<&[u8]> {
    sql.split(|b| is_space(*b)).filter(|t| !t.is_empty()).nth(1)
}

pub fn is_begin(sql: &[u8]) -> bool {
    let verb = statement_verb(sql);
    if verb.eq_ignore_ascii_case(b"BEGIN") {
        return true;
    }
    verb.eq_ignore_ascii_case(b"XA")
        && second_token(sql).is_some_and(|t| t.eq_ignore_ascii_case(b"START"))
}

pub fn is_end(sql: &[u8]) -> bool {
    let verb = statement_verb(sql);
    if verb.eq_ignore_ascii_case(b"COMMIT") || verb.eq_ignore_ascii_case(b"ROLLBACK") {
        // "ROLLBACK TO SAVEPOINT" stays inside the transaction.
        return !second_token(sql).is_some_and(|t| t.eq_ignore_ascii_case(b"TO"));
    }
    verb.eq_ignore_ascii_case(b"XA")
        && second_token(sql).is_some_and(|t| t.eq_ignore_ascii_case(b"PREPARE"))
}

/// `rules.statements.plain_statement` for ASCII text: whether the statement is certainly none of
/// CREATE/ALTER/DROP DATABASE or SCHEMA, a transaction statement, a multi-table UPDATE, judged
/// from its first keyword (and for CREATE/ALTER/DROP, no DATABASE or SCHEMA word anywhere).
/// None for text with any non-ASCII byte: Python's Unicode rules bite there (`"ſ".upper()` is
/// "S", IGNORECASE matches "ſchema", `\b` knows Unicode letters), so Python answers it.
pub fn plain_statement(sql: &[u8]) -> Option<bool> {
    if !sql.is_ascii() {
        return None;
    }
    // A leading comment: left to Python, whose reading of one (str.find from the comment's
    // first byte, so "/*/" closes it) the core's statement_verb does not copy.
    let start = sql.iter().position(|b| !is_space(*b)).unwrap_or(sql.len());
    if sql[start..].starts_with(b"/*") {
        return None;
    }
    let verb = statement_verb(sql);
    let is = |w: &[u8]| verb.eq_ignore_ascii_case(w);
    if is(b"CREATE") || is(b"ALTER") || is(b"DROP") {
        return Some(!has_database_word(sql));
    }
    // No plain first keyword; may open a multi-table UPDATE or a transaction; transaction words.
    const NOT_PLAIN: [&[u8]; 10] = [
        b"",
        b"UPDATE",
        b"WITH",
        b"START",
        b"BEGIN",
        b"COMMIT",
        b"ROLLBACK",
        b"SAVEPOINT",
        b"RELEASE",
        b"XA",
    ];
    Some(!NOT_PLAIN.iter().any(|w| is(w)))
}

/// `\b(?:DATABASE|SCHEMA)\b`, case-insensitive, over ASCII text.
fn has_database_word(sql: &[u8]) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < sql.len() {
        if word(sql[i]) {
            let start = i;
            while i < sql.len() && word(sql[i]) {
                i += 1;
            }
            let w = &sql[start..i];
            if w.eq_ignore_ascii_case(b"DATABASE") || w.eq_ignore_ascii_case(b"SCHEMA") {
                return true;
            }
        } else {
            i += 1;
        }
    }
    false
}
