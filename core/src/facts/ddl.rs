//! DDL facts: `_create`, `_alter`, `_drop`, `_rename` and `_truncate` of rules.statement_parser
//! for databases, tables, indexes and triggers, step by step; and for the schema model, CREATE
//! TABLE's column names and a trigger's timing, event and the tables its body writes.

use super::lex::{Cur, Kind, QName};
use super::{objects, one_of, raw_word, refs, Facts, TriggerDef};

const CREATE_MODIFIERS: &[&[u8]] = &[
    b"OR",
    b"REPLACE",
    b"TEMPORARY",
    b"UNIQUE",
    b"FULLTEXT",
    b"SPATIAL",
    b"ONLINE",
    b"OFFLINE",
    b"IGNORE",
    b"SQL",
    b"SECURITY",
    b"DEFINER",
    b"INVOKER",
    b"ALGORITHM",
    b"UNDEFINED",
    b"MERGE",
    b"TEMPTABLE",
    b"NO_WRITE_TO_BINLOG",
    b"LOCAL",
];

/// What opens a column list's element that is no column (schema._CONSTRAINT_WORDS).
const CONSTRAINT_WORDS: &[&[u8]] = &[
    b"PRIMARY",
    b"KEY",
    b"INDEX",
    b"UNIQUE",
    b"CONSTRAINT",
    b"FOREIGN",
    b"FULLTEXT",
    b"SPATIAL",
    b"CHECK",
    b"PERIOD",
    b"SYSTEM",
];

fn upper(w: &[u8]) -> Vec<u8> {
    w.to_ascii_uppercase()
}

pub fn create(cur: &mut Cur) -> Option<Facts> {
    cur.skip_modifiers(CREATE_MODIFIERS);
    let temporary = (0..cur.at).any(|i| cur.is_word_at(i, b"TEMPORARY"));
    let obj = upper(cur.word()?);
    cur.at += 1;
    match obj.as_slice() {
        b"DATABASE" | b"SCHEMA" => {
            cur.if_exists();
            let mut f = Facts::new("CREATE_DB");
            f.db_name = Some(cur.identifier()?);
            Some(f)
        }
        b"TABLE" | b"SEQUENCE" => {
            cur.if_exists();
            create_table(cur, temporary)
        }
        b"INDEX" => index(cur, "CREATE_INDEX"),
        b"TRIGGER" => create_trigger(cur),
        b"VIEW" => None, // its query's tables are sqlglot's to list
        other => objects::without_tables(cur, other),
    }
}

/// CREATE TABLE t (...) | LIKE s | ... SELECT: only the new table is updated (rpl_replicate_do).
fn create_table(cur: &mut Cur, temporary: bool) -> Option<Facts> {
    let table = cur.qname()?;
    let paren = cur.accept_punct(b'(');
    let mut f = Facts::new("CREATE_TABLE");
    f.temporary = temporary;
    f.updated.push(table);
    if cur.accept(b"LIKE") {
        f.read.push(cur.qname()?);
        return Some(f);
    }
    let select = (cur.at..cur.toks.len()).find(|&i| cur.is_word_at(i, b"SELECT"));
    match select {
        None => {
            if paren {
                f.columns = column_names(cur);
            }
        }
        Some(select) => {
            // One SELECT over named tables; a join, a union or a subquery is sqlglot's to read
            // (and loose text: `_read_tables` searches the raw text).
            if cur.loose
                || (select + 1..cur.toks.len()).any(|i| cur.is_word_at(i, b"SELECT"))
                || [b"JOIN".as_slice(), b"UNION", b"STRAIGHT_JOIN", b"WITH"]
                    .iter()
                    .any(|w| cur.has_word(w))
            {
                return None;
            }
            cur.at = select + 1;
            let from = cur.find_top_level(b"FROM");
            if let Some(from) = from {
                cur.at = from + 1;
                let mut end = (from + 1..cur.toks.len())
                    .find(|&i| {
                        [b"WHERE".as_slice(), b"GROUP", b"ORDER", b"LIMIT", b"HAVING"]
                            .iter()
                            .any(|w| cur.is_word_at(i, w))
                    })
                    .unwrap_or(cur.toks.len());
                if end == cur.toks.len() && cur.is_punct_at(end - 1, b';') {
                    end -= 1;
                }
                // WHERE, or LIMIT n; GROUP BY, ORDER BY and HAVING are sqlglot's to read.
                let tail_ok = end == cur.toks.len()
                    || end + 1 == cur.toks.len()
                    || cur.is_word_at(end, b"WHERE")
                    || (cur.is_word_at(end, b"LIMIT")
                        && cur.toks.get(end + 1).is_some_and(|t| {
                            t.kind == Kind::Word && cur.text(t).iter().all(u8::is_ascii_digit)
                        })
                        && (end + 2 == cur.toks.len()
                            || (end + 3 == cur.toks.len() && cur.is_punct_at(end + 2, b';'))));
                if !tail_ok {
                    return None;
                }
                let refs = refs::references(cur, end)?;
                f.read = refs.iter().map(|r| r.table.clone()).collect();
                f.refs = refs;
            }
            // Output columns the core cannot name (`*`, an expression) leave the statement to
            // Python: sqlglot reads those lists, and the text around them, its own way.
            let columns = projections(cur, select + 1, from.unwrap_or(cur.toks.len()))?;
            if !paren {
                f.columns = Some(columns);
            }
        }
    }
    Some(f)
}

