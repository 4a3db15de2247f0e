//! DDL facts: CREATE, ALTER, DROP, RENAME, TRUNCATE and the table maintenance statements of
//! databases, tables, indexes, views and triggers (a trigger's definition in `trigger`); and for
//! the schema model, CREATE TABLE's column names.

use super::lex::{Cur, Kind, QName};
use super::ColumnChange;
use super::{objects, one_of, refs, Facts};

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

pub fn create(cur: &mut Cur) -> Option<Facts> {
    cur.skip_modifiers(CREATE_MODIFIERS);
    let temporary = (0..cur.at).any(|i| cur.is_word_at(i, b"TEMPORARY"));
    let obj = cur.word()?.to_ascii_uppercase();
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
        b"TRIGGER" => super::trigger::create_trigger(cur),
        b"VIEW" => {
            // CREATE VIEW v AS query: the view; its query's tables are sqlglot's to list.
            cur.if_exists();
            let mut f = Facts::new("CREATE_VIEW");
            f.updated.push(cur.qname()?);
            let query = cur.find_top_level(b"AS")? + 1;
            f.read_text = Some(cur.sql[cur.toks.get(query)?.start..].to_vec());
            Some(f)
        }
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
            // A LIKE word past the column list is no table definition MySQL takes (`LIKE s`
            // comes right after the name): the columns are not read, as Python does not.
            if paren && !cur.has_word(b"LIKE") {
                f.columns = column_names(cur);
            }
        }
        Some(select) => {
            // One SELECT over named tables; a join, a union or a subquery is sqlglot's to read
            // (and loose text: `_read_tables` searches the raw text).
            let general = Some(cur.sql[cur.toks[select].start..].to_vec());
            if cur.loose
                || (select + 1..cur.toks.len()).any(|i| cur.is_word_at(i, b"SELECT"))
                || [b"JOIN".as_slice(), b"UNION", b"STRAIGHT_JOIN", b"WITH"]
                    .iter()
                    .any(|w| cur.has_word(w))
            {
                f.read_text = general;
                return Some(f);
            }
            cur.at = select + 1;
            let from = cur.find_top_level(b"FROM");
            if let Some(from) = from {
                cur.at = from + 1;
                let mut end = (from + 1..cur.toks.len())
                    .find(|&i| {
                        cur.is_any_at(i, &[b"WHERE", b"GROUP", b"ORDER", b"LIMIT", b"HAVING"])
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
                match refs::references(cur, end).filter(|_| tail_ok) {
                    Some(refs) => {
                        f.read = refs.iter().map(|r| r.table.clone()).collect();
                        f.refs = refs;
                    }
                    None => {
                        f.read_text = general;
                        return Some(f);
                    }
                }
            }
            // Output columns the core cannot name (`*`, an expression) leave the statement to
            // sqlglot: it reads those lists, and the text around them, its own way.
            match projections(cur, select + 1, from.unwrap_or(cur.toks.len())) {
                Some(columns) if !paren => f.columns = Some(columns),
                Some(_) => {}
                None => {
                    (f.read, f.refs, f.read_text) = (Vec::new(), Vec::new(), general);
                }
            }
        }
    }
    Some(f)
}

