//! The statement facts on hand-picked shapes, prefixes and hostile bodies
//! (tests/core/test_statement_facts.py holds their answers through Python).

use super::*;

fn q(db: Option<&str>, name: &str) -> QName {
    (db.map(|d| d.as_bytes().to_vec()), name.as_bytes().to_vec())
}

#[test]
fn multi_table_update_lists_its_references_and_set_columns() {
    let f = facts(b"UPDATE c.r JOIN (a.l JOIN b.m ON a.l.id = b.m.id) ON c.r.id = a.l.id SET mv = 1 WHERE c.r.id = 3")
        .expect("read");
    assert_eq!(f.kind, "UPDATE_MULTI");
    let tables: Vec<_> = f.refs.iter().map(|r| r.table.clone()).collect();
    assert_eq!(
        tables,
        vec![q(Some("c"), "r"), q(Some("a"), "l"), q(Some("b"), "m")]
    );
    assert_eq!(f.set_columns, vec![(None, b"mv".to_vec())]);
    let f = facts(b"UPDATE t1 AS x JOIN `t``2` y USING (id) SET x.a = y.a").expect("read");
    assert_eq!(f.refs[1].table, q(None, "t`2"));
    assert_eq!(f.refs[1].alias.as_deref(), Some(b"y".as_slice()));
    assert_eq!(
        f.set_columns,
        vec![(Some(vec![b"x".to_vec()]), b"a".to_vec())]
    );
}

#[test]
fn delete_forms() {
    let f =
        facts(b"DELETE c.t_2, b.t2 FROM c.t_2 JOIN b.t2 ON c.t_2.id = b.t2.id WHERE c.t_2.id = 4")
            .expect("read");
    assert_eq!(
        (f.kind, f.targets.len(), f.refs.len()),
        ("DELETE_MULTI", 2, 2)
    );
    let f = facts(b"DELETE FROM x USING a.t1 AS x JOIN c.tx1 ON a.t1.id = c.tx1.id").expect("read");
    assert_eq!(f.targets, vec![vec![b"x".to_vec()]]);
    assert_eq!(
        facts(b"DELETE FROM t AS x WHERE x.a = 1")
            .expect("read")
            .updated,
        vec![q(None, "t")]
    );
    // a WHERE word in a string, a subquery: the references are sqlglot's to read
    for sql in [
        b"DELETE t1 FROM t1 JOIN t2 ON t1.v = 'where' WHERE t1.a = 1".as_slice(),
        b"DELETE LOW_PRIORITY t1 FROM t1 JOIN t2 WHERE t1.a = (SELECT 1)",
    ] {
        let f = facts(sql).expect("read");
        assert!(f.refs.is_empty() && f.refs_text.is_some(), "{sql:?}");
        assert_eq!(f.targets, vec![vec![b"t1".to_vec()]]);
    }
    let f = facts(b"DELETE LOW_PRIORITY t1 FROM t1 JOIN t2 WHERE t1.a = 1").expect("read");
    assert_eq!(
        f.read_text.as_deref(),
        Some(b"DELETE t1 FROM t1 JOIN t2 WHERE t1.a = 1".as_slice())
    );
}

