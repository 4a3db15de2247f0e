//! A bounded mutation loop over the scanner (CI runs it with `cargo test`): 120 000 mutated
//! binlogs (flipped bits, overwritten bytes, extreme sizes, truncation, spliced junk) built from
//! synthetic MariaDB and MySQL binlogs and, when ../shared is beside the checkout, the real
//! fixture binlogs. Zero panics (so zero out-of-bounds reads: safe Rust checks every index),
//! and every answer well formed: units in order, inside the buffer, and an error's offset
//! inside the input.

use std::panic;
use std::path::Path;

use _core::assemble::{assemble, Options};
use _core::count_forms::Forms;
use _core::count_walk::{count_many, Job};
use _core::hops::statements;
use _core::payload::{mariadb_uncompress, payload_bytes};
use _core::scan::Scanner;
use _core::send::{walk, SendOptions};
use _core::sent::Sent;
use _core::stmt_units::{ByKeys, StmtUnits};
use _core::unit_list::UnitList;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, so a failure reproduces from its iteration number.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn event(t: u8, body: &[u8], crc: bool, log_pos: u32) -> Vec<u8> {
    let size = 19 + body.len() + if crc { 4 } else { 0 };
    let mut e = Vec::with_capacity(size);
    e.extend_from_slice(&1_700_000_000u32.to_le_bytes());
    e.push(t);
    e.extend_from_slice(&1u32.to_le_bytes());
    e.extend_from_slice(&(size as u32).to_le_bytes());
    e.extend_from_slice(&log_pos.to_le_bytes());
    e.extend_from_slice(&0u16.to_le_bytes());
    e.extend_from_slice(body);
    if crc {
        let c = crc32fast::hash(&e);
        e.extend_from_slice(&c.to_le_bytes());
    }
    e
}

fn fde(version: &str, crc: bool) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&4u16.to_le_bytes());
    let mut v = [0u8; 50];
    v[..version.len()].copy_from_slice(version.as_bytes());
    body.extend_from_slice(&v);
    body.extend_from_slice(&0u32.to_le_bytes());
    body.push(19);
    let mut post = vec![0u8; 171];
    post[1] = 13; // QUERY
    post[3] = 8; // ROTATE
    post[14] = 84; // FDE
    post[18] = 8; // TABLE_MAP
    for t in [23usize, 24, 25, 30, 31, 32] {
        post[t - 1] = 10;
    }
    post[32] = 42; // GTID
    post[161] = 19; // MariaDB GTID
    body.extend_from_slice(&post);
    body.push(u8::from(crc));
    event(15, &body, true, 0)
}

fn query(db: &str, sql: &str, crc: bool) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&7u32.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    body.push(db.len() as u8);
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(db.as_bytes());
    body.push(0);
    body.extend_from_slice(sql.as_bytes());
    event(2, &body, crc, 0)
}

fn table_map(id: u64, db: &str, table: &str, crc: bool) -> Vec<u8> {
    let mut body = id.to_le_bytes()[..6].to_vec();
    body.extend_from_slice(&[1, 0]);
    body.push(db.len() as u8);
    body.extend_from_slice(db.as_bytes());
    body.push(0);
    body.push(table.len() as u8);
    body.extend_from_slice(table.as_bytes());
    body.extend_from_slice(&[0, 1, 3, 0]);
    event(19, &body, crc, 0)
}

fn rows(id: u64, end: bool, crc: bool) -> Vec<u8> {
    let mut body = id.to_le_bytes()[..6].to_vec();
    body.extend_from_slice(&u16::from(end).to_le_bytes());
    body.extend_from_slice(&2u16.to_le_bytes());
    body.extend_from_slice(&[1, 1, 0, 42, 0, 0, 0]);
    event(30, &body, crc, 0)
}

/// A GTID event: MariaDB's (`standalone`: a DDL's group, no BEGIN follows) or MySQL's.
fn gtid(mariadb: bool, seq: u64, standalone: bool, crc: bool) -> Vec<u8> {
    if mariadb {
        let mut g = seq.to_le_bytes().to_vec();
        g.extend_from_slice(&0u32.to_le_bytes());
        g.push(u8::from(standalone));
        g.extend_from_slice(&[0; 6]);
        event(162, &g, crc, 0)
    } else {
        let mut g = vec![1u8];
        g.extend_from_slice(&[0x3e; 16]);
        g.extend_from_slice(&seq.to_le_bytes());
        g.push(2);
        g.extend_from_slice(&[0; 16]);
        event(33, &g, crc, 0)
    }
}

fn synthetic(mariadb: bool, crc: bool) -> Vec<u8> {
    let mut out = b"\xfebin".to_vec();
    out.extend(fde(
        if mariadb {
            "10.11.6-MariaDB-log"
        } else {
            "8.0.36"
        },
        crc,
    ));
    for i in 0..12u64 {
        out.extend(gtid(mariadb, i + 1, i % 5 == 4, crc));
        if !mariadb && i % 5 != 4 {
            out.extend(query("db1", "BEGIN", crc));
        }
        if i % 5 == 4 {
            out.extend(query("db1", "CREATE TABLE t9 (a int)", crc));
            continue;
        }
        out.extend(table_map(70 + i, "db1", &format!("t{i}"), crc));
        out.extend(rows(70 + i, false, crc));
        out.extend(rows(70 + i, true, crc));
        out.extend(event(16, &i.to_le_bytes(), crc, 0));
    }
    let mut rotate = 4u64.to_le_bytes().to_vec();
    rotate.extend_from_slice(b"bin.000002");
    out.extend(event(4, &rotate, crc, 0));
    out
}

/// A placeholder: a RAND event whose seeds are the size and type of the event it stands for.
fn rand(crc: bool) -> Vec<u8> {
    let mut body = 60u64.to_le_bytes().to_vec();
    body.extend_from_slice(&30u64.to_le_bytes());
    event(13, &body, crc, 0)
}

