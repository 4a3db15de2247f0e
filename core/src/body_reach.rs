//! The body of a trigger, routine or event as the master policy's bound reads it (issue #81
//! goal 5: one reader per form), over the statement facts' tokens (facts::lex, the reader
//! `filter` reads the trigger with): piece by piece (`;` apart), the body statements that reach
//! their table alone (gate_reach's check, the master walk's own of every statement text) are
//! that table; the other pieces are handed back as spans, which `rules.policy_bound` reads by its
//! general path (sqlglot). Text with a quote or comment left open is not answered.

use crate::facts::lex::{read, Cur, Kind};
use crate::gate_reach::reaches_key_alone;
use crate::stmt::{dml_shape, one_of};

/// `form`: where the body starts: after FOR EACH ROW [FOLLOWS|
/// PRECEDES name] (a trigger: NEW. and OLD. name its row), after DO (an event), after the
/// name and parameter list (a procedure, function or package).
pub const FORM_TRIGGER: u8 = 0;
pub const FORM_EVENT: u8 = 1;
pub const FORM_ROUTINE: u8 = 2;

/// A table a cleared body statement reaches: its database (None: the body's) and its name.
pub type BodyTable = (Option<Vec<u8>>, Vec<u8>);

/// What the body's reading found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BodyReach {
    /// The tables the cleared statements reach alone, each once, in body order.
    pub tables: Vec<BodyTable>,
    /// Byte spans [start, end) of the pieces (`;` apart) the general path reads, in body order:
    /// from a piece's first token to its `;` (or the text's end).
    pub declined: Vec<(usize, usize)>,
}

/// The words a routine's name follows.
const ROUTINE_WORDS: &[&[u8]] = &[b"PROCEDURE", b"FUNCTION", b"PACKAGE"];

/// The word a piece's statement starts at.
const BODY_VERBS: &[&[u8]] = &[
    b"INSERT", b"REPLACE", b"UPDATE", b"DELETE", b"SELECT", b"WITH", b"SET", b"CALL",
];

/// Words that, after the verb, mean another statement (or a block's end) in the piece: a server
/// would refuse it as one statement, so the check of one statement is not asked.
const NOT_ONE_STATEMENT: &[&[u8]] = &[
    b"INSERT", b"REPLACE", b"DELETE", b"SELECT", b"WITH", b"CALL", b"BEGIN", b"END", b"ELSE",
    b"ELSEIF", b"THEN", b"DO", b"LOOP", b"WHILE", b"REPEAT", b"UNTIL", b"RETURN",
];

