//! Statement keys: what a Query's decision reads, extracted from its bytes in the core's one pass
//! (issue #43). A statement-logged binlog (MariaDB's default MIXED format, sysbench's shapes) is
//! made of single-table DML: `INSERT|REPLACE [INTO] t (...)`, `UPDATE t SET ...`, `DELETE FROM t
//! WHERE ...`. For those the rule engine's decision is a function of (kind, default database,
//! the one updated table) alone, so each such key is decided once in Python and answered here
//! for every statement that shares it.
//!
//! The recogniser reads single-table DML; anything else (non-ASCII text, comments, subqueries,
//! RETURNING, a name that is a keyword, DDL, a multi-table UPDATE) is `None`: the statement facts
//! (`facts`) read that statement (its unit is decided in Python, in fact). It is the one reader
//! of these forms: `rules.statements` asks it through the facts (issue #57).
//! Only where they stand outside the string literals: a value's text (`'José'`, `'a -- b'`,
//! `'select'`) is no table and no clause to MySQL's lexer, so the key reads past it.
//! One shape goes further: an INSERT or REPLACE whose text holds SELECT (a source query, a
//! subquery) is keyed by its target alone (KIND_INSERT_SELECT), its one updated table.
//! The recogniser follows one reading and gives up where it fails, which is always safe (the
//! tests in tests/core/test_statement_keys.py hold each key to the tables a real MariaDB wrote,
//! and to `statement_tables` on every statement of the suite and on generated ones).
//! What texts are left to Python at once is `stmt_cues`; the keys' ids across buffers are
//! `stmt_keys`.

use std::borrow::Cow;

use crate::stmt_cues::{needs_python, outside_literals, quoted_end, word, Cues, Literals};

pub const KIND_INSERT: u8 = 1;
pub const KIND_REPLACE: u8 = 2;
pub const KIND_UPDATE: u8 = 3;
pub const KIND_DELETE: u8 = 4;
/// INSERT ... SELECT and REPLACE ... SELECT (a SELECT anywhere in an INSERT's text: a source
/// query, a subquery in VALUES or SET). Decided as INSERT and REPLACE are (only the target is an
/// updated table in `rpl_filter.cc`'s tables_ok; the read tables are not `updating`), but keyed
/// apart: what reads other tables is not what `lint` may clear by a VALUES key's verdict.
pub const KIND_INSERT_SELECT: u8 = 5;
pub const KIND_REPLACE_SELECT: u8 = 6;

/// A recognised single-table DML statement: its kind and its one updated table, unquoted
/// (`db` None: unqualified, the default database's). The names borrow the statement's text
/// unless a backquoted name held a doubled backquote (no allocation per statement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape<'a> {
    pub kind: u8,
    pub db: Option<Cow<'a, [u8]>>,
    pub table: Cow<'a, [u8]>,
}

/// A backquoted name's text (between its quotes) with each doubled backquote made one.
pub(crate) fn undouble(inner: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(inner.len());
    let mut j = 0;
    while j < inner.len() {
        name.push(inner[j]);
        j += if inner[j] == b'`' { 2 } else { 1 };
    }
    name
}

/// Python's `str.isspace()` over ASCII, which is what the regexes' `\s` matches in ASCII text.
#[inline]
pub(crate) fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x1c..=0x1f)
}

/// `[A-Za-z0-9_$]`: an unquoted name's characters in `_NAME`.
#[inline]
pub(crate) fn name_char(b: u8) -> bool {
    word(b) || b == b'$'
}

/// An unquoted word MySQL's lexer may read as a number, not a name: digits only (`UPDATE 0 SET`
/// is a syntax error: a name may begin with a digit but not be all digits), or a digit then an
/// exponent or a hex/binary prefix (`1e5`, `0x1f`, `0b1`). Declined, so the general reader
/// decides; `9a` stays a name.
fn number_like(t: &[u8]) -> bool {
    t.first().is_some_and(u8::is_ascii_digit)
        && (t.iter().all(u8::is_ascii_digit)
            || t[1..]
                .iter()
                .any(|b| matches!(b, b'e' | b'E' | b'x' | b'X' | b'b' | b'B')))
}

