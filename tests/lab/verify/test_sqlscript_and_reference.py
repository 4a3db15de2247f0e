"""Statement splitting (DELIMITER, quotes, comments) and which slaves have a real-replica reference.
No servers."""

from __future__ import annotations

import re
import subprocess

import pytest

from dumpfilter.topology import parse_topology
from dumpfilter.lab.verify import builtin_paths, no_reference_reason
from dumpfilter.lab.verify.against_replicas import VerifyError, split_statements


def test_split_handles_quotes_comments_and_delimiter():
    script = (
        "-- comment; not a statement\n"
        "USE a; INSERT INTO t VALUES ('x;y', \"q\"\"q\", 'it''s', 'b\\\\'); # tail ;\n"
        "/* block ; */ SELECT 1 /*!40101 , 2 */;\n"
        "DELIMITER //\n"
        "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW BEGIN\n"
        "  INSERT INTO u VALUES (1);\n"
        "END//\n"
        "delimiter ;\n"
        "SELECT `a;b` FROM x\n"
    )
    statements = split_statements(script)
    assert [s.sql for s in statements] == [
        "USE a",
        "INSERT INTO t VALUES ('x;y', \"q\"\"q\", 'it''s', 'b\\\\')",
        "SELECT 1 /*!40101 , 2 */",
        "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW BEGIN\n  INSERT INTO u VALUES (1);\nEND",
        "SELECT `a;b` FROM x",
    ]
    assert [s.line for s in statements] == [2, 2, 3, 5, 9]


def test_split_rejects_an_unterminated_quote():
    with pytest.raises(VerifyError, match=r"unterminated ' quote \(statement starting on line 1\)"):
        split_statements("INSERT INTO t VALUES ('oops);\n")


@pytest.mark.mariadb
def test_split_cuts_as_the_mariadb_client_does(mariadb_factory):
    """The statements are those the mariadb client (10.11) sends, as its `-vvv` echoes them: it cuts
    at a delimiter inside a versioned comment (`/*!...*/`, `/*M!...*/`: code to it; the lab's own
    splitter kept one whole), leaves comments out and follows DELIMITER lines."""
    server = mariadb_factory("client-cuts")
    script = ("SELECT 1 /*!40101 ; SELECT 2 */;\nSELECT 3 /*M!100100 ; SELECT 4 */;\nSELECT 5 /* ; */ , 6;\n"
              "SELECT 7 -- x;\n, 8;\n# c ;\nDELIMITER //\nSELECT 'a;b', \"c\"\"//\" //\ndelimiter ;\n"
              "SELECT `c;d` FROM (SELECT 1 AS `c;d`) x;\n")
    run = subprocess.run(["mariadb", "-h127.0.0.1", f"-P{server.port}", "-uroot", "--force", "-vvv"], input=script,
                         capture_output=True, text=True, timeout=60, check=False)
    sent = re.findall(r"^-{14}\n(.*?)\n-{14}$", run.stdout, re.S | re.M)
    assert len(sent) == 8, run.stdout
    assert [" ".join(s.sql.split()) for s in split_statements(script)] == [" ".join(s.split()) for s in sent]


def test_builtin_workload_covers_the_sharp_edges():
    _, workload_path, _ = builtin_paths()
    sql = [s.sql.upper() for s in split_statements(workload_path.read_text())]
    first_use = next(i for i, s in enumerate(sql) if s.startswith("USE "))
    assert first_use > 0  # statements with no default database come first
    for needle in ("RENAME TABLE", "CREATE TABLE T_LIKE LIKE", "CREATE TABLE T_SEL SELECT", "DROP DATABASE",
                   "CREATE DATABASE", "CREATE TEMPORARY TABLE", "CREATE TRIGGER", "DROP TRIGGER",
                   "INSERT INTO A.T2 SELECT", "DELETE C.T_2, B.T2 FROM"):
        assert any(needle in s for s in sql), needle


def test_reference_only_for_replicate_rules():
    topology_path, _, _ = builtin_paths()
    slaves = {s.name: s for s in parse_topology(topology_path.read_text()).slaves}
    assert "WL#2516" in no_reference_reason(slaves["effective"])
    assert all(no_reference_reason(s) is None for name, s in slaves.items() if name != "effective")
    rule_types = {line.split("=")[0] for s in slaves.values() for line in s.rules.option_lines()}
    assert rule_types == {f"replicate-{t}" for t in ("do-db", "ignore-db", "do-table", "ignore-table",
                                                     "wild-do-table", "wild-ignore-table", "rewrite-db")}
    binlog_rules = parse_topology('[[slaves]]\nname="m"\nserver_id=2\nrules=["binlog-do-db=a"]\n').slaves[0]
    assert "binlog" in no_reference_reason(binlog_rules)
