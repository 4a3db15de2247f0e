//! Statement facts (issues #43, #80): the one reader of a Query's text the statement keys do not
//! cover: its kind, DDL (databases, tables, indexes, renames, triggers with the tables their
//! bodies write), multi-table UPDATE and DELETE (their table references, aliases, SET columns and
//! delete targets), accounts, routines and the statements without tables. The Python side
//! (`rules.statement_facts`) applies the default database and the rules over these parts (which
//! reference a target names, WL#40's rename list).
//!
//! The tables a statement only reads (a subquery's, an INSERT ... SELECT's, a view's query) are
//! sqlglot's to list: where the core does not read them itself it hands Python the text to read
//! them from (`read_text`, and for a multi-table statement whose references it does not read,
//! `refs_text`). None: the text is no statement (unclosed, no verb, a shape the server refuses).

pub mod ddl;
pub mod lex;
mod objects;
pub mod refs;
pub mod script;
pub mod trigger;

use crate::stmt::framing;
pub(crate) use crate::stmt::one_of;
use crate::stmt_cues::word;
use lex::{Cur, Kind, QName};
pub use refs::Ref;

/// A column change of ALTER TABLE: (None, new) a column added, (old, None) one dropped, (old,
/// new) one renamed (CHANGE, RENAME COLUMN); names lower-cased.
pub type ColumnChange = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A SET assignment's column: its qualifier's parts (None: unqualified) and its name.
pub type SetColumn = (Option<Vec<Vec<u8>>>, Vec<u8>);

/// A trigger's definition as the schema model keeps it: its timing and event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerDef {
    pub timing: &'static str,
    pub event: &'static str,
}

/// A write of a trigger's or stored function's body, in body order: a table (without a
/// database: the trigger's or function's) and the trigger event it fires there; or a body
/// statement the statement key does not read, as its byte span of the text, which
/// `rules.statement_facts` reads as a statement of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyWrite {
    Table(QName, &'static str),
    Piece(usize, usize),
}

/// What a statement's decision reads (see the module's doc). Names without a database are the
/// default database's, except a trigger's table (the trigger's database).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// The `rules.statement_info.Kind` value.
    pub kind: &'static str,
    pub updated: Vec<QName>,
    /// Tables read, in order, before Python drops the updated ones, repeats and alias names.
    pub read: Vec<QName>,
    pub temporary: bool,
    pub if_exists: bool,
    pub db_name: Option<Vec<u8>>,
    pub renames: Vec<(QName, QName)>,
    pub trigger: Option<QName>,
    /// Multi-table UPDATE and DELETE: the references (`updated` is left to Python, which
    /// resolves `qualifiers` or `targets` against them under the default database).
    pub refs: Vec<Ref>,
    pub set_columns: Vec<SetColumn>,
    pub targets: Vec<Vec<Vec<u8>>>,
    /// CREATE TABLE's column names (lower-cased), where the core reads them all.
    pub columns: Option<Vec<Vec<u8>>>,
    /// ALTER TABLE's column changes in order (None: not read; see ddl::alter_actions).
    pub column_changes: Option<Vec<ColumnChange>>,
    pub trigger_def: Option<TriggerDef>,
    /// What a CREATE TRIGGER's or CREATE FUNCTION's body writes (None: not followed: a CALL or
    /// dynamic SQL could write more; a function without RETURNS).
    pub writes: Option<Vec<BodyWrite>>,
    /// The object a statement without a table list changes (WL#2516 needs its database):
    /// (object type, its name: a database None for the default one).
    pub target: Option<(&'static str, QName)>,
    /// The text sqlglot lists the read tables from, where the core leaves them to it.
    pub read_text: Option<Vec<u8>>,
    /// A multi-table UPDATE or DELETE's references (from the text's first WHERE, ORDER BY or
    /// LIMIT word on cut off by Python), where sqlglot reads them: `refs` is empty then.
    pub refs_text: Option<Vec<u8>>,
    /// WITH's common table expressions: unqualified, these names are no tables.
    pub ctes: Vec<Vec<u8>>,
}

impl Facts {
    fn new(kind: &'static str) -> Self {
        Facts {
            kind,
            ..Default::default()
        }
    }
}

/// Whether every parenthesis of `sql` outside its strings, names and comments closes, in order,
/// and nothing is left open (a schema file's DDL cut short: `CREATE TABLE t (a INT`).
pub fn parens_close(sql: &[u8]) -> bool {
    let Some(lexed) = lex::read(sql) else {
        return false; // a string, name or comment left open
    };
    let mut depth = 0usize;
    for t in &lexed.toks {
        if t.kind != lex::Kind::Punct {
            continue;
        }
        match sql[t.start] {
            b'(' => depth += 1,
            b')' => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            _ => {}
        }
    }
    depth == 0
}