/// The column list's names (schema._create_columns on a plain CREATE TABLE): the first name of
/// each element that is a column definition (a name, then its type's word). None where an
/// element is anything else, or the list is not closed.
fn column_names(cur: &mut Cur) -> Option<Vec<Vec<u8>>> {
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut first = true;
    let mut i = cur.at;
    while i < cur.toks.len() {
        if cur.is_punct_at(i, b'(') {
            depth += 1;
        } else if cur.is_punct_at(i, b')') {
            if depth == 0 {
                return (!names.is_empty()).then_some(names);
            }
            depth -= 1;
        } else if depth == 0 && cur.is_punct_at(i, b',') {
            first = true;
            i += 1;
            continue;
        } else if depth == 0 && first {
            let t = cur.toks[i];
            if t.kind == Kind::Word && one_of(cur.text(&t), &[b"PERIOD", b"SYSTEM"]) {
                return None; // a column so named, or PERIOD FOR / SYSTEM VERSIONING: sqlglot's call
            } else if t.kind == Kind::Word && one_of(cur.text(&t), CONSTRAINT_WORDS) {
                // A key or a constraint: no column. An index's words must lead to its column
                // list (`key INT` is a column so named: sqlglot's call).
                if one_of(
                    cur.text(&t),
                    &[b"KEY", b"INDEX", b"UNIQUE", b"FULLTEXT", b"SPATIAL"],
                ) {
                    let mut j = i + 1;
                    if cur.is_word_at(j, b"KEY") || cur.is_word_at(j, b"INDEX") {
                        j += 1;
                    }
                    if cur.is_identifier_at(j) && !cur.is_reserved_at(j) {
                        j += 1;
                    }
                    if !cur.is_punct_at(j, b'(') {
                        return None;
                    }
                }
            } else if cur.is_identifier_at(i)
                && !cur.is_reserved_at(i)
                && cur.toks.get(i + 1).is_some_and(|n| n.kind == Kind::Word)
            {
                names.push(cur.name_of(&t).to_ascii_lowercase());
            } else {
                return None;
            }
        }
        first = false;
        i += 1;
    }
    None
}

