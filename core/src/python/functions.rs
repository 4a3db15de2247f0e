//! The module's free functions: one-shot byte work on a buffer (CRC, Heartbeat, payloads,
//! renumbering, statement words) and the slave's relay run.

use dumpfilter_stub_attrs::stub;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PySlice};

use super::results::{
    by_keys, DomainSeq, HopResult, LoneText, RelayResult, Renumbered, ReplicaFrames, StatementEnd,
    StatementShape, WalkResult,
};
use super::scanner::PyScanner;
use super::text;
use super::unit_list::PyUnitList;
use crate::assemble;
use crate::relay;
use crate::rename_db::DbRenames;
use crate::replica;
use crate::stmt_units::{ByKeys, StmtUnits};
use std::collections::HashMap;

use crate::{hops, payload, sql};

/// A Heartbeat event for (file, pos), as the master sends one (see heartbeat::heartbeat).
#[stub]
#[pyfunction]
pub(super) fn heartbeat<'py>(
    py: Python<'py>,
    file: &str,
    pos: u64,
    server_id: u32,
    crc: bool,
) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(file.len() + 23);
    crate::heartbeat::heartbeat(file.as_bytes(), pos, server_id, crc, &mut out);
    PyBytes::new(py, &out)
}

/// The u32 counts per key id of `counts` summed by each key's class byte in `classes`: the
/// classes with a nonzero sum. A stream's statements answered by key, counted per class of rule
/// hits once per segment (master.decide.statement_keys' `settle`), not by iterating its counts
/// in Python for each class.
#[stub]
#[pyfunction]
pub(super) fn class_sums(counts: &Bound<'_, PyByteArray>, classes: &[u8]) -> HashMap<u8, u64> {
    let mut sums = [0u64; 256];
    // SAFETY: no Python code runs while the bytearray's buffer is read here.
    let counts = unsafe { counts.as_bytes() };
    for (c, class) in counts.chunks_exact(4).zip(classes) {
        sums[*class as usize] += u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u64;
    }
    (0..=255u8).zip(sums).filter(|(_, sum)| *sum != 0).collect()
}

/// `code` for each unit of `units` (u32 indices) whose byte in `row` is ROW_SLOW; None when
/// that was all of them, else the indices it set (see rows::mark_slow).
#[stub]
#[pyfunction]
pub(super) fn mark_slow<'py>(
    py: Python<'py>,
    row: &Bound<'py, PyByteArray>,
    units: &[u8],
    code: u8,
) -> Option<Bound<'py, PyBytes>> {
    // SAFETY: no Python code runs while the bytearray's buffer is borrowed here.
    let set = crate::rows::mark_slow(unsafe { row.as_bytes_mut() }, units, code);
    set.map(|set| PyBytes::new(py, &set))
}

/// Each ROW_SLOW unit of `row` from `at` set to its class's code, the rest returned (see
/// rows::mark_classes; `classes` and `codes` read in place).
#[stub]
#[pyfunction]
pub(super) fn mark_classes(
    row: &Bound<'_, PyByteArray>,
    at: usize,
    classes: &Bound<'_, PyByteArray>,
    codes: &Bound<'_, PyByteArray>,
) -> Vec<u32> {
    // SAFETY: no Python code runs while the bytearrays' buffers are borrowed here, and `row` is
    // none of the others (a bytearray's buffer is its own).
    unsafe {
        crate::rows::mark_classes(row.as_bytes_mut(), at, classes.as_bytes(), codes.as_bytes())
    }
}

/// `table[i]` for each id i of `ids` (u32, little-endian), 0xFF past its end: a keep table's
/// codes by key shape read at a buffer's key ids (rules.keep_table.KeyShapes), in one call where
/// an itemgetter made a tuple of ints (2.7 M over a 542 MB MIXED binlog's 48 rule groups).
#[stub]
#[pyfunction]
pub(super) fn gather<'py>(py: Python<'py>, table: &[u8], ids: &[u8]) -> Bound<'py, PyBytes> {
    let at = |i: &[u8]| table.get(u32::from_le_bytes([i[0], i[1], i[2], i[3]]) as usize);
    PyBytes::new(
        py,
        &ids.chunks_exact(4)
            .map(|i| *at(i).unwrap_or(&0xFF))
            .collect::<Vec<u8>>(),
    )
}

