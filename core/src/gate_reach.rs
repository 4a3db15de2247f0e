//! The master policy's gate on the compiled walk (issue #57 goal 3): which statement texts reach
//! nothing but their key's table (`reaches_key_alone`), so that a policy gate's verdict on them
//! is its verdict on that one table, decided once per key; and which Annotate_rows / Rows_query
//! texts of the fast units a stream keeps name only tables it keeps (`annotation_needs`). The
//! policy's bound (`rules.policy_bound`) reads single-table DML by this check too, and a body's
//! statements (body_reach.rs): one reader of the form. A text it does not clear goes to the
//! bound's general path, which reads its whole reach. What a segment's streams read of them,
//! once for all, is gate_reads.rs's.

use crate::le::u32_at;
use crate::stmt::{dml_shape, name_char, one_of, Shape};
use crate::stmt::{KIND_DELETE, KIND_INSERT, KIND_REPLACE, KIND_UPDATE};
use crate::stmt_cues::quote_or_backslash;
use crate::types::{ANNOTATE_ROWS, HEADER_LEN, ROWS_QUERY, TABLE_MAP};

/// Calls that cannot be a stored function's (a subset of `rules.sql_functions.NOT_STORED`,
/// `tests/core/test_gate_reach.py` holds it so), with the words that may stand before a `(`.
const BUILTIN_CALLS: &[&[u8]] = &[
    b"VALUES",
    b"VALUE",
    b"IN",
    b"AND",
    b"OR",
    b"NOT",
    b"XOR",
    b"IS",
    b"LIKE",
    b"NOW",
    b"CONCAT",
    b"IF",
    b"IFNULL",
    b"COALESCE",
    b"GREATEST",
    b"LEAST",
    b"UNIX_TIMESTAMP",
    b"FROM_UNIXTIME",
    b"LOWER",
    b"UPPER",
    b"ABS",
    b"ROUND",
    b"LENGTH",
    b"MD5",
    b"UUID",
    b"RAND",
    b"CURRENT_TIMESTAMP",
    b"SUBSTRING",
    b"REPLACE",
    b"CHAR_LENGTH",
    b"SHA1",
    b"SHA2",
    b"HEX",
    b"UNHEX",
    b"DATE_ADD",
    b"DATE_SUB",
    b"UTC_TIMESTAMP",
    b"CAST",
    b"CONVERT",
    b"FLOOR",
    b"CEIL",
    b"MOD",
    b"WHERE",
    b"SET",
    // A stored routine's statements are logged with each local variable or parameter as
    // NAME_CONST('name', value) (sp_head.cc's subst_spvars, MySQL and MariaDB alike): every
    // Annotate_rows / Rows_query text of a procedure's writes holds it.
    b"NAME_CONST",
];

/// Words after which a text may name tables or sequences its key does not: a query, a CTE,
/// MySQL 8's TABLE t, NEXT / PREVIOUS VALUE FOR.
const REACHING_WORDS: &[&[u8]] = &[b"SELECT", b"WITH", b"TABLE", b"NEXT", b"PREVIOUS"];

/// Bytes passed over outside strings and names: blanks, digits (a number names nothing; a name
/// that starts with digits is read from its first letter), operators and punctuation that cannot
/// make a name, a call, a comment (`dml_shape` has refused `--`, `/*` and `#`) or a second
/// statement. `@` too: `@x` is read as the name `x` (a user variable names no table).
const BORING: [bool; 256] = {
    let mut t = [false; 256];
    let set = b" \t\n\r\x0b\x0c0123456789,)+-*/=<>%!&|^~:?@";
    let mut i = 0;
    while i < set.len() {
        t[set[i] as usize] = true;
        i += 1;
    }
    t
};

