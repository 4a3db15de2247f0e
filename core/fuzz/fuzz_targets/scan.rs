//! cargo fuzz target: any bytes through the scanner's walks (units and type walk, with and
//! without CRC checks, at every limit; CRCs checked a run at a time must answer as one by one),
//! the assembly, verify's expected relay logs, each unit's skip forms, a stream's send walk (and its count mode, and the statements read ahead), the replica framing, the slave's relay run, the payload decoders, the DDL
//! text classifier, the statement facts and a lone statement's class, the lexer's error offset, the script splitter, the parenthesis check and the policy's body reader. A crash is a panic on input.
#![no_main]

use libfuzzer_sys::fuzz_target;

use _core::assemble::{assemble, Options};
use _core::body_reach::body_reach;
use _core::facts::{facts, lex, parens_close, script};
use _core::hops::statements;
use _core::lone_class::LoneClasses;
use _core::payload::{mariadb_uncompress, payload_bytes};
use _core::rename_db::DbRenames;
use _core::scan::{Scanner, F_FAST, F_HOLES};
use _core::send::{walk, SendOptions};
use _core::skip_forms::{self, SKIP_EMPTY, SKIP_PLACEHOLDER};
use _core::sql::{plain_statement, query_literals, Literals};
use _core::stmt::{dml_shape, dml_shape_read};
use _core::unit_list::UnitList;

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    // A binlog: the magic, then the input (the first byte picks the options).
    let _ = plain_statement(rest); // any bytes as a statement's text
    let _ = facts(rest); // and as the statement facts' input, after each verb they read
    let _ = parens_close(rest); // and as a schema file's DDL
    if let Err(open) = lex::lex(rest) {
        assert!(open.at < rest.len()); // where a quote or comment is left open
    }
    let split = script::split(rest); // and as a script: each statement within it
    assert!(split
        .statements
        .iter()
        .all(|s| s.sql.len() <= rest.len() && s.line >= 1));
    let _ = dml_shape(rest); // and as a statement key's (its names, numbers where names go)
    for literals in [Literals::Escaped, Literals::EscapedPlainBytes] {
        let _ = dml_shape_read(rest, || literals); // read as a Query's status variables may say
    }
    let _ = query_literals(rest, 0, control as usize % 32); // and as a Query's status variables
    let verbs: [&[u8]; 12] = [
        b"CREATE ",
        b"UPDATE ",
        b"DELETE ",
        b"DROP ",
        b"ALTER ",
        b"RENAME ",
        b"TRUNCATE ",
        b"CREATE TRIGGER t AFTER INSERT ON t FOR EACH ROW ",
        b"GRANT ",
        b"CALL ",
        b"LOAD DATA ",
        b"UPDATE a JOIN (b JOIN c ON x) ON y ",
    ];
    let mut text = verbs[control as usize % verbs.len()].to_vec();
    text.extend_from_slice(rest);
    let _ = facts(&text);
    // And as a lone statement's number, under a default database of the input's first bytes: the
    // same text has the same number when met again, its class's where the facts give one of a
    // kind not declined, else its text's (no class).
    let mut classes = LoneClasses::new(vec!["CREATE_TABLE".into()]);
    let db = &rest[..rest.len().min(control as usize % 8)];
    let first = classes.class_of(db, &text);
    assert!(first.is_some()); // (one text: within every bound)
    assert_eq!(classes.class_of(db, &text), first);
    let class = first.and_then(|id| classes.get(id));
    let read = _core::facts::class(&text).filter(|(kind, _)| *kind != "CREATE_TABLE");
    assert_eq!(class.map(|c| c.kind), read.map(|(kind, _)| kind));
    // And as a trigger's, event's or routine's body: each span it declines within the text.
    if let Some(r) = body_reach(&text, control % 3) {
        assert!(r.declined.iter().all(|&(s, e)| s < e && e <= text.len()));
    }
    let mut buf = b"\xfebin".to_vec();
    buf.extend_from_slice(rest);
    let verify = control & 1 != 0;
    let limit = if control & 2 != 0 { 64 } else { usize::MAX };
    let mut scanner = Scanner::new(verify);
    let out = scanner.units(&buf, 4, 0, limit, control & 4 != 0);
    assert!(out.stop <= buf.len());
    if verify && scanner.batch_crc {
        let mut one_by_one = Scanner::new(true);
        one_by_one.batch_crc = false;
        let other = one_by_one.units(&buf, 4, 0, limit, control & 4 != 0);
        assert_eq!(
            (&out.units, &out.error, out.stop),
            (&other.units, &other.error, other.stop)
        );
    }
    // A slave's scanner (`holes`): the same units, a fast unit with placeholders among its
    // events flagged F_HOLES where a binlog's reader takes it as not fast; relayed without them.
    let mut holed = Scanner::new(verify);
    holed.holes = true;
    let with_holes = holed.units(&buf, 4, 0, limit, control & 4 != 0);
    assert_eq!(
        (with_holes.units.len(), with_holes.stop),
        (out.units.len(), out.stop)
    );
    for (a, b) in out.units.iter().zip(&with_holes.units) {
        let bits = !(F_FAST | F_HOLES);
        assert_eq!(
            (a.start, a.end, a.events, a.kind),
            (b.start, b.end, b.events, b.kind)
        );
        assert_eq!(a.flags & bits, b.flags & bits);
        assert_eq!(a.flags & F_FAST, b.flags & F_FAST);
    }
    let holed_keep = vec![_core::keep::KEEP_KEEP; holed.names.len()];
    let lone_any = _core::relay::LoneFormat {
        query_post: 13,
        crc_len: 4 * (control & 2) as usize / 2,
    };
    let run = _core::relay::relay_ranges(
        &buf,
        &with_holes.units,
        &with_holes.tables,
        &holed_keep,
        0,
        Some(lone_any),
        None,
        None,
    );
    let mut relayed_bytes = vec![0u8; run.bytes as usize];
    run.fill(&buf, &mut relayed_bytes);
    let keep: Vec<u8> = (0..scanner.names.len())
        .map(|i| ((control as usize >> 3) + i) as u8 % 3)
        .collect();
    // replicate-rewrite-db's names over the scanner's databases (renamed or kept as they are): a
    // Query's database the map lacks stops the walks there, a renamed one is written anew.
    let renames = DbRenames {
        map: scanner
            .names
            .iter()
            .map(|(db, _)| {
                let to = if control & 4 != 0 {
                    [db.as_slice(), b"_rw"].concat()
                } else {
                    db.clone()
                };
                (db.clone(), to)
            })
            .collect(),
        query_post: 13,
        load_post: 26,
        table_map_post: 8,
        crc_len: 4 * (control & 2) as usize / 2,
    };
    let opt = Options {
        base: 0,
        renumber: control & 8 != 0,
        crc: control & 16 != 0,
        empty_keep: control & 32 != 0,
        limit: u64::MAX,
        fresh: false,
        gtids: control & 1 != 0,
        renames: (control & 128 != 0).then_some(&renames),
    };
    let answers: Vec<u8> = (0..out.units.len())
        .map(|i| ((control as usize) + i) as u8 % 3)
        .collect();
    // The statement units read up front (any post-header length, with or without CRC), their
    // keys answered at random: the assembly decides them from those answers.
    let format = ((control >> 3) as usize, 4 * (control & 2) as usize / 2, 0);
    let stmt = _core::stmt_units::StmtUnits::build_part(&out.units, &buf, format);
    let stmt_keep: Vec<u8> = (0..stmt.keys.len())
        .map(|i| ((control as usize) + i) as u8 % 4)
        .collect();
    // lint's reading of each unit's keyed statements (`statements_into`): key ids it interned,
    // Query offsets inside the buffer, nothing appended where it declines.
    let (mut keys, mut queries) = (Vec::new(), Vec::new());
    for k in 0..out.units.len() + 1 {
        let (kl, ql) = (keys.len(), queries.len());
        if stmt.statements_into(k, &buf, &mut keys, &mut queries) {
            assert_eq!(keys.len() - kl, queries.len() - ql);
            assert!(keys[kl..].iter().all(|&id| (id as usize) < stmt.keys.len()));
            assert!(queries[ql..].iter().all(|&q| q as usize + 19 <= buf.len()));
        } else {
            assert_eq!((keys.len(), queries.len()), (kl, ql));
        }
    }
    let mut by_keys = _core::stmt_units::ByKeys::new(&stmt, &stmt_keep);
    let a = assemble(
        &buf,
        &out.units,
        &out.tables,
        &keep,
        &answers,
        0,
        4,
        &opt,
        Some(&mut by_keys),
    );
    assert!(
        a.next <= out.units.len()
            && by_keys
                .key_uses()
                .iter()
                .all(|(id, _)| (*id as usize) < stmt.keys.len())
    );
    let mut plan = UnitList::default();
    plan.add(b"bin.000001", 4, &out.units, &out.tables, &out.tid_bytes);
    let row = plan.rows_many(&[&keep], None).remove(0);
    // Bytes by table (`experiment`): the envelopes shared out are the fast units' framing's.
    // Buckets of 0 s (taken as 1), a minute, an hour or whatever the input's first byte says.
    let seconds = [0, 60, 3600, u32::from(control)][usize::from(control >> 6)];
    let by_table = _core::tally::table_bytes(&plan, scanner.names.len(), seconds);
    assert_eq!(by_table.envelope.iter().sum::<u64>(), by_table.shared);
    assert!(by_table.shared <= by_table.framing);
    // Every byte of the units in one place: a table's, the framing, the other units'.
    let placed = by_table.by_name.iter().sum::<u64>() + by_table.framing + by_table.other;
    assert_eq!(
        placed,
        plan.units
            .iter()
            .map(|u| (u.end - u.start) as u64)
            .sum::<u64>()
    );
    // The time runs start in unit order, each at a unit of the list.
    assert!(by_table.cuts.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(by_table.cuts.iter().all(|c| c.0 < plan.units.len()));
    // Many slaves at once answer as each alone.
    let other: Vec<u8> = keep.iter().map(|k| k ^ (control & 1)).collect();
    assert_eq!(
        plan.rows_many(&[&keep, &other, &keep[..keep.len() / 2]], None),
        vec![
            row.clone(),
            plan.rows_many(&[&other], None).remove(0),
            plan.rows_many(&[&keep[..keep.len() / 2]], None).remove(0)
        ]
    );
    for k in 0..out.units.len() {
        if let Some((db, sql)) =
            plan.lone_query(k, &buf, (control >> 3) as usize, 4 * (control & 1) as usize)
        {
            assert!(db.end < sql.start && sql.end <= out.units[k].end);
            let _ = plain_statement(&buf[sql]);
        }
    }
    let lone = (control & 1 != 0).then_some(_core::relay::LoneFormat {
        query_post: (control >> 3) as usize,
        crc_len: 4 * (control & 2) as usize / 2,
    });
    // The statement units by key too: every key kept, or none answered.
    let all_kept = vec![_core::keep::KEEP_KEEP; stmt.keys.len()];
    let stmt_keep = if control & 64 != 0 {
        &all_kept[..]
    } else {
        &[][..]
    };
    let mut stmts = _core::stmt_units::ByKeys::new(&stmt, stmt_keep);
    let run = _core::relay::relay_ranges(
        &buf,
        &out.units,
        &out.tables,
        &keep,
        0,
        lone,
        Some(&mut stmts),
        (control & 128 != 0).then_some(&renames),
    );
    assert!(
        run.next <= out.units.len()
            && run
                .lone
                .iter()
                .all(|(k, db, sql)| *k < run.next && db.end < sql.start)
    );
    let mut relayed_bytes = vec![0u8; run.bytes as usize];
    run.fill(&buf, &mut relayed_bytes);
    // The MySQL GTIDs as runs: each run in order, each tagged unit named once.
    let gtids = _core::gtid_runs::mysql_gtids(&plan, &[&buf[..]], 0, usize::MAX);
    assert!(gtids.runs.iter().all(|r| r.first <= r.last));
    assert!(gtids.tagged.windows(2).all(|w| w[0] < w[1]));
    let marks = _core::split::gtid_marks(&buf, 0, buf.len());
    let at_marks = _core::gtid_runs::mysql_gtids_at(&buf, &marks);
    assert!(at_marks.tagged.iter().all(|&k| k < marks.len()));
    // What verify expects a slave's relay logs to hold, under every skip policy at once.
    let skips = [1u8, 2, 3];
    let relayed = _core::send::relayed(
        &plan,
        &[&buf[..]],
        None,
        (&row, &keep, None),
        0,
        &skips,
        opt.crc,
    );
    assert!(relayed.len() == skips.len() && relayed.iter().all(|s| s.next == relayed[0].next));
    for s in &relayed {
        let mut bytes = vec![0u8; s.out_len];
        s.fill(&[&buf[..]], &mut bytes);
    }
    // Every unit's skip forms (MariaDB and MySQL: a MySQL GTID's transaction_length rewritten),
    // made or counted alike, and what a slave relays of a placeholder form.
    for u in &plan.units {
        for skip in [SKIP_PLACEHOLDER, SKIP_EMPTY] {
            let mut made = Vec::new();
            let form = skip_forms::skipped(u, &buf, skip, opt.crc, false, None, Some(&mut made));
            assert_eq!(
                form,
                skip_forms::skipped(u, &buf, skip, opt.crc, false, None, None)
            );
            // Runs of placeholders as one: the same form, and counted back to its bytes.
            let mut runs = Vec::new();
            let run = skip_forms::skipped(u, &buf, skip, opt.crc, true, None, Some(&mut runs));
            assert_eq!(form, run);
            if let Some(form) = run {
                let (mut p, mut stood) = (0, _core::scan::RunCount::default());
                while p < runs.len() {
                    let size = _core::le::u32_at(&runs, p + 9).unwrap() as usize;
                    stood.add(&runs, p, size, 4 * usize::from(opt.crc));
                    p += size;
                }
                assert_eq!(form.bytes as i64, runs.len() as i64 + stood.bytes);
            }
            if let Some(form) = form {
                assert_eq!(form.bytes, made.len() as u64);
                let mut relayed = Vec::new();
                let _ = skip_forms::relayed_placeholders(&made, opt.crc, &mut relayed);
            }
        }
    }
    let pending = [7u8; 20];
    let sopt = SendOptions {
        batch_bytes: 0,
        limit: if control & 128 != 0 { 100 } else { u64::MAX },
        skip: (control & 2 != 0) as u8 + 2 * (control & 32 != 0) as u8,
        partial_ok: control & 4 != 0,
        runs: control & 64 != 0,
        // (with a limit, stretches cut batches where counting does not: tests/mutation.rs)
        stretches: control & 64 != 0 && control & 128 == 0,
        pending: (control & 8 != 0).then_some(&pending[..]),
        server_id: 1,
        heartbeat_crc: control & 16 != 0,
        stmts: None,
        count_only: false,
        relay: false,
    };
    let sent = walk(&plan, &[&buf[..out.stop]], &row, &keep, 0, &sopt);
    let mut sent_out = vec![0u8; sent.out_len];
    sent.fill(&[&buf[..out.stop]], &mut sent_out);
    assert!(sent.next <= out.units.len());
    assert_eq!(
        sent.sent_bytes + sent.heartbeat_bytes,
        sent_out.len() as u64
    );
    // Counting only (`experiment`) answers as sending does.
    let counted = _core::send::walk(
        &plan,
        &[&buf[..out.stop]],
        &row,
        &keep,
        0,
        &SendOptions {
            count_only: true,
            ..sopt
        },
    );
    assert_eq!(
        (counted.next, counted.sent_bytes, counted.heartbeat_bytes),
        (sent.next, sent.sent_bytes, sent.heartbeat_bytes)
    );
    // The count walk (`experiment`, shadow candidates) over every skip policy at once: the forms
    // of both formed policies made in one read of the records count as each made alone.
    let bufs = [&buf[..out.stop]];
    let jobs: Vec<_> = [1u8, SKIP_PLACEHOLDER, SKIP_EMPTY]
        .map(|skip| _core::count_walk::Job {
            row: &row,
            keep: &keep,
            stmt_keep: None,
            skip,
            partial_ok: control & 32 != 0,
            crc: control & 16 != 0,
            owed: usize::from(control & 8),
        })
        .into();
    let policies: Vec<(u8, bool)> = jobs.iter().map(|j| (j.skip, j.crc)).collect();
    let together = _core::count_forms::Forms::make_many(&plan, &bufs, Some(&stmt), &policies);
    let alone: Vec<_> = (policies.iter())
        .flat_map(|p| _core::count_forms::Forms::make_many(&plan, &bufs, Some(&stmt), &[*p]))
        .collect();
    let starts = [0, out.units.len() / 2];
    let count = |forms: &[_core::count_forms::Forms], jobs: &[_core::count_walk::Job]| {
        let forms: Vec<_> = forms.iter().collect();
        let got =
            _core::count_walk::count_many(&plan, &bufs, Some(&stmt), jobs, (&starts, 25), &forms);
        got.iter()
            .map(|c| {
                (
                    c.sent.next,
                    c.read_by_bucket.clone(),
                    c.sent_by_bucket.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(count(&together, &jobs), count(&alone, &jobs));
    // (the jobs of one row read each of its stretches once: each counts as it counts alone)
    let each: Vec<_> = (jobs.iter())
        .flat_map(|job| count(&together, std::slice::from_ref(job)))
        .collect();
    assert_eq!(count(&together, &jobs), each);
    // The statement units' bytes by group: each group met once, its key one of the list's.
    let group_of: Vec<u32> = (0..stmt.keys.len() as u32).map(|k| k % 3).collect();
    let (met, _) =
        _core::tally::statement_groups(&plan, &stmt, &group_of, &[0, 1, 2], out.units.len());
    assert!(met
        .iter()
        .all(|m| m.group < 3 && (m.key as usize) < stmt.keys.len()));
    // The statements a scan thread reads ahead are those the list reads when asked.
    for (k, read) in _core::unit_list::part_statements(&buf[..out.stop], &out.units) {
        assert_eq!(read.as_deref(), plan.unit_statements(k, &buf[..out.stop]));
    }
    // Any bytes as a stretch (`stretch`): its inner units inside it, or None.
    let crc_len = 4 * usize::from(control & 1 != 0);
    if let Some(got) = _core::stretch::inner(rest, 0, rest.len(), crc_len) {
        assert!(got.units > 0 && got.range.0 <= got.range.1 && got.range.1 <= rest.len());
    }
    // Any bytes as a batch framed for a real replica: whole packets, or None.
    if let Some(f) = _core::replica::frame(rest, control, control & 1 != 0, 4, 4) {
        assert!(f.packets.len() <= rest.len() + rest.len() / 19 * 5);
    }
    let _ = statements(&buf, 4, buf.len());
    let mask = [true; 256];
    let (_, stop, _) = Scanner::new(verify).walk(&buf, 4, 0, &mask);
    assert!(stop <= buf.len());
    let _ = payload_bytes(rest, 1 << 16);
    let _ = mariadb_uncompress(rest);
});
