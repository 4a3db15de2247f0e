//! What the Python UnitList reads of its units' texts for the streams, beside the list itself
//! (unit_list.rs): the lone queries every stream's statement flag words answer, what a gated
//! stream's statement units need (`rows_many`), the test a gated stream's keys stand on
//! (`reaches_key_alone`), and MySQL GTIDs' runs as records.

use dumpfilter_stub_attrs::stub;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyString};

use super::held::Held;
use super::results::{GtidRun, LoneGroup, LoneQueries, LoneQuery, LoneSums, MysqlGtids};
use super::text;
use crate::gate_reads::GateReads;
use crate::gtid_runs;
use crate::lone_class::{self, LoneClasses};
use crate::sql;
use crate::stmt_units::StmtUnits;
use crate::unit_list::UnitList;

/// What `lone_queries` answers in place for the units of a number Python has answered
/// (lone_class::resolved_at): `resolved`, and each unit's class code and key written into
/// `class_of` and `key_of` (a u32 a unit).
pub(super) struct Answered<'a> {
    pub resolved: &'a [u8],
    pub class_of: &'a Bound<'a, PyByteArray>,
    pub key_of: &'a Bound<'a, PyByteArray>,
}

/// `UnitList.lone_queries` (see there) over `list`, its parts' buffers `bufs`.
pub(super) fn lone_queries(
    py: Python<'_>,
    list: &UnitList,
    bufs: &[Held],
    formats: &[(usize, usize, usize)],
    every: bool,
    mut classes: Option<&mut LoneClasses>,
    answered: Option<Answered<'_>>,
) -> PyResult<LoneQueries> {
    if let Some(a) = &answered {
        let n = 4 * list.units.len();
        if classes.is_none() || a.class_of.len() < n || a.key_of.len() < n {
            return Err(PyValueError::new_err(
                "lone_queries: resolved needs classes, and class_of and key_of of 4 bytes a unit",
            ));
        }
    }
    let others = PyList::empty(py);
    let texts = PyList::empty(py);
    let mut replays: Vec<u8> = Vec::new();
    let mut writes: Vec<(usize, u32, u32)> = Vec::new(); // (unit, code, key), written after the loop
                                                         // A segment's DDL names a few databases: a short list beats hashing.
    let mut plain: Vec<(&[u8], Vec<u8>)> = Vec::new();
    for (k, u) in list.units.iter().enumerate() {
        if !u.may_be_lone() {
            continue; // (most units: the record alone says)
        }
        let p = u.part as usize;
        let (Some(&(post, crc, from)), Some(buf)) = (formats.get(p), bufs.get(p)) else {
            continue;
        };
        if k < from {
            continue;
        }
        let buf = buf.bytes(py);
        if let Some((db, sql)) = list.lone_query(k, buf, post, crc) {
            let (db, sql) = (&buf[db], &buf[sql]);
            let is_plain = sql::plain_statement(sql);
            if is_plain == Some(true) {
                let at = plain.iter().position(|(d, _)| *d == db).unwrap_or_else(|| {
                    plain.push((db, Vec::new()));
                    plain.len() - 1
                });
                plain[at].1.extend_from_slice(&(k as u32).to_le_bytes());
            }
            if is_plain != Some(true) || every {
                let class = classes.as_deref_mut().and_then(|c| c.class_of(db, sql));
                // (a unit without a GTID has no class; one Python must tell plain goes to Python)
                let found = match (&answered, class) {
                    (Some(a), Some(n)) if u.gtid_size > 0 && is_plain.is_some() => {
                        lone_class::resolved_at(a.resolved, n).map(|r| (n, r))
                    }
                    _ => None,
                };
                if let Some((n, (key, code, flags))) = found {
                    writes.push((k, code, key));
                    if flags & (lone_class::LONE_REPLAY | lone_class::LONE_DEFER) != 0 {
                        replays.extend_from_slice(&(k as u32).to_le_bytes());
                        replays.extend_from_slice(&n.to_le_bytes());
                        if flags & lone_class::LONE_DEFER != 0 {
                            texts.append(text(py, sql)?)?;
                        } else {
                            texts.append(py.None())?;
                        }
                    }
                    continue;
                }
                others.append(LoneQuery {
                    unit: k,
                    gtid_size: u.gtid_size as usize,
                    size: u.end() - u.start(),
                    db: text(py, db)?.unbind(),
                    plain: is_plain,
                    sql: text(py, sql)?.unbind(),
                    class_id: class.map_or(-1, i64::from),
                })?;
            }
        }
    }
    if let Some(a) = &answered {
        // SAFETY: no Python code runs while the bytearrays' buffers are borrowed here, and the two
        // are not one (a bytearray's buffer is its own).
        let (class_of, key_of) = unsafe { (a.class_of.as_bytes_mut(), a.key_of.as_bytes_mut()) };
        for (k, code, key) in writes {
            class_of[4 * k..4 * k + 4].copy_from_slice(&code.to_le_bytes());
            key_of[4 * k..4 * k + 4].copy_from_slice(&key.to_le_bytes());
        }
    }
    let groups = plain.into_iter().map(|(db, ks)| {
        Ok(LoneGroup {
            db: text(py, db)?.unbind(),
            units: PyBytes::new(py, &ks).unbind(),
        })
    });
    Ok(LoneQueries {
        plain: super::list(py, groups)?,
        others: others.unbind(),
        replays: PyBytes::new(py, &replays).unbind(),
        texts: texts.unbind(),
    })
}