/// `synthetic`, with every third transaction as the placeholder policy sends a skipped one (its
/// framing, and a RAND for every other event: the scanner takes runs of them in a loop of their
/// own) and a RAND before each DDL statement (inside a MariaDB standalone group).
fn with_placeholders(mariadb: bool, crc: bool) -> Vec<u8> {
    let data = synthetic(mariadb, crc);
    let mut out = data[..4].to_vec();
    let (mut at, mut k) = (4, 0);
    let mut gtids = 0;
    while at + 19 <= data.len() {
        let size = u32::from_le_bytes(data[at + 9..at + 13].try_into().unwrap()) as usize;
        let t = data[at + 4];
        let event = &data[at..at + size];
        if t == 162 || t == 33 {
            gtids += 1;
        }
        let skipped = gtids % 3 == 2;
        match t {
            19 | 30 if skipped => out.extend(rand(crc)),
            2 if event.windows(6).any(|w| w == b"CREATE") => {
                out.extend(rand(crc));
                out.extend_from_slice(event);
            }
            _ => out.extend_from_slice(event),
        }
        at += size;
        k += 1;
    }
    assert!(k > 12 && at == data.len());
    out
}

fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![
        synthetic(true, true),
        synthetic(true, false),
        synthetic(false, true),
        synthetic(false, false),
        with_placeholders(true, true),
        with_placeholders(true, false),
        with_placeholders(false, true),
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/real_binlogs");
    if let Ok(dirs) = std::fs::read_dir(&root) {
        for dir in dirs.flatten() {
            if let Ok(files) = std::fs::read_dir(dir.path()) {
                for f in files.flatten() {
                    let p = f.path();
                    if p.extension().is_some_and(|e| e == "gz") {
                        continue;
                    }
                    if let Ok(data) = std::fs::read(&p) {
                        if data.len() <= 1 << 20 && data.starts_with(b"\xfebin") {
                            seeds.push(data);
                        }
                    }
                }
            }
        }
    }
    seeds
}

fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        if data.len() <= 4 {
            return;
        }
        let at = 4 + rng.below(data.len() - 4);
        match rng.below(7) {
            0 => data[at] ^= 1 << rng.below(8),
            1 => data[at] = rng.next() as u8,
            2 => data.truncate(at),
            3 => {
                // An extreme event size (or a size one byte off) where a header may be.
                let v = [0u32, 1, 18, 19, 20, u32::MAX, 1 << 30, (1 << 30) + 1][rng.below(8)];
                let end = (at + 4).min(data.len());
                let bytes = v.to_le_bytes();
                data[at..end].copy_from_slice(&bytes[..end - at]);
            }
            4 => {
                let junk: Vec<u8> = (0..rng.below(64)).map(|_| rng.next() as u8).collect();
                data.splice(at..at, junk);
            }
            5 => {
                // A length byte (db, table, status vars) set to its maximum.
                data[at] = 0xff;
            }
            _ => {
                let len = rng.below(32).min(data.len() - at);
                data.drain(at..at + len);
            }
        }
    }
}

/// What a walk counted of what it kept, skipped, read and sent (its stop apart).
fn counters(s: &Sent) -> [u64; 13] {
    [
        s.kept,
        s.partial,
        s.skipped,
        s.heartbeats,
        s.sent_bytes,
        s.sent_events,
        s.heartbeat_bytes,
        s.skip_units,
        s.skip_events,
        s.skip_bytes,
        s.placeholders,
        s.read_bytes,
        s.read_events,
    ]
}

