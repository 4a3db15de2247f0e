//! The table references of a multi-table UPDATE or DELETE (`a JOIN b ON ...`, `a, b`, nested
//! parentheses), in statement order with their aliases: what `statement_facts._reference_tables`
//! asks sqlglot for. The shapes real binlogs hold; anything else (a derived table, index hints,
//! PARTITION, a three-part name, a leading parenthesis sqlglot does not read) is None.

use super::lex::{Cur, Kind, QName};
use super::one_of;

/// One table of the references: its name and its alias (None: no alias).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub table: QName,
    pub alias: Option<Vec<u8>>,
}

/// Words that end a reference's name where an alias could stand.
const AFTER_NAME: &[&[u8]] = &[
    b"ON",
    b"USING",
    b"JOIN",
    b"INNER",
    b"CROSS",
    b"LEFT",
    b"RIGHT",
    b"NATURAL",
    b"STRAIGHT_JOIN",
    b"OUTER",
    b"SET",
    b"WHERE",
    b"ORDER",
    b"LIMIT",
];

/// Clause words an ON condition cannot hold at its depth.
const CLAUSES: &[&[u8]] = &[
    b"GROUP",
    b"HAVING",
    b"ORDER",
    b"LIMIT",
    b"WHERE",
    b"UNION",
    b"SET",
    b"WINDOW",
    b"INTO",
    b"RETURNING",
    b"FROM",
    b"USING",
];

/// Words that may not be read as an alias: the core gives up on them (index hints, PARTITION,
/// clauses sqlglot reads its own way).
const NOT_ALIAS: &[&[u8]] = &[
    b"PARTITION",
    b"USE",
    b"IGNORE",
    b"FORCE",
    b"FOR",
    b"LOCK",
    b"GROUP",
    b"HAVING",
    b"UNION",
    b"WINDOW",
    b"RETURNING",
    b"AS",
    b"SELECT",
    b"FROM",
    b"WITH",
    b"TABLESAMPLE",
    b"LATERAL",
    b"VALUES",
];

/// The references read so far, and where a parenthesised join stands.
struct State {
    refs: Vec<Ref>,
    /// Inside a parenthesised join.
    grouped: bool,
    /// A parenthesised join was read: nothing may follow it. sqlglot lists the tables of a
    /// statement breadth first, so a table after one would come before the tables of its inner
    /// joins in sqlglot's read list.
    group_closed: bool,
}

/// The references in tokens [cur.at, end): None unless all of them are read.
pub fn references(cur: &mut Cur, end: usize) -> Option<Vec<Ref>> {
    // sqlglot reads `(a JOIN b ON ...) JOIN c` otherwise than MySQL: left to it.
    if cur.is_punct_at(cur.at, b'(') {
        return None;
    }
    let mut st = State {
        refs: Vec::new(),
        grouped: false,
        group_closed: false,
    };
    list(cur, end, &mut st)?;
    (cur.at == end && !st.refs.is_empty()).then_some(st.refs)
}

/// `item (, item)*` up to `end` or an unmatched `)`.
fn list(cur: &mut Cur, end: usize, st: &mut State) -> Option<()> {
    loop {
        item(cur, end, st)?;
        if cur.at < end && cur.accept_punct(b',') {
            continue;
        }
        return Some(());
    }
}

/// A factor and its joins.
fn item(cur: &mut Cur, end: usize, st: &mut State) -> Option<()> {
    factor(cur, end, st, false)?;
    while cur.at < end && join(cur) {
        let was_closed = st.group_closed;
        factor(cur, end, st, true)?;
        if cur.at < end && cur.accept(b"ON") {
            condition(cur, end)?;
        } else if cur.at < end && cur.accept(b"USING") {
            if !cur.accept_punct(b'(') {
                return None;
            }
            close(cur, end)?;
        } else if st.grouped || st.group_closed != was_closed {
            // A join in parentheses, or the parentheses' own, without its condition: sqlglot
            // does not read it.
            return None;
        }
    }
    Some(())
}