/// The inner events' bytes of a Transaction_payload event body; ValueError when malformed.
#[stub]
#[pyfunction]
#[pyo3(signature = (body, max_out = 1 << 30))]
pub(super) fn payload_bytes<'py>(
    py: Python<'py>,
    body: &[u8],
    max_out: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let data = py
        .detach(|| payload::payload_bytes(body, max_out))
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &data))
}

/// The statements of a fast unit's body buf[body:end] (see hops::statements): a StatementEnd
/// each, or None for the reference path.
#[stub]
#[pyfunction]
pub(super) fn statements(buf: &[u8], body: usize, end: usize) -> Option<Vec<StatementEnd>> {
    hops::statements(buf, body, end).map(|found| {
        found
            .into_iter()
            .map(|(end, events, tables)| StatementEnd {
                end,
                events,
                tables,
            })
            .collect()
    })
}

/// Renumbers the whole events of buf[start:stop] in place for output offset `base` (see
/// assemble::renumber); returns the last non-zero timestamp and the offsets of FDEs left to the
/// caller.
#[stub]
#[pyfunction]
pub(super) fn renumber(
    buf: &Bound<'_, PyByteArray>,
    start: usize,
    stop: usize,
    base: u64,
    crc: bool,
) -> Renumbered {
    // SAFETY: the GIL is held and nothing else runs Python code during the call, so no one can
    // resize or read the bytearray while it is borrowed.
    let data = unsafe { buf.as_bytes_mut() };
    let (last_timestamp, fdes) = assemble::renumber(data, start, stop, base, crc);
    Renumbered {
        last_timestamp,
        fdes,
    }
}

/// `rules.statements.plain_statement` for a statement's UTF-8 bytes, None where Python must
/// answer (text with non-ASCII bytes or a leading comment; see sql::plain_statement).
#[stub]
#[pyfunction]
pub(super) fn plain_statement(sql: &[u8]) -> Option<bool> {
    sql::plain_statement(sql)
}

/// Whether a replica applies a Query with this text (its bytes) whatever its database filter:
/// `transaction_filter.framing_statement` (see stmt::framing).
#[stub]
#[pyfunction]
pub(super) fn framing_statement(sql: &[u8]) -> bool {
    crate::stmt::framing(sql)
}

/// The key shape of a statement's UTF-8 bytes, as the compiled assembly reads it (see
/// stmt::dml_shape), or None where Python's parser decides. `escaped`: as the walk reads a Query
/// whose status variables say backslash escapes and a client character set in which a backslash
/// byte is always one (sql::Literals::EscapedPlainBytes).
#[stub]
#[pyfunction]
#[pyo3(signature = (sql, escaped = false))]
pub(super) fn statement_key(py: Python<'_>, sql: &[u8], escaped: bool) -> Option<StatementShape> {
    let literals = if escaped {
        crate::sql::Literals::EscapedPlainBytes
    } else {
        crate::sql::Literals::Unknown
    };
    crate::stmt::dml_shape_read(sql, || literals).map(|s| StatementShape {
        kind: s.kind,
        db: s.db.map(|d| PyBytes::new(py, &d).unbind()),
        table: PyBytes::new(py, &s.table).unbind(),
    })
}

/// Split's first pass over buf[off:] (`base`: the file offset of buf[0]; `buf`: bytes or a
/// read-only view of a mapping) with the stream's `scanner`: `Scanner.walk` over the Query and
/// Query_compressed events, handing out of them only those Python must see (sql::query_for_python:
/// may be a schema statement, or its decoding may refuse it), and every FDE.
#[stub]
#[pyfunction]
pub(super) fn schema_candidates<'py>(
    py: Python<'py>,
    mut scanner: PyRefMut<'py, PyScanner>,
    buf: Bound<'py, PyAny>,
    off: usize,
    base: u64,
) -> PyResult<WalkResult> {
    use crate::types::{FORMAT_DESCRIPTION, QUERY, QUERY_COMPRESSED};
    scanner.here()?;
    let held = super::held::Held::new(&buf)?;
    let data = held.bytes(py);
    super::check_off(off, data.len())?;
    let mut types = [false; 256];
    (types[QUERY as usize], types[QUERY_COMPRESSED as usize]) = (true, true);
    let inner = &mut scanner.inner;
    let mut fmt = inner.fmt.clone(); // the format in force at buf[off]
    let (offsets, stop, err) = py.detach(|| {
        let (offsets, stop, err) = inner.walk(data, off, base, &types);
        let mut packed = Vec::new();
        for o in offsets {
            let (pos, t) = (o as usize, data[o as usize + 4]);
            let nxt = pos + crate::le::u32_at(data, pos + 9).unwrap_or(0) as usize;
            let python = if t == FORMAT_DESCRIPTION {
                // The walk has read it: the events after it are in its format.
                fmt = crate::format::Format::parse(&data[pos..nxt])
                    .ok()
                    .map(Into::into);
                true
            } else {
                fmt.as_ref()
                    .is_none_or(|f| sql::query_for_python(data, pos, nxt, t, f))
            };
            if python {
                packed.extend_from_slice(&o.to_le_bytes());
            }
        }
        (packed, stop, err)
    });
    Ok(WalkResult {
        offsets: PyBytes::new(py, &offsets).unbind(),
        stop,
        error: super::error_field(py, err.as_ref())?,
    })
}