fn check(data: &[u8], rng: &mut Rng, iteration: usize) {
    let verify = rng.below(2) == 0;
    let mut scanner = Scanner::new(verify);
    let limit = [usize::MAX, 1, 100, 4096][rng.below(4)];
    let eof = rng.below(2) == 0;
    let start = 4.min(data.len());
    let out = scanner.units(data, start, 0, limit, eof);
    assert!(
        out.stop <= data.len(),
        "iteration {iteration}: stop past the buffer"
    );
    let mut prev = start;
    for u in &out.units {
        assert!(
            u.start == prev && u.start < u.end && u.end <= data.len(),
            "iteration {iteration}: unit {u:?}"
        );
        assert!(u.tables_lo <= u.tables_hi && u.tables_hi as usize <= out.tables.len());
        prev = u.end;
    }
    if let Some(e) = &out.error {
        assert!(
            e.offset <= data.len() as u64,
            "iteration {iteration}: error offset {} past the input",
            e.offset
        );
        assert!(!e.message.is_empty());
    }
    for id in &out.tables {
        assert!((*id as usize) < scanner.names.len());
    }
    if verify && scanner.batch_crc {
        // CRCs checked a run at a time answer exactly as one by one: units, error, offset.
        let mut one_by_one = Scanner::new(true);
        one_by_one.batch_crc = false;
        let other = one_by_one.units(data, start, 0, limit, eof);
        assert_eq!(
            (
                &out.units,
                (&out.tables, &out.tid_bytes),
                out.stop,
                out.events,
                out.last_rotate,
                &out.error
            ),
            (
                &other.units,
                (&other.tables, &other.tid_bytes),
                other.stop,
                other.events,
                other.last_rotate,
                &other.error
            ),
            "iteration {iteration}: batched CRC checks differ"
        );
    }
    // Assembly over what was scanned, with random answers per table (some unknown).
    let keep: Vec<u8> = (0..scanner.names.len())
        .map(|_| rng.below(3) as u8)
        .collect();
    let opt = Options {
        base: 0,
        renumber: rng.below(2) == 0,
        crc: rng.below(2) == 0,
        empty_keep: rng.below(2) == 0,
        limit: if rng.below(2) == 0 {
            u64::MAX
        } else {
            rng.next() >> 44
        },
        fresh: rng.below(2) == 0,
        gtids: rng.below(2) == 0,
        renames: None,
    };
    let from = rng.below(out.units.len() + 1);
    // Random answers for the units that are not fast (keep whole, empty, or unknown).
    let answers: Vec<u8> = (0..out.units.len()).map(|_| rng.below(4) as u8).collect();
    let a = assemble(
        &data[..out.stop.max(start)],
        &out.units,
        &out.tables,
        &keep,
        &answers,
        from,
        rng.next() >> 40,
        &opt,
        None,
    );
    assert!(
        a.next >= from && a.next <= out.units.len(),
        "iteration {iteration}: assemble stopped at {}",
        a.next
    );
    // The statement path over the same units, with random answers per statement key (issue #43).
    let buf = &data[..out.stop.max(start)];
    let stmt = StmtUnits::build_part(&out.units, buf, (13, 4 * rng.below(2), from));
    let stmt_keep: Vec<u8> = (0..stmt.keys.len()).map(|_| rng.below(4) as u8).collect();
    let mut by_keys = ByKeys::new(&stmt, &stmt_keep);
    let s = assemble(
        buf,
        &out.units,
        &out.tables,
        &keep,
        &answers,
        from,
        rng.next() >> 40,
        &opt,
        Some(&mut by_keys),
    );
    assert!(
        s.next >= from && s.next <= out.units.len() && s.gtids.len() as u64 <= s.out.len() as u64,
        "iteration {iteration}: assemble with statement keys stopped at {}",
        s.next
    );
    assert!(
        by_keys.units_done as usize <= stmt.units
            && by_keys
                .key_uses()
                .iter()
                .all(|(id, _)| (*id as usize) < stmt.keys.len()),
        "iteration {iteration}: keys used that the statement units do not hold"
    );
    // One stream's send walk over the scanned units, with random answers.
    let mut plan = UnitList::default();
    plan.add(b"bin.000001", 0, &out.units, &out.tables, &out.tid_bytes);
    // The per-unit reads the master makes of a UnitList: in bounds, and what the scan said.
    for k in 0..=out.units.len() {
        let tables = plan.tables(k);
        assert!(
            tables.iter().all(|id| (*id as usize) < scanner.names.len()),
            "iteration {iteration}"
        );
        // Its Table_maps' bytes with their rows events': one each, within the unit's bytes.
        let (names, bytes) = plan.maps(k);
        let size = out.units.get(k).map_or(0, |u| u.end - u.start);
        assert!(
            names == tables
                && bytes.len() == tables.len()
                && bytes.iter().map(|&b| b as usize).sum::<usize>() <= size,
            "iteration {iteration}"
        );
        if let Some((part, end)) = plan.end(k) {
            assert_eq!(
                (part, end),
                (0, out.units[k].end as u64),
                "iteration {iteration}"
            );
        }
        let _ = plan.gtid(k);
        // A DDL unit's texts (any post-header length, with or without CRC): inside the unit.
        let (post, crc) = (rng.below(256), 4 * rng.below(2));
        if let Some((db, sql)) = plan.lone_query(k, data, post, crc) {
            let u = &out.units[k];
            assert!(
                u.start <= db.start
                    && db.end < sql.start
                    && sql.start <= sql.end
                    && sql.end <= u.end,
                "iteration {iteration}: unit {k} texts {db:?} {sql:?} outside {}..{}",
                u.start,
                u.end
            );
            // The DDL text classifier on what the master would hand it: total, no panic.
            let _ = _core::sql::plain_statement(&data[sql]);
        }
    }
    assert!(plan.lone_query(out.units.len(), data, 13, 4).is_none());
    // The slave's relay run over the same units, from any unit, with its lone statements: the
    // ranges it copies and the texts it hands back lie inside the units it took.
    let from = rng.below(out.units.len() + 1);
    let lone = (rng.below(2) == 0).then(|| _core::relay::LoneFormat {
        query_post: rng.below(256),
        crc_len: 4 * rng.below(2),
    });
    let run =
        _core::relay::relay_ranges(data, &out.units, &out.tables, &keep, from, lone, None, None);
    assert!(
        from <= run.next && run.next <= out.units.len(),
        "iteration {iteration}"
    );
    let taken = &out.units[from..run.next];
    assert!(
        run.lone.iter().all(|(_, db, sql)| db.end < sql.start
            && sql.end <= data.len()
            && taken
                .iter()
                .any(|u| u.start <= db.start && sql.end <= u.end)),
        "iteration {iteration}: relay run texts outside its units"
    );
    assert_eq!(
        run.ranges
            .iter()
            .map(|piece| match piece {
                _core::relay::Piece::Range(lo, hi) | _core::relay::Piece::Made(lo, hi) => {
                    (hi - lo) as u64
                }
                _core::relay::Piece::Empty { len, .. } => *len as u64,
            })
            .sum::<u64>(),
        run.bytes,
        "iteration {iteration}"
    );
    assert!(plan.gtid_sources() <= out.units.len());
    assert!(
        plan.with_flags(u32::MAX, rng.below(out.units.len() + 2))
            .len()
            <= out.units.len()
    );
    // Many slaves answered at once answer as each alone (`experiment`'s rows).
    let other: Vec<u8> = (0..rng.below(keep.len() + 2))
        .map(|_| rng.below(3) as u8)
        .collect();
    assert_eq!(
        plan.rows_many(&[&keep, &other], None),
        vec![
            plan.rows_many(&[&keep], None).remove(0),
            plan.rows_many(&[&other], None).remove(0)
        ],
        "iteration {iteration}"
    );
    let mut pending = [0u8; 23]; // (a Heartbeat owed: an event of its size, as the runs are counted back)
    pending[9] = 23;
    let sbuf = &data[..out.stop.max(start)];
    let st = _core::stmt_units::StmtUnits::build(
        &plan,
        &[sbuf],
        &[(rng.below(40), 4 * rng.below(2), 0)],
    );
    let skeep: Vec<u8> = (0..st.keys.len()).map(|_| rng.below(3) as u8).collect();
    let row: Vec<u8> = if rng.below(2) == 0 {
        let by_keys = (st.columns(), &[Some(&skeep[..])][..]);
        plan.rows_many(&[&keep], Some(by_keys)).remove(0)
    } else {
        (0..out.units.len()).map(|_| rng.below(5) as u8).collect()
    };
    let sopt = SendOptions {
        batch_bytes: rng.next() >> 50,
        // No limit as `experiment` counts (`walk`'s counting-only way, from the list's sums).
        limit: if rng.below(3) == 0 {
            u64::MAX
        } else {
            rng.next() >> 48
        },
        skip: rng.below(4) as u8,
        partial_ok: rng.below(2) == 0,
        runs: rng.below(2) == 0,
        stretches: rng.below(2) == 0,
        pending: if rng.below(2) == 0 {
            Some(&pending[..])
        } else {
            None
        },
        server_id: 1,
        heartbeat_crc: rng.below(2) == 0,
        stmts: Some((&st, &skeep)),
        count_only: false,
        relay: false,
    };
    let sent_from = rng.below(out.units.len() + 1);
    let bufs = [&data[..out.stop.max(start)]];
    let sent = walk(&plan, &bufs, &row, &keep, sent_from, &sopt);
    // The binding's way (the master's): the walk's pieces filled into a buffer of out_len bytes.
    let sent_out = assembled(&sent, &bufs);
    assert!(
        sent.next >= sent_from && sent.next <= out.units.len(),
        "iteration {iteration}: send stopped at {}",
        sent.next
    );
    assert!(sent.pending.is_none_or(|k| k < sent.next));
    // What a replica is sent: the bytes out, with each placeholder run counted as its run and
    // each stretch as what it stands for.
    assert_eq!(
        (sent.sent_bytes + sent.heartbeat_bytes + sent.skip_bytes) as i64,
        sent_out.len() as i64 + stood_for(&sent_out, sopt.heartbeat_crc),
        "iteration {iteration}"
    );
    // Counting only (`experiment`) stops where sending stops, with the same counters. (With
    // stretches a batch is cut by its wire bytes, and counting by a replica's: without a limit.)
    let copt = SendOptions {
        limit: if sopt.stretches { u64::MAX } else { sopt.limit },
        ..sopt
    };
    let pieces = walk(&plan, &bufs, &row, &keep, sent_from, &copt);
    let counted = walk(
        &plan,
        &bufs,
        &row,
        &keep,
        sent_from,
        &SendOptions {
            count_only: true,
            ..copt
        },
    );
    assert_eq!(
        (counted.next, counted.pending, counted.pending_done),
        (pieces.next, pieces.pending, pieces.pending_done),
        "iteration {iteration}: counting stops elsewhere"
    );
    assert_eq!(
        counters(&counted),
        counters(&pieces),
        "iteration {iteration}: counted bytes differ from sent bytes"
    );
    // The count walk (shadow candidates, `experiment`: runs taken whole, skipped units' forms made
    // once per policy) counts what the send walk counts unit by unit, whatever the bytes.
    if (1..=3).contains(&sopt.skip) {
        let one = SendOptions {
            batch_bytes: 0,
            limit: u64::MAX,
            runs: false,
            stretches: false,
            count_only: true,
            ..sopt
        };
        let by_units = walk(&plan, &bufs, &row, &keep, sent_from, &one);
        let crc = one.heartbeat_crc;
        let made = Forms::make_many(&plan, &bufs, Some(&st), &[(2, crc), (3, crc)]);
        let forms: Vec<&Forms> = made.iter().collect();
        let job = Job {
            row: &row,
            keep: &keep,
            stmt_keep: Some(&skeep),
            skip: one.skip,
            partial_ok: one.partial_ok,
            crc,
            owed: one.pending.map_or(0, <[u8]>::len),
        };
        let got = count_many(&plan, &bufs, Some(&st), &[job], (&[sent_from], 0), &forms);
        let by_runs = &got[0].sent;
        assert_eq!(
            (by_runs.next, by_runs.pending, by_runs.pending_done),
            (by_units.next, by_units.pending, by_units.pending_done),
            "iteration {iteration}: the count walk stops elsewhere"
        );
        assert_eq!(
            counters(by_runs),
            counters(&by_units),
            "iteration {iteration}: the count walk counts otherwise"
        );
    }
    // The statements a scan thread reads ahead are those the list reads when asked.
    let sbuf = &data[..out.stop.max(start)];
    for (k, read) in _core::unit_list::part_statements(sbuf, &out.units) {
        assert_eq!(
            read.as_deref(),
            plan.unit_statements(k, sbuf),
            "iteration {iteration}"
        );
    }
    if data.len() > 8 {
        let body = rng.below(data.len());
        let _ = statements(data, body, body + rng.below(data.len() - body + 8));
    }
    let mut walker = Scanner::new(verify);
    let mask = [true; 256];
    let walked = walker.walk(data, start, 0, &mask);
    let (offsets, stop, _) = &walked;
    assert!(*stop <= data.len() && offsets.iter().all(|o| (*o as usize) < data.len()));
    if verify && walker.batch_crc {
        let mut one_by_one = Scanner::new(true);
        one_by_one.batch_crc = false;
        assert_eq!(
            walked,
            one_by_one.walk(data, start, 0, &mask),
            "iteration {iteration}: batched CRC walk differs"
        );
    }
    if data.len() > 40 {
        let at = rng.below(data.len() - 20);
        let _ = payload_bytes(&data[at..], 1 << 16);
        let _ = mariadb_uncompress(&data[at..]);
    }
}