/// The body's reading, step by step, over the facts' cursor.
impl Cur<'_> {
    /// The index of the body's first token.
    fn start(&self, form: u8) -> usize {
        let n = self.toks.len();
        match form {
            FORM_TRIGGER => {
                for i in 0..n.saturating_sub(2) {
                    if self.is_word_at(i, b"FOR")
                        && self.is_word_at(i + 1, b"EACH")
                        && self.is_word_at(i + 2, b"ROW")
                    {
                        let start = i + 3;
                        if self.is_any_at(start, &[b"FOLLOWS", b"PRECEDES"]) {
                            return start + 2;
                        }
                        return start;
                    }
                }
                n
            }
            FORM_EVENT => (0..n)
                .find(|&i| self.is_word_at(i, b"DO"))
                .map_or(n, |i| i + 1),
            _ => {
                // The parameter list follows the routine's name; MariaDB's sql_mode=ORACLE lets
                // a routine go without one (`CREATE PROCEDURE p AS BEGIN ... END`): its body
                // starts after the name then.
                let mut at = (0..n)
                    .find(|&i| self.is_any_at(i, ROUTINE_WORDS))
                    .map_or(0, |i| i + 1);
                at += usize::from(self.is_word_at(at, b"BODY"));
                if self.is_word_at(at, b"IF")
                    && self.is_word_at(at + 1, b"NOT")
                    && self.is_word_at(at + 2, b"EXISTS")
                {
                    at += 3;
                }
                at += if self.is_punct_at(at + 1, b'.') { 3 } else { 1 };
                if !self.is_punct_at(at, b'(') {
                    return at.min(n);
                }
                let mut depth = 0i64;
                for i in at..n {
                    if self.is_punct_at(i, b'(') {
                        depth += 1;
                    } else if self.is_punct_at(i, b')') {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                }
                n
            }
        }
    }

    /// Whether tokens [from, to) add nothing to the reach as the words before a statement (or a
    /// piece without one): no call, no sequence, no qualified name but a trigger's `NEW.c` and
    /// `OLD.c` (a trigger's row, not a table).
    fn plain(&self, from: usize, to: usize, trigger: bool) -> bool {
        (from..to).all(|i| {
            if self.is_punct_at(i, b'(') || self.is_any_at(i, &[b"NEXT", b"PREVIOUS"]) {
                return false;
            }
            if !self.is_punct_at(i, b'.') {
                return true;
            }
            // NEW and OLD name the row (compared as written, as `policy_bound._qualified` does).
            trigger && i > from && matches!(self.word_at(i - 1), Some(b"NEW" | b"OLD"))
        })
    }

    /// The one table the statement of the piece [verb, to) ending at byte `end` reaches (a
    /// trigger's `NEW.c` / `OLD.c` read as the column `c`), or None: the general path reads it.
    fn key_alone(&self, verb: usize, to: usize, end: usize, trigger: bool) -> Option<BodyTable> {
        let mut before: &[u8] = b"";
        for i in verb + 1..to {
            let Some(w) = self.word_at(i) else {
                continue;
            };
            if one_of(w, NOT_ONE_STATEMENT)
                || (w.eq_ignore_ascii_case(b"UPDATE") && !before.eq_ignore_ascii_case(b"KEY"))
            {
                return None;
            }
            before = w;
        }
        let mut text = Vec::new();
        let mut at = self.toks[verb].start;
        // `INSERT INTO NEW.t`: a database so named, not the trigger's row: the general path reads it.
        let row_db = |d: &[u8]| d.eq_ignore_ascii_case(b"NEW") || d.eq_ignore_ascii_case(b"OLD");
        if trigger
            && dml_shape(&self.sql[at..end]).is_some_and(|s| s.db.as_deref().is_some_and(row_db))
        {
            return None;
        }
        if trigger {
            for i in verb..to.saturating_sub(2) {
                let (word, dot) = (self.toks[i], self.toks[i + 1]);
                if matches!(self.word_at(i), Some(b"NEW" | b"OLD"))
                    && self.is_punct_at(i + 1, b'.')
                    && dot.start == word.end
                {
                    text.extend_from_slice(&self.sql[at..word.start]);
                    at = dot.end;
                }
            }
        }
        text.extend_from_slice(&self.sql[at..end]);
        let shape = dml_shape(&text).filter(|s| reaches_key_alone(&text, s))?;
        Some((shape.db.map(|d| d.into_owned()), shape.table.into_owned()))
    }
}

