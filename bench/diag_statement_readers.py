"""The schema model's, lint's and the policy bound's answers to statement texts, for checking that
one reader answers as another did (diagnostic, in process; run the same file in each checkout and
`cmp` the outputs). text52's readers moved to the core's facts were checked with it:

    python bench/diag_statement_readers.py corpus /tmp/corpus.jsonl      # once, in either checkout
    python bench/diag_statement_readers.py answers /tmp/corpus.jsonl OUT  # in each checkout
    python bench/diag_statement_readers.py reach /tmp/corpus.jsonl OUT    # in each checkout
    python bench/diag_statement_readers.py texts /tmp/corpus.jsonl OUT    # in each checkout
    python bench/diag_statement_readers.py rules OUT [TEXTS]              # drawn, then TEXTS=OUT in the other

`corpus` writes (source, default db, text) per statement: the rule vectors, the fixture binlogs
(../shared/fixtures), the verify workloads, the DDL string literals and .sql statements of the
tests, 6,000 trigger, routine and event bodies drawn by the body reader test's strategies
(derandomized), and the distinct unkeyed Query texts of the matrix binlogs (bench/data). `texts`
gives the policy bound's reach of every text and lint's readings of the calls in it; `rules`, the
rule parser's answer or one-line message for 20,000 drawn CHANGE statements (derandomized)."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

_DDL = re.compile(r"^\s*(CREATE|ALTER|DROP|RENAME)\b", re.I)


def corpus(out_path: str) -> None:
    from hypothesis import HealthCheck, given, settings, strategies as st

    from dumpfilter import _core
    from tests.core.test_statement_facts import _verify_statements
    from tests.core.test_statement_keys import _queries, _vectors
    from tests.rules.test_policy_body_reader import _texts

    with open(out_path, "w") as out:
        def put(src: str, db: str | None, sql: str) -> None:
            out.write(json.dumps([src, db, sql]) + "\n")

        for db, sql in _vectors():
            put("vectors", db, sql)
        for p in sorted(p for p in Path("../shared/fixtures").rglob("*") if p.is_file()
                        and p.suffix not in (".md", ".json", ".index", ".txt")):
            for db, sql in _queries(p):
                put(f"fixture:{p.name}", db, sql)
        for name, texts in _verify_statements().items():
            for sql in texts:
                put(f"verify:{name}", "a", sql)
        for p in sorted(Path("tests").rglob("*.py")):
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and _DDL.match(node.value):
                    put(f"lit:{p}", "db", node.value)
        for p in sorted(Path("tests").rglob("*.sql")):
            for sql in re.split(r";\s*\n", p.read_text(errors="replace")):
                if _DDL.match(sql):
                    put(f"sqlfile:{p}", "db", sql)

        @settings(max_examples=6000, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(st.one_of(_texts(), _texts(fragments=False)), st.sampled_from(["shop", "other", ""]))
        def body(sql: str, db: str) -> None:
            put("bodies", db, sql)

        body()
        for binlog in sorted(Path("bench/data").glob("*-520mb*")):
            seen: set[tuple[str | None, str]] = set()
            for path in sorted(binlog.glob("*bin.0*")):
                for db, sql in _queries(path):
                    if (db, sql) not in seen and _core.statement_key(sql.encode("utf-8", "surrogateescape")) is None:
                        seen.add((db, sql))
                        put(f"bin:{binlog.name}", db, sql)


def answers(corpus_path: str, out_path: str) -> None:
    """Per schema statement, the model it makes alone and the columns of its tables replayed in order
    per source; lint's text readings of ALTER, INSERT, REPLACE and CREATE; the final models."""
    from dumpfilter.rules import lint_sql
    from dumpfilter.rules.schema import SchemaModel, is_schema_statement, strip_version_comments
    from dumpfilter.rules.statements import statement_tables

    def dump(m: SchemaModel) -> dict[str, object]:
        return {"dbs": sorted(m.databases), "tables": sorted([list(k), v] for k, v in m.tables.items()),
                "triggers": sorted([list(k), [t.table, t.timing, t.event, t.writes]] for k, t in m.triggers.items()),
                "functions": sorted([list(k), v] for k, v in m.functions.items()), "views": sorted(m.views)}

    def delta(sql: str, db: str | None) -> int | None:  # columns an ALTER adds less those it drops
        if hasattr(lint_sql, "column_delta"):
            return lint_sql.column_delta(sql)  # (before text52)
        changes = statement_tables(sql, db or "").column_changes
        return None if changes is None else sum((new is not None) - (old is not None) for old, new in changes)

    models: dict[str, SchemaModel] = {}
    with open(out_path, "w") as out:
        for line in open(corpus_path):
            src, db, sql = json.loads(line)
            verb = sql.split(None, 1)[0].upper() if sql.split() else ""
            record: list[object] = [src, db, sql[:300]]
            if verb in ("ALTER", "INSERT", "REPLACE", "CREATE"):
                record.append([delta(sql, db) if verb == "ALTER" else None, lint_sql.first_row_values(sql),
                               lint_sql.insert_column_list(sql), lint_sql.if_not_exists(sql)])
            if is_schema_statement(sql):
                alone = SchemaModel()
                alone.observe(sql, db)
                model = models.setdefault(src, SchemaModel())
                info = statement_tables(strip_version_comments(sql), db or "")
                model.observe(sql, db, info)
                record += [dump(alone), [[list(t), model.columns(*t)] for t in info.updated]]
            if len(record) > 3:
                out.write(json.dumps(record, default=list) + "\n")
        for src, model in models.items():
            out.write(json.dumps(["final", src, dump(model)], default=list) + "\n")