/// Whether buf[off:] (a file's first bytes) holds another server's log_pos values: a relay log.
#[stub]
#[pyfunction]
pub(super) fn foreign_log_pos(buf: &[u8], off: usize) -> bool {
    hops::foreign_log_pos(buf, off)
}

/// A bare header hop over buf[off:] (bytes, a bytearray or a memoryview of a mapping): the events
/// and where it stopped, the end of the last whole event (the benchmarks' compiled baseline, and
/// where a file's whole events end).
#[stub]
#[pyfunction]
pub(super) fn hop(buf: &Bound<'_, PyAny>, off: usize) -> PyResult<HopResult> {
    let (events, stop) = super::read_buffer(buf, "hop", |bytes| hops::hop(bytes, off))?;
    Ok(HopResult { events, stop })
}

/// The last non-zero timestamp of the whole events in `buf` (bytes, a bytearray or a memoryview;
/// 0: none): what a writer dates a Rotate with after writing them (assemble::last_timestamp).
#[stub]
#[pyfunction]
pub(super) fn last_timestamp(buf: &Bound<'_, PyAny>) -> PyResult<u32> {
    super::read_buffer(buf, "last_timestamp", assemble::last_timestamp)
}

/// One event with its database renamed `db` and, a Table_map's, its table `table` (see
/// rename_db::rename_event; `post`: its kind's post-header length): the renamed event, None where
/// it names no database; ValueError where it cannot be read.
#[stub]
#[pyfunction]
#[pyo3(signature = (event, db, table, post, crc_len))]
pub(super) fn rename_event<'py>(
    py: Python<'py>,
    event: &[u8],
    db: &[u8],
    table: Option<&[u8]>,
    post: usize,
    crc_len: usize,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let renamed = crate::rename_db::rename_event(event, db, table, post, crc_len)
        .map_err(|_| PyValueError::new_err("an event cut short or overrun by its names"))?;
    Ok(renamed.map(|e| PyBytes::new(py, &e)))
}

/// What `relay_run` takes of replicate-rewrite-db's names (see there).
type Renames = (HashMap<Vec<u8>, Vec<u8>>, usize, usize);

