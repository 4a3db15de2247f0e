//! The bodies of triggers and stored functions: CREATE TRIGGER's trigger, table, timing and
//! event, and for the schema model the tables a trigger's or function's body writes.

use super::lex::{Cur, Kind};
use super::{one_of, BodyWrite, Facts, TriggerDef};

/// CREATE TRIGGER [IF NOT EXISTS] [db.]name {BEFORE|AFTER} {INSERT|UPDATE|DELETE} ON table
/// FOR EACH ROW [{FOLLOWS|PRECEDES} other] body: the trigger, its table (in the trigger's
/// database when unqualified), its definition and what its body writes.
pub fn create_trigger(cur: &mut Cur) -> Option<Facts> {
    cur.if_exists();
    let trigger = cur.qname()?;
    let at = cur.at;
    let mut f = Facts::new("CREATE_TRIGGER");
    f.trigger = Some(trigger);
    if let Some((def, table)) = defined(cur) {
        f.updated.push(table);
        f.trigger_def = Some(def);
        if cur.is(b"FOLLOWS") || cur.is(b"PRECEDES") {
            cur.at += 2; // the trigger it runs after or before
        }
        f.writes = body_writes(cur, cur.at);
        return Some(f);
    }
    // Not a definition the model keeps: the trigger and the table after its first ON.
    cur.at = at;
    if !cur.skip_to(b"ON") {
        return None;
    }
    f.updated.push(cur.qname()?);
    Some(f)
}

/// `{BEFORE|AFTER} {INSERT|UPDATE|DELETE} ON table FOR EACH ROW`: the definition and its table.
fn defined(cur: &mut Cur) -> Option<(TriggerDef, super::lex::QName)> {
    let timing = match cur.word()?.to_ascii_uppercase().as_slice() {
        b"BEFORE" => "BEFORE",
        b"AFTER" => "AFTER",
        _ => return None,
    };
    cur.at += 1;
    let event = match cur.word()?.to_ascii_uppercase().as_slice() {
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
    if !(cur.accept(b"FOR") && cur.accept(b"EACH") && cur.accept(b"ROW")) {
        return None;
    }
    Some((TriggerDef { timing, event }, table))
}

/// CREATE FUNCTION's body, after `RETURNS type[(...)]`: what it writes (`body_writes`), None
/// where no RETURNS is read.
pub fn function_writes(cur: &Cur) -> Option<Vec<BodyWrite>> {
    let returns = (cur.at..cur.toks.len()).find(|&i| cur.is_word_at(i, b"RETURNS"))?;
    let mut at = returns + 2; // the type's name
    if cur.is_punct_at(at, b'(') {
        at = (at..cur.toks.len()).find(|&i| cur.is_punct_at(i, b')'))? + 1; // its length
    }
    body_writes(cur, at.min(cur.toks.len()))
}

/// What a body (its tokens from `from`) writes, in body order: each INSERT, REPLACE, UPDATE or
/// DELETE statement in it (not after KEY, FOR, ON or DUPLICATE: ON DUPLICATE KEY UPDATE, FOR
/// UPDATE, ON DELETE), however nested in BEGIN, IF, CASE or loops, to its `;`: its table and the
/// trigger events it fires where the statement key reads it, else its span (see BodyWrite).
/// None after a CALL, PREPARE or EXECUTE: those could write more.
fn body_writes(cur: &Cur, from: usize) -> Option<Vec<BodyWrite>> {
    let sql = cur.sql;
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
            return None;
        }
        if !one_of(w, &[b"INSERT", b"REPLACE", b"UPDATE", b"DELETE"]) {
            continue;
        }
        let after = |kws: &[&[u8]]| {
            i > from
                && cur.toks[i - 1].kind == Kind::Word
                && one_of(cur.text(&cur.toks[i - 1]), kws)
        };
        if !after(&[b"KEY", b"FOR", b"ON", b"DUPLICATE"]) {
            words.push(i);
        }
    }
    // More write words than MAX_WRITES_PER_STATEMENT before one `;`: no body statement holds
    // them, and reading each from there to the `;` would cost the body's length each time (a
    // hostile CREATE TRIGGER). Not followed.
    let mut run = 0;
    for (k, &i) in words.iter().enumerate() {
        run = if k > 0 && ends[words[k - 1]] == ends[i] {
            run + 1
        } else {
            1
        };
        if run > MAX_WRITES_PER_STATEMENT {
            return None;
        }
    }
    let mut writes = Vec::new();
    for i in words {
        let start = cur.toks[i].start;
        let mut end = trimmed_end(sql, start, ends[i]);
        // `END` right after the last statement: the body's closing END, not the statement's.
        if end - start >= 3 && sql[end - 3..end].eq_ignore_ascii_case(b"END") {
            let before = end - 3;
            if before == start
                || !(sql[before - 1].is_ascii_alphanumeric() || sql[before - 1] == b'_')
            {
                end = before;
            }
        }
        let Some(shape) = crate::stmt::dml_shape(&sql[start..end]) else {
            writes.push(BodyWrite::Piece(start, end));
            continue;
        };
        let events: &[&'static str] = match shape.kind {
            crate::stmt::KIND_INSERT | crate::stmt::KIND_INSERT_SELECT => &["INSERT"],
            crate::stmt::KIND_REPLACE | crate::stmt::KIND_REPLACE_SELECT => &["INSERT", "DELETE"],
            crate::stmt::KIND_UPDATE => &["UPDATE"],
            _ => &["DELETE"],
        };
        let table = (shape.db.map(|d| d.into_owned()), shape.table.into_owned());
        writes.extend(events.iter().map(|e| BodyWrite::Table(table.clone(), e)));
    }
    Some(writes)
}

/// The most write words (INSERT, REPLACE, UPDATE, DELETE) a body's statement may hold before
/// its `;` for the body to be followed.
pub const MAX_WRITES_PER_STATEMENT: usize = 8;

/// `end` moved back over the blanks before it (not past `start`).
fn trimmed_end(sql: &[u8], start: usize, end: usize) -> usize {
    sql[start..end]
        .iter()
        .rposition(|b| !super::lex::space(*b))
        .map_or(start, |e| start + e + 1)
}