/// A join keyword group, consumed: JOIN, INNER|CROSS JOIN, STRAIGHT_JOIN,
/// [NATURAL] [LEFT|RIGHT] [OUTER] JOIN.
fn join(cur: &mut Cur) -> bool {
    let save = cur.at;
    if cur.accept(b"STRAIGHT_JOIN") || cur.accept(b"JOIN") {
        return true;
    }
    if cur.accept(b"INNER") || cur.accept(b"CROSS") {
        if cur.accept(b"JOIN") {
            return true;
        }
        cur.at = save;
        return false;
    }
    cur.accept(b"NATURAL");
    if cur.accept(b"LEFT") || cur.accept(b"RIGHT") {
        cur.accept(b"OUTER");
    }
    if cur.at > save && cur.accept(b"JOIN") {
        return true;
    }
    cur.at = save;
    false
}

/// A name with its alias, or (`after_join`) a parenthesised join: `JOIN (a JOIN b ON ...) ON
/// ...`, the last factor, not nested.
fn factor(cur: &mut Cur, end: usize, st: &mut State, after_join: bool) -> Option<()> {
    if cur.at >= end || st.group_closed {
        return None;
    }
    if cur.accept_punct(b'(') {
        // A lone table or a list in parentheses, parentheses doubled or nested, or after a
        // comma: sqlglot reads them otherwise, or not at all. Left to it.
        if !after_join || st.grouped || cur.is_punct_at(cur.at, b'(') {
            return None;
        }
        let before = st.refs.len();
        st.grouped = true;
        item(cur, end, st)?;
        st.grouped = false;
        st.group_closed = true;
        return (st.refs.len() >= before + 2 && cur.accept_punct(b')')).then_some(());
    }
    let table = cur.qname()?;
    if cur.is_punct_at(cur.at, b'.') {
        return None; // a three-part name
    }
    let mut alias = None;
    if cur.at < end {
        if cur.accept(b"AS") {
            alias = Some(cur.identifier()?);
        } else if cur.is_identifier_at(cur.at) {
            let t = cur.toks[cur.at];
            let text = cur.text(&t);
            if t.kind == Kind::Quoted || !one_of(text, AFTER_NAME) {
                if t.kind == Kind::Word && one_of(text, NOT_ALIAS) {
                    return None;
                }
                alias = Some(cur.identifier()?);
            }
        }
    }
    st.refs.push(Ref { table, alias });
    Some(())
}

/// An ON condition: up to a join keyword, a `,` or an unmatched `)` at its depth, or `end`.
fn condition(cur: &mut Cur, end: usize) -> Option<()> {
    let mut depth = 0usize;
    let from = cur.at;
    while cur.at < end {
        if cur.is_punct_at(cur.at, b'(') {
            depth += 1;
        } else if cur.is_punct_at(cur.at, b')') {
            if depth == 0 {
                break;
            }
            depth -= 1;
        } else if depth == 0 && cur.is_punct_at(cur.at, b',') {
            break;
        } else if depth == 0 && cur.word().is_some_and(|w| one_of(w, CLAUSES)) {
            return None; // a clause no reference list holds: sqlglot's to read
        } else if depth == 0 {
            let save = cur.at;
            if join(cur) {
                cur.at = save;
                break;
            }
        }
        cur.at += 1;
    }
    (depth == 0 && cur.at > from).then_some(())
}

/// Past the `)` that closes an opened `(`, before `end`.
fn close(cur: &mut Cur, end: usize) -> Option<()> {
    let mut depth = 1usize;
    while cur.at < end {
        if cur.accept_punct(b'(') {
            depth += 1;
        } else if cur.accept_punct(b')') {
            depth -= 1;
            if depth == 0 {
                return Some(());
            }
        } else {
            cur.at += 1;
        }
    }
    None
}