/// CREATE ... SELECT's output columns where each is a column or `expr AS name` (sqlglot's
/// alias_or_name), lower-cased, repeats dropped; None for `*`, a modifier, an unnamed expression.
fn projections(cur: &Cur, from: usize, end: usize) -> Option<Vec<Vec<u8>>> {
    let mut names: Vec<Vec<u8>> = Vec::new();
    let mut start = from;
    let mut depth = 0usize;
    for i in from..=end {
        if i < end && cur.is_punct_at(i, b'(') {
            depth += 1;
            continue;
        }
        if i < end && cur.is_punct_at(i, b')') {
            depth = depth.checked_sub(1)?;
            continue;
        }
        if i < end && !(depth == 0 && cur.is_punct_at(i, b',')) {
            continue;
        }
        let item = start..i;
        start = i + 1;
        let n = item.len();
        let column = |k: usize| {
            cur.is_identifier_at(item.start + k) && !word_in(cur, item.start + k, SELECT_WORDS)
        };
        // `[db.][t.]column`, or `... AS name`: the name is the item's last token.
        let dotted = n % 2 == 1
            && n <= 5
            && (0..n).all(|k| {
                if k % 2 == 0 {
                    column(k)
                } else {
                    cur.is_punct_at(item.start + k, b'.')
                }
            });
        let aliased =
            n >= 3 && cur.is_word_at(item.end - 2, b"AS") && cur.is_identifier_at(item.end - 1);
        if !(dotted || aliased) {
            return None;
        }
        let name = item.end - 1;
        let name = cur.name_of(&cur.toks[name]).to_ascii_lowercase();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    (!names.is_empty()).then_some(names)
}

/// Words after SELECT that are no column (modifiers): the core gives up on them.
const SELECT_WORDS: &[&[u8]] = &[
    b"DISTINCT",
    b"ALL",
    b"DISTINCTROW",
    b"HIGH_PRIORITY",
    b"STRAIGHT_JOIN",
    b"SQL_SMALL_RESULT",
    b"SQL_BIG_RESULT",
    b"SQL_BUFFER_RESULT",
    b"SQL_NO_CACHE",
    b"SQL_CACHE",
    b"SQL_CALC_FOUND_ROWS",
    b"NULL",
    b"TRUE",
    b"FALSE",
];

fn word_in(cur: &Cur, i: usize, words: &[&[u8]]) -> bool {
    cur.toks[i].kind == Kind::Word && one_of(cur.text(&cur.toks[i]), words)
}

/// CREATE TRIGGER [IF NOT EXISTS] [db.]name {BEFORE|AFTER} {INSERT|UPDATE|DELETE} ON table
/// FOR EACH ROW body: the trigger, its table (in the trigger's database when unqualified) and
/// its definition (read exactly where the schema model's patterns find it, or not at all).
fn create_trigger(cur: &mut Cur) -> Option<Facts> {
    if cur.loose {
        return None; // the model's patterns search the raw text
    }
    cur.if_exists();
    let trigger = cur.qname()?;
    let timing_at = cur.at;
    let timing = match upper(cur.word()?).as_slice() {
        b"BEFORE" => "BEFORE",
        b"AFTER" => "AFTER",
        _ => return None,
    };
    cur.at += 1;
    let event = match upper(cur.word()?).as_slice() {
        b"INSERT" => "INSERT",
        b"UPDATE" => "UPDATE",
        b"DELETE" => "DELETE",
        _ => return None,
    };
    cur.at += 1;
    if !cur.accept(b"ON") {
        return None;
    }
    let table = cur.qname()?;
    let for_at = cur.at;
    if !(cur.accept(b"FOR") && cur.accept(b"EACH") && cur.accept(b"ROW")) {
        return None;
    }
    let sql = cur.sql;
    let first_timing = raw_sequence(
        sql,
        &[
            &[b"BEFORE", b"AFTER"],
            &[b"INSERT", b"UPDATE", b"DELETE"],
            &[b"ON"],
        ],
    )?;
    let first_for = raw_sequence(sql, &[&[b"FOR"], &[b"EACH"], &[b"ROW"]])?;
    if first_timing != cur.toks[timing_at].start || first_for != cur.toks[for_at].start {
        return None;
    }
    let writes = body_writes(cur, cur.at)?;
    let mut f = Facts::new("CREATE_TRIGGER");
    f.updated.push(table);
    f.trigger = Some(trigger);
    f.trigger_def = Some(TriggerDef {
        timing,
        event,
        writes,
    });
    Some(f)
}

/// Where `\bW1\s+W2\s+...\b` (each Wi one of its words, any case) first matches in `sql`.
fn raw_sequence(sql: &[u8], groups: &[&[&[u8]]]) -> Option<usize> {
    let mut from = 0;
    while let Some((start, mut end)) = raw_word(sql, from, groups[0]) {
        let matched = groups[1..].iter().all(|group| {
            let mut i = end;
            while i < sql.len() && super::lex::space(sql[i]) {
                i += 1;
            }
            match raw_word(sql, i, group) {
                Some((s, e)) if s == i && i > end => {
                    end = e;
                    true
                }
                _ => false,
            }
        });
        if matched {
            return Some(start);
        }
        from = start + 1;
    }
    None
}

/// `schema._body_writes` over the body's tokens from `from`: each INSERT, REPLACE, UPDATE or
/// DELETE statement in it (not after KEY, FOR, ON or DUPLICATE) as the key reads it, with the
/// trigger events it fires; Some(None) after a CALL, PREPARE or EXECUTE. None where a statement
/// is not one the key reads (Python then reads the whole trigger).
#[allow(clippy::type_complexity)]
fn body_writes(cur: &Cur, from: usize) -> Option<Option<Vec<(QName, &'static str)>>> {
    let sql = cur.sql;
    let mut from = from;
    if cur.is_word_at(from, b"FOLLOWS") || cur.is_word_at(from, b"PRECEDES") {
        // `^\s*(FOLLOWS|PRECEDES)\s+\S+` is cut from the body: the other trigger's name, read
        // here only where that run of non-blanks is exactly one name token.
        let name = cur.toks.get(from + 1)?;
        let spaced = |i: usize| i >= sql.len() || super::lex::space(sql[i]);
        if !cur.is_identifier_at(from + 1)
            || name.start == cur.toks[from].end
            || !spaced(name.end)
            || sql[name.start..name.end]
                .iter()
                .any(|b| super::lex::space(*b))
        {
            return None;
        }
        from += 2;
    }
    // Each write word's statement runs to the next `;`: found once, from the end back.
    let mut ends = vec![sql.len(); cur.toks.len() + 1];
    for j in (from..cur.toks.len()).rev() {
        ends[j] = if cur.is_punct_at(j, b';') {
            cur.toks[j].start
        } else {
            ends[j + 1]
        };
    }
    let mut words = Vec::new();
    for i in from..cur.toks.len() {
        let t = cur.toks[i];
        if t.kind != Kind::Word {
            continue;
        }
        let w = cur.text(&t);
        if one_of(w, &[b"CALL", b"PREPARE", b"EXECUTE"]) {
            return Some(None);
        }
        if !one_of(w, &[b"INSERT", b"REPLACE", b"UPDATE", b"DELETE"]) {
            continue;
        }
        if i > from
            && cur.toks[i - 1].kind == Kind::Word
            && one_of(
                cur.text(&cur.toks[i - 1]),
                &[b"KEY", b"FOR", b"ON", b"DUPLICATE"],
            )
        {
            continue;
        }
        words.push(i);
    }
    // More write words than MAX_WRITES_PER_STATEMENT before one `;`: no body statement holds
    // them, and reading each from there to the `;` would cost the body's length each time.
    // Not followed (so says schema._body_writes too).
    let mut run = 0;
    for (k, &i) in words.iter().enumerate() {
        run = if k > 0 && ends[words[k - 1]] == ends[i] {
            run + 1
        } else {
            1
        };
        if run > MAX_WRITES_PER_STATEMENT {
            return Some(None);
        }
    }
    let mut writes = Vec::new();
    for i in words {
        let t = cur.toks[i];
        let end = ends[i];
        let mut piece = trim(&sql[t.start..end]);
        // `\bEND\s*$`: a body's closing END after its last statement.
        if piece.len() >= 3 && piece[piece.len() - 3..].eq_ignore_ascii_case(b"END") {
            let before = piece.len() - 3;
            if before == 0
                || !(piece[before - 1].is_ascii_alphanumeric() || piece[before - 1] == b'_')
            {
                piece = &piece[..before];
            }
        }
        let shape = crate::stmt::dml_shape(piece)?;
        let events: &[&'static str] = match shape.kind {
            crate::stmt::KIND_INSERT | crate::stmt::KIND_INSERT_SELECT => &["INSERT"],
            crate::stmt::KIND_REPLACE | crate::stmt::KIND_REPLACE_SELECT => &["INSERT", "DELETE"],
            crate::stmt::KIND_UPDATE => &["UPDATE"],
            _ => &["DELETE"],
        };
        let table = (shape.db.map(|d| d.into_owned()), shape.table.into_owned());
        for event in events {
            writes.push((table.clone(), *event));
        }
    }
    Some(Some(writes))
}

/// The most write words (INSERT, REPLACE, UPDATE, DELETE) a trigger body's statement may hold
/// before its `;` for the body to be followed (schema.MAX_WRITES_PER_STATEMENT).
pub const MAX_WRITES_PER_STATEMENT: usize = 8;

fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !super::lex::space(*b))
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !super::lex::space(*b))
        .map_or(start, |e| e + 1);
    &s[start..end]
}