/// `UnitList.lone_sums` (see there) over `list`, its parts' buffers `bufs`.
#[allow(clippy::too_many_arguments)]
pub(super) fn lone_sums(
    py: Python<'_>,
    list: &UnitList,
    bufs: &[Held],
    formats: &[(usize, usize, usize)],
    left: &[u32],
    (key_of, shares): (&[u8], &[u8]),
    sums: &Bound<'_, PyByteArray>,
    met: &Bound<'_, PyByteArray>,
) -> PyResult<LoneSums> {
    // SAFETY: no Python code runs while the bytearrays' buffers are borrowed here, and the two
    // are not one.
    let got = unsafe {
        crate::lone_sums::lone_sums(
            list,
            left,
            key_of,
            shares,
            sums.as_bytes_mut(),
            met.as_bytes_mut(),
        )
    }
    .map_err(|key| {
        PyValueError::new_err(format!("lone_sums: key {key} is past the sums or met"))
    })?;
    let queries = PyList::empty(py);
    for g in &got {
        let k = g.unit as usize;
        let read = list.units.get(k).and_then(|u| {
            let (post, crc, from) = *formats.get(u.part as usize)?;
            let buf = bufs.get(u.part as usize)?.bytes(py);
            let (db, sql) = (k >= from).then(|| list.lone_query(k, buf, post, crc))??;
            Some((u, &buf[db], &buf[sql]))
        });
        match read {
            Some((u, db, sql)) => queries.append(LoneQuery {
                unit: k,
                gtid_size: u.gtid_size as usize,
                size: u.end() - u.start(),
                db: text(py, db)?.unbind(),
                plain: sql::plain_statement(sql),
                sql: text(py, sql)?.unbind(),
                class_id: -1,
            })?,
            None => queries.append(py.None())?,
        }
    }
    Ok(LoneSums {
        units: got.iter().map(|g| g.unit).collect(),
        summed: got.iter().map(|g| g.summed).collect(),
        queries: queries.unbind(),
    })
}

