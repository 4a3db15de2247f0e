"""The per-table cache against a slow reference, WL#7361 channels and P_S rows, and `dumpfilter explain`."""

import datetime as dt
import json
import random

import pytest

from dumpfilter.cli.app import main
from dumpfilter.rules.channels import FilterRegistry
from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.parse import StartupFilters
from dumpfilter.rules.ruleset import RuleSet


def reference_wildcmp(key: str, pattern: str) -> bool:
    """A direct recursive my_wildcmp (escape '\\', one '_', many '%'), independent of the regex compiler."""
    if not pattern:
        return not key
    head = pattern[0]
    if head == "%":
        return any(reference_wildcmp(key[i:], pattern[1:]) for i in range(len(key) + 1))
    if head == "\\" and len(pattern) > 1:
        return bool(key) and key[0] == pattern[1] and reference_wildcmp(key[1:], pattern[2:])
    if head == "_":
        return bool(key) and reference_wildcmp(key[1:], pattern[1:])
    return bool(key) and key[0] == head and reference_wildcmp(key[1:], pattern[1:])


def reference_table_kept(rules: RuleSet, db: str, table: str) -> bool:
    """tables_ok for one table, lctn=0, no db rules: the manual's steps 1-8 written out plainly."""
    key = f"{db}.{table}"
    if key in rules.do_table:
        return True
    if key in rules.ignore_table:
        return False
    if any(reference_wildcmp(key, p) for p in rules.wild_do_table):
        return True
    if any(reference_wildcmp(key, p) for p in rules.wild_ignore_table):
        return False
    return not rules.do_table and not rules.wild_do_table


def test_ten_thousand_wild_rules_warm_cache_matches_reference():
    generator = random.Random(2387)
    letters = "ab_%\\"
    patterns = tuple("".join(generator.choice(letters) for _ in range(4)) + "." + "".join(
        generator.choice("xy%_") for _ in range(3)) for _ in range(10_000))
    rules = RuleSet(wild_do_table=patterns[:5_000], wild_ignore_table=patterns[5_000:], ignore_table=("ab.xy",))
    engine = RuleEngine(rules)
    tables = [("".join(generator.choice("ab_%") for _ in range(generator.randint(1, 5))),
               "".join(generator.choice("xy") for _ in range(generator.randint(1, 4)))) for _ in range(60)]
    for db, table in tables * 3:  # cold, then warm twice
        assert engine.table_kept(db, table) is reference_table_kept(rules, db, table), (db, table)


def test_channels_reset_all_and_change_without_channel():
    clock = iter(dt.datetime(2016, 12, 2, 11, 53, second) for second in range(60))
    startup = StartupFilters.from_options([
        ("replicate-do-db", "db1"), ("replicate-do-db", ":db1"), ("replicate-do-db", ":db2"),
        ("replicate-do-db", "ch_1:db4"), ("replicate-do-db", "ch_1:db5"), ("replicate-do-db", "ch_3:db6"),
        ("replicate-wild-do-table", "db.t1%"), ("replicate-wild-ignore-table", "ch_1:db.t2%")])
    registry = FilterRegistry.from_startup(startup, ["", "ch_1", "ch_2"], clock=lambda: next(clock))
    assert registry.warnings == ["There are per-channel replication filter(s) configured for channel 'ch_3' "
                                 "which does not exist. The filter(s) have been discarded."]
    rows = {(r["CHANNEL_NAME"], r["FILTER_NAME"]): (r["FILTER_RULE"], r["CONFIGURED_BY"])
            for r in registry.applier_filters()}
    assert rows == {
        ("", "REPLICATE_DO_DB"): ("db1,db2", "STARTUP_OPTIONS_FOR_CHANNEL"),
        ("", "REPLICATE_WILD_DO_TABLE"): ("db.t1%", "STARTUP_OPTIONS"),
        ("ch_1", "REPLICATE_DO_DB"): ("db4,db5", "STARTUP_OPTIONS_FOR_CHANNEL"),
        ("ch_1", "REPLICATE_WILD_DO_TABLE"): ("db.t1%", "STARTUP_OPTIONS"),
        ("ch_1", "REPLICATE_WILD_IGNORE_TABLE"): ("db.t2%", "STARTUP_OPTIONS_FOR_CHANNEL"),
        ("ch_2", "REPLICATE_DO_DB"): ("db1", "STARTUP_OPTIONS"),
        ("ch_2", "REPLICATE_WILD_DO_TABLE"): ("db.t1%", "STARTUP_OPTIONS"),
    }
    registry.change_replication_filter("CHANGE REPLICATION FILTER REPLICATE_DO_DB = () FOR CHANNEL 'ch_1'")
    registry.change_replication_filter("CHANGE REPLICATION FILTER REPLICATE_DO_DB = (dbB)")
    assert {r["CHANNEL_NAME"]: r["FILTER_RULE"] for r in registry.applier_filters()
            if r["FILTER_NAME"] == "REPLICATE_DO_DB"} == {"": "dbB", "ch_1": "dbB", "ch_2": "dbB"}
    assert registry.applier_global_filters()[0]["CONFIGURED_BY"] == "CHANGE_REPLICATION_FILTER"
    registry.create_channel("ch_2")  # made again: copies the global filters again
    assert registry.rules_for("ch_2").do_db == ("dbB",)
    assert registry.rules_for("ch_2").wild_do_table == ("db.t1%",)
    with pytest.raises(Exception, match="no such replication channel"):
        registry.change_replication_filter("CHANGE REPLICATION FILTER REPLICATE_DO_DB=(x) FOR CHANNEL 'nope'")


