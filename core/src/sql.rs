//! A Query event's text, read from the raw bytes (the default database, the SQL, MariaDB's
//! compressed form), and the statement words the grouping and the filters ask about: BEGIN,
//! COMMIT and their kin, a statement's first keyword, whether it is plain.

use std::borrow::Cow;
use std::ops::Range;

use crate::format::Format;
use crate::le::u16_at;
use crate::payload::mariadb_uncompress;
use crate::scan::ScanError;
use crate::stmt::space;
pub use crate::stmt_cues::Literals;
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

// The status variables read before the two that say how literals read (log_event.h,
// Query_log_event's status block: each a code byte, then a value of a known size; MariaDB writes
// its own after the common ones).
const Q_FLAGS2: u8 = 0;
const Q_SQL_MODE: u8 = 1;
const Q_CATALOG: u8 = 2;
const Q_AUTO_INCREMENT: u8 = 3;
const Q_CHARSET: u8 = 4;
const Q_TIME_ZONE: u8 = 5;
const Q_CATALOG_NZ: u8 = 6;
const Q_LC_TIME_NAMES: u8 = 7;
const Q_CHARSET_DATABASE: u8 = 8;
const Q_TABLE_MAP_FOR_UPDATE: u8 = 9;
const Q_MASTER_DATA_WRITTEN: u8 = 10;
const Q_INVOKER: u8 = 11;
const Q_MICROSECONDS: u8 = 13;
const Q_HRNOW: u8 = 128; // MariaDB
const Q_XID: u8 = 129; // MariaDB
/// sql_mode's NO_BACKSLASH_ESCAPES bit (MODE_NO_BACKSLASH_ESCAPES, 1 << 20), and ANSI_QUOTES
/// (a double-quoted text is then a name, read without escapes: left to the reading of both).
const MODE_NO_BACKSLASH_ESCAPES: u64 = 1 << 20;
const MODE_ANSI_QUOTES: u64 = 1 << 2;

/// Client character sets (by the collation id Q_CHARSET gives) whose every byte of a
/// backslash's value is a backslash: latin1, ascii, binary, utf8mb3 and utf8mb4 (MySQL's and
/// MariaDB's ids for their common collations). Any other id keeps the byte-wise caution.
fn plain_backslash(collation: u16) -> bool {
    matches!(collation,
        5 | 8 | 11 | 15 | 31 | 33 | 45..=49 | 63 | 65 | 76 | 83 | 94 | 192..=247 | 255..=323
        | 1057 | 1069 | 1070 | 1107)
}

