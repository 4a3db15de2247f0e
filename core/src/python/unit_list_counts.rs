//! The count mode of the Python UnitList (count_walk): every stream a caller counts over a
//! segment in one call (`UnitList.count_many`: `experiment`'s slaves, a master's shadow
//! candidates, or one slave's run), with the skipped units' forms made once per segment
//! and policy, kept beside the list for the later calls of its count until `forget_forms`
//! (`count_forms::FormsCache`); and the tallies a count
//! cuts and sums by (`table_bytes`, `statement_tables`).

use std::sync::Arc;

use dumpfilter_stub_attrs::stub;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

use super::results::{records, CountResult, StatementTables, TableBytes};
use super::sent::{send_result, SendConfig};
use super::sent_bytes::SentBytes;
use super::unit_list::PyUnitList;
use crate::count_forms::Forms;
use crate::count_walk::{self, Job};
use crate::stmt_units::StmtUnits;

records! {
    /// One stream to count (`UnitList.count_many`): its answers per unit (`UnitList.rows_many`), keep
    /// bytes per name id, walk configuration (its skip policy and Heartbeats' checksum; batch and
    /// limit not read), the size of a Heartbeat it still owes (0: none), and its keep byte per
    /// statement key id (None: statement units not cut by key).
    CountJob = "CountJob" new(row, keep, config, owed = 0, stmt_keep = None) {
        row: Py<PyBytes>,
        keep: Py<PyBytes>,
        config: Py<SendConfig>,
        owed: usize,
        stmt_keep: Option<Py<PyBytes>>,
    }
}

#[stub]
#[pymethods]
impl PyUnitList {
    /// Bytes per name id of `names` ids, their shares of the fast units' envelopes, the fast
    /// units' framing bytes, the other units' bytes, and a TimeCut (first unit, bucket) for each
    /// run of units whose binlog time falls in one `seconds` bucket (see tally::table_bytes).
    fn table_bytes(&self, py: Python<'_>, names: usize, seconds: u32) -> PyResult<TableBytes> {
        let list = &self.list;
        let t = py.detach(|| crate::tally::table_bytes(list, names, seconds));
        TableBytes::new(py, t)
    }

    /// The latest timestamp of the units' events, as their scans read them (0: none).
    fn max_timestamp(&self) -> u32 {
        self.list.latest
    }

    /// The statement units' bytes among units[..n] by group of keys, after `statement_units`
    /// (tally::statement_groups): `ids` each key id's number across lists (a KeyIndex's, u32
    /// little-endian), `group_of` a group per such number and `table_of` a table per group
    /// (both u32 little-endian; past the end, or u32::MAX: none, its units left). With `sums`
    /// (16 bytes a group: its statements' bytes and its envelopes' share, u64 little-endian),
    /// the groups' bytes are added into it, and only the groups it had not met, or met without
    /// an envelope share, are returned (tally::add_into); ValueError where a group met is past
    /// its end.
    #[pyo3(signature = (ids, group_of, table_of, n, sums = None))]
    fn statement_tables(
        &self,
        py: Python<'_>,
        ids: &[u8],
        group_of: &[u8],
        table_of: &[u8],
        n: usize,
        sums: Option<&Bound<'_, PyByteArray>>,
    ) -> PyResult<StatementTables> {
        let (empty, list) = (StmtUnits::default(), &self.list);
        let st = self.stmts.get().unwrap_or(&empty);
        let words = |b: &[u8]| -> Vec<u32> {
            b.chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect()
        };
        let (by_number, table_of) = (words(group_of), words(table_of));
        let group_of: Vec<u32> = (words(ids).iter())
            .map(|&i| *by_number.get(i as usize).unwrap_or(&u32::MAX))
            .collect();
        let (mut met, t) =
            py.detach(|| crate::tally::statement_groups(list, st, &group_of, &table_of, n));
        if let Some(sums) = sums {
            // SAFETY: no Python code runs while the bytearray's buffer is borrowed here.
            crate::tally::add_into(&mut met, unsafe { sums.as_bytes_mut() })
                .map_err(|g| PyValueError::new_err(format!("sums: group {g} is past their end")))?;
        }
        Ok(StatementTables {
            groups: met.iter().map(|m| m.group).collect(),
            payloads: met.iter().map(|m| m.payload).collect(),
            envelopes: met.iter().map(|m| m.envelope).collect(),
            keys: met.iter().map(|m| m.key).collect(),
            framing: t.framing,
            other: t.other,
            left: t.left,
        })
    }

    /// The skip forms `count_many` made dropped (count_forms::FormsCache), once a count of the list
    /// is done with them: a master's kept segments then hold none, and the next segment's forms
    /// reuse their memory instead of faulting new pages in (the small-transaction shadow pass
    /// took 9,300-12,300 minor faults a pass with them kept, 530-1,500 without).
    fn forget_forms(&self) {
        self.forms.clear();
    }

    /// `send`'s walk over units[starts[0]..] to the end of the list for every job, counted and
    /// never assembled (what a bandwidth experiment needs of a slave: no batch limit, no byte
    /// copied), in one call, cut into time buckets at `starts` (a Heartbeat owed at a cut owed
    /// into the next bucket as one of `carry` bytes), after `statement_units` (see
    /// count_walk::count_many). Each job's `walk` is what `send` returns, `out` empty.
    fn count_many(
        &self,
        py: Python<'_>,
        jobs: Vec<PyRef<'_, CountJob>>,
        starts: Vec<usize>,
        carry: usize,
    ) -> PyResult<Vec<CountResult>> {
        let bufs: Vec<&[u8]> = self.bufs.iter().map(|b| b.bytes(py)).collect();
        let (list, st) = (&self.list, self.stmts.get());
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
            let forms = self.forms.get(list, &bufs, st, &policies);
            let forms: Vec<&Forms> = forms.iter().map(Arc::as_ref).collect();
            count_walk::count_many(list, &bufs, st, &jobs, (&starts, carry), &forms)
        });
        counted
            .into_iter()
            .map(|c| {
                let walk = send_result(Py::new(py, SentBytes::empty())?, &c.sent);
                Ok(CountResult {
                    walk: Py::new(py, walk)?,
                    read_by_bucket: c.read_by_bucket,
                    sent_by_bucket: c.sent_by_bucket,
                })
            })
            .collect()
    }
}
