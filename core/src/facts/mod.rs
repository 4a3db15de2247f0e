//! Statement facts (issue #43): what the rule engine reads of a Query the statement keys do not
//! cover, read here instead of by the Python parser: DDL (databases, tables, indexes, renames,
//! triggers with the tables their bodies write) and multi-table UPDATE and DELETE (their table
//! references, aliases, SET columns and delete targets). The Python side (`rules.statement_facts`)
//! applies the default database and the parser's own rules over these parts (which reference a
//! target names, WL#40's rename list), so each part here is what `rules.statement_parser` reads
//! from its tokens, by the same steps.
//!
//! Where the core is not sure to read a statement as the Python parser does (non-ASCII text, a
//! comment, a subquery, a shape sqlglot reads otherwise), `facts` is None and Python parses it;
//! tests/core/test_statement_facts.py holds every answer here to the parser's.

pub mod ddl;
pub mod lex;
mod objects;
pub mod refs;

use lex::{Cur, Kind, QName, Tok};
pub use refs::Ref;

/// A SET assignment's column: its qualifier's parts (None: unqualified) and its name.
pub type SetColumn = (Option<Vec<Vec<u8>>>, Vec<u8>);

/// A trigger's definition as the schema model keeps it: timing, event, and the (table, event)
/// its body writes in body order (None: a CALL or dynamic SQL could write more). A table
/// without a database is in the trigger's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerDef {
    pub timing: &'static str,
    pub event: &'static str,
    pub writes: Option<Vec<(QName, &'static str)>>,
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
    pub trigger_def: Option<TriggerDef>,
    /// The object a statement without a table list changes (WL#2516 needs its database):
    /// (object type, its name: a database None for the default one).
    pub target: Option<(&'static str, QName)>,
}

impl Facts {
    fn new(kind: &'static str) -> Self {
        Facts {
            kind,
            ..Default::default()
        }
    }
}

/// The facts of `sql` (a Query's text), or None where Python's parser reads it.
pub fn facts(sql: &[u8]) -> Option<Facts> {
    let first = sql.iter().position(|b| !lex::space(*b))?;
    // The verbs read here; every other text goes to Python before it is lexed.
    let verb_end = sql[first..]
        .iter()
        .position(|b| !b.is_ascii_alphabetic())
        .map_or(sql.len(), |n| first + n);
    let verb = &sql[first..verb_end];
    if !one_of(
        verb,
        &[
            b"INSERT",
            b"REPLACE",
            b"UPDATE",
            b"DELETE",
            b"LOAD",
            b"CREATE",
            b"ALTER",
            b"DROP",
            b"RENAME",
            b"TRUNCATE",
            b"GRANT",
            b"REVOKE",
            b"CALL",
        ],
    ) {
        return None;
    }
    if let Some(shape) = crate::stmt::dml_shape(sql) {
        // The key's shapes; an INSERT ... SELECT's read tables are the parser's (sqlglot's) to list.
        let kind = match shape.kind {
            crate::stmt::KIND_INSERT => "INSERT",
            crate::stmt::KIND_REPLACE => "REPLACE",
            crate::stmt::KIND_UPDATE => "UPDATE",
            crate::stmt::KIND_DELETE => "DELETE",
            _ => return None,
        };
        let mut f = Facts::new(kind);
        f.updated
            .push((shape.db.map(|d| d.into_owned()), shape.table.into_owned()));
        return Some(f);
    }
    let lexed = lex::tokens(sql)?;
    let toks = lexed.toks;
    let mut cur = Cur::new(sql, &toks);
    cur.loose = lexed.loose;
    if toks.first().map(|t| t.end - t.start) != Some(verb.len()) {
        return None; // `CREATE_x ...`: no verb of these
    }
    cur.at = 1;
    let verb = verb.to_ascii_uppercase();
    match verb.as_slice() {
        b"UPDATE" => update(&mut cur),
        b"DELETE" => delete(&mut cur),
        b"LOAD" => load(&mut cur),
        b"CREATE" => ddl::create(&mut cur),
        b"ALTER" => ddl::alter(&mut cur),
        b"DROP" => ddl::drop(&mut cur),
        b"RENAME" => ddl::rename(&mut cur),
        b"TRUNCATE" => ddl::truncate(&mut cur),
        b"GRANT" | b"REVOKE" => objects::grant(&mut cur),
        b"CALL" => objects::call(&mut cur),
        _ => None,
    }
}

pub(crate) fn one_of(t: &[u8], words: &[&[u8]]) -> bool {
    words.iter().any(|w| t.eq_ignore_ascii_case(w))
}

/// `\b` at `i` of ASCII text, as Python's `re` sees it (word characters: letters, digits, `_`).
fn boundary(sql: &[u8], i: usize) -> bool {
    let w = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let before = i > 0 && w(sql[i - 1]);
    let after = i < sql.len() && w(sql[i]);
    before != after
}

/// Where `\b(w1|w2|...)\b` (case-insensitive) first matches in `sql[from..]`, as its start
/// and end.
pub(crate) fn raw_word(sql: &[u8], from: usize, words: &[&[u8]]) -> Option<(usize, usize)> {
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
/// word: `statement_parser._read_tables` asks sqlglot for tables only then.
fn lists_reads(sql: &[u8]) -> bool {
    raw_word(sql, 0, &[b"SELECT", b"FROM", b"JOIN"]).is_some()
}

/// Multi-table UPDATE (and a single-table one the key does not read, with an alias): `_update`.
fn update(cur: &mut Cur) -> Option<Facts> {
    if cur.loose || cur.has_word(b"SELECT") || cur.has_word(b"WITH") {
        return None; // a subquery's tables are sqlglot's to list
    }
    // LOW_PRIORITY, IGNORE: sqlglot reads them as a table's name (its read list is the parser's).
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
    if [
        b"GROUP".as_slice(),
        b"HAVING",
        b"UNION",
        b"RETURNING",
        b"INTO",
    ]
    .iter()
    .any(|w| clause(w))
        || (refs.len() > 1 && (clause(b"ORDER") || clause(b"LIMIT")))
    {
        return None;
    }
    let set_columns = set_columns(cur, set + 1);
    let mut f = Facts::new(if refs.len() == 1 {
        "UPDATE"
    } else {
        "UPDATE_MULTI"
    });
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
        } else if depth == 0
            && (cur.is_word_at(i, b"WHERE")
                || cur.is_word_at(i, b"ORDER")
                || cur.is_word_at(i, b"LIMIT"))
        {
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

/// DELETE: `_delete`, its three forms.
fn delete(cur: &mut Cur) -> Option<Facts> {
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
            Some(using) => (targets(cur, start, using)?, using + 1),
        }
    } else {
        let from = cur.find_top_level(b"FROM")?;
        let start = cur.at;
        (targets(cur, start, from)?, from + 1)
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
    cur.is(b"WHERE")
        || cur.is(b"ORDER")
        || cur.is(b"LIMIT")
        || (cur.is_punct_at(cur.at, b';') && cur.at + 1 == cur.toks.len())
}

/// `_delete_targets`: the names between `start` and `end`, split at commas. None where a
/// target has more than two parts or anything but names and dots is there.
fn targets(cur: &Cur, start: usize, end: usize) -> Option<Vec<Vec<Vec<u8>>>> {
    let mut targets = Vec::new();
    let mut parts: Vec<Vec<u8>> = Vec::new();
    for i in start..end {
        if cur.is_identifier_at(i) {
            parts.push(cur.name_of(&cur.toks[i]).into_owned());
        } else if cur.is_punct_at(i, b',') {
            targets.push(std::mem::take(&mut parts));
        } else if !cur.is_punct_at(i, b'.') {
            return None; // `t.*` too: sqlglot does not read it
        }
    }
    targets.push(parts);
    targets.retain(|t| !t.is_empty());
    if targets.is_empty() || targets.iter().any(|t| t.len() > 2) {
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
        let mut i = end;
        while i < sql.len() && lex::space(sql[i]) {
            i += 1;
        }
        if i > end && raw_word(sql, i, &[b"BY"]).is_some_and(|(s, _)| s == i) {
            return Some(start);
        }
        at = end;
    }
    None
}

/// Tokens as the lexer gives them (tests).
pub fn lexed(sql: &[u8]) -> Option<Vec<Tok>> {
    lex::tokens(sql).map(|l| l.toks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(db: Option<&str>, name: &str) -> QName {
        (db.map(|d| d.as_bytes().to_vec()), name.as_bytes().to_vec())
    }

    #[test]
    fn multi_table_update_lists_its_references_and_set_columns() {
        let f = facts(b"UPDATE c.r JOIN (a.l JOIN b.m ON a.l.id = b.m.id) ON c.r.id = a.l.id SET mv = 1 WHERE c.r.id = 3")
            .expect("read");
        assert_eq!(f.kind, "UPDATE_MULTI");
        let tables: Vec<_> = f.refs.iter().map(|r| r.table.clone()).collect();
        assert_eq!(
            tables,
            vec![q(Some("c"), "r"), q(Some("a"), "l"), q(Some("b"), "m")]
        );
        assert_eq!(f.set_columns, vec![(None, b"mv".to_vec())]);
        let f = facts(b"UPDATE t1 AS x JOIN `t``2` y USING (id) SET x.a = y.a").expect("read");
        assert_eq!(f.refs[1].table, q(None, "t`2"));
        assert_eq!(f.refs[1].alias.as_deref(), Some(b"y".as_slice()));
        assert_eq!(
            f.set_columns,
            vec![(Some(vec![b"x".to_vec()]), b"a".to_vec())]
        );
    }

    #[test]
    fn delete_forms() {
        let f = facts(
            b"DELETE c.t_2, b.t2 FROM c.t_2 JOIN b.t2 ON c.t_2.id = b.t2.id WHERE c.t_2.id = 4",
        )
        .expect("read");
        assert_eq!(
            (f.kind, f.targets.len(), f.refs.len()),
            ("DELETE_MULTI", 2, 2)
        );
        let f =
            facts(b"DELETE FROM x USING a.t1 AS x JOIN c.tx1 ON a.t1.id = c.tx1.id").expect("read");
        assert_eq!(f.targets, vec![vec![b"x".to_vec()]]);
        assert_eq!(
            facts(b"DELETE FROM t AS x WHERE x.a = 1")
                .expect("read")
                .updated,
            vec![q(None, "t")]
        );
        // a WHERE word in a string, where the parser cuts the references: Python's
        assert!(facts(b"DELETE t1 FROM t1 JOIN t2 ON t1.v = 'where' WHERE t1.a = 1").is_none());
        assert!(facts(b"DELETE t1 FROM t1 JOIN t2 WHERE t1.a = (SELECT 1)").is_none());
    }

    #[test]
    fn ddl_shapes() {
        let f = facts(b"CREATE TABLE IF NOT EXISTS d.`t` (id INT PRIMARY KEY, `V` TEXT, KEY k (v), CHECK (id > 0))")
            .expect("read");
        assert_eq!(
            (f.kind, f.updated.clone()),
            ("CREATE_TABLE", vec![q(Some("d"), "t")])
        );
        assert_eq!(f.columns, Some(vec![b"id".to_vec(), b"v".to_vec()]));
        let f = facts(b"CREATE TABLE t SELECT id, t.v AS w FROM a.t1 WHERE id <= 4").expect("read");
        assert_eq!(
            (f.read, f.columns),
            (
                vec![q(Some("a"), "t1")],
                Some(vec![b"id".to_vec(), b"w".to_vec()])
            )
        );
        assert!(facts(b"CREATE TABLE t SELECT * FROM a.t1").is_none());
        let f = facts(b"RENAME TABLE a TO b, c.d TO e").expect("read");
        assert_eq!(
            f.renames,
            vec![
                (q(None, "a"), q(None, "b")),
                (q(Some("c"), "d"), q(None, "e"))
            ]
        );
        let f = facts(b"DROP TEMPORARY TABLE IF EXISTS a, b.c").expect("read");
        assert!(f.temporary && f.if_exists && f.updated.len() == 2);
        assert_eq!(
            facts(b"DROP DATABASE IF EXISTS d_x").expect("read").db_name,
            Some(b"d_x".to_vec())
        );
        assert!(facts(b"DROP TABLE t -- gone").is_none());
        assert!(facts(b"CREATE TABLE key.t (a INT)").is_none()); // a reserved word as a name
    }

    #[test]
    fn a_trigger_and_what_its_body_writes() {
        let f = facts(
            b"CREATE DEFINER=`root`@`localhost` TRIGGER b.tr AFTER UPDATE ON t_x FOR EACH ROW BEGIN \
              IF NEW.v <> OLD.v THEN REPLACE INTO a.au VALUES (NEW.id); END IF; UPDATE t9 SET k = 1; END",
        )
        .expect("read");
        assert_eq!(f.trigger, Some(q(Some("b"), "tr")));
        assert_eq!(f.updated, vec![q(None, "t_x")]);
        let def = f.trigger_def.expect("defined");
        assert_eq!((def.timing, def.event), ("AFTER", "UPDATE"));
        let writes = def.writes.expect("followed");
        let events: Vec<_> = writes.iter().map(|(_, e)| *e).collect();
        assert_eq!(events, vec!["INSERT", "DELETE", "UPDATE"]);
        let call =
            facts(b"CREATE TRIGGER tr BEFORE DELETE ON t FOR EACH ROW CALL p()").expect("read");
        assert_eq!(call.trigger_def.expect("defined").writes, None);
    }

    #[test]
    fn a_body_statement_with_more_write_words_than_any_statement_holds_is_not_followed() {
        let body = |n: usize, sep: &str| {
            let stmts: Vec<String> = (0..n)
                .map(|i| format!("INSERT INTO t{i} VALUES (1)"))
                .collect();
            format!(
                "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW BEGIN {} END",
                stmts.join(sep)
            )
        };
        let writes = |sql: String| {
            facts(sql.as_bytes())
                .expect("read")
                .trigger_def
                .expect("defined")
                .writes
        };
        // One statement per `;`: each read, however many.
        assert_eq!(writes(body(3000, "; ")).expect("followed").len(), 3000);
        // Up to the cap before one `;`, each read (as the Python reading does: to the `;`).
        let under = writes(body(ddl::MAX_WRITES_PER_STATEMENT, " ")).expect("followed");
        assert_eq!(under.len(), ddl::MAX_WRITES_PER_STATEMENT);
        // Past it, not followed: 3000 of them would each be read to the end of the body.
        assert_eq!(writes(body(ddl::MAX_WRITES_PER_STATEMENT + 1, " ")), None);
        assert_eq!(writes(body(3000, " ")), None);
    }

    #[test]
    fn every_prefix_is_read_or_refused_without_a_panic() {
        let texts: [&[u8]; 3] = [
            b"CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW FOLLOWS x BEGIN INSERT INTO u VALUES (1); END",
            b"UPDATE a JOIN (b JOIN c ON b.x = c.x) ON a.y = b.y SET a.z = 'q''s', b.w = (1) WHERE a.k = 1",
            b"DELETE a, b FROM a JOIN b USING (id) WHERE a.x = 1",
        ];
        for text in texts {
            for end in 0..=text.len() {
                let _ = facts(&text[..end]);
            }
        }
    }
}
