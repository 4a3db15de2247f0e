//! `_core.statement_facts`: a statement's facts (see facts::facts) as named records, for
//! `rules.statement_facts`. Names are bytes, a name's database None where the text gives none.

use dumpfilter_stub_attrs::stub;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use super::list;
use super::results::records;
use crate::facts::lex::QName;
use crate::facts::{BodyWrite as Write, TriggerDef};

records! {
    /// A name as the statement gives it: its database (None: not given) and the name.
    QualifiedName = "QualifiedName" {
        db: Option<Py<PyBytes>>,
        name: Py<PyBytes>,
    }

    /// A table reference of a multi-table statement and its alias.
    TableReference = "TableReference" {
        table: Py<QualifiedName>,
        alias: Option<Py<PyBytes>>,
    }

    /// RENAME TABLE's pair.
    Rename = "Rename" {
        old: Py<QualifiedName>,
        new: Py<QualifiedName>,
    }

    /// A SET column of a multi-table UPDATE: its qualifier's parts (None: none) and the column.
    SetColumn = "SetColumn" {
        qualifier: Option<Vec<Vec<u8>>> as Option<Vec<Py<PyBytes>>>,
        column: Py<PyBytes>,
    }

    /// A write of a trigger's or function's body: the table (a database None: the trigger's or
    /// function's) and the trigger event it fires; or, table None, a body statement the
    /// statement key does not read, at bytes [start, end) of the text (event "").
    BodyWrite = "BodyWrite" {
        table: Option<Py<QualifiedName>>,
        event: &'static str,
        start: usize,
        end: usize,
    }

    /// A column change of ALTER TABLE (lower-cased): old None, a column added; new None, one
    /// dropped; both, one renamed.
    ColumnChange = "ColumnChange" {
        old: Option<Vec<u8>> as Option<Py<PyBytes>>,
        new: Option<Vec<u8>> as Option<Py<PyBytes>>,
    }

    /// A trigger's definition as the schema model keeps it.
    TriggerDefinition = "TriggerDefinition" {
        timing: &'static str,
        event: &'static str,
    }

    /// The object a statement without a table list changes: its type and name.
    ObjectTarget = "ObjectTarget" {
        object: &'static str,
        name: Py<QualifiedName>,
    }

    /// `statement_class`: a statement's kind and the tables it updates, each as a database (the
    /// default where the text gives none) and a name, in order.
    StatementClass = "StatementClass" {
        /// The `rules.statement_info.Kind` value.
        kind: &'static str,
        dbs: Py<PyList> as Vec<String>,
        names: Py<PyList> as Vec<String>,
    }

    /// `statement_facts`: what the rule engine reads of a DDL or multi-table statement.
    StatementFacts = "StatementFacts" {
        /// The `rules.statement_info.Kind` value.
        kind: &'static str,
        /// QualifiedName per table updated.
        updated: Py<PyList> as Vec<QualifiedName>,
        /// QualifiedName per table read, in order (Python drops the updated ones, repeats, aliases).
        read: Py<PyList> as Vec<QualifiedName>,
        temporary: bool,
        if_exists: bool,
        db_name: Option<Py<PyBytes>>,
        /// Rename per pair.
        renames: Py<PyList> as Vec<Rename>,
        trigger: Option<Py<QualifiedName>>,
        /// TableReference per reference (multi-table UPDATE and DELETE, CREATE ... SELECT).
        refs: Py<PyList> as Vec<TableReference>,
        /// SetColumn per SET column.
        set_columns: Py<PyList> as Vec<SetColumn>,
        /// DELETE's targets, each as its name's parts.
        targets: Vec<Vec<Vec<u8>>> as Vec<Vec<Py<PyBytes>>>,
        /// CREATE TABLE's column names (lower-cased), where the core reads them all.
        columns: Option<Vec<Vec<u8>>> as Option<Vec<Py<PyBytes>>>,
        /// ColumnChange per ALTER TABLE column change, in order; None: not read.
        column_changes: Option<Py<PyList>> as Option<Vec<ColumnChange>>,
        trigger_def: Option<Py<TriggerDefinition>>,
        /// BodyWrite per write of a CREATE TRIGGER's or CREATE FUNCTION's body, in body order;
        /// None: not followed (a CALL or dynamic SQL could write more).
        writes: Option<Py<PyList>> as Option<Vec<BodyWrite>>,
        target: Option<Py<ObjectTarget>>,
        /// The text sqlglot lists the read tables from, where the core leaves them to it.
        read_text: Option<Py<PyBytes>>,
        /// A multi-table statement's references, where sqlglot reads them (`refs` empty).
        refs_text: Option<Py<PyBytes>>,
        /// WITH's common table expressions' names.
        ctes: Vec<Vec<u8>> as Vec<Py<PyBytes>>,
    }

    /// `body_reach`: the tables the body statements the core clears reach alone (QualifiedName,
    /// a database None: the body's), each once, and the pieces the general path reads, as byte spans
    /// [starts[k], ends[k]) of the text.
    BodyReach = "BodyReach" {
        tables: Py<PyList> as Vec<QualifiedName>,
        starts: Vec<usize>,
        ends: Vec<usize>,
    }
}

fn bytes(py: Python<'_>, b: &[u8]) -> Py<PyBytes> {
    PyBytes::new(py, b).unbind()
}

fn qname(py: Python<'_>, q: &QName) -> PyResult<Py<QualifiedName>> {
    Py::new(
        py,
        QualifiedName {
            db: q.0.as_deref().map(|d| bytes(py, d)),
            name: bytes(py, &q.1),
        },
    )
}

