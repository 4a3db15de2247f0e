"""A `--schema FILE` of junk (100 MB of `SELECT 1;`, random text, random bytes) was read to its end,
every statement split and replayed, and only then refused as creating nothing: 44 s and more. Now a
statement no schema dump holds refuses the file there, in one line naming the file and the line,
and the script is cut in one pass (a statement of many lines was rescanned from its start at each
line). Shown by the work done, never by a clock: how many statements reached the model, how many
scans a statement of many lines took. Real dumps are still taken whole."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from dumpfilter.errors import RuleError
from dumpfilter.rules.schema import SchemaModel

# What mysqldump and mariadb-dump --no-data write besides tables and triggers: MariaDB's sandbox
# line, version comments (Percona's `/*!50717 SELECT ...*/` among them), CHANGE MASTER
# (--master-data), a sequence's DO SETVAL, and a dump with data's rows (--no-autocommit: COMMIT).
DUMP = """/*M!999999\\- enable the sandbox mode */
-- MariaDB dump 10.19  Distrib 10.11.19-MariaDB
/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;
/*!50717 SELECT COUNT(*) INTO @rocksdb_has_p_s_session_variables FROM INFORMATION_SCHEMA.TABLES */;
/*!50717 PREPARE s FROM @rocksdb_get_is_supported */;
SET @@SESSION.SQL_LOG_BIN= 0;
CHANGE MASTER TO MASTER_USE_GTID=slave_pos;
CREATE DATABASE /*!32312 IF NOT EXISTS*/ `d` /*!40100 DEFAULT CHARACTER SET latin1 */;
USE `d`;
CREATE SEQUENCE `s1` start with 100 minvalue 1 maxvalue 9223372036854775806 increment by 1 cache 1000 nocycle ENGINE=InnoDB;
DO SETVAL(`s1`, 100, 0);
DROP TABLE IF EXISTS `t1`;
CREATE TABLE `t1` (
  `a` int(11) NOT NULL,
  `b` varchar(10) DEFAULT NULL COMMENT 'x -- y # z; ok',
  PRIMARY KEY (`a`)
) ENGINE=InnoDB DEFAULT CHARSET=latin1;
LOCK TABLES `t1` WRITE;
/*!40000 ALTER TABLE `t1` DISABLE KEYS */;
INSERT INTO `t1` VALUES (1,'a');
/*!40000 ALTER TABLE `t1` ENABLE KEYS */;
UNLOCK TABLES;
commit;
DELIMITER ;;
/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER tr1 AFTER INSERT ON t1 FOR EACH ROW BEGIN INSERT INTO log VALUES (NEW.a); END */;;
DELIMITER ;
/*!40101 SET CHARACTER_SET_CLIENT=@OLD_CHARACTER_SET_CLIENT */;
"""


@pytest.fixture
def observed(monkeypatch):
    """The statements that reached the model (SchemaModel.observe)."""
    seen: list[str] = []
    observe = SchemaModel.observe

    def counted(self, sql, *args, **kwargs):
        seen.append(sql)
        return observe(self, sql, *args, **kwargs)

    monkeypatch.setattr(SchemaModel, "observe", counted)
    return seen


def _junk(kind: str) -> bytes:
    rng = random.Random(7)
    if kind == "select":
        return b"SELECT 1;\n" * 200_000
    if kind == "rows":  # rows before any table: a dump of data alone, or junk
        return b"INSERT INTO t VALUES (1);\n" * 100_000
    if kind == "text":
        return "".join(rng.choices("abcdefghij KLMNOP();,.'\"`#-*/\n\t0123456789", k=2_000_000)).encode()
    return bytes(rng.choices(range(1, 256), k=2_000_000))  # random bytes, none a NUL (that is refused first)


@pytest.mark.parametrize("kind", ["select", "rows", "text", "bytes"])
def test_junk_is_refused_at_its_first_statement(tmp_path, observed, kind):
    path = tmp_path / "junk.sql"
    path.write_bytes(_junk(kind))
    with pytest.raises(RuleError) as info:
        SchemaModel.load(path)
    message = str(info.value)
    assert message.startswith(f"--schema {path}: line 1: ") and "is not a statement of a schema dump" in message
    assert "\n" not in message
    assert observed == []  # refused before anything reached the model


def test_junk_after_a_schema_is_refused_where_it_starts(tmp_path, observed):
    path = tmp_path / "junk.sql"
    path.write_text("CREATE DATABASE d;\nCREATE TABLE d.t (a int);\n\n" + "SELECT 1;\n" * 200_000)
    with pytest.raises(RuleError, match=r": line 4: 'SELECT 1' is not a statement of a schema dump"):
        SchemaModel.load(path)
    assert len(observed) == 2


def test_what_dumps_hold_is_taken_and_what_they_do_not_refused_at_its_line(tmp_path):
    path = tmp_path / "dump.sql"
    path.write_text(DUMP)
    model = SchemaModel.load(path)
    assert model.knows("d", "t1") and model.knows("d", "s1")
    assert model.triggers[("d", "tr1")].writes == ((("d", "log"), "INSERT"),)
    path.write_text(DUMP.replace("UNLOCK TABLES;\n", "UNLOCK TABLES;\nSELECT * FROM `t1`;\n"))
    with pytest.raises(RuleError, match=r": line 23: 'SELECT \* FROM `t1`' is not a statement of a schema dump"):
        SchemaModel.load(path)


def test_a_quote_over_many_lines_is_one_statement():
    """A quote open over 20 000 lines is one statement (the core's splitter skips a quote whole:
    one scan of the text)."""
    text = "CREATE TABLE d.t (a int COMMENT '" + "x;\n" * 20_000 + "');\nCREATE TABLE d.u (b int);\n"
    model = SchemaModel.from_sql(text, strict=True)
    assert model.tables == {("d", "t"): ("a",), ("d", "u"): ("b",)}


def test_junk_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "junk.sql"
    path.write_bytes(_junk("text"))
    run = subprocess.run([sys.executable, "-m", "dumpfilter", "explain", "--sql", "SELECT 1", "--schema", str(path)],
                         capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    err = run.stderr.decode(errors="replace").strip()
    assert run.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"dumpfilter: error: --schema {path}: line 1: "), err



@pytest.mark.parametrize(("cut", "whole"), [
    ("CREATE TABLE d.t (a int", "CREATE TABLE d.t (a int)"),
    ("CREATE TABLE d.t (a int)) ENGINE=InnoDB (", "CREATE TABLE d.t (a int) ENGINE=InnoDB"),
    ("CREATE TABLE d.t (a int /* ) */", "CREATE TABLE d.t (a int /* ) */)"),
    ("CREATE TABLE d.t (a int COMMENT ')' -- (\n", "CREATE TABLE d.t (a int COMMENT ')' -- (\n)"),
    ("/*!40101 CREATE TABLE d.t (a int */", "/*!40101 CREATE TABLE d.t (a int) */"),
    ("/*!40101 CREATE TABLE d.t (a 'x */", "/*!40101 CREATE TABLE d.t (a int) */"),  # (no lexing: left closed)
    ("CREATE TABLE d.t (a int COMMENT 'open", "CREATE TABLE d.t (a int COMMENT 'x')"),
])
def test_ddl_cut_short_is_refused_and_whole_ddl_is_lexed_by_the_core_alone(cut, whole):
    """A user's schema file: each table statement's quotes and parentheses must close. The core's
    lexer answers, comments of every kind included (a versioned one's code is code): no Python
    lexer reads beside it (issue #80)."""
    assert SchemaModel.from_sql(DUMP, strict=True).knows("d", "t1")
    with pytest.raises(RuleError, match=r"line 2: cannot parse"):
        SchemaModel.from_sql(f"CREATE DATABASE d;\n{cut};\n", strict=True)
    assert SchemaModel.from_sql(f"CREATE DATABASE d;\n{whole};\n", strict=True).columns("d", "t") == ("a",)
