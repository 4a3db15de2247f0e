-- Built-in sharp-edge workload for `dumpfilter verify --builtin`. It runs on the primary in ONE
-- session (USE persists), under ROW, STATEMENT and MIXED, against builtin_topology.toml.
--
-- Part 1 is written so that no reference replica stops: DDL runs under a USE of its own database
-- and cross-database statements only touch seed tables, which exist everywhere. Filtering still
-- makes the replicas' data differ from the primary's (that is the point), so ids are never reused:
-- a row a replica kept because a DELETE was filtered must not collide with a later INSERT.
-- Part 2 holds the classic traps that stop some replicas with an error; dumpfilter must then stop
-- on the same transaction with the same error code, and with the same data up to there.

-- ---------------------------------------------------------------------------------------------
-- Part 1
-- 1.1 No default database: the Query event's db is empty. do-db skips all of these under STATEMENT
--     (even a.t1 for do-db=a), ignore-db applies all of them; under ROW the rows' own db decides.
INSERT INTO a.t1 VALUES (101, 'no default db');
UPDATE b.t_x SET v = 'no default db' WHERE id = 1;
INSERT INTO c.t_1 VALUES (101, 'no default db');
INSERT INTO c.tx1 VALUES (101, 'no default db');

-- 1.2 USE a; UPDATE b.t: the statement is filtered on `a`, not on the table's database.
USE a;
UPDATE b.t_x SET v = 'updated under USE a' WHERE id = 2;
INSERT INTO b.t2 VALUES (102, 'inserted under USE a');
USE b;
UPDATE a.t1 SET v = 'updated under USE b' WHERE id = 2;
DELETE FROM a.t2 WHERE id = 5;

-- 1.3 Multi-table UPDATE / DELETE across databases: only the tables that are written count, in
--     statement order (the first decisive table wins).
USE a;
UPDATE a.t1 JOIN b.t_x ON a.t1.id = b.t_x.id SET a.t1.v = CONCAT(a.t1.v, ' +', b.t_x.v) WHERE a.t1.id = 3;
UPDATE b.t_x, a.t2 SET b.t_x.v = 'multi (b first)', a.t2.v = 'multi (b first)' WHERE b.t_x.id = a.t2.id AND b.t_x.id = 3;
USE c;
UPDATE c.t_1 JOIN a.t2 ON c.t_1.id = a.t2.id SET c.t_1.v = 'joined a.t2, only c.t_1 written' WHERE c.t_1.id = 4;
DELETE c.t_2, b.t2 FROM c.t_2 JOIN b.t2 ON c.t_2.id = b.t2.id WHERE c.t_2.id = 4;
DELETE a.t1 FROM a.t1 JOIN c.tx1 ON a.t1.id = c.tx1.id WHERE c.tx1.id = 5;

-- 1.4 INSERT ... SELECT across databases: the read-only source never counts.
USE b;
INSERT INTO a.t2 SELECT id + 200, CONCAT('from b.t_x: ', v) FROM b.t_x WHERE id <= 3;
USE a;
INSERT INTO t1 SELECT id + 210, CONCAT('from c.t_1: ', v) FROM c.t_1 WHERE id <= 3;
INSERT INTO c.tx1 SELECT id + 220, v FROM a.t2 WHERE id <= 2;

-- 1.5 Transactions that write several databases (ROW splits them per table; STATEMENT cannot).
USE a;
BEGIN;
INSERT INTO a.t1 VALUES (230, 'trx part 1');
INSERT INTO b.t_x VALUES (230, 'trx part 2');
UPDATE c.t_2 SET v = 'trx part 3' WHERE id = 2;
COMMIT;

-- 1.6 A trigger: under STATEMENT the replica fires it itself, under ROW its rows are shipped and
--     filtered by their own table (a.t_audit).
USE a;
DELIMITER //
CREATE TRIGGER t1_audit AFTER INSERT ON t1 FOR EACH ROW
BEGIN
  INSERT INTO t_audit (id, what) VALUES (NEW.id, CONCAT('insert: ', NEW.v));
END//
DELIMITER ;
INSERT INTO t1 VALUES (240, 'fires the trigger');
USE c;
INSERT INTO a.t1 VALUES (241, 'fires the trigger from USE c');

-- 1.7 CREATE TABLE ... LIKE and CREATE TABLE ... SELECT (only the new table counts).
USE a;
CREATE TABLE t_like LIKE c.t_1;
INSERT INTO t_like SELECT id + 250, v FROM c.t_1;
USE c;
CREATE TABLE t_sel SELECT id, v FROM a.t1 WHERE id <= 4;
-- Cross-database CTAS under USE a: the CREATE is filtered on `a`, under ROW its rows on `c`.
USE a;
CREATE TABLE c.t_sel2 SELECT id, v FROM b.t2 WHERE id <= 3;

-- 1.8 RENAME TABLE swap: every table named counts (c.t_1 is a do-table on one slave and an
--     ignore-table on another). Afterwards only fresh ids are written, so a replica that skipped
--     the swap still applies the rows, to the other table.
USE c;
RENAME TABLE t_1 TO t_swap, t_2 TO t_1, t_swap TO t_2;
INSERT INTO t_1 VALUES (260, 'after the swap (was t_2)');
INSERT INTO t_2 VALUES (261, 'after the swap (was t_1)');
UPDATE t_1 SET v = 'updated after the swap' WHERE id = 1;

-- 1.9 DROP / CREATE DATABASE: filtered on the database named, whatever the session's USE.
USE a;
DROP DATABASE d_x;
CREATE DATABASE d_x;
USE d_x;
CREATE TABLE t_a (id INT PRIMARY KEY, v VARCHAR(64));
INSERT INTO t_a VALUES (270, 'recreated'), (271, 'recreated');