def test_counter_resets_on_reconfiguration():
    """COUNTER is the master's count of the rule's hits (master.decide.rule_hits, tested with a
    streaming slave in tests/master); a CHANGE REPLICATION FILTER of the type starts it again."""
    registry = FilterRegistry.from_startup(StartupFilters.from_options([("replicate-do-db", "a")]), [""])
    registry.channels[""].entries["do_db"].counter = 2  # as rule_hits counts them
    assert registry.applier_filters()[0]["COUNTER"] == 2
    registry.change_replication_filter("CHANGE REPLICATION FILTER REPLICATE_DO_DB=(a)")
    assert registry.applier_filters()[0]["COUNTER"] == 0


def test_explain_text(capsys):
    assert main(["explain", "--replicate-do-db=a", "--current-db", "b", "--sql", "INSERT INTO t VALUES (1)"]) == 0
    assert capsys.readouterr().out == "skip: replicate-do-db: default database 'b' is not in the do list\n"


def test_explain_json_table_with_channel_rules(capsys):
    assert main(["explain", "--replicate-wild-do-table=ch:db1.%", "--channel", "ch", "--binlog-format", "ROW",
                 "--table", "db1.t1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "decision": "apply", "reason": "replicate-wild-do-table: 'db1.t1' matches 'db1.%'",
        "rule": "replicate-wild-do-table", "tables": ["db1.t1"]}


def test_explain_change_replication_filter_and_lctn(capsys):
    main(["explain", "--change-replication-filter", "CHANGE REPLICATION FILTER REPLICATE_IGNORE_TABLE=(db.t)",
          "--lower-case-table-names", "1", "--current-db", "DB", "--sql", "UPDATE T SET a=1"])
    assert capsys.readouterr().out == "skip: replicate-ignore-table: 'db.t' is in the ignore list\n"


def test_explain_batch(tmp_path, capsys):
    batch = tmp_path / "in.jsonl"
    lines = [
        {"binlog_format": "STATEMENT", "current_db": None, "sql": "INSERT INTO db1.t1 VALUES (1)",
         "filters": {"replicate_do_db": ["db1"]}},
        {"binlog_format": "ROW", "current_db": None, "table": "db1.t1", "filters": {"replicate_do_db": ["db1"]}},
        {"binlog_format": "STATEMENT", "current_db": "x", "sql": "CREATE DATABASE dbx", "flavor": "mariadb",
         "filters": {"replicate_do_db": ["dbx"], "replicate_wild_do_table": ["db%.t1"]}},
    ]
    batch.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert main(["explain", "--batch", str(batch)]) == 0
    decisions = [json.loads(line)["decision"] for line in capsys.readouterr().out.splitlines()]
    assert decisions == ["skip", "apply", "skip"]


def test_explain_malformed_rule_exits_non_zero(capsys):
    assert main(["explain", "--replicate-do-table=db1", "--sql", "BEGIN"]) == 2
    assert "replicate-do-table: 'db1' is not of the form db.table" in capsys.readouterr().err