#[test]
fn ddl_shapes() {
    let f = facts(b"CREATE TABLE IF NOT EXISTS d.`t` (id INT PRIMARY KEY, `V` TEXT, KEY k (v), CHECK (id > 0))")
        .expect("read");
    assert_eq!(
        (f.kind, f.updated.clone()),
        ("CREATE_TABLE", vec![q(Some("d"), "t")])
    );
    assert_eq!(f.columns, Some(vec![b"id".to_vec(), b"v".to_vec()]));
    let f = facts(b"CREATE TABLE t SELECT id, t.v AS w FROM a.t1 WHERE id <= 4").expect("read");
    assert_eq!(
        (f.read, f.columns),
        (
            vec![q(Some("a"), "t1")],
            Some(vec![b"id".to_vec(), b"w".to_vec()])
        )
    );
    let f = facts(b"CREATE TABLE t SELECT * FROM a.t1").expect("read");
    assert_eq!((f.read, f.columns), (vec![], None)); // `*`: sqlglot's to read
    assert_eq!(
        f.read_text.as_deref(),
        Some(b"SELECT * FROM a.t1".as_slice())
    );
    let f = facts(b"RENAME TABLE a TO b, c.d TO e").expect("read");
    assert_eq!(
        f.renames,
        vec![
            (q(None, "a"), q(None, "b")),
            (q(Some("c"), "d"), q(None, "e"))
        ]
    );
    let f = facts(b"DROP TEMPORARY TABLE IF EXISTS a, b.c").expect("read");
    assert!(f.temporary && f.if_exists && f.updated.len() == 2);
    assert_eq!(
        facts(b"DROP DATABASE IF EXISTS d_x").expect("read").db_name,
        Some(b"d_x".to_vec())
    );
    assert_eq!(
        facts(b"/*!40000 DROP TABLE t */ -- gone")
            .expect("read")
            .updated,
        vec![q(None, "t")]
    );
    assert!(facts(b"CREATE TABLE key.t (a INT)").is_none()); // a reserved word as a name
    let f = facts(b"CREATE TABLE quick (value INT PRIMARY KEY, duplicate INT)").expect("read");
    assert_eq!(
        f.columns,
        Some(vec![b"value".to_vec(), b"duplicate".to_vec()])
    ); // keywords MariaDB does not reserve
}

#[test]
fn a_trigger_and_what_its_body_writes() {
    let f = facts(
        b"CREATE DEFINER=`root`@`localhost` TRIGGER b.tr AFTER UPDATE ON t_x FOR EACH ROW BEGIN \
          IF NEW.v <> OLD.v THEN REPLACE INTO a.au VALUES (NEW.id); END IF; UPDATE t9 SET k = 1; END",
    )
    .expect("read");
    assert_eq!(f.trigger, Some(q(Some("b"), "tr")));
    assert_eq!(f.updated, vec![q(None, "t_x")]);
    let def = f.trigger_def.expect("defined");
    assert_eq!((def.timing, def.event), ("AFTER", "UPDATE"));
    let writes = f.writes.expect("followed");
    let events: Vec<_> = writes
        .iter()
        .map(|w| match w {
            BodyWrite::Table(_, e) => *e,
            BodyWrite::Piece(..) => "piece",
        })
        .collect();
    assert_eq!(events, vec!["INSERT", "DELETE", "UPDATE"]);
    let call = facts(b"CREATE TRIGGER tr BEFORE DELETE ON t FOR EACH ROW CALL p()").expect("read");
    assert!(call.trigger_def.is_some() && call.writes.is_none());
}

#[test]
fn a_body_read_past_comments_with_the_statements_the_key_declines_as_spans() {
    let sql: &[u8] = b"CREATE TRIGGER tr /* BEFORE INSERT ON x */ AFTER DELETE ON t FOR EACH ROW \
        BEGIN UPDATE a JOIN b ON a.i = b.i SET a.v = 1; INSERT INTO c VALUES (1); END";
    let f = facts(sql).expect("read");
    let def = f.trigger_def.expect("defined");
    assert_eq!((def.timing, def.event), ("AFTER", "DELETE"));
    let writes = f.writes.expect("followed");
    let BodyWrite::Piece(start, end) = writes[0] else {
        panic!("a span: {writes:?}")
    };
    assert_eq!(
        &sql[start..end],
        b"UPDATE a JOIN b ON a.i = b.i SET a.v = 1"
    );
    assert_eq!(writes[1], BodyWrite::Table(q(None, "c"), "INSERT"));
    let function = facts(
        b"CREATE FUNCTION d.f(x INT) RETURNS DECIMAL(10, 2) DETERMINISTIC \
        BEGIN DELETE FROM e.g WHERE k = x; RETURN 1; END",
    )
    .expect("read");
    let writes = function.writes.expect("followed");
    assert_eq!(writes, vec![BodyWrite::Table(q(Some("e"), "g"), "DELETE")]);
}

