"""Fuzz targets: every rule syntax (mysqld options, my.cnf, CHANGE REPLICATION FILTER, WL#2516
CHANGE MASTER) and the topology file. Inputs are built from the grammar's own tokens mixed with
arbitrary text; what parses is then compiled and asked about tables and a statement. Nothing but
RuleError/TopologyError (DumpFilterError) may escape, and no input may take long."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dumpfilter.rules.evaluate import RuleEngine
from dumpfilter.rules.mycnf import startup_filters_from_file
from dumpfilter.rules.parse import OPTION_TYPES, parse_filter_statement, parse_option
from dumpfilter.rules.ruleset import Settings
from dumpfilter.topology import parse_topology
from tests.fuzz.fuzz_support import TARGET_TIMEOUT, FUZZ, only_project_errors

pytestmark = pytest.mark.timeout(TARGET_TIMEOUT)

NAME_CHARS = "ab1_%\\.`'\" ,()=-:;>\n\t\u00e9\u4e2d\udcff"
names = st.text(alphabet=NAME_CHARS, max_size=24)
settings_st = st.builds(Settings, flavor=st.sampled_from(["mysql", "mariadb"]),
                        lower_case_table_names=st.sampled_from([0, 1, 2]),
                        semantics=st.sampled_from(["mysql", "effective"]))
OPTION_NAMES = sorted(OPTION_TYPES) + ["replicate_do_db", "--loose-replicate-wild-do-table", "replicate-foo", ""]
CRF_WORDS = ["CHANGE", "REPLICATION", "FILTER", "REPLICATE_DO_DB", "REPLICATE_IGNORE_DB", "REPLICATE_DO_TABLE",
             "REPLICATE_IGNORE_TABLE", "REPLICATE_WILD_DO_TABLE", "REPLICATE_WILD_IGNORE_TABLE",
             "REPLICATE_REWRITE_DB", "FOR", "CHANNEL", "=", "(", ")", ",", ".", ";", "'db%.t_'", "`a b`", "db1",
             "'", "`", "\"x\"", "/*", "*/", "--", "#"]
CM_KEYS = ["DO", "IGNORE", "REWRITE", "IGNOR", "FOO", "MASTER_HOST", "SOURCE_PORT", "REPLICATE_DO_DB",
           "REPLICATE_REWRITE_DB", "master-host", ""]


def _exercise(rules, settings) -> None:
    """Compile the rules and ask what a master asks."""
    engine = RuleEngine(rules, settings)
    for db, table in (("db1", "t1"), ("a%b", "c_d"), ("", ""), ("\u00e9", "x" * 64)):
        engine.table_kept(db, table)
        engine.decide_table(db, table)
    engine.decide_statement("INSERT INTO db1.t1 VALUES (1)", "db1")


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(OPTION_NAMES), names), max_size=6), settings_st)
def test_fuzz_mysqld_options(options, settings):
    from dumpfilter.rules.parse import StartupFilters

    with only_project_errors(repr(options)):
        for name, value in options:
            parse_option(name, value)
        _exercise(StartupFilters.from_options(options).for_channel(""), settings)


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(["[mysqld]", "[mariadbd]", "[client]", "[mysqld", "!include x.cnf",
                                            "!includedir d", "!bogus", "# c", "; c"]),
                          st.builds(lambda k, v: f"{k}={v}", st.sampled_from(OPTION_NAMES), names),
                          st.text(max_size=30)), max_size=8))
def test_fuzz_my_cnf(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("cnf") / "my.cnf"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
    with only_project_errors(repr(lines)):
        _exercise(startup_filters_from_file(path).for_channel(""), Settings())


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(CRF_WORDS), names), max_size=16), settings_st)
def test_fuzz_change_replication_filter(words, settings):
    text = " ".join(words)
    with only_project_errors(repr(text)):
        change = parse_filter_statement(text)
        _exercise(change.apply(__import__("dumpfilter.rules.ruleset", fromlist=["RuleSet"]).RuleSet()), settings)


@FUZZ
@given(st.sampled_from(["CHANGE MASTER", "CHANGE MASTER 'c'", "CHANGE REPLICATION SOURCE", "change master \"x\"",
                        "CHANGE MASTER '"]),
       st.lists(st.tuples(st.sampled_from(CM_KEYS), st.one_of(names, st.builds(lambda a, b: f"'{a}->{b}'", names, names))),
                max_size=5), settings_st)
def test_fuzz_change_master(head, pairs, settings):
    text = f"{head} TO " + ", ".join(f"{k}={v}" for k, v in pairs)
    with only_project_errors(repr(text)):
        change = parse_filter_statement(text)
        from dumpfilter.rules.ruleset import RuleSet
        _exercise(change.apply(RuleSet()), settings.__class__(semantics="effective"))


TOPOLOGY_LINES = ["[master]", "binlogs = 'data'", "files = ['a.000001']", "policy = 'p.toml'", "[master.workload]",
                  "seed = 1", "transactions = -5", "[[slaves]]", "name = 's'", "name = 1", "server_id = 2",
                  "server_id = 0", "server_id = 99999999999", "rules = ['replicate-do-db=db1']", "rules = 'x'",
                  "rules = [1]", "change_replication_filter = \"CHANGE MASTER TO DO='a.%'\"",
                  "change_replication_filter = ['x']", "channel = 'c'", "filter_semantics = 'effective'",
                  "skip_policy = 'nope'", "flavor = 'mariadb'", "lower_case_table_names = 7", "user = 'u'",
                  "[experiment]", "skip_policies = ['heartbeat']", "master_vs_slave = 'yes'", "[bogus]", "x = ",
                  "[[slaves]", "= 1"]


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(TOPOLOGY_LINES), st.text(max_size=20)), max_size=12))
def test_fuzz_topology_file(lines):
    text = "\n".join(lines)
    with only_project_errors(repr(text)):
        topology = parse_topology(text, "fuzz.toml")
        for slave in getattr(topology, "slaves", ()):
            _exercise(slave.rules, slave.settings)