/// A name as read: its raw text (quotes included) and the name.
type Name<'a> = (&'a [u8], Cow<'a, [u8]>);

struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// Skips `\s*`; returns how many bytes.
    fn spaces(&mut self) -> usize {
        let n = self.s[self.at..].iter().take_while(|b| space(**b)).count();
        self.at += n;
        n
    }

    /// The maximal run of `[A-Za-z0-9_$]` here (maybe empty), not consumed.
    fn token(&self) -> &'a [u8] {
        let rest = &self.s[self.at..];
        &rest[..rest.iter().take_while(|b| name_char(**b)).count()]
    }

    /// The keyword `kw` here followed by a `\b` (consumed), as `KW\b` matches.
    fn keyword(&mut self, kw: &[u8]) -> bool {
        let end = self.at + kw.len();
        if end <= self.s.len()
            && self.s[self.at..end].eq_ignore_ascii_case(kw)
            && !self.s.get(end).is_some_and(|b| word(*b))
        {
            self.at = end;
            return true;
        }
        false
    }

    /// `_NAME`: a backquoted name (doubled backquotes inside) or an unquoted one, greedy: the
    /// raw text (quotes included) and the name.
    fn name(&mut self) -> Option<Name<'a>> {
        let s = self.s;
        let from = self.at;
        if s.get(from) == Some(&b'`') {
            let end = quoted_end(s, from, false)?;
            if end == from + 2 {
                return None; // `` is no name
            }
            self.at = end;
            let inner = &s[from + 1..end - 1];
            let name = if inner.contains(&b'`') {
                Cow::Owned(undouble(inner))
            } else {
                Cow::Borrowed(inner)
            };
            return Some((&s[from..end], name));
        }
        let t = self.token();
        if t.is_empty() || number_like(t) {
            return None;
        }
        self.at += t.len();
        Some((t, Cow::Borrowed(t)))
    }

    /// `_QNAME`: a name, then `\s*.\s*name` when a dot follows. None when the dot has no name
    /// after it (the regex would backtrack into another reading: left to Python).
    fn qname(&mut self) -> Option<(Name<'a>, Option<Name<'a>>)> {
        let first = self.name()?;
        let save = self.at;
        self.spaces();
        if self.s.get(self.at) == Some(&b'.') {
            self.at += 1;
            self.spaces();
            let second = self.name()?;
            return Some((first, Some(second)));
        }
        self.at = save;
        Some((first, None))
    }
}

/// Reserved words a statement's table name may be mistaken for (see `dml_shape`).
const RESERVED: &[&[u8]] = &[
    b"FROM",
    b"WHERE",
    b"SET",
    b"ORDER",
    b"LIMIT",
    b"JOIN",
    b"SELECT",
    b"VALUES",
    b"VALUE",
    b"INTO",
    b"IGNORE",
    b"LOW_PRIORITY",
    b"QUICK",
    b"DELAYED",
    b"HIGH_PRIORITY",
    b"UPDATE",
    b"DELETE",
    b"INSERT",
    b"REPLACE",
    b"TABLE",
    b"ON",
    b"USING",
    b"LEFT",
    b"RIGHT",
    b"INNER",
    b"CROSS",
    b"STRAIGHT_JOIN",
    b"NATURAL",
    b"GROUP",
    b"HAVING",
    b"UNION",
    b"AS",
    b"WITH",
    b"PARTITION",
    b"DEFAULT",
    b"KEY",
    b"RETURNING",
    b"DUPLICATE",
];

/// Whether word `t` is one of `words`, ASCII case aside.
pub(crate) fn one_of(t: &[u8], words: &[&[u8]]) -> bool {
    words.iter().any(|w| t.eq_ignore_ascii_case(w))
}

/// Per length, the first letters (a bit each) of the RESERVED words of that length.
const RESERVED_AT: [u32; 16] = {
    let mut at = [0u32; 16];
    let mut i = 0;
    while i < RESERVED.len() {
        let w = RESERVED[i];
        at[w.len()] |= 1 << ((w[0] | 0x20) - b'a');
        i += 1;
    }
    at
};

