"""Parsers (options, my.cnf, CHANGE REPLICATION FILTER, WL#2516 CHANGE MASTER), errors, and render round trips."""

import pytest
from hypothesis import given, settings, strategies as st

from dumpfilter.errors import RuleError
from dumpfilter.rules.mycnf import startup_filters_from_file
from dumpfilter.rules.parse import StartupFilters, parse_change_master, parse_change_replication_filter, parse_option
from dumpfilter.rules.ruleset import RuleSet


def test_wl7361_manual_example_channel_resolution():
    startup = StartupFilters.from_options([
        ("replicate-do-db", "db1"), ("replicate-do-db", "channel_1:db2"), ("replicate-do-db", "db3"),
        ("replicate-ignore-db", "db4"), ("replicate-ignore-db", "channel_2:db5"),
        ("replicate-wild-do-table", "channel_1:db6.t1%")])
    channel_1 = startup.for_channel("channel_1")
    assert (channel_1.do_db, channel_1.ignore_db, channel_1.wild_do_table) == (("db2",), ("db4",), ("db6.t1%",))
    channel_2 = startup.for_channel("channel_2")
    assert (channel_2.do_db, channel_2.ignore_db) == (("db1", "db3"), ("db5",))


@pytest.mark.parametrize("name,value,expected", [
    ("replicate-do-db", "a,b", (None, "do_db", "a,b")),  # values are single names
    ("replicate_do_db", ":db", ("", "do_db", "db")),  # ':rule' = default channel
    ("--loose-replicate-do-db", "ch:a:b", ("ch", "do_db", "a:b")),  # first colon separates
    ("replicate-rewrite-db", "mysqltest1 -> test", (None, "rewrite_db", ("mysqltest1", "test"))),
    ("binlog-do-db", "a:b", (None, "binlog_do_db", "a:b")),  # no channel form
])
def test_parse_option(name, value, expected):
    assert parse_option(name, value) == expected


@pytest.mark.parametrize("name,value,message", [
    ("replicate-do-table", "db1", "replicate-do-table: 'db1' is not of the form db.table"),
    ("replicate-wild-do-table", "db1", "replicate-wild-do-table: 'db1' is not of the form"),
    ("replicate-rewrite-db", "a-b", "replicate-rewrite-db: 'a-b' has no '->'"),
    ("replicate-rewrite-db", " ->b", "empty FROM"),
    ("replicate-rewrite-db", "a-> ", "empty TO"),
])
def test_malformed_options_name_the_rule(name, value, message):
    with pytest.raises(RuleError, match=message.replace("(", r"\(")):
        parse_option(name, value)


def test_change_replication_filter_later_list_wins_and_backquotes():
    change = parse_change_replication_filter(
        "CHANGE REPLICATION FILTER REPLICATE_DO_DB=(db1,db2,`db32`,`db,3`), REPLICATE_DO_DB=(`:test`,my_db3,my_db4),"
        " Replicate_Ignore_DB=(my_initfiledb3), REPLICATE_IGNORE_TABLE=(`a``b`.t) FOR CHANNEL 'ch_1'")
    rules = change.apply(RuleSet(wild_do_table=("kept.%",)))
    assert rules.do_db == (":test", "my_db3", "my_db4")
    assert rules.ignore_db == ("my_initfiledb3",)
    assert rules.ignore_table == ("a`b.t",)
    assert rules.wild_do_table == ("kept.%",)  # unlisted types unchanged
    assert change.channel == "ch_1"


def test_empty_list_clears_a_type():
    rules = parse_change_replication_filter("CHANGE REPLICATION FILTER REPLICATE_DO_DB = ()").apply(
        RuleSet(do_db=("a",), ignore_db=("b",)))
    assert rules == RuleSet(ignore_db=("b",))


@pytest.mark.parametrize("text,message", [
    ("CHANGE REPLICATION FILTER REPLICATE_DO_TABLE=(db1)", "replicate-do-table: 'db1' is not of the form db.table"),
    ("CHANGE REPLICATION FILTER REPLICATE_DO_DB=(`db1)", "replicate-do-db: unbalanced `"),
    ("CHANGE REPLICATION FILTER REPLICATE_WILD_IGNORE_TABLE=('db1')", "replicate-wild-ignore-table: 'db1'"),
    ("CHANGE REPLICATION FILTER REPLICATE_WILD_DO_TABLE=(db1.t)", "replicate-wild-do-table: expected a quoted"),
    ("CHANGE REPLICATION FILTER REPLICATE_DO_SOMETHING=(a)", "expected one of"),
    ("CHANGE REPLICATION FILTER REPLICATE_REWRITE_DB=((a))", "replicate-rewrite-db: expected ','"),
])
def test_change_replication_filter_errors(text, message):
    with pytest.raises(RuleError, match=message):
        parse_change_replication_filter(text)


def test_wl2516_change_master():
    change = parse_change_master("CHANGE MASTER 'foo' TO DO='db1.%', IGNORE='%.table2', REWRITE=db1.%->db2.%;")
    assert change.channel == "foo"
    assert dict(change.changes) == {"effective_do": ("db1.%",), "effective_ignore": ("%.table2",),
                                    "effective_rewrite": (("db1.%", "db2.%"),)}
    with pytest.raises(RuleError, match="REWRITE: 'db1' has no '->'"):
        parse_change_master("CHANGE MASTER TO REWRITE=db1")
    with pytest.raises(RuleError, match="DO: 'db1' is not of the form"):
        parse_change_master("CHANGE MASTER TO DO='db1'")


def test_mycnf_groups_repeats_includes(tmp_path):
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "b.cnf").write_text("[mariadbd]\nreplicate_do_db = from_dir\n")
    (tmp_path / "conf.d" / "ignored.txt").write_text("[mysqld]\nreplicate-do-db=never\n")
    (tmp_path / "inc.cnf").write_text("[mysqld]\nreplicate-ignore-table=db.t  # trailing comment\n")
    main = tmp_path / "my.cnf"
    main.write_text("[client]\nreplicate-do-db=not_server\n[mysqld]\nserver-id=2\nreplicate-do-db=a\n"
                    "replicate-do-db=b\nreplicate-wild-do-table=\"db\\_1.%\"\n; comment\n!include inc.cnf\n"
                    "!includedir conf.d\n")
    rules = startup_filters_from_file(main).global_rules
    assert rules.do_db == ("a", "b", "from_dir")
    assert rules.wild_do_table == ("db\\_1.%",)  # unknown escapes keep the backslash
    assert rules.ignore_table == ("db.t",)


identifier = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=8)
table_key = st.tuples(identifier.filter(lambda s: "." not in s), identifier).map(".".join)
wild = st.tuples(st.text(min_size=0, max_size=6), st.text(min_size=0, max_size=6)).map(".".join)


@settings(max_examples=150, deadline=None)
@given(st.builds(RuleSet, do_db=st.tuples(identifier), ignore_db=st.lists(identifier, max_size=3).map(tuple),
                 do_table=st.lists(table_key, max_size=3).map(tuple),
                 ignore_table=st.lists(table_key, max_size=3).map(tuple),
                 wild_do_table=st.lists(wild, max_size=3).map(tuple),
                 wild_ignore_table=st.lists(wild, max_size=3).map(tuple),
                 rewrite_db=st.lists(st.tuples(identifier, identifier), max_size=3).map(tuple)))
def test_render_parses_back_to_the_same_rule_set(rules):
    assert parse_change_replication_filter(rules.render()).apply(RuleSet()) == rules
    assert parse_change_replication_filter(rules.render()).apply(RuleSet(do_db=("other",))) == rules