/// A statement's class off its facts alone: its kind and the tables it updates (a database None
/// where the text gives none), where those are all its decision reads of the text; None where
/// there are no facts, CTEs or renames, or no table updated but some read (`statement_class`,
/// `lone_class::LoneClasses`).
pub fn class(sql: &[u8]) -> Option<(&'static str, Vec<QName>)> {
    let f = facts(sql)?;
    let reads = f.read_text.is_some() || !f.refs.is_empty() || !f.read.is_empty();
    if !f.ctes.is_empty() || !f.renames.is_empty() || (f.updated.is_empty() && reads) {
        return None;
    }
    Some((f.kind, f.updated))
}

/// The facts of `sql` (a Query's text), or None: no statement the rules read.
pub fn facts(sql: &[u8]) -> Option<Facts> {
    let first = sql.iter().position(|b| !lex::space(*b))?;
    let verb_end = sql[first..]
        .iter()
        .position(|b| !b.is_ascii_alphabetic())
        .map_or(sql.len(), |n| first + n);
    // The key's shapes first, for the verbs it reads, before the text is lexed: a bulk INSERT is
    // most of a statement binlog's bytes.
    if one_of(
        &sql[first..verb_end],
        &[b"INSERT", b"REPLACE", b"UPDATE", b"DELETE"],
    ) {
        let shape = crate::stmt::dml_shape(sql);
        let kind = shape.as_ref().and_then(|shape| match shape.kind {
            crate::stmt::KIND_INSERT => Some("INSERT"),
            crate::stmt::KIND_REPLACE => Some("REPLACE"),
            crate::stmt::KIND_UPDATE => Some("UPDATE"),
            crate::stmt::KIND_DELETE => Some("DELETE"),
            _ => None,
        });
        if let (Some(shape), Some(kind)) = (shape, kind) {
            let mut f = Facts::new(kind);
            f.updated
                .push((shape.db.map(|d| d.into_owned()), shape.table.into_owned()));
            return Some(f);
        }
    }
    let lexed = lex::read(sql)?;
    let toks = lexed.toks;
    let mut cur = Cur::new(sql, &toks);
    cur.loose = lexed.loose;
    let verb = cur.word()?.to_ascii_uppercase();
    cur.at = 1;
    statement(&mut cur, &verb)
}

/// The statement opening with `verb` (upper-cased; the cursor after it).
fn statement(cur: &mut Cur, verb: &[u8]) -> Option<Facts> {
    match verb {
        b"INSERT" => insert(cur, "INSERT"),
        b"REPLACE" => insert(cur, "REPLACE"),
        b"UPDATE" => update(cur),
        b"DELETE" => delete(cur),
        b"WITH" => with(cur),
        b"LOAD" => load(cur),
        b"CREATE" => ddl::create(cur),
        b"ALTER" => ddl::alter(cur),
        b"DROP" => ddl::drop(cur),
        b"RENAME" => ddl::rename(cur),
        b"TRUNCATE" => ddl::truncate(cur),
        b"ANALYZE" | b"OPTIMIZE" | b"REPAIR" => ddl::maintenance(cur),
        b"GRANT" | b"REVOKE" => objects::grant(cur),
        b"CALL" => objects::call(cur),
        b"SET" => Some(objects::set(cur)),
        b"INSTALL" | b"UNINSTALL" => Some(objects::plugin()),
        // Only what a replica applies whatever its filters (stmt::framing, the raw text) is a
        // transaction statement: "begin", " COMMIT", RELEASE SAVEPOINT or START TRANSACTION
        // are judged like any statement (db_ok on the default database).
        b"BEGIN" | b"COMMIT" | b"ROLLBACK" | b"SAVEPOINT" | b"XA" if framing(cur.sql) => {
            Some(Facts::new("TRANSACTION"))
        }
        b"START" if cur.is(b"TRANSACTION") => Some(Facts::new("OTHER")),
        b"BEGIN" | b"COMMIT" | b"ROLLBACK" | b"SAVEPOINT" | b"XA" | b"RELEASE" | b"DO"
        | b"SIGNAL" | b"RESIGNAL" | b"FLUSH" | b"USE" | b"LOCK" | b"UNLOCK" | b"HANDLER"
        | b"PREPARE" | b"EXECUTE" | b"DEALLOCATE" | b"SHUTDOWN" => Some(Facts::new("OTHER")),
        _ => None,
    }
}