/// Whether statement `sql`, of single-table DML shape `shape` (`stmt::dml_shape` of it), reaches
/// its updated table and nothing else: no other qualified name, no call but built-ins, no query,
/// sequence or second statement, no backslash or double quote (whose reading depends on the
/// session's sql_mode), an INSERT ... SELECT never. `rules.policy_bound.statement_reach` reads
/// such a text so: that one table, without the default database.
pub fn reaches_key_alone(sql: &[u8], shape: &Shape) -> bool {
    if !matches!(
        shape.kind,
        KIND_INSERT | KIND_REPLACE | KIND_UPDATE | KIND_DELETE
    ) {
        return false;
    }
    let digits = |name: &[u8]| name.iter().all(u8::is_ascii_digit);
    if shape.db.as_deref().is_some_and(digits) || digits(&shape.table) {
        return false; // a name the dot rule below would read as a number
    }
    let insert = matches!(shape.kind, KIND_INSERT | KIND_REPLACE);
    // The qualified names the text may hold: the table's own, when it is qualified.
    let mut dots_left = usize::from(shape.db.is_some());
    let mut first_paren = true;
    // The last token: a word (its bytes), a backquoted name (its inner bytes), or none.
    let mut last: Option<(&[u8], bool)> = None;
    let mut last_end = 0usize;
    let n = sql.len();
    let mut i = 0;
    while i < n {
        // Blanks, digits and operators, most of a text outside its strings: passed over (the
        // checks below read the gap between a name and what follows it).
        while i < n && BORING[sql[i] as usize] {
            i += 1;
        }
        let Some(&b) = sql.get(i) else {
            break;
        };
        match b {
            b'\\' | b'"' | b';' | b'#' | 0x80..=0xff => return false,
            b'\'' => {
                // A string: its text names nothing.
                i += 1;
                loop {
                    let Some(q) = quote_or_backslash(sql, i, b'\'') else {
                        return false;
                    };
                    if sql[q] == b'\\' {
                        return false;
                    }
                    if q + 1 < n && sql[q + 1] == b'\'' {
                        i = q + 2;
                        continue;
                    }
                    i = q + 1;
                    break;
                }
                last = None;
                last_end = i;
            }
            b'`' => {
                let start = i + 1;
                let Some(len) = sql[start..].iter().position(|c| *c == b'`') else {
                    return false;
                };
                i = start + len;
                if sql.get(i + 1) == Some(&b'`') {
                    return false; // a doubled backquote: left to Python
                }
                last = Some((&sql[start..i], true));
                i += 1;
                last_end = i;
            }
            b'.' => {
                // A qualified name (`x.y`, `x . y`, `.y`, `x.*`), unless a number (`1.5`, `.5`).
                let before = sql[..i].iter().rev().find(|c| !c.is_ascii_whitespace());
                let after = sql[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
                let letter = |c: &u8| c.is_ascii_alphabetic() || matches!(c, b'_' | b'$' | b'`');
                let word_before = last_end == i
                    && matches!(last, Some((w, quoted)) if quoted || !w.iter().all(u8::is_ascii_digit));
                if word_before
                    || before.is_some_and(letter)
                    || after.is_some_and(|c| letter(c) || *c == b'*')
                {
                    if dots_left == 0 {
                        return false;
                    }
                    dots_left -= 1;
                }
                i += 1;
                last = None;
                last_end = i;
            }
            b'(' => {
                let call = last.filter(|_| sql[last_end..i].iter().all(u8::is_ascii_whitespace));
                if let Some((name, quoted)) = call {
                    let own_columns = insert && first_paren && name == &*shape.table;
                    if !own_columns && (quoted || !one_of(name, BUILTIN_CALLS)) {
                        return false;
                    }
                }
                first_paren = false;
                i += 1;
                last = None;
                last_end = i;
            }
            _ if name_char(b) => {
                let start = i;
                while i < n && name_char(sql[i]) {
                    i += 1;
                }
                let w = &sql[start..i];
                if matches!(w[0] | 0x20, b's' | b'w' | b't' | b'n' | b'p')
                    && one_of(w, REACHING_WORDS)
                {
                    return false;
                }
                last = Some((w, false));
                last_end = i;
            }
            _ => return false, // a byte no DML text needs here (`{`, a control byte, ...)
        }
    }
    true
}

/// `reaches_key_alone` of a statement's text, its shape read here.
pub fn text_reaches_key_alone(sql: &[u8]) -> bool {
    dml_shape(sql).is_some_and(|s| reaches_key_alone(sql, &s))
}

/// What a unit's Annotate_rows / Rows_query texts need of a stream for the core to show they reach
/// only tables it keeps (`unit`: its events, checksum `crc` bytes each; `tids`: its Table_maps'
/// name ids in order; `names`: (db, table) by name id): the name ids that must be kept (empty:
/// no such text), or None where a text is not shown to reach a single table of the Table_maps
/// after it (Python reads it). Each text must be single-table DML (`reaches_key_alone`) whose
/// table is among those Table_maps, in the one database they give it when it is unqualified, as
/// `rules.policy_bound.annotation_reach` resolves it; a master's keep bytes are rules AND gate, so
/// a kept name is an allowed one. The same for every stream: read once per unit.
pub fn annotation_needs<N: AsRef<[u8]>>(
    unit: &[u8],
    crc: usize,
    tids: &[u32],
    names: &[(N, N)],
) -> Option<Box<[u32]>> {
    let mut needs: Vec<u32> = Vec::new();
    // The annotation being read (its text) and the Table_maps after it so far.
    let mut text: Option<&[u8]> = None;
    let mut maps: Vec<u32> = Vec::new();
    let (mut at, mut t) = (0usize, 0usize);
    loop {
        let end = at + HEADER_LEN > unit.len();
        let kind = if end { 0 } else { unit[at + 4] };
        if end || kind == ANNOTATE_ROWS || kind == ROWS_QUERY {
            if let Some(sql) = text.take() {
                needs.push(annotation_table(sql, &maps, names)?);
                maps.clear();
            }
            if end {
                break;
            }
        }
        let size = u32_at(unit, at + 9)? as usize;
        if size < HEADER_LEN || at + size > unit.len() {
            return None;
        }
        if kind == ANNOTATE_ROWS || kind == ROWS_QUERY {
            let body = at + HEADER_LEN + usize::from(kind == ROWS_QUERY);
            let stop = (at + size).checked_sub(crc).filter(|s| *s >= body)?;
            text = Some(&unit[body..stop]);
        } else if kind == TABLE_MAP {
            if text.is_some() {
                maps.push(*tids.get(t)?);
            }
            t += 1;
        }
        at += size;
    }
    needs.sort_unstable();
    needs.dedup();
    Some(needs.into_boxed_slice())
}

/// The name id of the one table an annotation's text reaches, among the Table_maps after it.
fn annotation_table<N: AsRef<[u8]>>(sql: &[u8], maps: &[u32], names: &[(N, N)]) -> Option<u32> {
    let shape = dml_shape(sql)?;
    if !reaches_key_alone(sql, &shape) {
        return None;
    }
    let name = |id: u32| names.get(id as usize);
    let mut found: Option<u32> = None;
    for &id in maps {
        let (d, tb) = name(id)?;
        if tb.as_ref() != &*shape.table || shape.db.as_deref().is_some_and(|db| db != d.as_ref()) {
            continue;
        }
        match found {
            // Unqualified: every Table_map of that table name in one database (ids are interned
            // names: another id is another database).
            Some(other) if other != id => return None,
            _ => found = Some(id),
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_texts_reach_their_table_alone() {
        for sql in [
            &b"UPDATE sbtest1 SET k=k+1 WHERE id=5020"[..],
            b"UPDATE sbtest1 SET c='68-96.43 secret.f()' WHERE id=3",
            b"DELETE FROM sbtest1 WHERE id=1.5",
            b"INSERT INTO sbtest1 (id, k, c, pad) VALUES (1, 2, 'x', 'y')",
            b"INSERT INTO t(a) VALUES (NOW()) ON DUPLICATE KEY UPDATE a=VALUES(a)",
            b"INSERT INTO shop.t (a) VALUES (1)",
            b"UPDATE counters SET n = n + 1 WHERE id = 1 + ( NAME_CONST('seed',7) +  NAME_CONST('i',3)) % 100",
            b"INSERT INTO queue (job) VALUES (CONCAT('job-',  NAME_CONST('seed',7) +  NAME_CONST('i',2230)))",
            b"UPDATE `shop`.`t` SET a = .5 WHERE b IN (1, 2)",
        ] {
            assert!(
                text_reaches_key_alone(sql),
                "{}",
                String::from_utf8_lossy(sql)
            );
        }
    }

    #[test]
    fn other_reaches_are_not_shown() {
        for sql in [
            &b"UPDATE t SET a = secret.f(1)"[..],
            b"UPDATE t SET a = f(1)",
            b"UPDATE t SET a = `f`(1)",
            b"UPDATE t SET a = NEXTVAL(s)",
            b"UPDATE t SET a = NEXT VALUE FOR s",
            b"INSERT INTO t VALUES (t(1))",
            b"INSERT INTO t SELECT * FROM secret.s",
            b"UPDATE t SET a=1; DROP TABLE x",
            b"UPDATE t SET a = 'x\\' WHERE b = secret.f()",
            b"UPDATE t SET a = \"x\"",
            b"INSERT INTO shop.t (a) VALUES (secret.s.c)",
            b"UPDATE t SET a = @@session.x",
            b"UPDATE t SET a = secret . f(1)",
            b"INSERT INTO t TABLE s",
        ] {
            assert!(
                !text_reaches_key_alone(sql),
                "{}",
                String::from_utf8_lossy(sql)
            );
        }
    }
}