#[test]
fn a_body_statement_with_more_write_words_than_any_statement_holds_is_not_followed() {
    let body = |n: usize, sep: &str| {
        let stmts: Vec<String> = (0..n)
            .map(|i| format!("INSERT INTO t{i} VALUES (1)"))
            .collect();
        format!(
            "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW BEGIN {} END",
            stmts.join(sep)
        )
    };
    let writes = |sql: String| facts(sql.as_bytes()).expect("read").writes;
    // One statement per `;`: each read, however many.
    assert_eq!(writes(body(3000, "; ")).expect("followed").len(), 3000);
    // Up to the cap before one `;`, each read to the `;`.
    let under = writes(body(trigger::MAX_WRITES_PER_STATEMENT, " ")).expect("followed");
    assert_eq!(under.len(), trigger::MAX_WRITES_PER_STATEMENT);
    // Past it, not followed: 3000 of them would each be read to the end of the body.
    assert_eq!(
        writes(body(trigger::MAX_WRITES_PER_STATEMENT + 1, " ")),
        None
    );
    assert_eq!(writes(body(3000, " ")), None);
}

#[test]
fn alter_table_column_changes_and_its_rename() {
    let changes = |sql: &[u8]| facts(sql).expect("read").column_changes;
    let c = |old: Option<&str>, new: Option<&str>| {
        (
            old.map(|o| o.as_bytes().to_vec()),
            new.map(|n| n.as_bytes().to_vec()),
        )
    };
    assert_eq!(
        changes(
            b"ALTER TABLE t ADD (X INT, y DECIMAL(3, 1)), DROP COLUMN IF EXISTS b, ADD KEY (a)"
        ),
        Some(vec![
            c(None, Some("x")),
            c(None, Some("y")),
            c(Some("b"), None)
        ])
    );
    assert_eq!(
        changes(b"ALTER ONLINE TABLE t CHANGE a z INT COMMENT 'RENAME TO u', RENAME COLUMN q TO r"),
        Some(vec![c(Some("a"), Some("z")), c(Some("q"), Some("r"))])
    );
    assert_eq!(
        changes(b"ALTER TABLE t ENGINE=InnoDB, DROP PRIMARY KEY"),
        Some(vec![])
    );
    assert_eq!(changes(b"ALTER TABLE t ADD SYSTEM VERSIONING"), None);
    let f = facts(b"ALTER TABLE d.t RENAME TO u, ADD COLUMN b INT").expect("read");
    assert_eq!(f.renames, vec![(q(Some("d"), "t"), q(None, "u"))]);
    assert_eq!(f.column_changes, Some(vec![c(None, Some("b"))]));
}

#[test]
fn every_prefix_is_read_or_refused_without_a_panic() {
    let texts: [&[u8]; 4] = [
        b"ALTER TABLE t ADD (a INT, b INT), CHANGE c d INT, RENAME COLUMN e TO f, RENAME TO g",
        b"CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW FOLLOWS x BEGIN INSERT INTO u VALUES (1); END",
        b"UPDATE a JOIN (b JOIN c ON b.x = c.x) ON a.y = b.y SET a.z = 'q''s', b.w = (1) WHERE a.k = 1",
        b"DELETE a, b FROM a JOIN b USING (id) WHERE a.x = 1",
    ];
    for text in texts {
        for end in 0..=text.len() {
            let _ = facts(&text[..end]);
        }
    }
}

#[test]
fn parentheses_close_outside_strings_names_and_comments() {
    let cases: [(&[u8], bool); 10] = [
        (b"CREATE TABLE t (a INT, b DECIMAL(10,2), KEY k (a))", true),
        (b"CREATE TABLE t (a INT", false),
        (b"CREATE TABLE t (a INT)) ENGINE=x (", false),
        (b"CREATE TABLE t (a INT COMMENT ')(')", true),
        (b"CREATE TABLE `a(` (b INT /* ) */)", true),
        (b"CREATE TABLE t (a INT COMMENT 'it''s (')", true),
        (b"CREATE TABLE t (a INT COMMENT 'open", false), // left open
        (b"CREATE TABLE t (a INT) -- (", true),          // a line comment
        (b"/*!40101 CREATE TABLE t (a INT) */", true),   // a versioned comment: code to mysqld
        (b"/*!40101 CREATE TABLE t (a INT */", false),
    ];
    for (sql, want) in cases {
        assert_eq!(parens_close(sql), want, "{}", String::from_utf8_lossy(sql));
    }
}