/// `one_of(t, RESERVED)`, most names let go by their length and first letter.
pub(crate) fn reserved(t: &[u8]) -> bool {
    let Some(&first) = t.first() else {
        return false;
    };
    // `| 0x20` folds only the letters onto a..z.
    let letter = (first | 0x20).wrapping_sub(b'a');
    if t.len() >= RESERVED_AT.len() || letter >= 26 || RESERVED_AT[t.len()] & (1 << letter) == 0 {
        return false;
    }
    one_of(t, RESERVED)
}

/// The single-table DML shape of `sql`; None where it is none, or where the core is not sure to
/// read it (see the module's doc).
pub fn dml_shape(sql: &[u8]) -> Option<Shape<'_>> {
    dml_shape_read(sql, || Literals::Unknown)
}

/// `dml_shape` of a Query's text whose string literals the server read as `literals` says (its
/// status variables: `sql::query_literals`, read only for a text whose literals are read).
#[inline]
pub fn dml_shape_read(sql: &[u8], literals: impl FnOnce() -> Literals) -> Option<Shape<'_>> {
    let mut c = Cursor { s: sql, at: 0 };
    c.spaces();
    let verb = c.token();
    let verbs: [(&[u8], u8); 4] = [
        (b"INSERT", KIND_INSERT),
        (b"REPLACE", KIND_REPLACE),
        (b"UPDATE", KIND_UPDATE),
        (b"DELETE", KIND_DELETE),
    ];
    let (_, kind) = *verbs.iter().find(|(v, _)| verb.eq_ignore_ascii_case(v))?;
    // The cues, outside the string literals (whose text is a value, whatever it holds): a comment,
    // RETURNING or a byte outside ASCII (Python's Unicode rules: case folding, `\s`, `\b`) there
    // goes to Python, as does a literal the server may have ended elsewhere (`outside_literals`).
    // An INSERT's SELECT (a source query or a subquery) reads tables but updates only the target,
    // which is read before any SELECT: keyed apart (KIND_INSERT_SELECT), the rest of the text
    // unread. A SELECT in an UPDATE or DELETE goes to Python (a multi-table form may hide behind it).
    let cues = if needs_python(sql) {
        outside_literals(sql, literals())
    } else {
        Cues::Literal
    };
    let selects = match cues {
        Cues::Literal => false,
        Cues::Selects if matches!(kind, KIND_INSERT | KIND_REPLACE) => true,
        _ => return None,
    };
    c.at += verb.len();
    let mods: &[&[u8]] = match kind {
        KIND_UPDATE => &[b"LOW_PRIORITY", b"IGNORE"],
        KIND_DELETE => &[b"LOW_PRIORITY", b"QUICK", b"IGNORE"],
        _ => &[b"LOW_PRIORITY", b"DELAYED", b"HIGH_PRIORITY", b"IGNORE"],
    };
    // `(?:\s+MODIFIER)*\s+`: every modifier word, each after blanks.
    loop {
        if c.spaces() == 0 {
            return None;
        }
        let t = c.token();
        if !one_of(t, mods) {
            break;
        }
        c.at += t.len();
    }
    match kind {
        KIND_INSERT | KIND_REPLACE => {
            // `(?:INTO\s+)?`: INTO must have blanks after it (else the regex reads it as the table).
            let t = c.token();
            if t.eq_ignore_ascii_case(b"INTO") {
                c.at += t.len();
                if c.spaces() == 0 {
                    return None;
                }
            }
        }
        KIND_DELETE => {
            let t = c.token();
            if !t.eq_ignore_ascii_case(b"FROM") {
                return None;
            }
            c.at += t.len();
            if c.spaces() == 0 {
                return None;
            }
        }
        _ => {}
    }
    let ((raw, first), second) = c.qname()?;
    // What follows the table.
    let ends = match kind {
        KIND_INSERT | KIND_REPLACE => {
            c.spaces();
            c.s.get(c.at) == Some(&b'(')
                || c.keyword(b"VALUES")
                || c.keyword(b"VALUE")
                || c.keyword(b"SET")
                || (selects && c.keyword(b"SELECT"))
        }
        KIND_UPDATE => c.spaces() > 0 && c.keyword(b"SET"),
        _ => {
            c.spaces();
            let rest = &c.s[c.at..];
            let tail = rest.strip_prefix(b";").unwrap_or(rest);
            tail.iter().all(|b| space(*b))
                || c.keyword(b"WHERE")
                || c.keyword(b"ORDER")
                || c.keyword(b"LIMIT")
        }
    };
    if !ends {
        return None;
    }
    // An unqualified first name that is one of these words is not taken for a table.
    if second.is_none() && one_of(raw, &[b"INTO", b"VALUES", b"VALUE", b"SET", b"SELECT"]) {
        return None;
    }
    // A reserved word as an unquoted name is a syntax error on the server, so no binlog holds
    // one (`UPDATE FROM.t SET`).
    if reserved(raw) || second.as_ref().is_some_and(|(raw2, _)| reserved(raw2)) {
        return None;
    }
    let second = second.map(|(_, name)| name);
    let kind = match kind {
        KIND_INSERT if selects => KIND_INSERT_SELECT,
        KIND_REPLACE if selects => KIND_REPLACE_SELECT,
        k => k,
    };
    let (db, table) = match second {
        Some(table) => (Some(first), table),
        None => (None, first),
    };
    Some(Shape { kind, db, table })
}