#[test]
fn mutated_binlogs_never_panic() {
    let seeds = seeds();
    assert!(seeds.len() >= 4);
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    const ITERATIONS: usize = 120_000;
    let mut clean_units = 0usize;
    for s in &seeds[..4] {
        let out = Scanner::new(true).units(s, 4, 0, usize::MAX, true);
        assert!(out.error.is_none(), "synthetic seed: {:?}", out.error);
        clean_units += out.units.len();
    }
    assert!(
        clean_units >= 4 * 13,
        "synthetic seeds scan into {clean_units} units"
    );
    let failures: Vec<usize> = (0..ITERATIONS)
        .filter(|&i| {
            let mut data = seeds[i % seeds.len()].clone();
            mutate(&mut rng, &mut data);
            let mut local = Rng(rng.next() | 1);
            panic::catch_unwind(panic::AssertUnwindSafe(|| check(&data, &mut local, i))).is_err()
        })
        .take(5)
        .collect();
    assert!(
        failures.is_empty(),
        "panics at iterations {failures:?} (of {ITERATIONS})"
    );
}

#[test]
fn synthetic_binlogs_group_as_expected() {
    for (mariadb, crc) in [(true, true), (true, false), (false, true), (false, false)] {
        let data = synthetic(mariadb, crc);
        let mut scanner = Scanner::new(true);
        let out = scanner.units(&data, 4, 0, usize::MAX, true);
        assert!(out.error.is_none());
        // FDE, 12 transactions (every fifth a DDL), the Rotate.
        assert_eq!(out.units.len(), 14);
        let fast = out
            .units
            .iter()
            .filter(|u| u.flags & _core::scan::F_FAST != 0)
            .count();
        assert_eq!(fast, 10, "mariadb={mariadb} crc={crc}");
        assert!(out.units[13].flags & _core::scan::F_ROTATE_END != 0);
        assert_eq!(scanner.names.len(), 10);
    }
}

