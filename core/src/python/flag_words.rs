//! `_core.FlagWords`: the master's flag words per (db, table), computed by Python on a miss.

use dumpfilter_stub_attrs::stub;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use pyo3::{PyTraverseError, PyVisit};

use crate::flags::{self, FlagWords};

/// The master's flag words (see flags.rs): `compute(db, table)` (the Python rule engines) gives
/// a missing word as little-endian bytes, once per table and generation.
///
/// `compute` is a bound method of the Python object that holds this one: a cycle, which
/// Python's collector sees only through `__traverse__` (without it, every master made and
/// dropped in one process stayed alive, with its segment cache's mappings and descriptors).
#[stub]
#[pyclass(module = "dumpfilter._core", name = "FlagWords")]
pub(super) struct PyFlagWords {
    inner: FlagWords,
    compute: Option<Py<PyAny>>,
}

impl PyFlagWords {
    /// The word of (db, table), computed on a miss. The borrow is let go while Python computes
    /// (another thread may use the words meanwhile; a word computed across a `clear` is not kept).
    fn word_of(slf: &Bound<'_, Self>, db: &str, table: &str) -> PyResult<flags::Word> {
        let key = flags::key(db.as_bytes(), table.as_bytes());
        let (compute, generation) = {
            let this = slf.borrow();
            if let Some(word) = this.inner.get(&key) {
                return Ok(word.clone());
            }
            let Some(compute) = &this.compute else {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "FlagWords used after it was cleared",
                ));
            };
            (compute.clone_ref(slf.py()), this.inner.generation)
        };
        let bytes: Vec<u8> = compute.call1(slf.py(), (db, table))?.extract(slf.py())?;
        let word = flags::word_from_le(&bytes);
        slf.borrow_mut().inner.insert(key, word.clone(), generation);
        Ok(word)
    }
}

#[stub]
#[pymethods]
impl PyFlagWords {
    #[new]
    fn new(
        #[gen_stub(override_type(type_repr = "collections.abc.Callable[[str, str], bytes]", imports = ("collections.abc")))]
        compute: Py<PyAny>,
    ) -> Self {
        PyFlagWords {
            inner: FlagWords::default(),
            compute: Some(compute),
        }
    }

    #[gen_stub(skip)]
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(compute) = &self.compute {
            visit.call(compute)?;
        }
        Ok(())
    }

    #[gen_stub(skip)]
    fn __clear__(&mut self) {
        self.compute = None;
    }

    /// Whether slave bit `bit` keeps (db, table).
    fn kept(slf: &Bound<'_, Self>, db: &str, table: &str, bit: usize) -> PyResult<bool> {
        Ok(flags::has_bit(&Self::word_of(slf, db, table)?, bit))
    }

    /// One byte per (db, table) of `names` (1: slave bit `bit` keeps it): a segment's keep
    /// bytes for `UnitList.rows_many`.
    fn keep<'py>(
        slf: &Bound<'py, Self>,
        #[gen_stub(override_type(type_repr = "list[tuple[str, str]]"))] names: &Bound<'py, PyList>,
        bit: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::with_capacity(names.len());
        for name in names.iter() {
            let (db, table): (String, String) = name.extract()?;
            out.push(u8::from(flags::has_bit(
                &Self::word_of(slf, &db, &table)?,
                bit,
            )));
        }
        Ok(PyBytes::new(slf.py(), &out))
    }

    /// Forgets every word (slaves or their rules changed).
    fn invalidate(&mut self) {
        self.inner.clear();
    }

    #[getter]
    fn generation(&self) -> u64 {
        self.inner.generation
    }

    #[getter]
    fn computed(&self) -> u64 {
        self.inner.computed
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}