/// The statement without its modifiers (LOW_PRIORITY, IGNORE, ...: sqlglot reads them as a
/// table's name): `verb`, then the text from the cursor on.
fn unmodified(cur: &Cur, verb: &[u8]) -> Vec<u8> {
    [verb, &text_from(cur, cur.at)].concat()
}

/// The text from token `i` on (empty past the end).
fn text_from(cur: &Cur, i: usize) -> Vec<u8> {
    cur.toks
        .get(i)
        .map_or(&[][..], |t| &cur.sql[t.start..])
        .to_vec()
}

/// INSERT or REPLACE the key does not read (`... SELECT`, a comment): its table, and the rest
/// of the text for sqlglot's read tables.
fn insert(cur: &mut Cur, kind: &'static str) -> Option<Facts> {
    cur.skip_modifiers(&[b"LOW_PRIORITY", b"DELAYED", b"HIGH_PRIORITY", b"IGNORE"]);
    cur.accept(b"INTO");
    let mut f = Facts::new(kind);
    f.updated.push(cur.qname()?);
    f.read_text = Some(text_from(cur, cur.at));
    Some(f)
}

/// WITH [RECURSIVE] c AS (...)[, ...] UPDATE|DELETE|INSERT|REPLACE ...: the main statement's
/// facts, and the names of its common table expressions.
fn with(cur: &mut Cur) -> Option<Facts> {
    cur.accept(b"RECURSIVE");
    let mut ctes = Vec::new();
    loop {
        ctes.push(cur.identifier()?);
        if cur.accept_punct(b'(') {
            cur.skip_balanced()?;
        }
        if !(cur.accept(b"AS") && cur.accept_punct(b'(')) {
            return None;
        }
        cur.skip_balanced()?;
        if !cur.accept_punct(b',') {
            break;
        }
    }
    let verb = cur.word()?.to_ascii_uppercase();
    cur.at += 1;
    let mut f = match verb.as_slice() {
        b"SELECT" => return Some(Facts::new("OTHER")),
        b"UPDATE" | b"DELETE" | b"INSERT" | b"REPLACE" => statement(cur, &verb)?,
        _ => return None,
    };
    if f.read_text.is_some() {
        f.read_text = Some(cur.sql.to_vec()); // the expressions' tables are read too
    }
    f.ctes = ctes;
    Some(f)
}

/// `\b` at `i` of ASCII text, as Python's `re` sees it (word characters: letters, digits, `_`).
fn boundary(sql: &[u8], i: usize) -> bool {
    let before = i > 0 && word(sql[i - 1]);
    let after = i < sql.len() && word(sql[i]);
    before != after
}

/// Where `\b(w1|w2|...)\b` (case-insensitive) first matches in `sql[from..]`, as its start
/// and end.
fn raw_word(sql: &[u8], from: usize, words: &[&[u8]]) -> Option<(usize, usize)> {
    (from..sql.len()).find_map(|i| {
        if !boundary(sql, i) {
            return None;
        }
        words.iter().find_map(|w| {
            let end = i + w.len();
            (end <= sql.len() && sql[i..end].eq_ignore_ascii_case(w) && boundary(sql, end))
                .then_some((i, end))
        })
    })
}

/// Whether the statement's text (anywhere, strings included) holds SELECT, FROM or JOIN as a
/// word: `statement_facts._read_tables` asks sqlglot for tables only then.
fn lists_reads(sql: &[u8]) -> bool {
    raw_word(sql, 0, &[b"SELECT", b"FROM", b"JOIN"]).is_some()
}

/// UPDATE the key does not read: its references read here where they are plain, else by sqlglot.
fn update(cur: &mut Cur) -> Option<Facts> {
    let at = cur.at;
    if let Some(f) = update_plain(cur) {
        return Some(f);
    }
    cur.at = at;
    cur.skip_modifiers(&[b"LOW_PRIORITY", b"IGNORE"]);
    let set = cur.find_top_level(b"SET")?;
    let mut f = Facts::new("UPDATE");
    f.refs_text = Some(cur.sql[cur.toks.get(cur.at)?.start..cur.toks[set].start].to_vec());
    f.set_columns = set_columns(cur, set + 1);
    f.read_text = Some(unmodified(cur, b"UPDATE "));
    Some(f)
}

