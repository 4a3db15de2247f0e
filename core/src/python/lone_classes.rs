//! `_core.LoneClasses`: lone statements' classes numbered across segments (lone_class), which
//! `UnitList.lone_queries` reads each unit's class into, so that Python meets a class once.

use std::sync::{Mutex, MutexGuard};

use dumpfilter_stub_attrs::stub;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::facts::StatementClass;
use crate::lone_class::LoneClasses;

/// Lone statements' classes (a kind and the tables it updates, each table's database the unit's
/// default where the text names none) numbered from 0 in the order met, across calls of
/// `UnitList.lone_queries(..., classes=)`. `declined`: the kinds (`rules.statement_info.Kind`
/// values) left to Python's whole parse. Numbering holds a lock: threads may share one.
#[stub]
#[pyclass(frozen, module = "dumpfilter._core", name = "LoneClasses")]
pub(super) struct PyLoneClasses(Mutex<LoneClasses>);

impl PyLoneClasses {
    pub(super) fn lock(&self) -> MutexGuard<'_, LoneClasses> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[stub]
#[pymethods]
impl PyLoneClasses {
    #[new]
    fn new(declined: Vec<String>) -> Self {
        PyLoneClasses(Mutex::new(LoneClasses::new(declined)))
    }

    /// Class `id`'s kind and tables (as `statement_class` gives them), None if not numbered.
    fn get(&self, py: Python<'_>, id: u32) -> PyResult<Option<StatementClass>> {
        let classes = self.lock();
        let Some(c) = classes.get(id) else {
            return Ok(None);
        };
        let (dbs, names) = (PyList::empty(py), PyList::empty(py));
        for (db, name) in &c.tables {
            dbs.append(super::text(py, db)?)?;
            names.append(super::text(py, name)?)?;
        }
        Ok(Some(StatementClass {
            kind: c.kind,
            dbs: dbs.unbind(),
            names: names.unbind(),
        }))
    }

    /// The classes numbered so far.
    fn __len__(&self) -> usize {
        self.lock().len()
    }
}