/// `tally::table_bytes` of scanned units: each table has its Table_maps' and rows events' bytes,
/// a unit's envelope (GTID, BEGIN, Annotate_rows or Rows_query, XID) goes to its tables, split
/// evenly, the remainder to the first, all from what the scanner kept of each Table_map (its
/// bytes and its rows events') and of each unit's time: no event is read again. The scanner
/// takes the fast units' events in its tight loop, or one by one where CRCs are checked event
/// by event: both keep the same.
#[test]
fn table_bytes_are_what_the_scanned_events_say() {
    for run in 0..4 {
        let (mariadb, crc, one_by_one) = (run % 2 == 0, run != 1, run >= 2);
        let version = if mariadb {
            "10.11.6-MariaDB-log"
        } else {
            "8.0.36"
        };
        let mut data = b"\xfebin".to_vec();
        data.extend(fde(version, crc));
        // Per unit: each statement's (table id, table), and its annotation's length.
        let units: [(&[(u64, &str)], usize); 4] = [
            (&[(70, "t1"), (71, "t1")], 30), // two Table_maps of one table
            (&[(72, "t2")], 0),
            (&[(73, "t1")], 70_000), // an envelope past a u16
            (&[(74, "t1"), (75, "t2")], 10),
        ];
        let (mut tables, mut envelopes, mut maps) = ([0u64; 2], Vec::new(), Vec::new());
        for (i, (statements, note)) in units.iter().enumerate() {
            let start = data.len();
            data.extend(gtid(mariadb, i as u64 + 1, false, crc));
            if !mariadb {
                data.extend(query("db1", "BEGIN", crc));
            }
            let mut rows_bytes = 0;
            for &(id, table) in statements.iter() {
                if *note > 0 {
                    data.extend(event(
                        if mariadb { 160 } else { 29 },
                        &vec![b'x'; *note],
                        crc,
                        0,
                    ));
                }
                let events = [table_map(id, "db1", table, crc), rows(id, true, crc)];
                let size: usize = events.iter().map(Vec::len).sum();
                tables[usize::from(table == "t2")] += size as u64;
                maps.push(size as u32);
                rows_bytes += size;
                data.extend(events.concat());
            }
            data.extend(event(16, &(i as u64).to_le_bytes(), crc, 0));
            envelopes.push((data.len() - start - rows_bytes) as u64);
        }
        let mut scanner = Scanner::new(true);
        scanner.batch_crc &= !one_by_one;
        let out = scanner.units(&data, 4, 0, usize::MAX, true);
        assert!(out.error.is_none() && out.units.len() == 5); // the FDE, the 4 units
        let mut plan = UnitList::default();
        plan.add(b"bin.000001", 4, &out.units, &out.tables, &out.tid_bytes);
        assert_eq!(out.tid_bytes, maps, "{mariadb} {one_by_one}");
        let first = |u: &_core::scan::Unit| {
            u32::from_le_bytes(data[u.start..u.start + 4].try_into().unwrap())
        };
        assert!(out.units.iter().all(|u| u.ts == first(u) && u.ts != 0));
        let e = &envelopes;
        let t = _core::tally::table_bytes(&plan, 2, 60);
        assert_eq!(t.cuts, vec![(0, first(&out.units[0]) / 60)]);
        let id = |name: &[u8]| scanner.names.iter().position(|n| n.1 == name).unwrap();
        let (t1, t2) = (id(b"t1"), id(b"t2"));
        assert_eq!((t.by_name[t1], t.by_name[t2]), (tables[0], tables[1]));
        let split = (e[3] / 2 + e[3] % 2, e[3] / 2);
        assert_eq!(t.envelope[t1], e[0] + e[2] + split.0);
        assert_eq!(t.envelope[t2], e[1] + split.1);
        let total: u64 = e.iter().sum();
        assert_eq!((t.framing, t.shared), (total, total));
        assert_eq!(t.other, out.units[0].end as u64 - 4); // the FDE
    }
}

/// A run of units starts where their first events' time enters a new bucket; a unit of
/// time 0 (an artificial event) joins the run before it; the first run starts at unit 0.
#[test]
fn time_runs_cut_where_a_bucket_starts() {
    let times = [100u32, 0, 100, 130, 179, 200, 0, 250, 250];
    let units: Vec<_core::scan::Unit> = (times.iter().enumerate())
        .map(|(k, &ts)| _core::scan::Unit {
            start: 10 * k,
            end: 10 * k + 10,
            ts,
            ..Default::default()
        })
        .collect();
    let mut list = UnitList::default();
    list.add(b"f", 0, &units[..4], &[], &[]);
    list.add(b"g", 0, &units[4..], &[], &[]); // (a second part: unit numbers go on)
    assert_eq!(
        list.times(),
        [(0, 100), (3, 130), (4, 179), (5, 200), (7, 250)]
    );
    let t = _core::tally::table_bytes(&list, 0, 60);
    assert_eq!(t.cuts, vec![(0, 1), (3, 2), (5, 3), (7, 4)]);
    assert_eq!((t.other, t.framing), (90, 0));
    let later = _core::scan::Unit {
        ts: 30,
        ..Default::default()
    }; // (first at unit 0 whatever its time)
    let mut one = UnitList::default();
    one.add(b"f", 0, &[_core::scan::Unit::default(), later], &[], &[]);
    assert_eq!(_core::tally::table_bytes(&one, 0, 60).cuts, vec![(0, 0)]);
}

