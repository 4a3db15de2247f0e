"""MariaDB's per-connection filters (issue #41, item 3; multi_source/mdev-8874): an option file's
`m1.replicate_ignore_table='a.t1'` and `SET GLOBAL m1.replicate_...` are the channel form, never
silently dropped; a prefixed option that is not a filter is refused naming its line."""

from __future__ import annotations

import pytest

from dumpfilter.errors import RuleError
from dumpfilter.rules.mycnf import startup_filters_from_file
from dumpfilter.rules.parse import apply_changes, parse_filter_statement
from dumpfilter.rules.ruleset import RuleSet


def test_an_option_files_connection_prefix_is_the_channel_form(tmp_path):
    cnf = tmp_path / "my.cnf"
    cnf.write_text("[mysqld]\nm1.replicate_ignore_table='a.t1'\nreplicate-do-db=x\n"
                   "'m2'.replicate-rewrite-db=b->c\n")
    filters = startup_filters_from_file(cnf)
    assert filters.for_channel("m1").ignore_table == ("a.t1",)
    assert filters.for_channel("m1").do_db == ("x",)
    assert filters.for_channel("m2").rewrite_db == (("b", "c"),)
    assert filters.for_channel("").ignore_table == ()


@pytest.mark.parametrize("line", ["m1.slave_parallel_threads=4", "m1.binlog_do_db=a", ".replicate_do_db=a"])
def test_a_prefixed_option_that_is_not_a_filter_is_refused_naming_its_line(tmp_path, line):
    cnf = tmp_path / "my.cnf"
    cnf.write_text(f"[mysqld]\nreplicate-do-db=x\n{line}\n")
    with pytest.raises(RuleError) as err:
        startup_filters_from_file(cnf)
    assert f"{cnf}:3" in str(err.value) and "\n" not in str(err.value)


def test_set_global_per_connection():
    change = parse_filter_statement("SET GLOBAL m1.replicate_ignore_table='a.t1,a.t2'")
    assert change.channel == "m1" and change.changes == (("ignore_table", ("a.t1", "a.t2")),)
    assert parse_filter_statement("SET GLOBAL 'm1'.replicate_do_db='d'").channel == "m1"
    plain = parse_filter_statement("SET GLOBAL replicate_rewrite_db='a->b,c->d'")
    assert plain.channel is None and plain.changes == (("rewrite_db", (("a", "b"), ("c", "d"))),)
    assert apply_changes(RuleSet(), [plain], "", str).rewrite_db == (("a", "b"), ("c", "d"))
    with pytest.raises(RuleError):  # another connection's rules are not silently taken for these
        apply_changes(RuleSet(), [change], "", str)
    with pytest.raises(RuleError, match="not a replicate"):
        parse_filter_statement("SET GLOBAL m1.slave_parallel_threads=4")