/// `UnitList.rows_many` (see there) of `list`, its parts' buffers `bufs` and its gate reads
/// `gate`; `by_keys`: its statement units (when read) and each slave's keep bytes for them.
pub(super) fn rows_many(
    py: Python<'_>,
    (list, bufs, gate): (&UnitList, &[Held], &GateReads),
    keeps: &[Vec<u8>],
    by_keys: Option<(&StmtUnits, Vec<Option<Vec<u8>>>)>,
    gated: Option<Vec<Option<Vec<u8>>>>,
    formats: Option<Vec<(usize, usize, usize)>>,
) -> PyResult<Vec<Vec<u8>>> {
    let n = keeps.len();
    if by_keys.as_ref().is_some_and(|(_, k)| k.len() != n)
        || gated.as_ref().is_some_and(|g| g.len() != n)
    {
        return Err(PyValueError::new_err(
            "rows_many: one statement keep and one gated (when given) per keep",
        ));
    }
    let keeps: Vec<&[u8]> = keeps.iter().map(Vec::as_slice).collect();
    let by_keys = by_keys
        .as_ref()
        .map(|(st, k)| (*st, k.iter().map(Option::as_deref).collect::<Vec<_>>()));
    let bufs: Vec<&[u8]> = bufs.iter().map(|b| b.bytes(py)).collect();
    let formats = formats.unwrap_or_default();
    Ok(py.detach(|| {
        let mut rows = list.rows_many(
            &keeps,
            by_keys.as_ref().map(|(st, k)| (st.columns(), &k[..])),
        );
        if let (Some((st, stmt_keeps)), Some(gated)) = (&by_keys, &gated) {
            for ((row, keep), gated) in rows.iter_mut().zip(stmt_keeps).zip(gated) {
                if let (Some(keep), Some(gated)) = (keep, gated) {
                    gate.statement_rows(list, st, &bufs, &formats, row, keep, gated);
                }
            }
        }
        rows
    }))
}

/// Whether statement `sql` reaches only its key's table (gate_reach::reaches_key_alone): what a
/// gated stream's key answers stand on (tests hold it to rules.policy_bound).
#[stub]
#[pyfunction]
pub(super) fn reaches_key_alone(sql: &[u8]) -> bool {
    crate::gate_reach::text_reaches_key_alone(sql)
}

/// The GTIDs a series writer's block holds at `marks` (packed u64 offsets; see
/// gtid_runs::mysql_gtids_at): `buf` is the block, bytes or a bytearray.
#[stub]
#[pyfunction]
pub(super) fn mysql_gtids_at(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    marks: &[u8],
) -> PyResult<MysqlGtids> {
    let offsets: Vec<u64> = marks
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
        .collect();
    let read = |b: &[u8]| gtid_runs::mysql_gtids_at(b, &offsets);
    gtids_record(py, super::read_buffer(buf, "mysql_gtids_at", read)?)
}

/// Runs as records, each run's source as MySQL spells a uuid (lowercase, 8-4-4-4-12).
pub(super) fn gtids_record(py: Python<'_>, found: gtid_runs::MysqlGtids) -> PyResult<MysqlGtids> {
    let runs = PyList::empty(py);
    let mut named: Option<([u8; 16], Py<PyString>)> = None;
    for run in found.runs {
        let source = match &named {
            Some((sid, text)) if *sid == run.sid => text.clone_ref(py),
            _ => {
                let text = PyString::new(py, &uuid_text(&run.sid)).unbind();
                named = Some((run.sid, text.clone_ref(py)));
                text
            }
        };
        runs.append(GtidRun {
            source,
            first: run.first,
            last: run.last,
        })?;
    }
    Ok(MysqlGtids {
        runs: runs.unbind(),
        tagged: found.tagged,
    })
}

/// A uuid's 16 bytes as text: 8-4-4-4-12 lowercase hex digits.
fn uuid_text(sid: &[u8; 16]) -> String {
    let hex: String = sid.iter().map(|b| format!("{b:02x}")).collect();
    let (a, b, c, d) = (&hex[..8], &hex[8..12], &hex[12..16], &hex[16..20]);
    format!("{a}-{b}-{c}-{d}-{}", &hex[20..])
}
