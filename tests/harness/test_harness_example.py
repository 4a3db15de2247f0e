"""docs/api.md's worked example, as a harness author writes it: public names only
(`dumpfilter.harness` alone: a relay log's events are looked inside by their attributes), the plugin's fixtures
found through its pytest11 entry point, no conftest of ours in between."""

from __future__ import annotations

from dumpfilter.harness import Rules, lint


def tables_with_rows(slave) -> set[str]:
    """db.table of every table a slave received row events for."""
    seen = set()
    for txn in slave.relay_log.transactions():
        maps = {e.table_id: f"{e.db}.{e.table}" for e in txn.events if e.table is not None}  # Table_maps
        seen |= {maps[e.table_id] for e in txn.events if e.is_rows and e.table_id in maps}
    return seen


def test_each_slave_gets_only_its_schemas(dumpfilter_binlog, dumpfilter_master, dumpfilter_slave):
    binlog = dumpfilter_binlog(transactions=300, schemas=3)
    master = dumpfilter_master(binlog)                        # 127.0.0.1, a free port
    reporting = dumpfilter_slave(master, ["replicate-do-db=db1", "replicate-do-db=db3"])
    archive = dumpfilter_slave(master, Rules.from_change(
        "CHANGE REPLICATION FILTER REPLICATE_WILD_IGNORE_TABLE = ('db1.t1')"), skip_policy="placeholder")

    sent = reporting.catch_up()
    archive.catch_up()

    assert tables_with_rows(reporting) and not {t for t in tables_with_rows(reporting) if t.startswith("db2.")}
    assert "db1.t1" not in tables_with_rows(archive) and "db2.t1" in tables_with_rows(archive)
    assert sent.transactions_skipped > 0
    assert reporting.position.pos == master.binlog_end().pos  # caught up with the whole binlog
    assert lint(binlog, reporting.rules).ok and lint(binlog, archive.rules).ok


def test_the_example_in_the_docs_is_this_test():
    """docs/api.md shows this module's example verbatim: the two cannot drift apart."""
    from pathlib import Path

    source = Path(__file__).read_text()
    docs = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    start = source.index("def tables_with_rows")
    end = source.index("def test_the_example_in_the_docs_is_this_test")
    assert source[start:end].strip() in docs


def test_the_docs_import_only_the_public_api():
    """docs/api.md calls everything outside `dumpfilter.harness` internal: none of its examples, nor
    this module, imports from anywhere else in dumpfilter (the example imported dumpfilter.codec)."""
    import re
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    code = "\n".join(re.findall(r"```python\n(.*?)```", docs, re.S)) + Path(__file__).read_text()
    imported = set(re.findall(r"^\s*(?:from|import)\s+(dumpfilter[\w.]*)", code, re.M))
    assert imported == {"dumpfilter.harness"}, imported
