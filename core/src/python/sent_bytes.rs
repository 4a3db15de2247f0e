//! A walk's bytes handed to Python uncopied (`SentBytes`: its pieces of the held buffers and
//! the bytes it made), copied once where a batch's pieces are joined (`join_parts`), or filled
//! into one new bytes object without the GIL (`filled_bytes`).

use dumpfilter_stub_attrs::stub;
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::held::Held;
use crate::sent::Sent;

/// What a walk sends (`UnitList.send`'s `out`), not copied yet: its pieces of the list's
/// buffers, held here (a mapping stays open while they are), and the bytes it made. They are
/// copied once, where a batch's pieces are joined (`join_parts`: a Dump reply's wire bytes, a
/// replica's batch). Copied into bytes of their own first, then joined, eight do-db streams of a
/// small-transaction binlog spent 4% of the master's CPU on the second copy. `bytes()` of it
/// fills new bytes.
#[stub]
#[pyclass(frozen, module = "dumpfilter._core", name = "SentBytes")]
pub(super) struct SentBytes {
    sent: Sent,
    bufs: Vec<Held>,
}

impl SentBytes {
    /// The bytes of `s`, a walk over `bufs` (a UnitList's), each of them held again.
    pub(super) fn new(py: Python<'_>, s: Sent, bufs: &[Held]) -> PyResult<Self> {
        let used = |p: usize| {
            s.pieces
                .iter()
                .any(|x| matches!(x, crate::sent::Piece::Buf { part, .. } if *part as usize == p))
        };
        // (a buffer no piece reads is not held: an empty hold stands in its place)
        let bufs = (bufs.iter().enumerate())
            .map(|(p, b)| match used(p) {
                true => b.share(py),
                false => Ok(Held::Bytes(PyBytes::new(py, b"").unbind())),
            })
            .collect::<PyResult<_>>()?;
        Ok(SentBytes { sent: s, bufs })
    }

    /// No bytes: the `out` of a count walk's result (`count_many`), which sends none.
    pub(super) fn empty() -> Self {
        SentBytes {
            sent: Sent::default(),
            bufs: Vec::new(),
        }
    }

    /// The walk whose bytes these are (its counters: `send_result`).
    pub(super) fn sent(&self) -> &Sent {
        &self.sent
    }
}

#[stub]
#[pymethods]
impl SentBytes {
    fn __len__(&self) -> usize {
        self.sent.out_len
    }

    fn __bytes__(&self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        let bufs: Vec<&[u8]> = self.bufs.iter().map(|b| b.bytes(py)).collect();
        filled_bytes(py, &self.sent, &bufs)
    }
}

/// What `join_parts` copies of one part.
enum Src<'a> {
    Slice(&'a [u8]),
    Sent(&'a Sent, Vec<&'a [u8]>),
}

/// `head`, the bytes of each of `parts` and `tail` in one new bytes object, copied without the
/// GIL: `b"".join` where a part may also be a `SentBytes`, whose pieces are copied straight in.
/// A part is bytes, an object exporting contiguous bytes (a memoryview), or a SentBytes.
#[stub]
#[pyfunction]
pub(super) fn join_parts<'py>(
    py: Python<'py>,
    head: &[u8],
    #[gen_stub(override_type(type_repr = "list[bytes | memoryview | SentBytes]"))] parts: &Bound<
        'py,
        PyList,
    >,
    tail: &[u8],
) -> PyResult<Py<PyBytes>> {
    let items: Vec<Bound<'py, PyAny>> = parts.iter().collect(); // (held: the list may change)
    let mut views: Vec<PyBuffer<u8>> = Vec::new();
    for item in &items {
        if item.cast::<PyBytes>().is_err() && item.cast::<SentBytes>().is_err() {
            let view = PyBuffer::<u8>::get(item)?;
            if !view.is_c_contiguous() {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "a part is not contiguous bytes",
                ));
            }
            views.push(view);
        }
    }
    let mut srcs = Vec::with_capacity(items.len() + 2);
    srcs.push(Src::Slice(head));
    let mut next_view = views.iter();
    for item in &items {
        if let Ok(b) = item.cast::<PyBytes>() {
            srcs.push(Src::Slice(b.as_bytes()));
        } else if let Ok(sent) = item.cast::<SentBytes>() {
            let sent = sent.get();
            let bufs = sent.bufs.iter().map(|b| b.bytes(py)).collect();
            srcs.push(Src::Sent(&sent.sent, bufs));
        } else if let Some(view) = next_view.next() {
            // SAFETY: the export is held (`views`) until the copy is done: its memory stays
            // valid and in place; contiguous, checked above.
            srcs.push(Src::Slice(unsafe {
                std::slice::from_raw_parts(view.buf_ptr() as *const u8, view.len_bytes())
            }));
        }
    }
    srcs.push(Src::Slice(tail));
    let len = |s: &Src| match s {
        Src::Slice(b) => b.len(),
        Src::Sent(s, _) => s.out_len,
    };
    let total: usize = srcs.iter().map(len).sum();
    let bytes = bytes_filled(py, total, |out| {
        let mut at = 0;
        for src in &srcs {
            let n = len(src);
            match src {
                Src::Slice(b) => out[at..at + n].copy_from_slice(b),
                Src::Sent(s, bufs) => s.fill(bufs, &mut out[at..at + n]),
            }
            at += n;
        }
    });
    drop(views);
    bytes
}

/// A new bytes object holding what a walk sends (`Sent::fill`), its kept bytes copied straight
/// into it, without the GIL (a Vec assembled first, then copied into the bytes, cost a second
/// full copy of everything sent: about 4 ms per do-db slave's pass over a 263 MB binlog).
pub(super) fn filled_bytes(py: Python<'_>, s: &Sent, bufs: &[&[u8]]) -> PyResult<Py<PyBytes>> {
    bytes_filled(py, s.out_len, |dst| s.fill(bufs, dst))
}

/// A new bytes object of `len` bytes, every one written by `fill`, without the GIL and not
/// zeroed first (`PyBytes::new_with` writes zeros over the buffer, then lets the closure write
/// it again, holding the GIL: a relay run's renamed megabyte per batch was written twice).
pub(super) fn bytes_filled(
    py: Python<'_>,
    len: usize,
    fill: impl FnOnce(&mut [u8]) + Send,
) -> PyResult<Py<PyBytes>> {
    // SAFETY: PyBytes_FromStringAndSize(NULL, len) returns a new, uninitialised bytes object of
    // `len` bytes (or NULL with an exception set), which no other code can see until it is
    // handed back below; `fill` writes its buffer in full before that (every caller's contract).
    unsafe {
        let obj =
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as pyo3::ffi::Py_ssize_t);
        let bytes: Bound<'_, PyBytes> =
            Bound::from_owned_ptr_or_err(py, obj)?.cast_into_unchecked();
        let dst = Dst(pyo3::ffi::PyBytes_AsString(bytes.as_ptr()) as *mut u8, len);
        py.detach(|| {
            let dst = dst;
            fill(std::slice::from_raw_parts_mut(dst.0, dst.1))
        });
        Ok(bytes.unbind())
    }
}

/// A bytes object's buffer handed to the fill without the GIL (see `bytes_filled`).
struct Dst(*mut u8, usize);
// SAFETY: the buffer belongs to a bytes object no other thread can reach while it is filled.
unsafe impl Send for Dst {}
