//! A buffer held by the core past the call that handed it over (`Held`): a bytes object, or a
//! read-only buffer export (a mapped binlog), read without the GIL by a scan or a UnitList.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A buffer a UnitList reads after the call that handed it over: a bytes object, or any object
/// exporting read-only contiguous bytes (the master maps closed binlog files rather than
/// copying them). Held, a mapping cannot be closed or resized under the UnitList: Python refuses
/// while it is exported. A writable buffer is refused: it could change under a scan that runs
/// without the GIL.
pub(super) enum Held {
    Bytes(Py<PyBytes>),
    View(PyBuffer<u8>),
}

impl Held {
    pub(super) fn new(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(bytes) = obj.cast::<PyBytes>() {
            return Ok(Held::Bytes(bytes.clone().unbind()));
        }
        let view = PyBuffer::<u8>::get(obj)?;
        if !view.is_c_contiguous() || !view.readonly() {
            return Err(PyValueError::new_err(
                "a UnitList reads bytes or a read-only contiguous buffer (a mapping opened PROT_READ)",
            ));
        }
        Ok(Held::View(view))
    }

    pub(super) fn bytes<'a>(&'a self, py: Python<'_>) -> &'a [u8] {
        match self {
            Held::Bytes(b) => b.as_bytes(py),
            // SAFETY: the export is held as long as self: the memory stays valid and in place,
            // and the object is read-only or not written while it is a UnitList's part.
            Held::View(v) => unsafe {
                std::slice::from_raw_parts(v.buf_ptr() as *const u8, v.len_bytes())
            },
        }
    }
}

impl Held {
    /// Another hold on the same bytes (a view's object exported again), for what reads them
    /// after the UnitList that held them may be gone (`SentBytes`).
    pub(super) fn share(&self, py: Python<'_>) -> PyResult<Self> {
        match self {
            Held::Bytes(b) => Ok(Held::Bytes(b.clone_ref(py))),
            Held::View(v) => match v.obj(py) {
                Some(obj) => Held::new(obj),
                None => Err(PyValueError::new_err("a held buffer without its object")),
            },
        }
    }
}
