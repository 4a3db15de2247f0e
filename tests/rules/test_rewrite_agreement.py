"""WL#2516 REWRITE=db5.%->db7.% described once: `explain`, the bytes the slave writes, `lint`, the
built-in topology and docs/effective-semantics.md agree that it renames a row event's table and a
statement's default database, never a name written in the statement (as replicate-rewrite-db)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from dumpfilter.codec import BinlogReader, EventType, group_transactions
from dumpfilter.codec import encode as enc
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.ruleset import Settings
from dumpfilter.rules.lint import Linter
from dumpfilter.rules.parse import apply_changes
from dumpfilter.rules.ruleset import RuleSet
from dumpfilter.rules.renamer import event_renamer
from dumpfilter.topology import load_topology
from tests.oracles.lint import feed_all
from tests.rules.test_lint_cases import Build, _same_through_the_scan

ROOT = Path(__file__).resolve().parents[2]
STATEMENT = "CHANGE MASTER TO REWRITE=db5.%->db7.%"
SETTINGS = Settings(flavor="mariadb", semantics="effective")


def _engine() -> RuleEngine:
    return RuleEngine(apply_changes(RuleSet(), [STATEMENT], "", str), SETTINGS)


def _explain(*argv: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "dumpfilter", "explain", "--filter-semantics", "effective",
                           "--flavor", "mariadb", "--change-replication-filter", STATEMENT, *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_statement_keeps_its_qualified_names_only_the_default_database_is_renamed():
    said = _explain("--current-db", "db5", "--sql", "UPDATE db5.t3 SET a = 1")
    assert "renames the default database 'db5' to 'db7'" in said and "not rewritten" in said
    assert "'db5.t3' to 'db7.t3'" not in said
    # the slave writes exactly that: `use db7`, the text untouched
    build = Build()
    event = build.ev(EventType.QUERY, enc.query_body("UPDATE db5.t3 SET a = 1", "db5"))
    engine = _engine()
    written = event_renamer(engine, engine.rules, SETTINGS)(event)
    assert written.db == "db7" and written.sql == "UPDATE db5.t3 SET a = 1"


def test_a_row_event_table_is_renamed():
    assert "REWRITE renames 'db5.t3' to 'db7.t3'" in _explain("--table", "db5.t3")
    build = Build()
    event = build.ev(EventType.TABLE_MAP, enc.table_map_body(7, "db5", "t3", b"\x03"))
    engine = _engine()
    assert event_renamer(engine, engine.rules, SETTINGS)(event).table_map[1:] == ("db7", "t3")


def test_a_table_pattern_renames_a_row_events_table_and_the_event_is_whole():
    """REWRITE='db5.t3->db7.a_longer_t9': the Table_map the slave writes is the one a server would
    write for the new names (its size and CRC32 made again by the core's writer)."""
    settings = Settings(flavor="mariadb", semantics="effective")
    engine = RuleEngine(apply_changes(RuleSet(), ["CHANGE MASTER TO REWRITE='db5.t3->db7.a_longer_t9'"], "", str),
                        settings)
    build = Build()
    event = build.ev(EventType.TABLE_MAP, enc.table_map_body(7, "db5", "t3", b"\x03"))
    written = event_renamer(engine, engine.rules, settings)(event)
    assert written.raw == build.ev(EventType.TABLE_MAP, enc.table_map_body(7, "db7", "a_longer_t9", b"\x03")).raw


def test_lint_predicts_the_qualified_name_missing_and_names_the_rewrite_rule():
    build = Build().q("CREATE DATABASE db5").q("CREATE DATABASE db7").q("CREATE TABLE t3 (a INT)", "db5") \
        .q("UPDATE db5.t3 SET a = 1", "db5")
    engine = _engine()
    linter = Linter(engine, None, flavor="mariadb")
    units = group_transactions(BinlogReader(io.BytesIO(build.bytes()), "bin.000001"))
    breaks = feed_all(linter, (("bin.000001", txn) for txn in units))
    assert [(b.errno, b.cause.rule) for b in breaks] == [(1146, "REWRITE")], breaks
    _same_through_the_scan(build, breaks, lambda: Linter(_engine(), None, flavor="mariadb"))
    assert "replicate-rewrite-db" not in breaks[0].cause.reason


def test_the_built_in_topology_keeps_what_its_comment_says(tmp_path):
    text = (ROOT / "dumpfilter/data/default_topology.toml").read_text()
    # the demo's effective slave has no REWRITE (a rename into a database the replicas lack would be
    # a second break); its comment's claim about DO before IGNORE is what the engine decides
    assert "DO patterns are tried first, so db5.t4 is kept although '%.t4'" in text
    path = tmp_path / "topology.toml"
    path.write_text(text)
    slave = next(s for s in load_topology(path).slaves if s.name == "effective")
    engine = RuleEngine(slave.rules, slave.settings)
    kept = engine.decide_statement("UPDATE db5.t4 SET a = 1", "db5")  # DO 'db5.t4' before IGNORE '%.t4'
    assert kept.apply and "DO: 'db5.t4' matches 'db5.t4'" in kept.reason
    assert "| `UPDATE db5.t3 ...` (qualified in the text) | nothing in the text" in \
        (ROOT / "docs/effective-semantics.md").read_text()