fn qnames(py: Python<'_>, names: &[QName]) -> PyResult<Py<PyList>> {
    list(py, names.iter().map(|q| qname(py, q)))
}

/// A statement's facts (see facts::facts) for `rules.statement_facts`; None: no statement the
/// rules read.
#[stub]
#[pyfunction]
pub(super) fn statement_facts(py: Python<'_>, sql: &[u8]) -> PyResult<Option<StatementFacts>> {
    let Some(f) = crate::facts::facts(sql) else {
        return Ok(None);
    };
    let renames = f.renames.iter().map(|(old, new)| {
        let (old, new) = (qname(py, old)?, qname(py, new)?);
        Ok(Rename { old, new })
    });
    let refs = f.refs.iter().map(|r| {
        Ok(TableReference {
            table: qname(py, &r.table)?,
            alias: r.alias.as_deref().map(|a| bytes(py, a)),
        })
    });
    let set_columns = f.set_columns.into_iter().map(|(qualifier, column)| {
        let column = bytes(py, &column);
        Ok(SetColumn { qualifier, column })
    });
    let trigger_def = f
        .trigger_def
        .map(|TriggerDef { timing, event }| Py::new(py, TriggerDefinition { timing, event }))
        .transpose()?;
    let write = |w: &Write| -> PyResult<Py<BodyWrite>> {
        let (table, event, start, end) = match w {
            Write::Table(table, event) => (Some(qname(py, table)?), *event, 0, 0),
            Write::Piece(start, end) => (None, "", *start, *end),
        };
        Py::new(
            py,
            BodyWrite {
                table,
                event,
                start,
                end,
            },
        )
    };
    let writes = f
        .writes
        .as_ref()
        .map(|ws| list(py, ws.iter().map(write)))
        .transpose()?;
    let target = f.target.as_ref().map(|(object, name)| {
        let name = qname(py, name)?;
        Py::new(py, ObjectTarget { object, name })
    });
    let column_changes = f.column_changes.map(|changes| {
        let change = |(old, new)| Py::new(py, ColumnChange { old, new });
        list(py, changes.into_iter().map(change))
    });
    Ok(Some(StatementFacts {
        kind: f.kind,
        updated: qnames(py, &f.updated)?,
        read: qnames(py, &f.read)?,
        temporary: f.temporary,
        if_exists: f.if_exists,
        db_name: f.db_name.as_deref().map(|d| bytes(py, d)),
        renames: list(py, renames)?,
        trigger: f.trigger.as_ref().map(|t| qname(py, t)).transpose()?,
        refs: list(py, refs)?,
        set_columns: list(py, set_columns)?,
        targets: f.targets,
        columns: f.columns,
        column_changes: column_changes.transpose()?,
        trigger_def,
        writes,
        target: target.transpose()?,
        read_text: f.read_text.as_deref().map(|t| bytes(py, t)),
        refs_text: f.refs_text.as_deref().map(|t| bytes(py, t)),
        ctes: f.ctes,
    }))
}

/// `statement_facts`' kind and updated tables alone, each name's database `default` where the
/// text gives none (`rules.statement_facts.core_class`: a lone DDL text met first is classed by
/// them, no StatementFacts built: the DDL-heavy pass meets 8,715 such texts); None where there
/// are no facts, CTEs or renames, or no table updated but some read.
#[stub]
#[pyfunction]
pub(super) fn statement_class<'py>(
    py: Python<'py>,
    sql: &[u8],
    default: &Bound<'py, PyString>,
) -> PyResult<Option<StatementClass>> {
    let Some((kind, updated)) = crate::facts::class(sql) else {
        return Ok(None);
    };
    let (dbs, names) = (PyList::empty(py), PyList::empty(py));
    for (db, name) in &updated {
        match db {
            Some(db) => dbs.append(super::text(py, db)?)?,
            None => dbs.append(default)?, // (as given: a name read with surrogates stays so)
        }
        names.append(super::text(py, name)?)?;
    }
    Ok(Some(StatementClass {
        kind,
        dbs: dbs.unbind(),
        names: names.unbind(),
    }))
}

/// The master policy's reading of a CREATE/ALTER TRIGGER's, routine's or event's body (see
/// body_reach::body_reach; `form`: body_reach::FORM_*); None where the general path reads the
/// whole text.
#[stub]
#[pyfunction]
pub(super) fn body_reach(py: Python<'_>, sql: &[u8], form: u8) -> PyResult<Option<BodyReach>> {
    let Some(r) = crate::body_reach::body_reach(sql, form) else {
        return Ok(None);
    };
    let (starts, ends) = r.declined.into_iter().unzip();
    Ok(Some(BodyReach {
        tables: qnames(py, &r.tables)?,
        starts,
        ends,
    }))
}

/// Whether `sql`'s parentheses close and nothing is left open (see facts::parens_close).
#[stub]
#[pyfunction]
pub(super) fn parens_close(sql: &[u8]) -> bool {
    crate::facts::parens_close(sql)
}

/// Adds the facts' classes and functions to the module.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_records(m)?;
    functions! { m: statement_facts, statement_class, parens_close, body_reach }
    use crate::body_reach::{FORM_EVENT, FORM_ROUTINE, FORM_TRIGGER};
    constants! { m,
        BODY_TRIGGER = FORM_TRIGGER, BODY_EVENT = FORM_EVENT, BODY_ROUTINE = FORM_ROUTINE,
    }
    Ok(())
}
