"""A hypothesis grammar of MySQL/MariaDB statements over allowed (shop.t1, shop.t2) and forbidden
(secret.s1, secret.s2, and mysql.* through account statements) objects, each drawn statement with
the truth of what it reaches: the databases of every table, routine and sequence it names (an
unqualified name resolved in its default database). Forbidden literals carry `pw-`."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

ALLOWED_DB, FORBIDDEN_DB = "shop", "secret"
TABLES = {ALLOWED_DB: ("t1", "t2"), FORBIDDEN_DB: ("s1", "s2")}
# Names that exist only in the forbidden database: any of them in a text names a forbidden object.
FORBIDDEN_WORDS = ("secret", "s1", "s2", "mysql")


@dataclass(frozen=True)
class Drawn:
    sql: str
    default_db: str
    reached: frozenset  # databases reached
    written: tuple      # (db, table) written (a ROW binlog has Table_maps for them)
    # An Annotate_rows text does not carry the default database: it can be told (from the
    # Table_maps) when a bare name is written, and is needed only when some name is bare.
    annotation_resolvable: bool = True

    @property
    def allowed(self) -> bool:
        return self.reached <= {ALLOWED_DB}


class _Context:
    def __init__(self, draw, default_db: str):
        self.draw, self.default_db, self.reached, self.written = draw, default_db, set(), []
        self.scope = default_db  # where a bare name resolves: the body of a routine or trigger runs in its schema
        self.bare = self.bare_written = False

    def ref(self, write: bool = False, suffix: str = "") -> str:
        """A table reference: qualified (plain or backquoted), or bare when it is in the default db."""
        db = self.draw(st.sampled_from(sorted(TABLES)))
        table = self.draw(st.sampled_from(TABLES[db])) + suffix
        self.reached.add(db)
        if write:
            self.written.append((db, table))
        form = self.draw(st.sampled_from(["bare", "dotted", "quoted"] if db == self.scope else ["dotted", "quoted"]))
        if form == "bare":
            self.bare = True
            self.bare_written = self.bare_written or write
            return table
        return f"{db}.{table}" if form == "dotted" else f"`{db}`.`{table}`"

    def literal(self) -> str:
        n = self.draw(st.integers(0, 99))
        return f"'pw-{n}'" if FORBIDDEN_DB in self.reached else f"'ok-{n}'"

    def expr(self) -> str:
        kind = self.draw(st.sampled_from(["literal", "literal", "subquery", "function", "nextval", "builtin"]))
        if kind == "subquery":
            return f"(SELECT c FROM {self.ref()} WHERE c <> {self.literal()} LIMIT 1)"
        if kind == "function":
            db = self.draw(st.sampled_from(sorted(TABLES)))
            self.reached.add(db)
            return f"{db}.f({self.literal()})"
        if kind == "nextval":
            return f"NEXTVAL({self.ref()})"
        if kind == "builtin":
            return f"CONCAT({self.literal()}, NOW())"
        return self.literal()


_FORMS = ("insert", "insert_odku", "insert_select", "cte_insert", "update_sub", "update_multi", "delete",
          "replace", "set_statement", "ctas", "view", "trigger", "procedure", "call", "load", "account")


@st.composite
def statements(draw) -> Drawn:
    default_db = draw(st.sampled_from([ALLOWED_DB, FORBIDDEN_DB]))
    c = _Context(draw, default_db)
    form = draw(st.sampled_from(_FORMS))
    if form == "insert":
        target = c.ref(write=True)
        sql = f"INSERT INTO {target} VALUES (1, {c.expr()})"
    elif form == "insert_odku":
        target = c.ref(write=True)
        sql = f"INSERT INTO {target} VALUES (1, {c.expr()}) ON DUPLICATE KEY UPDATE c = {c.expr()}"
    elif form == "insert_select":
        target = c.ref(write=True)
        sql = f"INSERT INTO {target} SELECT id, c FROM {c.ref()} WHERE c <> {c.literal()}"
    elif form == "cte_insert":
        source, target = c.ref(), c.ref(write=True)
        sql = f"WITH w AS (SELECT id, c FROM {source}) INSERT INTO {target} SELECT * FROM w"
    elif form == "update_sub":
        target = c.ref(write=True)
        sql = f"UPDATE {target} SET c = {c.expr()} WHERE id IN (SELECT id FROM {c.ref()})"
    elif form == "update_multi":
        x, y = c.ref(write=True), c.ref(write=True)
        sql = f"UPDATE {x} AS x JOIN {y} AS y ON x.id = y.id SET x.c = {c.expr()}, y.c = {c.literal()}"
    elif form == "delete":
        target = c.ref(write=True)
        sql = f"DELETE FROM {target} WHERE c = {c.expr()}"
    elif form == "replace":
        target = c.ref(write=True)
        sql = f"REPLACE INTO {target} VALUES (2, {c.expr()})"
    elif form == "set_statement":
        target = c.ref(write=True)
        sql = f"SET STATEMENT max_statement_time = 10 FOR INSERT INTO {target} VALUES (3, {c.expr()})"
    elif form == "ctas":
        target = c.ref(write=True, suffix="_copy")
        sql = f"CREATE TABLE {target} AS SELECT c FROM {c.ref()} WHERE c <> {c.literal()}"
    elif form == "view":
        view = c.ref(suffix="_v")
        sql = f"CREATE VIEW {view} AS SELECT c FROM {c.ref()} WHERE c <> {c.literal()}"
    elif form == "trigger":  # the trigger lives in its table's schema, where its body runs
        db = draw(st.sampled_from(sorted(TABLES)))
        c.reached.add(db)
        table = f"{db}.{draw(st.sampled_from(TABLES[db]))}"
        c.scope = db
        sql = (f"CREATE TRIGGER {db}.tr AFTER INSERT ON {table} FOR EACH ROW "
               f"INSERT INTO {c.ref()} VALUES (NEW.id, {c.expr()})")
    elif form == "procedure":
        db = draw(st.sampled_from(sorted(TABLES)))
        c.reached.add(db)
        c.scope = db
        sql = f"CREATE PROCEDURE {db}.p() BEGIN INSERT INTO {c.ref()} VALUES (4, {c.expr()}); END"
    elif form == "call":
        db = draw(st.sampled_from(sorted(TABLES)))
        c.reached.add(db)
        sql = f"CALL {db}.p({c.expr()})"
    elif form == "load":
        target = c.ref(write=True)
        sql = f"LOAD DATA INFILE '/tmp/data.csv' INTO TABLE {target} (id, c) SET d = {c.expr()}"
    else:
        c.reached.add("mysql")
        n = draw(st.integers(0, 99))
        sql = draw(st.sampled_from([
            f"CREATE USER 'u{n}'@'%' IDENTIFIED BY 'pw-{n}'",
            f"ALTER USER 'u{n}'@'%' IDENTIFIED BY 'pw-{n}'",
            f"GRANT SELECT ON shop.* TO 'u{n}'@'%' IDENTIFIED BY 'pw-{n}'",
            f"SET PASSWORD FOR 'u{n}'@'%' = PASSWORD('pw-{n}')",
            f"RENAME USER 'u{n}'@'%' TO 'pw-{n}'@'%'",
            f"DROP USER 'u{n}'@'%'",
            f"CREATE ROLE r{n}",
            f"REVOKE ALL ON *.* FROM 'u{n}'@'%'",
            f"CREATE SERVER s{n} FOREIGN DATA WRAPPER mysql OPTIONS (USER 'u', PASSWORD 'pw-{n}')",
        ]))
    return Drawn(sql, default_db, frozenset(c.reached), tuple(c.written), c.bare_written or not c.bare)
