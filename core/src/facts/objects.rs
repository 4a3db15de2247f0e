//! Statements about objects other than tables: accounts (CREATE/ALTER/DROP/RENAME USER and
//! ROLE, GRANT, REVOKE), routines (procedures, functions, events, packages, servers, UDFs; CALL)
//! and views' names; SET, INSTALL and UNINSTALL. WL#2516 decides them by the database of the
//! object they change (`Facts::target`).

use super::lex::Cur;
use super::Facts;

/// Account and privilege statements change the grant tables of the `mysql` system database.
const ACCOUNT: (&str, Option<&[u8]>, &[u8]) = ("ACCOUNT", Some(b"mysql"), b"");

fn target(f: &mut Facts, t: (&'static str, Option<&[u8]>, &[u8])) {
    f.target = Some((t.0, (t.1.map(<[u8]>::to_vec), t.2.to_vec())));
}

/// SET: PASSWORD and DEFAULT ROLE change the account tables; any other sets variables.
pub fn set(cur: &Cur) -> Facts {
    if !(cur.is(b"PASSWORD") || (cur.is(b"DEFAULT") && cur.is_word_at(cur.at + 1, b"ROLE"))) {
        return Facts::new("SET");
    }
    let mut f = Facts::new("ACCOUNT");
    target(&mut f, ACCOUNT);
    f
}

/// INSTALL and UNINSTALL PLUGIN or SONAME change mysql.plugin.
pub fn plugin() -> Facts {
    let mut f = Facts::new("OTHER");
    target(&mut f, ("PLUGIN", Some(b"mysql"), b"plugin"));
    f
}

/// USER, ROLE: the account tables; PROCEDURE, FUNCTION, EVENT, ...: the routine they name.
pub fn without_tables(cur: &mut Cur, obj: &[u8]) -> Option<Facts> {
    match obj {
        b"USER" | b"ROLE" => {
            let mut f = Facts::new("ACCOUNT");
            target(&mut f, ACCOUNT);
            Some(f)
        }
        b"PROCEDURE" | b"FUNCTION" | b"EVENT" | b"AGGREGATE" | b"SERVER" | b"TABLESPACE"
        | b"LOGFILE" | b"RESOURCE" | b"SPATIAL" | b"PACKAGE" | b"UNDO" => routine(cur, obj),
        _ => None,
    }
}

/// `_routine_target`: a stored routine, event or package lives in a database (its qualifier,
/// else the default one); a UDF (`... SONAME`) in mysql.func, a server in mysql.servers;
/// tablespaces, log file groups and resource groups in none.
fn routine(cur: &mut Cur, obj: &[u8]) -> Option<Facts> {
    let mut f = Facts::new("ROUTINE");
    let mut obj = obj;
    if obj == b"AGGREGATE" {
        cur.accept(b"FUNCTION");
        obj = b"FUNCTION";
    }
    if obj == b"SERVER" {
        target(&mut f, ("SERVER", Some(b"mysql"), b"servers"));
        return Some(f);
    }
    let kind = match obj {
        b"PROCEDURE" => "PROCEDURE",
        b"FUNCTION" => "FUNCTION",
        b"EVENT" => "EVENT",
        b"PACKAGE" => "PACKAGE",
        _ => return Some(f),
    };
    if kind == "PACKAGE" {
        cur.accept(b"BODY");
    }
    cur.if_exists();
    let name = cur.qname()?;
    if kind == "FUNCTION" && (cur.at..cur.toks.len()).any(|i| cur.is_word_at(i, b"SONAME")) {
        target(&mut f, ("UDF", Some(b"mysql"), b"func"));
    } else {
        if kind == "FUNCTION" {
            f.writes = super::trigger::function_writes(cur);
        }
        f.target = Some((kind, name));
    }
    Some(f)
}

/// CALL [db.]p(...): the procedure's database is the effective one.
pub fn call(cur: &mut Cur) -> Option<Facts> {
    let name = cur.qname()?;
    let mut f = Facts::new("ROUTINE");
    f.target = Some(("PROCEDURE", name));
    Some(f)
}

/// GRANT and REVOKE: the account tables, and the table `ON [TABLE] db.t` names
/// (rpl_ignore_table, BUG#25482); `*`, `db.*` and routines name none.
pub fn grant(cur: &mut Cur) -> Option<Facts> {
    let mut f = Facts::new("ACCOUNT");
    target(&mut f, ACCOUNT);
    let Some(on) = cur.find_top_level(b"ON") else {
        return Some(f); // GRANT role TO user
    };
    cur.at = on + 1;
    cur.accept(b"TABLE");
    if cur.is(b"PROCEDURE") || cur.is(b"FUNCTION") || cur.accept_punct(b'*') {
        return Some(f);
    }
    let first = cur.identifier()?;
    if !cur.accept_punct(b'.') {
        f.updated.push((None, first));
        return Some(f);
    }
    if cur.accept_punct(b'*') {
        return Some(f);
    }
    f.updated.push((Some(first), cur.identifier()?));
    Some(f)
}

/// DROP VIEW [IF EXISTS] list.
pub fn drop_view(cur: &mut Cur) -> Option<Facts> {
    let mut f = Facts::new("DROP_VIEW");
    f.if_exists = cur.if_exists();
    f.updated = cur.name_list()?;
    Some(f)
}

/// ALTER VIEW v ...: the view (its query's tables are not listed here).
pub fn alter_view(cur: &mut Cur) -> Option<Facts> {
    let mut f = Facts::new("CREATE_VIEW");
    f.updated.push(cur.qname()?);
    Some(f)
}

/// ALTER DATABASE [name] ...: without a name, the default database.
pub fn alter_db(cur: &mut Cur) -> Option<Facts> {
    let mut f = Facts::new("ALTER_DB");
    let options: &[&[u8]] = &[
        b"CHARACTER",
        b"CHARSET",
        b"DEFAULT",
        b"COLLATE",
        b"READ",
        b"ENCRYPTION",
        b"UPGRADE",
        b"COMMENT",
    ];
    if cur.is_identifier_at(cur.at) && !cur.word().is_some_and(|w| super::one_of(w, options)) {
        f.db_name = Some(cur.identifier()?);
    }
    Some(f)
}