/// The column list's names (schema.create_columns on a plain CREATE TABLE): the first name of
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
            if cur.is_any_at(i, &[b"PERIOD", b"SYSTEM"]) {
                return None; // a column so named, or PERIOD FOR / SYSTEM VERSIONING: sqlglot's call
            } else if cur.is_any_at(i, CONSTRAINT_WORDS) {
                // A key or a constraint: no column. An index's words must lead to its column
                // list (`key INT` is a column so named: sqlglot's call).
                if cur.is_any_at(i, &[b"KEY", b"INDEX", b"UNIQUE", b"FULLTEXT", b"SPATIAL"]) {
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
                names.push(cur.name_of(&cur.toks[i]).to_ascii_lowercase());
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
            cur.is_identifier_at(item.start + k) && !cur.is_any_at(item.start + k, SELECT_WORDS)
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
    let obj = cur.word()?.to_ascii_uppercase();
    cur.at += 1;
    match obj.as_slice() {
        b"TABLE" | b"SEQUENCE" => {}
        b"DATABASE" | b"SCHEMA" => return objects::alter_db(cur),
        b"VIEW" => return objects::alter_view(cur),
        other => return objects::without_tables(cur, other),
    }
    cur.if_exists();
    // ALTER TABLE t RENAME TO u: the new name is not in the table list (`renames` holds it).
    let mut f = Facts::new("ALTER_TABLE");
    let table = cur.qname()?;
    f.updated.push(table.clone());
    f.column_changes = if obj == b"TABLE" {
        alter_actions(cur, &table, &mut f.renames)
    } else {
        Some(Vec::new()) // a sequence's columns are fixed
    };
    Some(f)
}

/// ALTER TABLE's actions (`,` apart): its column changes in order, lower-cased (see
/// Facts::column_changes), and RENAME [TO|AS] new as a rename of `table`. ENGINE, keys,
/// partitions, MODIFY, ALTER COLUMN, DISABLE KEYS, CONVERT TO CHARACTER SET and the other
/// actions keep every column's name. None where system versioning or a period is added or
/// dropped (its hidden columns are not modelled).
fn alter_actions(
    cur: &mut Cur,
    table: &QName,
    renames: &mut Vec<(QName, QName)>,
) -> Option<Vec<ColumnChange>> {
    let mut out = Vec::new();
    let lower = |name: Vec<u8>| name.to_ascii_lowercase();
    while cur.at < cur.toks.len() {
        let action = cur.word().unwrap_or_default().to_ascii_uppercase();
        cur.at += 1;
        let column = cur.accept(b"COLUMN");
        match action.as_slice() {
            b"ADD" | b"DROP" if cur.is(b"SYSTEM") || cur.is(b"PERIOD") => return None,
            // A key, a constraint, a partition.
            b"ADD" | b"DROP"
                if !column
                    && (cur.is(b"PARTITION")
                        || cur.word().is_some_and(|w| one_of(w, CONSTRAINT_WORDS))) => {}
            b"ADD" if cur.accept_punct(b'(') => {
                // ADD (a INT, b INT): the first name of each element.
                loop {
                    out.push((None, Some(lower(cur.identifier()?))));
                    skip_element(cur)?;
                    if !cur.accept_punct(b',') {
                        break;
                    }
                }
                cur.accept_punct(b')');
            }
            b"ADD" => {
                cur.if_exists();
                out.push((None, Some(lower(cur.identifier()?))));
            }
            b"DROP" => {
                cur.if_exists();
                out.push((Some(lower(cur.identifier()?)), None));
            }
            b"CHANGE" => {
                cur.if_exists();
                let old = lower(cur.identifier()?);
                out.push((Some(old), Some(lower(cur.identifier()?))));
            }
            b"RENAME" if column => {
                let old = lower(cur.identifier()?);
                cur.accept(b"TO");
                out.push((Some(old), Some(lower(cur.identifier()?))));
            }
            b"RENAME" if !(cur.is(b"INDEX") || cur.is(b"KEY")) => {
                cur.accept_any(&[b"TO", b"AS"]);
                renames.push((table.clone(), cur.qname()?));
            }
            _ => {}
        }
        skip_element(cur)?; // the rest of the action
        cur.at += 1; // its `,`
    }
    Some(out)
}

/// Past the rest of a list's element: to the next `,` or `)` outside parentheses (not taken).
fn skip_element(cur: &mut Cur) -> Option<()> {
    while cur.at < cur.toks.len()
        && !cur.is_punct_at(cur.at, b',')
        && !cur.is_punct_at(cur.at, b')')
    {
        if cur.accept_punct(b'(') {
            cur.skip_balanced()?;
        } else {
            cur.at += 1;
        }
    }
    Some(())
}

pub fn drop(cur: &mut Cur) -> Option<Facts> {
    let temporary = cur.accept(b"TEMPORARY");
    let obj = cur.word()?.to_ascii_uppercase();
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

/// ANALYZE, OPTIMIZE, REPAIR [NO_WRITE_TO_BINLOG | LOCAL] TABLE list.
pub fn maintenance(cur: &mut Cur) -> Option<Facts> {
    cur.skip_modifiers(&[b"NO_WRITE_TO_BINLOG", b"LOCAL"]);
    if !cur.accept_any(&[b"TABLE", b"TABLES"]) {
        return None;
    }
    let mut f = Facts::new("TABLE_MAINTENANCE");
    f.updated = cur.name_list()?;
    Some(f)
}

pub fn truncate(cur: &mut Cur) -> Option<Facts> {
    cur.accept(b"TABLE");
    let mut f = Facts::new("TRUNCATE");
    f.updated.push(cur.qname()?);
    Some(f)
}