/// CREATE or DROP INDEX name ... ON table: the table.
fn index(cur: &mut Cur, kind: &'static str) -> Option<Facts> {
    cur.identifier()?;
    if !cur.skip_to(b"ON") {
        return None;
    }
    let mut f = Facts::new(kind);
    f.updated.push(cur.qname()?);
    Some(f)
}

pub fn alter(cur: &mut Cur) -> Option<Facts> {
    cur.skip_modifiers(CREATE_MODIFIERS);
    let obj = upper(cur.word()?);
    cur.at += 1;
    match obj.as_slice() {
        b"TABLE" | b"SEQUENCE" => {}
        b"DATABASE" | b"SCHEMA" => return objects::alter_db(cur),
        b"VIEW" => return objects::alter_view(cur),
        other => return objects::without_tables(cur, other),
    }
    cur.if_exists();
    // ALTER TABLE t RENAME TO u: the new name is not in the table list.
    let mut f = Facts::new("ALTER_TABLE");
    f.updated.push(cur.qname()?);
    Some(f)
}

pub fn drop(cur: &mut Cur) -> Option<Facts> {
    let temporary = cur.accept(b"TEMPORARY");
    let obj = upper(cur.word()?);
    cur.at += 1;
    let mut f = match obj.as_slice() {
        b"DATABASE" | b"SCHEMA" => {
            let mut f = Facts::new("DROP_DB");
            f.if_exists = cur.if_exists();
            f.db_name = Some(cur.identifier()?);
            return Some(f);
        }
        b"TABLE" | b"TABLES" | b"SEQUENCE" => Facts::new("DROP_TABLE"),
        b"INDEX" => return index(cur, "DROP_INDEX"),
        b"TRIGGER" => {
            let mut f = Facts::new("DROP_TRIGGER");
            f.if_exists = cur.if_exists();
            // The table is not in the statement; the applier looks it up (Bug#24478).
            f.trigger = Some(cur.qname()?);
            return Some(f);
        }
        b"VIEW" => return objects::drop_view(cur),
        other => return objects::without_tables(cur, other),
    };
    f.temporary = temporary;
    f.if_exists = cur.if_exists();
    f.updated = cur.name_list()?;
    Some(f)
}

pub fn rename(cur: &mut Cur) -> Option<Facts> {
    if cur.is(b"USER") || cur.is(b"ROLE") {
        return objects::without_tables(cur, b"USER");
    }
    if !(cur.accept(b"TABLE") || cur.accept(b"TABLES")) {
        return None;
    }
    let mut f = Facts::new("RENAME_TABLE");
    loop {
        let source = cur.qname()?;
        if !cur.accept(b"TO") {
            return None;
        }
        f.renames.push((source, cur.qname()?));
        if !cur.accept_punct(b',') {
            return Some(f);
        }
    }
}

pub fn truncate(cur: &mut Cur) -> Option<Facts> {
    cur.accept(b"TABLE");
    let mut f = Facts::new("TRUNCATE");
    f.updated.push(cur.qname()?);
    Some(f)
}
