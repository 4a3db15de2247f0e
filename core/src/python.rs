//! The Python face of the core: `dumpfilter._core`. Calls are made per buffer, never per event;
//! results come back as packed little-endian arrays (bytes) that Python views with memoryview.
//! One file per exposed class or area (python/); this file registers them all, and holds the
//! conversions they share.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::rows;
use crate::scan::{self, ErrorKind, ScanError};

/// Adds each constant to the module (with `stubs`, declares it `Final[int]` in the stub too).
macro_rules! constants {
    ($m:ident, $($name:ident = $value:expr,)*) => {$(
        #[cfg(feature = "stubs")]
        pyo3_stub_gen::module_variable!("dumpfilter._core", stringify!($name), $crate::python::stubs::FinalInt);
        $m.add(stringify!($name), $value)?;
    )*};
    // `module: NAME, ...;`: each a constant of that module, under its own name.
    ($m:ident; $($module:ident: $($name:ident),*;)*) => {
        constants!($m, $($($name = $module::$name,)*)*)
    };
}

/// Adds each #[pyfunction] to the module.
macro_rules! functions {
    ($m:ident: $($f:path),* $(,)?) => {$(
        $m.add_function(wrap_pyfunction!($f, $m)?)?;
    )*};
}

mod facts;
mod flag_words;
mod functions;
mod held;
mod key_index;
mod lone_classes;
mod results;
mod scan_thread;
mod scanner;
mod sent;
mod sent_bytes;
mod split;
mod sql_text;
mod stmt_pieces;
#[cfg(feature = "stubs")]
pub(crate) mod stubs;
mod unit_list;
mod unit_list_counts;
mod unit_list_reads;
mod verify_forms;

use flag_words::PyFlagWords;
use functions::*;
use scanner::PyScanner;
use unit_list::PyUnitList;

/// A str of UTF-8 bytes, undecodable bytes kept as surrogates (Python's "surrogateescape").
fn text<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, pyo3::types::PyString>> {
    use pyo3::types::PyString;
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(PyString::new(py, s)),
        Err(_) => PyString::from_encoded_object(
            &PyBytes::new(py, bytes),
            Some(c"utf-8"),
            Some(c"surrogateescape"),
        ),
    }
}

/// A scan's error as Python sees it: None, or a ScanFault, kind "binlog" or "checksum".
fn scan_fault(e: Option<&ScanError>) -> Option<results::ScanFault> {
    let e = e?;
    let kind = match e.kind {
        ErrorKind::Binlog => "binlog",
        ErrorKind::Checksum => "checksum",
    };
    Some(results::ScanFault {
        kind,
        message: e.message.clone(),
        offset: e.offset,
    })
}

/// A list of the records `items` makes (the first error, if any).
fn list<T: for<'py> IntoPyObject<'py>>(
    py: Python<'_>,
    items: impl Iterator<Item = PyResult<T>>,
) -> PyResult<Py<pyo3::types::PyList>> {
    let items = items.collect::<PyResult<Vec<T>>>()?;
    Ok(pyo3::types::PyList::new(py, items)?.unbind())
}

/// `read` of the bytes of `buf` (bytes, a bytearray or a memoryview), which `call` refuses where
/// they are not contiguous.
fn read_buffer<T>(
    buf: &Bound<'_, PyAny>,
    call: &str,
    read: impl FnOnce(&[u8]) -> T,
) -> PyResult<T> {
    let view = pyo3::buffer::PyBuffer::<u8>::get(buf)?;
    if !view.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{call} reads a contiguous buffer"
        )));
    }
    // SAFETY: the GIL is held and no Python code runs while the buffer is read.
    Ok(read(unsafe {
        std::slice::from_raw_parts(view.buf_ptr() as *const u8, view.len_bytes())
    }))
}

/// `scan_fault` as a field of a result.
fn error_field(py: Python<'_>, e: Option<&ScanError>) -> PyResult<Option<Py<results::ScanFault>>> {
    scan_fault(e).map(|f| Py::new(py, f)).transpose()
}

/// `words` as little-endian bytes (`le`: their type's to_le_bytes), packed straight into the bytes
/// handed to Python (no buffer copied in between).
fn packed<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    words: &[T],
    le: fn(T) -> [u8; N],
) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, words.len() * N, |b| {
        for (place, w) in b.chunks_exact_mut(N).zip(words) {
            place.copy_from_slice(&le(*w));
        }
        Ok(())
    })
}

fn check_off(off: usize, len: usize) -> PyResult<()> {
    if off > len {
        return Err(PyValueError::new_err(format!(
            "offset {off} is past the buffer ({len} bytes)"
        )));
    }
    Ok(())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyScanner>()?;
    m.add_class::<PyUnitList>()?;
    m.add_class::<PyFlagWords>()?;
    m.add_class::<key_index::PyKeyIndex>()?;
    m.add_class::<lone_classes::PyLoneClasses>()?;
    m.add_class::<sent_bytes::SentBytes>()?;
    sent::add_records(m)?;
    unit_list_counts::add_records(m)?;
    scanner::add_records(m)?;
    results::add_records(m)?;
    facts::register(m)?;
    sql_text::register(m)?;
    functions! { m:
        heartbeat, mark_slow, mark_classes, gather, class_sums, payload_bytes, statements, hop, last_timestamp,
        foreign_log_pos, plain_statement, framing_statement, schema_candidates, statement_key,
        renumber, relay_run, rename_event, replica_frames, split::split_route,
        unit_list_reads::reaches_key_alone, held_bytes, unit_list_reads::mysql_gtids_at,
        split::gtid_marks, stmt_pieces::statement_pieces, verify_forms::relayed, sent_bytes::join_parts,
    }
    use crate::{keep, lone_class, skip_forms, stmt};
    constants! { m;
        scan: UNIT_WORDS, F_FAST, F_COMPLETE;
        keep: KEEP_DROP, KEEP_KEEP, KEEP_ASK;
        stmt: KIND_INSERT, KIND_REPLACE, KIND_UPDATE, KIND_DELETE, KIND_INSERT_SELECT,
            KIND_REPLACE_SELECT;
        rows: ROW_SKIP, ROW_PARTIAL, ROW_KEEP, ROW_SLOW, CLASS_UNREAD, CLASS_LEFT, CLASS_STAYS;
        lone_class: LONE_RESOLVED, LONE_REPLAY, LONE_DEFER;
        skip_forms: SKIP_STOP, SKIP_HEARTBEAT, SKIP_PLACEHOLDER, SKIP_EMPTY;
        scan: F_ROTATE_END, F_HAS_FDE, F_MARIADB_GTID, F_MYSQL_GTID, F_TAGGED_GTID,
            F_ANONYMOUS_GTID, F_UNKNOWN_NON_IGNORABLE, F_PAYLOAD;
    }
    Ok(())
}