/// The slave's relay run over the last `units` call of `scanner` (see relay::relay_ranges): the
/// bytes to relay, the next unit index, the counts, the lone statements copied whose text the
/// slave's check reads, and the statement keys met and used. `lone`: (QUERY post-header length,
/// checksum length) of the format in force, to copy lone statements too; None, to stop at them.
/// `stmt_keep` (with `lone`): a keep byte per key id of the scanner's `statement_units`, to copy
/// the statement units whose every statement its keys keep.
/// `renames` (with `lone`): replicate-rewrite-db's names, (the master's database name -> the
/// one applied, EXECUTE_LOAD_QUERY's and TABLE_MAP's post-header lengths): the units relayed with
/// their names renamed (rename_db), the run stopping at a name the map lacks.
#[stub]
#[pyfunction]
#[pyo3(signature = (scanner, buf, start, keep, lone = None, stmt_keep = None, renames = None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn relay_run<'py>(
    py: Python<'py>,
    mut scanner: PyRefMut<'py, PyScanner>,
    buf: &Bound<'py, PyBytes>,
    start: usize,
    keep: &[u8],
    lone: Option<(usize, usize)>,
    stmt_keep: Option<&[u8]>,
    #[gen_stub(override_type(type_repr = "tuple[dict[bytes, bytes], int, int] | None"))]
    renames: Option<Renames>,
) -> PyResult<RelayResult> {
    let data = buf.as_bytes();
    let s = &mut *scanner;
    let (units, tables) = (&s.last_units, &s.last_tables);
    let lone = lone.map(|(query_post, crc_len)| relay::LoneFormat {
        query_post,
        crc_len,
    });
    let mut stmts = stmt_keep
        .zip(s.last_stmt.as_ref())
        .map(|(k, st)| ByKeys::new(st, k));
    let renames = renames
        .zip(lone)
        .map(|((map, load_post, table_map_post), f)| DbRenames {
            map,
            query_post: f.query_post,
            load_post,
            table_map_post,
            crc_len: f.crc_len,
        });
    let p = py.detach(|| {
        relay::relay_ranges(
            data,
            units,
            tables,
            keep,
            start,
            lone,
            stmts.as_mut(),
            renames.as_ref(),
        )
    });
    // What to relay: the buffer itself when the run relays all of it (an empty-transaction
    // stream's batch: kept units and emptied ones back to back, about 1 MB each), a view of it
    // for one stretch, else one copy of the stretches, straight into the bytes handed to Python.
    // (Under replicate-rewrite-db, a range with names to rename is copied as they are written.)
    let out = match p.ranges[..] {
        [relay::Piece::Range(0, hi)] if hi == data.len() && p.edits.is_empty() => {
            buf.clone().into_any()
        }
        [relay::Piece::Range(lo, hi)] if p.edits.is_empty() => PyMemoryView::from(buf.as_any())?
            .into_any()
            .get_item(PySlice::new(py, lo as isize, hi as isize, 1))?,
        _ => super::sent_bytes::bytes_filled(py, p.bytes as usize, |dst| p.fill(data, dst))?
            .into_bound(py)
            .into_any(),
    };
    let texts = p.lone.iter().map(|(unit, db, sql)| {
        Ok(LoneText {
            unit: *unit,
            db: text(py, &data[db.clone()])?.unbind(),
            sql: text(py, &data[sql.clone()])?.unbind(),
        })
    });
    Ok(RelayResult {
        out: out.unbind(),
        next: p.next,
        units: p.units,
        events: p.events,
        bytes: p.bytes,
        heartbeats: p.heartbeats,
        lone: super::list(py, texts)?,
        placeholders: p.placeholders,
        by_keys: by_keys(py, stmts.as_ref())?,
        renamed: p.edits.len() as u64,
    })
}

/// A batch's events framed for a real replica (see replica::frame): None where the batch needs
/// the per-event way.
#[stub]
#[pyfunction]
pub(super) fn replica_frames(
    py: Python<'_>,
    events: &[u8],
    seq: u8,
    annotate: bool,
    master_pos: u64,
    counted: u64,
) -> PyResult<Option<ReplicaFrames>> {
    let Some(f) = py.detach(|| replica::frame(events, seq, annotate, master_pos, counted)) else {
        return Ok(None);
    };
    let gtids = f
        .gtids
        .iter()
        .map(|&(domain, seq_no)| DomainSeq { domain, seq_no });
    Ok(Some(ReplicaFrames {
        packets: PyBytes::new(py, &f.packets).unbind(),
        seq: f.seq,
        moved: f.moved,
        gtids: PyList::new(py, gtids)?.unbind(),
        master_pos: f.master_pos,
        counted: f.counted,
    }))
}

/// The heap bytes `list` holds: its records and what is read of it once for every stream (see
/// unit_list::UnitList::heap_bytes), its statement units, those a scan thread built ahead and the
/// skip forms its counts made (count_forms::FormsCache). What
/// the master's segment cache counts for a segment it keeps by its scan (INDEX_BYTES): a MIXED
/// segment's statement units are about twice its records.
#[stub]
#[pyfunction]
pub(super) fn held_bytes(list: PyRef<'_, PyUnitList>) -> usize {
    let ahead = list.ahead.lock().unwrap_or_else(|e| e.into_inner());
    let ahead = ahead.as_ref().map_or(0, |(_, st)| st.heap_bytes());
    let forms = list.forms.heap_bytes();
    list.list.heap_bytes() + list.stmts.get().map_or(0, StmtUnits::heap_bytes) + ahead + forms
}
