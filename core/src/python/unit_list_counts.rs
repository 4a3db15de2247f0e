//! The count mode of the Python UnitList (count_walk): every stream a caller counts over a
//! segment in one call (`UnitList.count_many`: `experiment`'s slaves, a master's shadow
//! candidates), or one (`UnitList.count`), with the skipped units' forms made once per segment
//! and policy, kept beside the list for every later call (`FormsCache`).

use std::sync::{Arc, Mutex};

use dumpfilter_stub_attrs::stub;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::results::{CountResult, SendResult};
use super::sent::{send_result, SendConfig};
use crate::count_walk::{self, Forms, Job};
use crate::skip_forms::{SKIP_EMPTY, SKIP_PLACEHOLDER};
use crate::stmt_units::StmtUnits;
use crate::unit_list::UnitList;

/// One stream to count (`UnitList.count_many`): its answers per unit (`UnitList.rows`), keep
/// bytes per name id, walk configuration (its skip policy and Heartbeats' checksum; batch and
/// limit not read), the size of a Heartbeat it still owes (0: none), and its keep byte per
/// statement key id (None: statement units not cut by key).
#[stub]
#[pyclass(frozen, get_all, module = "dumpfilter._core", name = "CountJob")]
pub(super) struct CountJob {
    row: Py<PyBytes>,
    keep: Py<PyBytes>,
    config: Py<SendConfig>,
    owed: usize,
    stmt_keep: Option<Py<PyBytes>>,
}

#[stub]
#[pymethods]
impl CountJob {
    #[new]
    #[pyo3(signature = (row, keep, config, owed = 0, stmt_keep = None))]
    fn new(
        row: Py<PyBytes>,
        keep: Py<PyBytes>,
        config: Py<SendConfig>,
        owed: usize,
        stmt_keep: Option<Py<PyBytes>>,
    ) -> Self {
        CountJob {
            row,
            keep,
            config,
            owed,
            stmt_keep,
        }
    }
}

/// The skipped units' forms a list has made, per policy (made at the first count under it).
#[derive(Default)]
pub(super) struct FormsCache(Mutex<Vec<Arc<Forms>>>);

impl FormsCache {
    /// The forms under each of `policies` (placeholder and empty-transaction ones only), the
    /// missing ones made in one read of the units.
    fn get(
        &self,
        list: &UnitList,
        bufs: &[&[u8]],
        st: Option<&StmtUnits>,
        policies: &[(u8, bool)],
    ) -> Vec<Arc<Forms>> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut missing: Vec<(u8, bool)> = Vec::new();
        for &(skip, crc) in policies {
            let known = held.iter().any(|f| (f.skip, f.crc) == (skip, crc));
            let formed = matches!(skip, SKIP_PLACEHOLDER | SKIP_EMPTY);
            if formed && !known && !missing.contains(&(skip, crc)) {
                missing.push((skip, crc));
            }
        }
        held.extend(
            Forms::make(list, bufs, st, &missing)
                .into_iter()
                .map(Arc::new),
        );
        held.clone()
    }
}

/// `UnitList.count_many` over `list` (its parts' buffers `bufs`, statement units `st`).
pub(super) fn count_many(
    py: Python<'_>,
    (list, bufs, st): (&UnitList, &[&[u8]], Option<&StmtUnits>),
    cache: &FormsCache,
    jobs: &[PyRef<'_, CountJob>],
    starts: &[usize],
    carry: usize,
) -> PyResult<Vec<CountResult>> {
    let jobs: Vec<Job> = jobs
        .iter()
        .map(|j| {
            let config = j.config.get();
            Job {
                row: j.row.as_bytes(py),
                keep: j.keep.as_bytes(py),
                stmt_keep: j.stmt_keep.as_ref().map(|k| k.as_bytes(py)),
                skip: config.skip,
                partial_ok: config.partial_ok,
                crc: config.heartbeat_crc,
                owed: j.owed,
            }
        })
        .collect();
    let policies: Vec<(u8, bool)> = jobs.iter().map(|j| (j.skip, j.crc)).collect();
    let counted = py.detach(|| {
        let forms = cache.get(list, bufs, st, &policies);
        let forms: Vec<&Forms> = forms.iter().map(Arc::as_ref).collect();
        count_walk::count_many(list, bufs, st, &jobs, (starts, carry), &forms)
    });
    counted
        .into_iter()
        .map(|c| {
            let walk = send_result(PyBytes::new(py, b"").unbind(), &c.sent);
            Ok(CountResult {
                walk: Py::new(py, walk)?,
                read_by_bucket: c.read_by_bucket,
                sent_by_bucket: c.sent_by_bucket,
            })
        })
        .collect()
}

/// `UnitList.count`: one stream from unit `start`, owing a Heartbeat of `pending` bytes.
#[allow(clippy::too_many_arguments)]
pub(super) fn count(
    py: Python<'_>,
    lists: (&UnitList, &[&[u8]], Option<&StmtUnits>),
    cache: &FormsCache,
    (row, keep, stmt_keep): (&[u8], &[u8], Option<&[u8]>),
    start: usize,
    config: &SendConfig,
    pending: usize,
) -> SendResult {
    let (list, bufs, st) = lists;
    let job = Job {
        row,
        keep,
        stmt_keep,
        skip: config.skip,
        partial_ok: config.partial_ok,
        crc: config.heartbeat_crc,
        owed: pending,
    };
    let s = py.detach(|| {
        let forms = cache.get(list, bufs, st, &[(job.skip, job.crc)]);
        let forms: Vec<&Forms> = forms.iter().map(Arc::as_ref).collect();
        let got = count_walk::count_many(list, bufs, st, &[job], (&[start], 0), &forms);
        got.into_iter().next().map(|c| c.sent).unwrap_or_default()
    });
    send_result(PyBytes::new(py, b"").unbind(), &s)
}