/// Multi-table UPDATE (and a single-table one the key does not read, with an alias) over plain
/// references (no subquery, comment or modifier: sqlglot's to read).
fn update_plain(cur: &mut Cur) -> Option<Facts> {
    if cur.loose || cur.has_word(b"SELECT") || cur.has_word(b"WITH") {
        return None; // a subquery's tables are sqlglot's to list
    }
    // LOW_PRIORITY, IGNORE: the general reader hands sqlglot the text without them.
    if cur.is(b"LOW_PRIORITY") || cur.is(b"IGNORE") {
        return None;
    }
    let set = cur.find_top_level(b"SET")?;
    let refs = refs::references(cur, set)?;
    // Clauses an UPDATE does not take (and ORDER BY, LIMIT past one table): the server refuses
    // them, and sqlglot reads the text around them its own way.
    let clause = |w: &[u8]| {
        let mut c = Cur::new(cur.sql, cur.toks);
        c.at = set + 1;
        c.find_top_level(w).is_some()
    };
    let clauses: [&[u8]; 5] = [b"GROUP", b"HAVING", b"UNION", b"RETURNING", b"INTO"];
    if clauses.iter().any(|w| clause(w))
        || (refs.len() > 1 && (clause(b"ORDER") || clause(b"LIMIT")))
    {
        return None;
    }
    let set_columns = set_columns(cur, set + 1);
    let kind = if refs.len() == 1 {
        "UPDATE"
    } else {
        "UPDATE_MULTI"
    };
    let mut f = Facts::new(kind);
    if lists_reads(cur.sql) {
        f.read = refs.iter().map(|r| r.table.clone()).collect();
    }
    f.refs = refs;
    f.set_columns = set_columns;
    Some(f)
}

/// `_set_columns`: each SET assignment's (qualifier parts, column).
fn set_columns(cur: &Cur, from: usize) -> Vec<SetColumn> {
    let mut columns = Vec::new();
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let (mut depth, mut expecting) = (0i32, true);
    for i in from..cur.toks.len() {
        if cur.is_punct_at(i, b'(') {
            depth += 1;
        } else if cur.is_punct_at(i, b')') {
            depth -= 1;
        } else if depth == 0 && cur.is_any_at(i, &[b"WHERE", b"ORDER", b"LIMIT"]) {
            break;
        } else if depth == 0 && cur.is_punct_at(i, b',') {
            expecting = true;
            parts.clear();
        } else if depth == 0 && expecting && cur.is_punct_at(i, b'=') {
            if let Some((column, qualifier)) = parts.split_last() {
                let qualifier = (!qualifier.is_empty()).then(|| qualifier.to_vec());
                columns.push((qualifier, column.clone()));
            }
            expecting = false;
        } else if depth == 0 && expecting && cur.is_identifier_at(i) {
            parts.push(cur.name_of(&cur.toks[i]).into_owned());
        }
    }
    columns
}

/// DELETE the key does not read, its three forms: its references read here where they are
/// plain, else by sqlglot.
fn delete(cur: &mut Cur) -> Option<Facts> {
    let at = cur.at;
    if let Some(f) = delete_plain(cur) {
        return Some(f);
    }
    cur.at = at;
    cur.skip_modifiers(&[b"LOW_PRIORITY", b"QUICK", b"IGNORE"]);
    let read_text = Some(unmodified(cur, b"DELETE "));
    let (start, end) = if cur.accept(b"FROM") {
        let start = cur.at;
        match cur.find_top_level(b"USING") {
            Some(using) => (start, using),
            None => {
                let mut f = Facts::new("DELETE");
                f.updated.push(cur.qname()?);
                f.read_text = read_text;
                return Some(f);
            }
        }
    } else {
        (cur.at, cur.find_top_level(b"FROM")?)
    };
    let mut f = Facts::new("DELETE_MULTI");
    f.targets = targets(cur, start, end, false)?;
    let refs = text_from(cur, end + 1);
    if refs.is_empty() {
        return None; // nothing after FROM or USING
    }
    f.refs_text = Some(refs);
    f.read_text = read_text;
    Some(f)
}

