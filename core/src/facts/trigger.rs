//! CREATE TRIGGER: the trigger, its table, and for the schema model its timing, event and the
//! tables its body writes (the model's `_create_trigger` and `ddl_text.body_writes`), read
//! exactly where those find them, or not at all (the model then reads the text).

use super::lex::{upper, Cur, Kind, QName};
use super::{one_of, raw_word, Facts, TriggerDef};

/// CREATE TRIGGER [IF NOT EXISTS] [db.]name {BEFORE|AFTER} {INSERT|UPDATE|DELETE} ON table
/// FOR EACH ROW body: the trigger, its table (in the trigger's database when unqualified) and
/// its definition (read exactly where the schema model's patterns find it, or not at all).
pub fn create_trigger(cur: &mut Cur) -> Option<Facts> {
    let at = cur.at;
    if let Some(f) = defined(cur).filter(|_| !cur.loose) {
        return Some(f); // (loose text: the model's patterns search the raw text)
    }
    // The trigger and the table after its first ON; the model reads the rest from the text.
    cur.at = at;
    cur.if_exists();
    let trigger = cur.qname()?;
    if !cur.skip_to(b"ON") {
        return None;
    }
    let mut f = Facts::new("CREATE_TRIGGER");
    f.updated.push(cur.qname()?);
    f.trigger = Some(trigger);
    Some(f)
}

/// CREATE TRIGGER with the definition read.
fn defined(cur: &mut Cur) -> Option<Facts> {
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

/// `ddl_text.body_writes` over the body's tokens from `from`: each INSERT, REPLACE, UPDATE or
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
    // Not followed (so says ddl_text.body_writes too).
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
/// before its `;` for the body to be followed (ddl_text.MAX_WRITES_PER_STATEMENT).
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
