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
CREATE TABLE ra.t1 LIKE a.t1;
CREATE TABLE ra.t2 LIKE a.t2;
CREATE TABLE ra.t_audit LIKE a.t_audit;

INSERT INTO a.t1 VALUES (1, 'a1-1'), (2, 'a1-2'), (3, 'a1-3'), (4, 'a1-4'), (5, 'a1-5');
INSERT INTO a.t2 VALUES (1, 'a2-1'), (2, 'a2-2'), (3, 'a2-3'), (4, 'a2-4'), (5, 'a2-5');
INSERT INTO b.t_x VALUES (1, 'bx-1'), (2, 'bx-2'), (3, 'bx-3'), (4, 'bx-4'), (5, 'bx-5');
INSERT INTO b.t2 VALUES (1, 'b2-1'), (2, 'b2-2'), (3, 'b2-3'), (4, 'b2-4'), (5, 'b2-5');
INSERT INTO c.t_1 VALUES (1, 'c1-1'), (2, 'c1-2'), (3, 'c1-3'), (4, 'c1-4'), (5, 'c1-5');
INSERT INTO c.t_2 VALUES (1, 'c2-1'), (2, 'c2-2'), (3, 'c2-3'), (4, 'c2-4'), (5, 'c2-5');
INSERT INTO c.tx1 VALUES (1, 'cx-1'), (2, 'cx-2'), (3, 'cx-3'), (4, 'cx-4'), (5, 'cx-5');
INSERT INTO d_x.t_a VALUES (1, 'dx-1'), (2, 'dx-2'), (3, 'dx-3');
INSERT INTO ra.t1 SELECT * FROM a.t1;
INSERT INTO ra.t2 SELECT * FROM a.t2;