/// The body of CREATE or ALTER `sql` (a TRIGGER, PROCEDURE, FUNCTION, EVENT or PACKAGE, its
/// header read by the classifier), piece by piece: the tables of the pieces whose statement
/// reaches its table alone with nothing before it that reaches more, the spans of the others (a
/// piece without a statement and without a call, sequence or qualified name reaches nothing:
/// neither). None: the general path reads the whole text.
pub fn body_reach(sql: &[u8], form: u8) -> Option<BodyReach> {
    let lexed = read(sql)?;
    let body = Cur::new(sql, &lexed.toks);
    if !body.is_any_at(0, &[b"CREATE", b"ALTER"]) {
        return None;
    }
    let trigger = form == FORM_TRIGGER;
    let n = body.toks.len();
    let start = body.start(form).min(n);
    if start > 0
        && body.is_punct_at(start - 1, b'.')
        && body.toks.get(start).is_some_and(|t| t.kind == Kind::Str)
    {
        return None; // a first string the whole text's ANSI_QUOTES reading may take for a name
    }
    let mut out = BodyReach::default();
    let mut from = start;
    for i in start..=n {
        if i < n && !body.is_punct_at(i, b';') {
            continue;
        }
        let (piece, to) = (from, i);
        from = i + 1;
        if to <= piece {
            continue;
        }
        let end = if i < n { body.toks[i].start } else { sql.len() };
        let verb = (piece..to).find(|&k| body.is_any_at(k, BODY_VERBS));
        let cleared = match verb {
            None if body.plain(piece, to, trigger) => continue,
            Some(verb) if body.plain(piece, verb, trigger) => {
                body.key_alone(verb, to, end, trigger)
            }
            _ => None,
        };
        match cleared {
            Some(table) => {
                if !out.tables.contains(&table) {
                    out.tables.push(table);
                }
            }
            None => out.declined.push((body.toks[piece].start, end)),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(db: Option<&str>, t: &str) -> BodyTable {
        (db.map(|d| d.as_bytes().to_vec()), t.as_bytes().to_vec())
    }

    #[test]
    fn plain_statements_are_cleared_and_the_rest_declined() {
        let sql = b"CREATE TRIGGER s.tr AFTER INSERT ON s.t FOR EACH ROW BEGIN \
            UPDATE a SET c = NEW.c WHERE id = OLD.id; IF NEW.x > 0 THEN DELETE FROM x.b WHERE id = 1; \
            INSERT INTO c VALUES (f(1)); UPDATE a SET c = 2; END IF; END";
        let r = body_reach(sql, FORM_TRIGGER).expect("read");
        assert_eq!(r.tables, vec![table(None, "a"), table(Some("x"), "b")]);
        let declined: Vec<&[u8]> = r.declined.iter().map(|&(s, e)| &sql[s..e]).collect();
        assert_eq!(declined, vec![&b"INSERT INTO c VALUES (f(1))"[..]]);
    }

    #[test]
    fn a_database_named_new_or_old_is_no_row_of_the_trigger() {
        let sql = b"CREATE TRIGGER s.tr AFTER INSERT ON s.t FOR EACH ROW BEGIN \
            INSERT INTO NEW.t (a) VALUES (OLD.a); UPDATE old.u SET a = 1; END";
        let r = body_reach(sql, FORM_TRIGGER).expect("read");
        assert!(r.tables.is_empty());
        assert_eq!(r.declined.len(), 2);
    }

    #[test]
    fn a_routine_body_starts_after_its_parameters() {
        let sql = b"CREATE PROCEDURE p(IN a INT) BEGIN UPDATE t SET c = NEW.c; CALL q(); END";
        let r = body_reach(sql, FORM_ROUTINE).expect("read");
        assert!(r.tables.is_empty()); // NEW. is no row's in a procedure
        let declined: Vec<&[u8]> = r.declined.iter().map(|&(s, e)| &sql[s..e]).collect();
        assert_eq!(
            declined,
            vec![&b"BEGIN UPDATE t SET c = NEW.c"[..], b"CALL q()"]
        );
    }

    #[test]
    fn a_routine_without_a_parameter_list_starts_after_its_name() {
        // sql_mode=ORACLE: the first parenthesis is the body's, not a parameter list.
        let sql = b"CREATE PROCEDURE s.p AS BEGIN UPDATE x.u SET a = (1); END";
        let r = body_reach(sql, FORM_ROUTINE).expect("read");
        assert_eq!(r.tables, vec![table(Some("x"), "u")]);
        let sql = b"CREATE OR REPLACE PACKAGE BODY IF NOT EXISTS pk AS FUNCTION f RETURN INT AS \
            BEGIN RETURN (SELECT pw FROM x.u); END; END";
        let r = body_reach(sql, FORM_ROUTINE).expect("read");
        assert!(r.tables.is_empty());
        assert_eq!(r.declined.len(), 1);
        assert!(sql[r.declined[0].0..].starts_with(b"AS FUNCTION f RETURN"));
    }

    #[test]
    fn a_byte_outside_ascii_is_read_in_a_string_only() {
        let sql =
            "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO UPDATE t SET a = 'caf\u{e9}'; CALL p()";
        let r = body_reach(sql.as_bytes(), FORM_EVENT).expect("read");
        assert_eq!(r.tables, vec![table(None, "t")]);
        let declined: Vec<&[u8]> = r
            .declined
            .iter()
            .map(|&(s, e)| &sql.as_bytes()[s..e])
            .collect();
        assert_eq!(declined, vec![&b"CALL p()"[..]]);
    }

    #[test]
    fn comments_and_names_outside_ascii_are_read_and_open_text_is_not() {
        // (a name outside ASCII is the general path's: the key reads ASCII names)
        let sql =
            "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO /*!50100 UPDATE t\u{e9} SET a = 1; */ \
            DELETE FROM u WHERE a = '\u{e9}'; -- gone\n CALL p()";
        let r = body_reach(sql.as_bytes(), FORM_EVENT).expect("read");
        assert_eq!(r.tables, vec![table(None, "u")]);
        let declined: Vec<&str> = r.declined.iter().map(|&(s, e)| &sql[s..e]).collect();
        assert_eq!(declined, vec!["UPDATE t\u{e9} SET a = 1", "CALL p()"]);
        for sql in [
            &b"CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO UPDATE t SET a = 'x"[..],
            b"CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO UPDATE t SET a = 1 /* x",
            b"DROP EVENT e",
        ] {
            assert_eq!(
                body_reach(sql, FORM_EVENT),
                None,
                "{}",
                String::from_utf8_lossy(sql)
            );
        }
    }
}