/// `Literals` of the QUERY event at raw[q..] (`query_post` its post-header length).
pub fn query_literals(raw: &[u8], q: usize, query_post: usize) -> Literals {
    let Some(len) = u16_at(raw, q + HEADER_LEN + 11) else {
        return Literals::Unknown;
    };
    let from = q + HEADER_LEN + query_post;
    let Some(vars) = raw.get(from..from + len as usize) else {
        return Literals::Unknown;
    };
    let (mut escapes, mut plain, mut i) = (None, false, 0);
    while i < vars.len() && (escapes.is_none() || !plain) {
        let code = vars[i];
        let at = |k: usize| vars.get(i + 1 + k).copied().map(usize::from);
        let size = match code {
            Q_FLAGS2 | Q_AUTO_INCREMENT | Q_MASTER_DATA_WRITTEN => Some(4),
            Q_SQL_MODE | Q_TABLE_MAP_FOR_UPDATE | Q_XID => Some(8),
            Q_CATALOG => at(0).map(|n| n + 2),
            Q_CHARSET => Some(6),
            Q_TIME_ZONE | Q_CATALOG_NZ => at(0).map(|n| n + 1),
            Q_LC_TIME_NAMES | Q_CHARSET_DATABASE => Some(2),
            Q_INVOKER => at(0).and_then(|user| at(1 + user).map(|host| user + host + 2)),
            Q_MICROSECONDS | Q_HRNOW => Some(3),
            _ => None, // a code whose size is not known here: what follows is not read
        };
        let Some(size) = size.filter(|n| i + 1 + n <= vars.len()) else {
            break;
        };
        let value = &vars[i + 1..i + 1 + size];
        if code == Q_SQL_MODE {
            let mode = u64::from_le_bytes(value.try_into().expect("8 bytes"));
            escapes = Some(mode & (MODE_NO_BACKSLASH_ESCAPES | MODE_ANSI_QUOTES) == 0);
        } else if code == Q_CHARSET {
            plain = plain_backslash(u16::from_le_bytes([value[0], value[1]]));
        }
        i += 1 + size;
    }
    match (escapes, plain) {
        (Some(true), true) => Literals::EscapedPlainBytes,
        (Some(true), false) => Literals::Escaped,
        _ => Literals::Unknown,
    }
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

/// The statement's first keyword, skipping leading blanks and /* comments */ (statement_verb).
pub fn statement_verb(sql: &[u8]) -> &[u8] {
    let mut s = sql;
    loop {
        s = &s[s.iter().take_while(|b| space(**b)).count()..];
        if !s.starts_with(b"/*") {
            break;
        }
        let Some(i) = s.windows(2).skip(2).position(|w| w == b"*/") else {
            return &[];
        };
        s = &s[i + 4..];
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
        // The character starting here (a UTF-8 one is at most 4 bytes), where it decodes.
        let mut chunks = s[end..s.len().min(end + 4)].utf8_chunks();
        match chunks.next().and_then(|c| c.valid().chars().next()) {
            Some(c) if c.is_alphabetic() => end += c.len_utf8(),
            _ => break,
        }
    }
    &s[..end]
}

/// First words of statements that are certainly not CREATE, ALTER, DROP or RENAME (the verbs
/// `rules.schema.is_schema_statement` takes). None is a prefix of those four, so no version
/// comment after one (`SET/*!50000 ...*/`, which Python reads as SET joined to the comment's text)
/// can make it one.
const NOT_SCHEMA: [&[u8]; 29] = [
    b"INSERT",
    b"UPDATE",
    b"DELETE",
    b"REPLACE",
    b"BEGIN",
    b"COMMIT",
    b"ROLLBACK",
    b"SAVEPOINT",
    b"RELEASE",
    b"XA",
    b"SET",
    b"SELECT",
    b"LOAD",
    b"CALL",
    b"DO",
    b"USE",
    b"TRUNCATE",
    b"GRANT",
    b"REVOKE",
    b"FLUSH",
    b"ANALYZE",
    b"OPTIMIZE",
    b"REPAIR",
    b"LOCK",
    b"UNLOCK",
    b"WITH",
    b"HANDLER",
    b"START",
    b"CHECK",
];

/// Whether `sql` may be a statement `rules.schema.is_schema_statement` accepts: false only when,
/// past leading blanks, it opens with a word of NOT_SCHEMA (any case) followed by its end or an
/// ASCII byte that cannot continue a name. Anything else (a comment or version comment first,
/// another word, a byte outside ASCII) may be one: Python answers it. Split's first pass hands
/// Python only these, so the statements it replays are exactly those it replayed before.
pub fn may_be_schema_statement(sql: &[u8]) -> bool {
    let start = sql.iter().position(|b| !space(*b)).unwrap_or(sql.len());
    let s = &sql[start..];
    let end = s
        .iter()
        .position(|b| !b.is_ascii_alphabetic())
        .unwrap_or(s.len());
    let ends = s
        .get(end)
        .is_none_or(|&b| b.is_ascii() && !b.is_ascii_alphanumeric() && b != b'_' && b != b'$');
    !(ends && NOT_SCHEMA.iter().any(|w| s[..end].eq_ignore_ascii_case(w)))
}

/// Whether split's first pass must hand the Query or Query_compressed event buf[pos..nxt] (`t` its
/// type, `fmt` the format in force) to Python: its text may be a schema statement
/// (`may_be_schema_statement`), or Python's decoding (`Event.query`) may refuse it: a post-header,
/// status variables or db name that run past the event, a compressed text that does not
/// decompress. Those it refuses, Python reports (file and offset) as before.
/// (`query_sql`'s empty text, where the lengths run past the event, is handed over too.)
pub fn query_for_python(buf: &[u8], pos: usize, nxt: usize, t: u8, fmt: &Format) -> bool {
    let buf = &buf[..nxt.min(buf.len())];
    if pos + HEADER_LEN + 13 + fmt.checksum_len > nxt {
        return true;
    }
    query_sql(buf, pos, nxt, t, fmt).map_or(true, |sql| may_be_schema_statement(&sql))
}

/// Whether the second whitespace-separated token of the text (str.split()[1]) is `word`, any case.
fn second_is(sql: &[u8], word: &[u8]) -> bool {
    let mut tokens = sql.split(|b| space(*b)).filter(|t| !t.is_empty());
    tokens.nth(1).is_some_and(|t| t.eq_ignore_ascii_case(word))
}

pub fn is_begin(sql: &[u8]) -> bool {
    let verb = statement_verb(sql);
    verb.eq_ignore_ascii_case(b"BEGIN")
        || verb.eq_ignore_ascii_case(b"XA") && second_is(sql, b"START")
}

pub fn is_end(sql: &[u8]) -> bool {
    let verb = statement_verb(sql);
    if verb.eq_ignore_ascii_case(b"COMMIT") || verb.eq_ignore_ascii_case(b"ROLLBACK") {
        // "ROLLBACK TO SAVEPOINT" stays inside the transaction.
        return !second_is(sql, b"TO");
    }
    verb.eq_ignore_ascii_case(b"XA") && second_is(sql, b"PREPARE")
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
    let start = sql.iter().position(|b| !space(*b)).unwrap_or(sql.len());
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
    sql.split(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
        .any(|w| w.eq_ignore_ascii_case(b"DATABASE") || w.eq_ignore_ascii_case(b"SCHEMA"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stmt_cues::{outside_literals, Cues};

    /// A QUERY event (no checksum, post-header of 13 bytes) with status variables `vars`.
    fn query(vars: &[u8]) -> Vec<u8> {
        let mut e = vec![0u8; HEADER_LEN];
        e[4] = QUERY;
        e.extend_from_slice(&[0; 8]);
        e.push(0); // db_len
        e.extend_from_slice(&[0, 0]);
        e.extend_from_slice(&(vars.len() as u16).to_le_bytes());
        e.extend_from_slice(vars);
        e.extend_from_slice(b"\0UPDATE t SET a=1");
        e
    }

    fn vars(mode: u64, collation: u16) -> Vec<u8> {
        let mut v = vec![Q_FLAGS2, 0, 0, 0, 0, Q_SQL_MODE];
        v.extend_from_slice(&mode.to_le_bytes());
        v.extend_from_slice(&[Q_CATALOG_NZ, 3, b's', b't', b'd', Q_CHARSET]);
        v.extend_from_slice(&collation.to_le_bytes());
        v.extend_from_slice(&[45, 0, 8, 0]);
        v
    }

    #[test]
    fn only_a_statement_that_opens_with_a_certain_non_schema_word_is_passed_over() {
        // Cases split at '|'. Passed over: a NOT_SCHEMA word, then its end or a byte no name has.
        let over = b"BEGIN|COMMIT|insert into t values (1)| \n\t\x0b\x0c\rUPDATE t SET a=1|\x1c\x1fDELETE\n\
            FROM t|SET @a=1|Set/*!50000 TINGS*/|XA START 'x'|REPLACE(|SELECT`a`|DO 1|INSERT";
        // Python's: DDL, a comment or a blank Python skips first, a word that goes on, any other.
        let python =
            b"CREATE TABLE t (a int)|  alter table t add b int|DROP TABLE t|RENAME TABLE a TO b|\
            /* x */ CREATE TABLE t (a int)|/*!40000 ALTER TABLE t DISABLE KEYS */|INSERTX|INSERT_x|\
            INSERT$|SET1|INSERT\xc3\xa9|\xef\xbb\xbfINSERT|\xc2\xa0INSERT|-- c\nINSERT|#c\nINSERT|\
            (SELECT 1)||   |CREATEX|OTHER";
        for (cases, want) in [(&over[..], false), (&python[..], true)] {
            for sql in cases.split(|b| *b == b'|') {
                let shown = String::from_utf8_lossy(sql);
                assert_eq!(may_be_schema_statement(sql), want, "{shown:?}");
            }
        }
        // Else `W/*!50000 REST*/` could read as a schema verb once Python joins the comment in.
        for verb in [&b"CREATE"[..], b"ALTER", b"DROP", b"RENAME"] {
            assert!(!NOT_SCHEMA.iter().any(|w| verb.starts_with(w)));
        }
    }

    /// A QUERY or QUERY_COMPRESSED event with 4 bytes of (unchecked) CRC: db `d`, text `sql`.
    fn text_event(t: u8, sql: &[u8]) -> Vec<u8> {
        let mut e = vec![0u8; HEADER_LEN];
        e[4] = t;
        e.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]); // db_len 1, no status variables
        e.extend_from_slice(b"d\0");
        e.extend_from_slice(sql);
        e.extend_from_slice(&[0; 4]);
        e
    }

    #[test]
    fn a_query_goes_to_python_when_its_text_may_be_ddl_or_python_refuses_it() {
        use std::io::Write;
        let compressed = |sql: &[u8]| {
            let mut z =
                flate2::write::ZlibEncoder::new(vec![0x81, sql.len() as u8], Default::default());
            z.write_all(sql).unwrap();
            z.finish().unwrap()
        };
        let mut post = vec![0u8; 170];
        (
            post[QUERY as usize - 1],
            post[QUERY_COMPRESSED as usize - 1],
        ) = (13, 13);
        let fmt = Format {
            mariadb: true,
            checksum_alg: Some(1),
            checksum_len: 4,
            post_header: post,
            fast: false,
        };
        let at = |e: &[u8]| {
            query_for_python(
                &[b"prefix", e, b"next"].concat(),
                6,
                6 + e.len(),
                e[4],
                &fmt,
            )
        };
        assert!(!at(&text_event(QUERY, b"BEGIN")));
        assert!(at(&text_event(QUERY, b"CREATE TABLE t (a int)")));
        assert!(!at(&text_event(
            QUERY_COMPRESSED,
            &compressed(b"INSERT INTO t VALUES (1)")
        )));
        assert!(at(&text_event(
            QUERY_COMPRESSED,
            &compressed(b"DROP TABLE t")
        )));
        // Python's decoding refuses these: they go to it, which says so (file and offset).
        assert!(at(&text_event(QUERY_COMPRESSED, b"\x81\x05garbage")));
        assert!(at(&text_event(
            QUERY_COMPRESSED,
            &compressed(b"INSERT")[..4]
        )));
        let mut long_db = text_event(QUERY, b"BEGIN");
        long_db[HEADER_LEN + 8] = 9; // the db name runs into the CRC
        let mut long_status = text_event(QUERY, b"BEGIN");
        long_status[HEADER_LEN + 11] = 200;
        let short_post = &text_event(QUERY, b"")[..HEADER_LEN + 14];
        assert!(at(&long_db) && at(&long_status) && at(short_post));
        // Without a CRC the same bytes read as BEGIN and 4 NULs: still passed over.
        let (begin, no_crc) = (
            text_event(QUERY, b"BEGIN"),
            Format {
                checksum_len: 0,
                ..fmt.clone()
            },
        );
        assert!(!query_for_python(&begin, 0, begin.len(), QUERY, &no_crc));
    }

    #[test]
    fn the_status_variables_say_how_literals_read() {
        let strict = 1 << 21; // STRICT_TRANS_TABLES: no bearing on literals
        for (vars, want) in [
            (vars(strict, 45), Literals::EscapedPlainBytes), // utf8mb4_general_ci
            (vars(0, 8), Literals::EscapedPlainBytes),       // latin1
            (vars(strict, 13), Literals::Escaped), // sjis: a backslash may be a trail byte
            (vars(strict, 2304), Literals::Escaped), // an id not known here
            (vars(MODE_NO_BACKSLASH_ESCAPES, 45), Literals::Unknown),
            (vars(MODE_ANSI_QUOTES | strict, 45), Literals::Unknown),
            (vec![Q_FLAGS2, 0, 0, 0, 0], Literals::Unknown), // no sql_mode
            (
                vec![99, 1, 2, 3, Q_SQL_MODE, 0, 0, 0, 0, 0, 0, 0, 0],
                Literals::Unknown,
            ), // an unknown code first
            (vec![Q_FLAGS2, 0, 0, Q_SQL_MODE], Literals::Unknown), // cut short
        ] {
            assert_eq!(query_literals(&query(&vars), 0, 13), want, "{vars:?}");
        }
        // The sql_mode alone (no charset before an unknown code): escapes, byte-wise caution.
        let mut v = vec![Q_SQL_MODE];
        v.extend_from_slice(&0u64.to_le_bytes());
        v.push(200);
        assert_eq!(query_literals(&query(&v), 0, 13), Literals::Escaped);
        assert_eq!(
            query_literals(&query(&v)[..HEADER_LEN + 12], 0, 13),
            Literals::Unknown
        );
    }

    #[test]
    fn a_literal_is_read_as_the_query_says() {
        use Literals::*;
        for (sql, unknown, escaped, plain_bytes) in [
            // Ends at another quote without escapes: read only where the Query says.
            (
                &b"INSERT INTO t VALUES ('O\\'Brien', '\xc3\xa9')"[..],
                Cues::Parser,
                Cues::Literal,
                Cues::Literal,
            ),
            // A backslash after a byte outside ASCII: a trail byte in sjis, so only in utf8mb4 & co.
            (
                b"INSERT INTO t VALUES ('caf\xc3\xa9\\'s')",
                Cues::Parser,
                Cues::Parser,
                Cues::Literal,
            ),
            (
                b"INSERT INTO t VALUES ('\x95\\\\')",
                Cues::Parser,
                Cues::Parser,
                Cues::Literal,
            ),
            // What escapes hide stays hidden; what is outside every literal is still a cue.
            (
                b"INSERT INTO t VALUES ('a\\' -- b')",
                Cues::Parser,
                Cues::Literal,
                Cues::Literal,
            ),
            (
                b"INSERT INTO t VALUES ('a\\') -- b",
                Cues::Parser,
                Cues::Parser,
                Cues::Parser,
            ),
            (
                b"INSERT INTO t VALUES ('a\\')",
                Cues::Parser,
                Cues::Parser,
                Cues::Parser,
            ), // unclosed
        ] {
            let got = [Unknown, Escaped, EscapedPlainBytes].map(|l| outside_literals(sql, l));
            assert_eq!(
                got,
                [unknown, escaped, plain_bytes],
                "{:?}",
                String::from_utf8_lossy(sql)
            );
        }
    }
}