def reach(corpus_path: str, out_path: str) -> None:
    """The policy bound's reach of every trigger, routine, event and package text."""
    from dumpfilter.rules.policy_bound import statement_reach

    body = re.compile(r"\s*(/\*!\d+\s*)?(CREATE|ALTER)\b.*\b(TRIGGER|PROCEDURE|FUNCTION|EVENT|PACKAGE)\b", re.I | re.S)
    with open(out_path, "w") as out:
        for line in open(corpus_path):
            _, db, sql = json.loads(line)
            if body.match(sql):
                r = statement_reach(sql, db or "")
                found = None if r is None else [sorted(r.tables), sorted(r.schemas), r.default_schema]
                out.write(json.dumps([sql[:200], db, found]) + "\n")


def texts(corpus_path: str, out_path: str) -> None:
    """The policy bound's reach and lint's function calls (each name called) of every text."""
    from dumpfilter.rules.lint_divergence import called
    from dumpfilter.rules.policy_bound import statement_reach
    from dumpfilter.rules.schema import SchemaModel

    with open(out_path, "w") as out:
        for line in open(corpus_path):
            _, db, sql = json.loads(line)
            r = statement_reach(sql, db or "")
            found = None if r is None else [sorted(r.tables), sorted(r.schemas), r.default_schema]
            words = {w.lower() for w in re.findall(r"\w+", sql)}
            model = SchemaModel(functions={(d, w): ((("x", w), "INSERT"),) for w in words for d in (db or "", "d")})
            calls = called(model, sql, db or "")
            out.write(json.dumps([sql[:200], db, found, sorted(w[0][1] for w in calls)]) + "\n")


def rules(out_path: str, texts_path: str = "") -> None:
    """The rule parser's answer or message per CHANGE statement: drawn (derandomized), or those of
    `texts_path` (an earlier output, so that both checkouts read the same texts)."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    from dumpfilter.errors import DumpFilterError
    from dumpfilter.rules.parse import parse_filter_statement

    def answer(text: str) -> str:
        try:
            return repr(parse_filter_statement(text))
        except DumpFilterError as exc:
            return str(exc)

    with open(out_path, "w") as out:
        if texts_path:
            for line in open(texts_path):
                text = json.loads(line)[0]
                out.write(json.dumps([text, answer(text)]) + "\n")
            return
        pieces = ["REPLICATE_DO_DB", "REPLICATE_WILD_DO_TABLE", "REPLICATE_REWRITE_DB", "REPLICATE_DO_TABLE", " = ",
                  "(", ")", ",", "'db.%'", "`a``b`", "`x", "'q", '"s"', "/* c */", "/* c", "-- c\n", "#c\n", "db1.t",
                  "\u00a0", "é", " FOR CHANNEL ", "'ch'", "->", ".", "\\", "''", "``", "MASTER_HOST='h', ",
                  "REPLICATE_DO_DB='a,b'", "REPLICATE_REWRITE_DB='a->b'", "'x\\'", "/*!50003 ", "*/", ";", " "]
        drawn = st.lists(st.sampled_from(pieces) | st.text(max_size=2), max_size=14).map("".join)
        heads = ["CHANGE REPLICATION FILTER ", "CHANGE REPLICATION FILTER REPLICATE_DO_DB = (",
                 "CHANGE REPLICATION FILTER REPLICATE_WILD_DO_TABLE = (", "CHANGE MASTER TO ", "CHANGE BINLOG DO "]

        @settings(max_examples=20000, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(st.sampled_from(heads), drawn, st.sampled_from(["", ")", ") FOR CHANNEL 'c'"]))
        def one(head: str, tail: str, end: str) -> None:
            out.write(json.dumps([head + tail + end, answer(head + tail + end)]) + "\n")

        one()


if __name__ == "__main__":
    sys.path.insert(0, ".")
    {"corpus": corpus, "answers": answers, "reach": reach, "texts": texts, "rules": rules}[sys.argv[1]](*sys.argv[2:])