#[test]
fn placeholder_units_group_as_the_general_path_groups_them() {
    for (mariadb, crc) in [(true, true), (false, true), (true, false)] {
        let data = with_placeholders(mariadb, crc);
        let out = Scanner::new(true).units(&data, 4, 0, usize::MAX, true);
        assert!(out.error.is_none());
        // The RANDs' own loop runs where CRCs are checked a run at a time, or not at all; the
        // general path, event by event, where they are checked one by one.
        let mut one_by_one = Scanner::new(true);
        one_by_one.batch_crc = false;
        let general = one_by_one.units(&data, 4, 0, usize::MAX, true);
        assert_eq!(
            (
                &out.units,
                (&out.tables, &out.tid_bytes),
                out.stop,
                out.events
            ),
            (
                &general.units,
                (&general.tables, &general.tid_bytes),
                general.stop,
                general.events
            ),
            "mariadb={mariadb} crc={crc}"
        );
        assert_eq!(out.units.len(), 14);
        let holes = |u: &_core::scan::Unit| {
            let mut at = u.start;
            let mut n = 0;
            while at < u.end {
                n += usize::from(data[at + 4] == 13);
                at += u32::from_le_bytes(data[at + 9..at + 13].try_into().unwrap()) as usize;
            }
            n
        };
        let placeholder_units = out
            .units
            .iter()
            .filter(|u| holes(u) == 3 && u.flags & _core::scan::F_FAST == 0)
            .count();
        assert!(placeholder_units >= 3, "{placeholder_units}");
    }
}

#[test]
fn a_flipped_bit_is_a_checksum_error_at_its_event() {
    let mut data = synthetic(true, true);
    let fde_end = 4 + u32::from_le_bytes(data[13..17].try_into().unwrap()) as usize;
    data[fde_end + 25] ^= 0x10; // inside the first GTID's body
    let out = Scanner::new(true).units(&data, 4, 0, usize::MAX, true);
    let e = out.error.expect("a CRC error");
    assert_eq!(e.kind, _core::scan::ErrorKind::Checksum);
    assert_eq!(e.offset, fde_end as u64);
    assert_eq!(out.units.len(), 1); // the FDE before it
}

#[test]
fn renumbering_sets_end_offsets_and_fresh_crcs() {
    let data = synthetic(true, true);
    let fde_end = 4 + u32::from_le_bytes(data[13..17].try_into().unwrap()) as usize;
    let mut body = data[fde_end..].to_vec();
    // log_pos 0 stays 0; give every event a non-zero one first.
    let mut at = 0;
    while at < body.len() {
        let size = u32::from_le_bytes(body[at + 9..at + 13].try_into().unwrap()) as usize;
        body[at + 13..at + 17].copy_from_slice(&1u32.to_le_bytes());
        at += size;
    }
    let len = body.len();
    let (ts, fdes) = _core::assemble::renumber(&mut body, 0, len, 1000, true);
    assert_eq!(ts, 1_700_000_000);
    assert!(fdes.is_empty());
    let mut at = 0;
    while at < body.len() {
        let size = u32::from_le_bytes(body[at + 9..at + 13].try_into().unwrap()) as usize;
        let log_pos = u32::from_le_bytes(body[at + 13..at + 17].try_into().unwrap()) as usize;
        assert_eq!(log_pos, 1000 + at + size);
        let crc = u32::from_le_bytes(body[at + size - 4..at + size].try_into().unwrap());
        assert_eq!(crc, crc32fast::hash(&body[at..at + size - 4]));
        at += size;
    }
}

#[test]
fn rows_answer_per_unit() {
    use _core::rows::rows_many;
    // units: not fast; no tables; tables 0,1 (kept, not); tables 1 (not); tables 0 (kept); unknown id
    let tids = [0u32, 1, 1, 0, 9];
    let bounds = [u32::MAX, 0, 0, 0, 0, 2, 2, 3, 3, 4, 4, 5];
    assert_eq!(
        rows_many(&tids, &bounds, &[&[1, 0]], None),
        [vec![3, 2, 1, 0, 2, 3]]
    );
}

#[test]
fn a_stream_sends_kept_units_and_one_heartbeat_per_skipped_stretch() {
    let data = synthetic(true, true);
    let mut scanner = Scanner::new(true);
    let out = scanner.units(&data, 4, 0, usize::MAX, true);
    let mut plan = UnitList::default();
    plan.add(b"bin.000001", 0, &out.units, &out.tables, &out.tid_bytes);
    // Tables t0..t11 of db1 (ten of them in fast units): keep the even ones.
    let keep: Vec<u8> = scanner
        .names
        .iter()
        .map(|(_, t)| u8::from(t[1..].iter().fold(0, |a, b| a * 10 + b - b'0') % 2 == 0))
        .collect();
    let row = plan.rows_many(&[&keep], None).remove(0);
    assert_eq!(row.len(), out.units.len());
    let opt = SendOptions {
        batch_bytes: 0,
        limit: u64::MAX,
        skip: _core::skip_forms::SKIP_HEARTBEAT,
        partial_ok: true,
        runs: false,
        stretches: false,
        pending: None,
        server_id: 9,
        heartbeat_crc: true,
        stmts: None,
        count_only: false,
        relay: false,
    };
    // From the first transaction on (unit 0 is the FDE, a control unit the caller sends).
    let sent = walk(&plan, &[&data], &row, &keep, 1, &opt);
    let mut expected = Vec::new();
    let mut owed: Option<usize> = None;
    let mut k = 1;
    while k < out.units.len() && row[k] != 3 {
        let u = &out.units[k];
        if row[k] == 2 {
            if let Some(j) = owed.take() {
                _core::heartbeat::heartbeat(
                    b"bin.000001",
                    out.units[j].end as u64,
                    9,
                    true,
                    &mut expected,
                );
            }
            expected.extend_from_slice(&data[u.start..u.end]);
        } else {
            assert_eq!(row[k], 0);
            owed = Some(k);
        }
        k += 1;
    }
    assert_eq!(
        sent.next, k,
        "stops at the first unit that is not fast (the DDL)"
    );
    assert!(sent.kept >= 2 && sent.skipped >= 1 && sent.heartbeats >= 1);
    assert_eq!(assembled(&sent, &[&data]), expected);
    assert_eq!(sent.pending, owed);
    // The heartbeat is a whole event with a right CRC: its CRC over itself is the residue.
    let hb_at = out.units[1].end - out.units[1].start;
    let hb_size = u32::from_le_bytes(expected[hb_at + 9..hb_at + 13].try_into().unwrap()) as usize;
    assert_eq!(expected[hb_at + 4], 27);
    assert_eq!(
        crc32fast::hash(&expected[hb_at..hb_at + hb_size]),
        0x2144_DF1C
    );
    // A batch limit of one byte cuts after the first kept unit.
    let one = walk(
        &plan,
        &[&data],
        &row,
        &keep,
        1,
        &SendOptions { limit: 1, ..opt },
    );
    assert_eq!(one.kept, 1);
    assert!(one.next < sent.next || sent.kept == 1);
}