/// Whether a replica's SQL thread applies a Query with this text whatever its database filter
/// (`if (is_trans_keyword() || db_ok(db))`, Query_log_event::do_apply_event): MySQL's
/// `Query_log_event::is_trans_keyword` (sql/log_event.h), read on the RAW text, no blank or
/// comment skipped. BEGIN and COMMIT are compared case-sensitively over the text's own length
/// (`strncmp(query, "BEGIN", q_len)`), so a prefix of either is framing, the empty text
/// included, and so is either followed by a NUL byte (where strncmp stops); "begin" is not.
/// SAVEPOINT, ROLLBACK (ROLLBACK TO too) and the XA forms are prefixes compared over the
/// keyword's length, ASCII case folded (`strncasecmp`): "RELEASE SAVEPOINT" is not framing.
/// MariaDB 10.11 lists no XA form, but since MDEV-33921 lets the XA Query events of an XA
/// transaction's GTID groups (the only ones a server writes) past the filter: MySQL's list
/// answers for both (a forged XA text in a plain MariaDB group is the one difference).
pub fn framing(sql: &[u8]) -> bool {
    let exact =
        |w: &[u8]| w.starts_with(sql) || (sql.starts_with(w) && sql.get(w.len()) == Some(&0));
    let folded = |at: usize, w: &[u8]| {
        sql.get(at..at + w.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(w))
    };
    let xa: [&[u8]; 5] = [b"START", b"END", b"PREPARE", b"COMMIT", b"ROLLBACK"];
    exact(b"BEGIN")
        || exact(b"COMMIT")
        || folded(0, b"SAVEPOINT")
        || folded(0, b"ROLLBACK")
        || (folded(0, b"XA ") && xa.iter().any(|w| folded(3, w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_answers_as_one_of() {
        let mut met = 0;
        for w in RESERVED
            .iter()
            .chain([&b"sbtest1"[..], b"t", b"", b"`from`", b"_on", b"@on"].iter())
        {
            let lower = w.to_ascii_lowercase();
            let mut longer = w.to_vec();
            longer.push(b'x');
            for t in [
                w.to_vec(),
                lower.clone(),
                longer,
                lower[..lower.len().saturating_sub(1)].to_vec(),
            ] {
                assert_eq!(
                    reserved(&t),
                    one_of(&t, RESERVED),
                    "{:?}",
                    String::from_utf8_lossy(&t)
                );
                met += reserved(&t) as u32;
            }
        }
        assert!(met >= 2 * RESERVED.len() as u32);
    }

    fn shape(sql: &str) -> Option<(u8, Option<String>, String)> {
        dml_shape(sql.as_bytes()).map(|s| {
            (
                s.kind,
                s.db.map(|d| String::from_utf8(d.into_owned()).unwrap()),
                String::from_utf8(s.table.into_owned()).unwrap(),
            )
        })
    }

    #[test]
    fn sysbench_shapes() {
        assert_eq!(
            shape("UPDATE sbtest1 SET k=k+1 WHERE id=5"),
            Some((KIND_UPDATE, None, "sbtest1".into()))
        );
        assert_eq!(
            shape("DELETE FROM sbtest1 WHERE id=5"),
            Some((KIND_DELETE, None, "sbtest1".into()))
        );
        assert_eq!(
            shape("INSERT INTO db.`t``x` (id) VALUES (1)"),
            Some((KIND_INSERT, Some("db".into()), "t`x".into()))
        );
        assert_eq!(
            shape("replace low_priority t values(1)"),
            Some((KIND_REPLACE, None, "t".into()))
        );
        assert_eq!(
            shape("DELETE FROM t ;  "),
            Some((KIND_DELETE, None, "t".into()))
        );
    }

    #[test]
    fn insert_select_by_its_target() {
        assert_eq!(
            shape("INSERT INTO t SELECT 1"),
            Some((KIND_INSERT_SELECT, None, "t".into()))
        );
        assert_eq!(
            shape("REPLACE INTO d.t (a) SELECT a FROM u JOIN v"),
            Some((KIND_REPLACE_SELECT, Some("d".into()), "t".into()))
        );
        assert_eq!(
            shape("INSERT INTO t VALUES ((SELECT max(a) FROM u))"),
            Some((KIND_INSERT_SELECT, None, "t".into()))
        );
    }

    #[test]
    fn literals_are_values() {
        for (sql, kind) in [
            ("INSERT INTO users (name) VALUES ('José')", KIND_INSERT),
            ("UPDATE users SET note='ça va -- #' WHERE id=3", KIND_UPDATE),
            ("DELETE FROM users WHERE note=\"/* select */\"", KIND_DELETE),
            (
                "REPLACE users VALUES (_utf8mb4'日本', N'x', X'41', 'it''s', 'a\\nb')",
                KIND_REPLACE,
            ),
            (
                "INSERT INTO users SELECT 'returning' FROM u",
                KIND_INSERT_SELECT,
            ),
        ] {
            assert_eq!(shape(sql), Some((kind, None, "users".into())), "{sql}");
        }
    }

    #[test]
    fn declines_what_python_must_read() {
        for sql in [
            "INSERT INTO t SELECT 1 -- x",
            "INSERT INTO t SELECT 1 RETURNING a",
            "INSERT INTO t WITH w AS (SELECT 1) SELECT * FROM w",
            "UPDATE t SET a=(SELECT 1)",
            "DELETE FROM t WHERE a IN (SELECT b FROM u)",
            "UPDATE t1, t2 SET a=1",
            "UPDATE t1 JOIN t2 ON 1 SET a=1",
            "INSERT INTO t VALUES (1) # x",
            "DELETE FROM t USING t, u",
            "INSERT INTO values (1)",
            "INSERT INTO tSET x=1",
            "INSERT INTO t(a) VALUES ('é') -- x",
            "UPDATE t SET a='é' WHERE b=(SELECT 1)",
            "UPDATE t SET a='O\\'Brien -- x'",
            "UPDATE t SET a='\\'' WHERE b='#'",
            "UPDATE t SET a='é\\n#'",
            "UPDATE t SET a='unclosed #",
            "UPDATE té SET a='#'",
            "UPDATE `t#` SET a='x'",
            "UPDATE `t`SET a=1",
            "DELETE FROM t RETURNING a",
            "INSERT INTO a. (x)",
            "CREATE TABLE t (a int)",
        ] {
            assert_eq!(shape(sql), None, "{sql}");
        }
    }
}