-- 1.10 Temporary tables confined to their own statements' tables (ROW and MIXED do not log them).
USE b;
CREATE TEMPORARY TABLE t_scratch (id INT PRIMARY KEY, v VARCHAR(64));
INSERT INTO t_scratch VALUES (280, 'scratch');
INSERT INTO b.t2 SELECT id, v FROM t_scratch;
DROP TEMPORARY TABLE t_scratch;

-- 1.11 DROP TRIGGER names no table: the replica looks the trigger's table up (Bug#24478).
USE c;
DROP TRIGGER a.t1_audit;
INSERT INTO a.t1 VALUES (290, 'trigger gone');

-- 1.12 Multi-table UPDATE with unqualified SET columns (BUG#37051, table_map_for_update): only the
--      table that owns the column is updated, and only dumpfilter's schema model can tell which
--      (a.t_left.lv, b.t_mid.mv, c.t_right.rv). The seed's triggers write more tables, and MariaDB
--      checks those too (b.t_mid -> a.t_audit, a.t_left -> a.t2, c.t_right -> b.t2).
USE a;
UPDATE a.t_left LEFT JOIN c.t_right ON a.t_left.id = c.t_right.id SET rv = 'U1: only c.t_right' WHERE a.t_left.id = 1;
UPDATE c.t_right LEFT JOIN a.t_left ON c.t_right.id = a.t_left.id SET lv = 'U2: only a.t_left' WHERE c.t_right.id = 2;
UPDATE c.t_right JOIN (a.t_left JOIN b.t_mid ON a.t_left.id = b.t_mid.id) ON c.t_right.id = a.t_left.id
  SET mv = 'U3: nested joins, only b.t_mid' WHERE c.t_right.id = 3;

-- 1.13 A trigger on a filtered table that writes a kept table (b.t_mid -> a.t_audit, a do-table), and
--      a trigger on a kept table that writes a filtered one (c.t_right -> b.t2, wild-ignored b.%).
UPDATE b.t_mid JOIN b.t_x ON b.t_mid.id = b.t_x.id SET mv = 'T1: its trigger writes a.t_audit' WHERE b.t_mid.id = 4;
UPDATE c.t_right JOIN b.t_x ON c.t_right.id = b.t_x.id SET rv = 'T2: its trigger writes b.t2' WHERE c.t_right.id = 5;

-- 1.14 Multi-table DELETE: only the delete targets count; the tables its triggers write do not
--      (MariaDB checks it before opening the tables, observed on 10.11).
DELETE a.t_left FROM a.t_left JOIN c.t_right ON a.t_left.id = c.t_right.id WHERE a.t_left.id = 6;

-- 1.15 A trigger created in the middle of the binlog exists only where its CREATE was applied.
USE b;
DELIMITER //
CREATE TRIGGER t_x_upd AFTER UPDATE ON t_x FOR EACH ROW
BEGIN
  INSERT INTO a.t_audit (id, what) VALUES (NEW.id + 4000, CONCAT('b.t_x updated: ', NEW.v));
END//
DELIMITER ;
USE a;
UPDATE b.t_x JOIN a.t_left ON b.t_x.id = a.t_left.id SET v = 'M1: fires the new trigger' WHERE b.t_x.id = 5;

-- ---------------------------------------------------------------------------------------------
-- Part 2: traps that stop some replicas (each stops at its first).
-- 2.1 MariaDB: CREATE DATABASE e_1 is skipped by db-and-wild (wild check on 'e_1.'), but
--     CREATE TABLE e_1.t_new matches its wild-do e\_1.t% -> error 1049 on that replica.
CREATE DATABASE e_1;
USE e_1;
CREATE TABLE t_new (id INT PRIMARY KEY, v VARCHAR(64));
INSERT INTO t_new VALUES (1, 'new database');

-- 2.2 A temporary table read by a write to a kept table: a table rule that skips the CREATE
--     TEMPORARY (do-table, wild-ignore %.tmp%) makes the INSERT fail under STATEMENT/MIXED.
USE a;
CREATE TEMPORARY TABLE tmp_a (id INT PRIMARY KEY, v VARCHAR(64));
INSERT INTO tmp_a SELECT id + 300, v FROM c.t_2 WHERE id <= 2;
INSERT INTO a.t1 SELECT id, v FROM tmp_a;
DROP TEMPORARY TABLE tmp_a;

-- 2.3 The classic: a table created in another database than the session's. do-db=a skips the
--     CREATE (db b) but, under ROW, applies the rows (db a) -> error 1146.
USE b;
CREATE TABLE a.t_cross (id INT PRIMARY KEY, v VARCHAR(64));
INSERT INTO a.t_cross VALUES (1, 'cross-database create');

-- 2.4 A skipped ALTER (slave skip-alter: ignore-db=g judges the ALTER by its USE g). Under
--     STATEMENT/MIXED the kept INSERT carries 3 values for a 2-column replica table -> error 1136;
--     under ROW the replica keeps going (row events carry their own column count). No other slave
--     keeps part of f without the rest.
CREATE DATABASE f;
CREATE DATABASE g;
USE f;
CREATE TABLE t_alter (id INT PRIMARY KEY, v VARCHAR(64));
USE g;
ALTER TABLE f.t_alter ADD COLUMN w INT NOT NULL DEFAULT 0;
USE f;
INSERT INTO t_alter VALUES (1, 'after a skipped ALTER', 7);
