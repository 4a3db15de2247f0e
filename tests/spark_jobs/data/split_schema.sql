-- The master's schema before the binlog, for split's --schema cases (test_split_reference).
CREATE DATABASE db1;
CREATE TABLE db1.t1 (id INT NOT NULL PRIMARY KEY, v INT);
CREATE TABLE db1.t2 (id INT NOT NULL PRIMARY KEY, v INT);
CREATE DATABASE db2;
CREATE TABLE db2.t1 (id INT NOT NULL PRIMARY KEY, v INT);
CREATE TABLE db2.t2 (id INT NOT NULL PRIMARY KEY, v INT);