/// A binlog of more than `min` bytes: the synthetic one's transactions repeated (sizes,
/// types and CRCs stay valid; only log_pos and GTIDs repeat, which the scanner does not check).
fn large(mariadb: bool, min: usize) -> Vec<u8> {
    let base = synthetic(mariadb, true);
    let body_start = 4 + u32::from_le_bytes(base[13..17].try_into().unwrap()) as usize;
    let rotate_size = 19 + 8 + 10 + 4;
    let body = &base[body_start..base.len() - rotate_size];
    let mut out = base[..body_start].to_vec();
    while out.len() < min {
        out.extend_from_slice(body);
    }
    out
}

#[test]
fn large_buffers_check_their_crcs_on_a_second_thread_with_the_same_answers() {
    // Buffers of 1 MB and more have their runs' CRCs checked by a checker thread while the walk
    // goes on: every answer (units, stop, the error, its offset) must be the per-event check's.
    let mut rng = Rng(0x5eed_cafe);
    for mariadb in [true, false] {
        let clean = large(mariadb, 3 << 20);
        for round in 0..24 {
            let mut data = clean.clone();
            if round > 0 {
                let at = 4 + rng.below(data.len() - 4);
                data[at] ^= 1 << rng.below(8);
            }
            let mut batched = Scanner::new(true);
            assert!(batched.batch_crc || !_core::crc::batch_available());
            let mut single = Scanner::new(true);
            single.batch_crc = false;
            let a = batched.units(&data, 4, 0, usize::MAX, true);
            let b = single.units(&data, 4, 0, usize::MAX, true);
            assert_eq!(a.units, b.units, "round {round}");
            assert_eq!(a.stop, b.stop, "round {round}");
            assert_eq!(
                a.error.as_ref().map(|e| (e.offset, e.kind)),
                b.error.as_ref().map(|e| (e.offset, e.kind))
            );
            if round == 0 {
                assert!(
                    a.error.is_none() && a.stop == data.len(),
                    "the clean binlog scans whole"
                );
            }
            let mask = [true; 256];
            let wa = Scanner::new(true).walk(&data, 4, 0, &mask);
            let mut slow = Scanner::new(true);
            slow.batch_crc = false;
            let wb = slow.walk(&data, 4, 0, &mask);
            assert_eq!((wa.0, wa.1), (wb.0, wb.1), "round {round}");
            assert_eq!(
                wa.2.map(|e| (e.offset, e.kind)),
                wb.2.map(|e| (e.offset, e.kind))
            );
        }
    }
}

/// A MariaDB transaction writing `tables` (table id, db, table), one rows event each.
fn mariadb_txn(seq: u64, domain: u32, tables: &[(u64, &str, &str)], crc: bool) -> Vec<u8> {
    let mut g = seq.to_le_bytes().to_vec();
    g.extend_from_slice(&domain.to_le_bytes());
    g.push(0);
    g.extend_from_slice(&[0; 6]);
    let mut out = event(162, &g, crc, 0);
    for (i, (id, db, table)) in tables.iter().enumerate() {
        out.extend(table_map(*id, db, table, crc));
        out.extend(rows(*id, i + 1 == tables.len(), crc));
    }
    out.extend(event(16, &seq.to_le_bytes(), crc, 0));
    out
}

#[test]
fn a_table_id_seen_again_for_another_table_gets_that_tables_name() {
    // The scanner remembers each table id's name (a cache checked by comparing the name bytes):
    // an id reused for another table (the server's table cache evicted the first), and ids that
    // share a cache slot, must each come out with the name their own Table_map gives.
    for crc in [true, false] {
        let mut data = b"\xfebin".to_vec();
        data.extend(fde("10.11.6-MariaDB-log", crc));
        let txns: [&[(u64, &str, &str)]; 6] = [
            &[(70, "db1", "t1")],
            &[(70, "db1", "t2")],
            &[(70 + 256, "db2", "t1"), (70, "db1", "t2")],
            &[(70, "db1", "t1"), (71, "db1", "t1")],
            &[(70, "db1x", "t1")],
            &[(70, "db1", "xt1")],
        ];
        for (i, tables) in txns.iter().enumerate() {
            data.extend(mariadb_txn(i as u64 + 1, 0, tables, crc));
        }
        for chunk in [usize::MAX, 97] {
            // Whole, and fed in small slices as the master and the filter feed it.
            let mut scanner = Scanner::new(true);
            let mut got: Vec<Vec<(Vec<u8>, Vec<u8>)>> = Vec::new();
            let (mut at, mut end) = (4, 4usize.saturating_add(chunk).min(data.len()));
            loop {
                let out = scanner.units(&data[..end], at, 0, usize::MAX, end == data.len());
                assert!(out.error.is_none());
                for u in &out.units {
                    if u.flags & _core::scan::F_FAST != 0 {
                        let ids = &out.tables[u.tables_lo as usize..u.tables_hi as usize];
                        got.push(
                            ids.iter()
                                .map(|id| scanner.names[*id as usize].clone())
                                .collect(),
                        );
                    }
                }
                at = out.stop;
                if end == data.len() {
                    break;
                }
                end = end.saturating_add(chunk).min(data.len());
            }
            let want: Vec<Vec<(Vec<u8>, Vec<u8>)>> = txns
                .iter()
                .map(|t| {
                    t.iter()
                        .map(|(_, d, n)| (d.as_bytes().to_vec(), n.as_bytes().to_vec()))
                        .collect()
                })
                .collect();
            assert_eq!(got, want, "crc={crc} chunk={chunk}");
        }
    }
}