/// DELETE over plain references (as UPDATE's).
fn delete_plain(cur: &mut Cur) -> Option<Facts> {
    if cur.loose || cur.has_word(b"SELECT") || cur.has_word(b"WITH") {
        return None;
    }
    if cur.is(b"LOW_PRIORITY") || cur.is(b"QUICK") || cur.is(b"IGNORE") {
        return None; // (as for UPDATE)
    }
    let (targets, refs_from) = if cur.accept(b"FROM") {
        let start = cur.at;
        match cur.find_top_level(b"USING") {
            None => {
                // DELETE FROM t [[AS] a] ...: one table (the key reads it when it has no alias).
                let table = cur.qname()?;
                cur.accept(b"AS");
                if cur.is_identifier_at(cur.at) && !ends_single_delete(cur) {
                    cur.at += 1;
                }
                if !(cur.at == cur.toks.len() || ends_single_delete(cur)) {
                    return None;
                }
                let mut f = Facts::new("DELETE");
                f.updated.push(table);
                return Some(f);
            }
            Some(using) => (targets(cur, start, using, true)?, using + 1),
        }
    } else {
        let from = cur.find_top_level(b"FROM")?;
        let start = cur.at;
        (targets(cur, start, from, true)?, from + 1)
    };
    let refs_start = cur.toks.get(refs_from)?.start;
    // `_cut_at_where`: the references end at the text's first WHERE, ORDER BY or LIMIT word,
    // wherever it is (a string, a backquoted name): the core reads on only where it is a word.
    let end = match raw_cut(cur.sql, refs_start) {
        None => cur.toks.len(),
        Some(at) => cur
            .toks
            .iter()
            .position(|t| t.start == at && t.kind == Kind::Word)?,
    };
    // A multi-table DELETE takes no ORDER BY or LIMIT: the server refuses them, and sqlglot reads
    // what follows its own way.
    if end < cur.toks.len() && !cur.is_word_at(end, b"WHERE") {
        return None;
    }
    if (refs_from..end).any(|i| cur.toks[i].kind == Kind::Str) {
        return None;
    }
    cur.at = refs_from;
    let refs = refs::references(cur, end)?;
    let mut f = Facts::new("DELETE_MULTI");
    if lists_reads(cur.sql) {
        // sqlglot lists the targets' tables first, then the references'.
        f.read = targets
            .iter()
            .filter_map(|t| match t.as_slice() {
                [name] => Some((None, name.clone())),
                [db, name] => Some((Some(db.clone()), name.clone())),
                _ => None,
            })
            .chain(refs.iter().map(|r| r.table.clone()))
            .collect();
    }
    f.refs = refs;
    f.targets = targets;
    Some(f)
}

/// LOAD DATA ... INTO TABLE t ...: `_load`, the table after the first INTO TABLE.
fn load(cur: &mut Cur) -> Option<Facts> {
    while cur.at < cur.toks.len() && !(cur.is(b"INTO") && cur.is_word_at(cur.at + 1, b"TABLE")) {
        cur.at += 1;
    }
    if cur.at >= cur.toks.len() {
        return None;
    }
    cur.at += 2;
    let mut f = Facts::new("LOAD_DATA");
    f.updated.push(cur.qname()?);
    Some(f)
}

fn ends_single_delete(cur: &Cur) -> bool {
    cur.is_any_at(cur.at, &[b"WHERE", b"ORDER", b"LIMIT"])
        || (cur.is_punct_at(cur.at, b';') && cur.at + 1 == cur.toks.len())
}

/// The delete targets: the names between `start` and `end`, split at commas (`a, db.b.*`: a,
/// db.b). `plain`: None where a target has more than two parts or anything but names and dots is
/// there, or none is.
fn targets(cur: &Cur, start: usize, end: usize, plain: bool) -> Option<Vec<Vec<Vec<u8>>>> {
    let mut targets = Vec::new();
    let mut parts: Vec<Vec<u8>> = Vec::new();
    for i in start..end {
        if cur.is_identifier_at(i) {
            parts.push(cur.name_of(&cur.toks[i]).into_owned());
        } else if cur.is_punct_at(i, b',') {
            targets.push(std::mem::take(&mut parts));
        } else if plain && !cur.is_punct_at(i, b'.') {
            return None; // `t.*` too: sqlglot does not read it
        }
    }
    targets.push(parts);
    targets.retain(|t| !t.is_empty());
    if plain && (targets.is_empty() || targets.iter().any(|t| t.len() > 2)) {
        return None;
    }
    Some(targets)
}

/// The start of `\b(WHERE|ORDER\s+BY|LIMIT)\b`'s first match in sql[from..].
fn raw_cut(sql: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some((start, end)) = raw_word(sql, at, &[b"WHERE", b"ORDER", b"LIMIT"]) {
        if !sql[start..end].eq_ignore_ascii_case(b"ORDER") {
            return Some(start);
        }
        let i = end + sql[end..].iter().take_while(|b| lex::space(**b)).count();
        if i > end && raw_word(sql, i, &[b"BY"]).is_some_and(|(s, _)| s == i) {
            return Some(start);
        }
        at = end;
    }
    None
}

#[cfg(test)]
mod tests;
