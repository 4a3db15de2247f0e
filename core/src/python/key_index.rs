//! `_core.KeyIndex`: statement keys numbered by their bytes across buffers (a segment's or a
//! scan's key ids are its own), so that Python meets each key once, not once per buffer.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Mutex;

use dumpfilter_stub_attrs::stub;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::results::{KeyNumbers, StatementKey};
use crate::stmt::{KIND_DELETE, KIND_INSERT, KIND_REPLACE, KIND_UPDATE};
use crate::stmt_keys::KeyHasher;

/// Statement keys (`StatementKey.key`) numbered from 0 in the order first met, the numbers kept
/// across calls: a buffer's keys are read as the numbers of keys met before, Python reads only
/// the new ones. `twins`: plain INSERT, REPLACE, DELETE and UPDATE keys of one table and
/// database take one number (their decisions under rpl_filter.cc do not read the verb:
/// rules.keep_table's shapes). Numbering holds a lock: threads may share an index.
#[stub]
#[pyclass(frozen, module = "dumpfilter._core", name = "KeyIndex")]
pub(super) struct PyKeyIndex {
    twins: bool,
    numbers: Mutex<HashMap<Vec<u8>, u32, BuildHasherDefault<KeyHasher>>>,
}

#[stub]
#[pymethods]
impl PyKeyIndex {
    #[new]
    #[pyo3(signature = (twins = false))]
    fn new(twins: bool) -> Self {
        PyKeyIndex {
            twins,
            numbers: Mutex::default(),
        }
    }

    /// Each key's number, and the positions in `keys` of the keys numbered by this call. A key
    /// is a StatementKey, or any object whose `key` is its bytes.
    fn number<'py>(&self, py: Python<'py>, keys: Vec<Bound<'py, PyAny>>) -> PyResult<KeyNumbers> {
        let mut numbers = self.numbers.lock().unwrap_or_else(|e| e.into_inner());
        let (mut packed, mut new) = (Vec::with_capacity(4 * keys.len()), Vec::new());
        let mut bytes: Vec<u8> = Vec::new();
        for (at, key) in keys.iter().enumerate() {
            bytes.clear();
            match key.cast::<StatementKey>() {
                Ok(k) => bytes.extend_from_slice(k.get().key.as_bytes(py)),
                Err(_) => {
                    bytes.extend_from_slice(key.getattr("key")?.cast::<PyBytes>()?.as_bytes())
                }
            }
            if let Some(kind) = bytes.first_mut() {
                if self.twins && [KIND_INSERT, KIND_REPLACE, KIND_DELETE].contains(kind) {
                    *kind = KIND_UPDATE;
                }
            }
            let next = numbers.len() as u32;
            let n = match numbers.get(bytes.as_slice()) {
                Some(&n) => n,
                None => {
                    numbers.insert(bytes.clone(), next);
                    new.push(at);
                    next
                }
            };
            packed.extend_from_slice(&n.to_le_bytes());
        }
        Ok(KeyNumbers {
            numbers: PyBytes::new(py, &packed).unbind(),
            new,
        })
    }

    /// The keys numbered so far.
    fn __len__(&self) -> usize {
        self.numbers.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Every number forgotten: the next key met is 0 again.
    fn clear(&self) {
        self.numbers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}