#[test]
fn a_plan_answers_per_unit_as_the_scan_gave_them() {
    let mut data = b"\xfebin".to_vec();
    data.extend(fde("10.11.6-MariaDB-log", true));
    data.extend(mariadb_txn(1, 0, &[(70, "db1", "t1")], true));
    data.extend(mariadb_txn(
        2,
        0,
        &[(71, "db2", "t1"), (70, "db1", "t1")],
        true,
    ));
    data.extend(mariadb_txn(3, 5, &[(72, "db3", "t1")], true));
    let mut rotate = 4u64.to_le_bytes().to_vec();
    rotate.extend_from_slice(b"bin.000002");
    data.extend(event(4, &rotate, true, 0));
    let mut scanner = Scanner::new(true);
    let out = scanner.units(&data, 4, 1000, usize::MAX, true);
    assert!(out.error.is_none());
    let mut plan = UnitList::default();
    plan.add(
        b"bin.000001",
        1000,
        &out.units[..2],
        &out.tables,
        &out.tid_bytes,
    );
    plan.add(
        b"bin.000001",
        1000,
        &out.units[2..],
        &out.tables,
        &out.tid_bytes,
    );
    assert_eq!(plan.units.len(), 5); // FDE, three transactions, the Rotate
    let size: usize = out.units.iter().map(|u| u.end - u.start).sum();
    assert_eq!(plan.size, size as u64);
    for (k, u) in out.units.iter().enumerate() {
        let part = u32::from(k >= 2);
        let ids = if u.flags & _core::scan::F_FAST != 0 {
            &out.tables[u.tables_lo as usize..u.tables_hi as usize]
        } else {
            &[][..]
        };
        assert_eq!(plan.tables(k), ids);
        if k == 4 {
            assert_eq!(plan.end(k), None); // a real Rotate: its target is the end
        } else {
            assert_eq!(plan.end(k), Some((part, 1000 + u.end as u64)));
        }
        let gtid = (u.flags & _core::scan::F_MARIADB_GTID != 0).then_some((
            u.gtid_domain,
            u.gtid_server,
            u.gtid_seq,
        ));
        assert_eq!(plan.gtid(k), gtid);
    }
    assert_eq!(plan.gtid(1), Some((0, 1, 1)));
    assert_eq!(plan.gtid(3), Some((5, 1, 3)));
    assert_eq!(plan.gtid_sources(), 2);
    assert_eq!(plan.with_flags(_core::scan::F_ROTATE_END, 0), vec![4]);
    assert_eq!(plan.with_flags(_core::scan::F_MARIADB_GTID, 2), vec![2, 3]);
    assert_eq!(
        (plan.end(5), plan.gtid(5), plan.tables(5)),
        (None, None, &[][..])
    );
}

/// What walk `s` sends, assembled from its pieces over `bufs`, as the binding fills its bytes.
fn assembled(s: &Sent, bufs: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![0u8; s.out_len];
    s.fill(bufs, &mut out);
    out
}

/// The bytes the placeholder runs and stretches among `out`'s events stand for beyond themselves
/// (0 where it holds none), as a slave's scanner counts them (`crc`: checksummed events).
fn stood_for(out: &[u8], crc: bool) -> i64 {
    let (mut p, mut runs) = (0, _core::scan::RunCount::default());
    while let Some(size) = _core::le::u32_at(out, p + 9) {
        let size = size as usize;
        if size < 19 || p + size > out.len() {
            break;
        }
        runs.add(out, p, size, if crc { 4 } else { 0 });
        p += size;
    }
    runs.bytes
}

/// `binlog`'s events from offset 4 with their timestamps set by `stamp(k)` for the k-th event
/// (CRCs left as they were: the scans below do not check them).
fn stamped(binlog: &[u8], stamp: impl Fn(usize) -> u32) -> (Vec<u8>, Vec<(usize, u32)>) {
    let (mut data, mut at, mut k, mut events) = (binlog.to_vec(), 4, 0, Vec::new());
    while at + 19 <= data.len() {
        let size = u32::from_le_bytes(data[at + 9..at + 13].try_into().unwrap()) as usize;
        data[at..at + 4].copy_from_slice(&stamp(k).to_le_bytes());
        events.push((at, stamp(k)));
        (at, k) = (at + size, k + 1);
    }
    (data, events)
}

#[test]
fn a_scan_reads_the_latest_timestamp_of_the_units_it_hands_out() {
    // Every event its own timestamp, the latest in turn at each event: fast bodies, placeholder
    // runs, DDL and control events all read; a unit left open (the buffer ends inside it, not
    // at EOF) is not counted, as it is scanned again with the next buffer.
    for binlog in [
        synthetic(true, false),
        with_placeholders(true, false),
        synthetic(false, false),
    ] {
        let (_, events) = stamped(&binlog, |_| 0);
        for top in 0..events.len() {
            let (data, events) = stamped(&binlog, |k| {
                if k == top {
                    2_000_000_000
                } else {
                    1_000 + k as u32
                }
            });
            let out = Scanner::new(false).units(&data, 4, 0, usize::MAX, true);
            assert!(out.error.is_none());
            assert_eq!(out.latest, 2_000_000_000, "event {top}");
            let cut = events[events.len() - 3].0 + 5; // inside the third event from the end
            let part = Scanner::new(false).units(&data[..cut], 4, 0, usize::MAX, false);
            let want = events
                .iter()
                .filter(|(at, _)| *at < part.stop)
                .map(|e| e.1)
                .max()
                .unwrap_or(0);
            assert_eq!(part.latest, want, "event {top}, cut");
        }
    }
}
