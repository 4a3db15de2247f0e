-- Seed for the built-in sharp-edge verification: loaded on every server (primary, reference
-- replicas, dumpfilter targets) without being replicated. Every table the workload reads across
-- databases exists everywhere, so cross-database statements that a rule set lets through do not
-- fail just because an earlier, filtered statement would have created the table.
-- `ra` receives `a` on the slave with replicate-rewrite-db=a->ra.
CREATE DATABASE a;
CREATE DATABASE b;
CREATE DATABASE c;
CREATE DATABASE d_x;
CREATE DATABASE ra;

CREATE TABLE a.t1 (id INT PRIMARY KEY, v VARCHAR(64));
CREATE TABLE a.t2 (id INT PRIMARY KEY, v VARCHAR(64));
CREATE TABLE a.t_audit (id INT PRIMARY KEY, what VARCHAR(80));
CREATE TABLE b.t_x (id INT PRIMARY KEY, v VARCHAR(64));
CREATE TABLE b.t2 (id INT PRIMARY KEY, v VARCHAR(64));
-- c.t_1, c.t_2 and c.tx1 share one shape: RENAME TABLE swaps them, and rows written to the
-- "wrong" table on a replica that skipped the swap still apply (same columns, same ids).
CREATE TABLE c.t_1 (id INT PRIMARY KEY, v VARCHAR(64));
CREATE TABLE c.t_2 (id INT PRIMARY KEY, v VARCHAR(64));
CREATE TABLE c.tx1 (id INT PRIMARY KEY, v VARCHAR(64));
CREATE TABLE d_x.t_a (id INT PRIMARY KEY, v VARCHAR(64));
-- Multi-table UPDATE/DELETE with unqualified SET columns and triggers (issue #14): each table has its
-- own column name, so an unqualified SET column names exactly one of them. The triggers are part of
-- the seed, so they exist on every server: a replica whose rules filter their table still fires them.
CREATE TABLE a.t_left (id INT PRIMARY KEY, lv VARCHAR(64));
CREATE TABLE b.t_mid (id INT PRIMARY KEY, mv VARCHAR(64));
CREATE TABLE c.t_right (id INT PRIMARY KEY, rv VARCHAR(64));
DELIMITER //
CREATE TRIGGER b.t_mid_upd AFTER UPDATE ON b.t_mid FOR EACH ROW
BEGIN
  INSERT INTO a.t_audit (id, what) VALUES (NEW.id + 1000, CONCAT('b.t_mid updated: ', NEW.mv));
END//
CREATE TRIGGER a.t_left_upd AFTER UPDATE ON a.t_left FOR EACH ROW
BEGIN
  INSERT INTO a.t2 (id, v) VALUES (NEW.id + 2000, CONCAT('a.t_left updated: ', NEW.lv));
END//
CREATE TRIGGER a.t_left_del AFTER DELETE ON a.t_left FOR EACH ROW
BEGIN
  INSERT INTO a.t_audit (id, what) VALUES (OLD.id + 5000, 'a.t_left deleted');
END//
CREATE TRIGGER c.t_right_upd AFTER UPDATE ON c.t_right FOR EACH ROW
BEGIN
  INSERT INTO b.t2 (id, v) VALUES (NEW.id + 3000, CONCAT('c.t_right updated: ', NEW.rv));
END//
DELIMITER ;
CREATE TABLE ra.t1 LIKE a.t1;
CREATE TABLE ra.t2 LIKE a.t2;
CREATE TABLE ra.t_audit LIKE a.t_audit;
CREATE TABLE ra.t_left LIKE a.t_left;

INSERT INTO a.t1 VALUES (1, 'a1-1'), (2, 'a1-2'), (3, 'a1-3'), (4, 'a1-4'), (5, 'a1-5');
INSERT INTO a.t2 VALUES (1, 'a2-1'), (2, 'a2-2'), (3, 'a2-3'), (4, 'a2-4'), (5, 'a2-5');
INSERT INTO b.t_x VALUES (1, 'bx-1'), (2, 'bx-2'), (3, 'bx-3'), (4, 'bx-4'), (5, 'bx-5');
INSERT INTO b.t2 VALUES (1, 'b2-1'), (2, 'b2-2'), (3, 'b2-3'), (4, 'b2-4'), (5, 'b2-5');
INSERT INTO c.t_1 VALUES (1, 'c1-1'), (2, 'c1-2'), (3, 'c1-3'), (4, 'c1-4'), (5, 'c1-5');
INSERT INTO c.t_2 VALUES (1, 'c2-1'), (2, 'c2-2'), (3, 'c2-3'), (4, 'c2-4'), (5, 'c2-5');
INSERT INTO c.tx1 VALUES (1, 'cx-1'), (2, 'cx-2'), (3, 'cx-3'), (4, 'cx-4'), (5, 'cx-5');
INSERT INTO d_x.t_a VALUES (1, 'dx-1'), (2, 'dx-2'), (3, 'dx-3');
INSERT INTO a.t_left VALUES (1, 'l-1'), (2, 'l-2'), (3, 'l-3'), (4, 'l-4'), (5, 'l-5'), (6, 'l-6'), (7, 'l-7');
INSERT INTO b.t_mid VALUES (1, 'm-1'), (2, 'm-2'), (3, 'm-3'), (4, 'm-4'), (5, 'm-5'), (6, 'm-6'), (7, 'm-7');
INSERT INTO c.t_right VALUES (1, 'r-1'), (2, 'r-2'), (3, 'r-3'), (4, 'r-4'), (5, 'r-5'), (6, 'r-6'), (7, 'r-7');
INSERT INTO ra.t_left SELECT * FROM a.t_left;
INSERT INTO ra.t1 SELECT * FROM a.t1;
INSERT INTO ra.t2 SELECT * FROM a.t2;
