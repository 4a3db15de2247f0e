"""Coverage-guided fuzz targets (atheris, libFuzzer) for the Python side and its boundary with the
compiled core: whole binlog files (the core scanner and assembler through the filter, the
Python reader, decoders, grouping and decisions), every rule syntax, and the Register RPC's
message as the service receives it. Hypothesis (test_fuzz_*.py) draws from grammars; these mutate
bytes with coverage feedback, starting from corpora of real fixture binlogs and generated ones.

    python tests/fuzz/atheris_targets.py TARGET [libFuzzer flags...]   (TARGET: binlog, rules, rpc, policy)

tests/fuzz/test_atheris.py runs each target for ATHERIS_RUNS inputs (-runs), each input under
FUZZ_CPU_BOUND seconds of its thread's CPU time (a hang: libFuzzer's -timeout). The one rule:
nothing but the project's own errors (DumpFilterError) may escape, and no input may take long;
libFuzzer reports anything else as a crash and exits non-zero."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "fixtures" / "real_binlogs"

with atheris.instrument_imports(include=["dumpfilter"]):
    from dumpfilter.codec import BinlogReader, group_transactions
    from dumpfilter.errors import DumpFilterError
    from tests.support.filtering import filter_bytes
    from dumpfilter.topology import parse_topology
    from dumpfilter.rules.evaluate import RuleEngine
    from dumpfilter.rules import policy_bound
    from dumpfilter.rules.lint import Linter
    from dumpfilter.rules.mycnf import startup_filters_from_file
    from dumpfilter.rules.parse import StartupFilters, parse_filter_statement
    from dumpfilter.rules.ruleset import RuleSet, Settings
    from dumpfilter.rules.transaction_filter import TransactionFilter
    from dumpfilter.master.serve.grpc_server import registration_from_proto
    from dumpfilter.master.service import DumpService

ENGINES = [RuleEngine(RuleSet(do_db=("db1",)), Settings(flavor="mariadb")),
           RuleEngine(RuleSet(wild_ignore_table=("%.t_",), rewrite_db=(("db2", "x"),)), Settings()),
           RuleEngine(RuleSet(effective_do=("db1.%",)), Settings(semantics="effective"))]


# -- binlog: whole files --------------------------------------------------------------------------
def _decode(event) -> None:
    for name in ("query", "db", "sql", "table_names", "table_id", "gtid", "gtid_set", "rotate"):
        with contextlib.suppress(AttributeError):  # not this event type's field
            getattr(event, name)


def binlog(data: bytes) -> None:
    if len(data) < 2:
        return
    flags, body = data[0], b"\xfebin" + data[1:]
    engine = ENGINES[flags % len(ENGINES)]
    verify = bool(flags & 4)
    try:
        reader = BinlogReader(io.BytesIO(body), "<fuzz>", verify_checksums=verify)
        tfilter = TransactionFilter(engine)
        linter = Linter(RuleEngine(engine.rules, engine.settings), flavor=engine.settings.flavor)
        for txn in group_transactions(reader):
            for event in txn.events:
                _decode(event)
            tfilter.filter(txn)
            linter.feed("<fuzz>", txn)
    except DumpFilterError:
        pass
    with contextlib.suppress(DumpFilterError):  # the compiled core: scanner, decisions, assembly
        filter_bytes(body, TransactionFilter(engine), verify_checksums=verify)


def binlog_corpus(directory: Path) -> None:
    from dumpfilter.workload.generator import WorkloadSpec, generate

    gen = directory / "generated"
    gen.mkdir(exist_ok=True)
    for fmt in ("row", "statement", "mixed"):
        generate(WorkloadSpec(seed=7, transactions=20, binlog_format=fmt, max_binlog_size=1 << 20), gen, f"g{fmt}")
    files = sorted(gen.glob("g*.0*"))
    if SHARED.is_dir():
        files += sorted(p for p in SHARED.rglob("*") if p.is_file() and not p.name.endswith((".md", ".gz", ".index")))
    for i, path in enumerate(files):
        raw = path.read_bytes()[4:8192]
        (directory / f"seed{i}").write_bytes(bytes([i % 8]) + raw)


# -- rules: every syntax ----------------------------------------------------------------------------
def _exercise(rules, settings) -> None:
    engine = RuleEngine(rules, settings)
    for db, table in (("db1", "t1"), ("a%b", "c_d"), ("", "")):
        engine.table_kept(db, table)
        engine.decide_table(db, table)
    engine.decide_statement("INSERT INTO db1.t1 VALUES (1)", "db1")


def rules(data: bytes) -> None:
    if not data:
        return
    kind, text = data[0] % 5, data[1:].decode("utf-8", "surrogateescape")
    settings = Settings(flavor=("mysql", "mariadb")[data[0] >> 7], semantics="effective" if kind == 1 else "mysql")
    try:
        if kind in (0, 1):  # CHANGE REPLICATION FILTER / WL#2516 CHANGE MASTER
            _exercise(parse_filter_statement(text).apply(RuleSet()), settings)
        elif kind == 2:  # mysqld options, one name=value a line
            options = [tuple(line.partition("=")[::2]) for line in text.splitlines()]
            _exercise(StartupFilters.from_options(options).for_channel(""), settings)
        elif kind == 3:  # my.cnf
            with tempfile.NamedTemporaryFile("wb", suffix=".cnf") as f:
                f.write(data[1:])
                f.flush()
                _exercise(startup_filters_from_file(f.name).for_channel(""), settings)
        else:  # the topology file
            topology = parse_topology(text, "fuzz.toml")
            for slave in getattr(topology, "slaves", ()):
                _exercise(slave.rules, slave.settings)
    except DumpFilterError:
        pass


def rules_corpus(directory: Path) -> None:
    seeds = [b"\x00CHANGE REPLICATION FILTER REPLICATE_DO_DB = (db1, `db 2`), REPLICATE_WILD_DO_TABLE = ('db%.t_')",
             b"\x80CHANGE REPLICATION FILTER REPLICATE_REWRITE_DB = ((a, b)) FOR CHANNEL 'c'",
             b"\x01CHANGE MASTER 'c' TO DO='db1.%', IGNORE='%.table2', REWRITE='db1.%->db2.%'",
             b"\x02replicate-do-db=db1\nreplicate-wild-ignore-table=db%.t%\nreplicate-rewrite-db=a->b",
             b"\x03[mysqld]\nreplicate-do-db = db1\n!include x.cnf\n[mariadbd]\nreplicate_ignore_table=a.b\n",
             b"\x04[master]\nbinlogs = 'data'\n[[slaves]]\nname = 's'\nserver_id = 2\nrules = ['replicate-do-db=db1']\n"]
    for i, seed in enumerate(seeds):
        (directory / f"seed{i}").write_bytes(seed)


# -- policy: the bound's reading of a body (the core's, the general path's where it declines) ---------
_BODY_HEADS = ["CREATE TRIGGER db1.tr AFTER INSERT ON t FOR EACH ROW ", "CREATE PROCEDURE p(IN a INT) ",
               "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO ", "CREATE FUNCTION f() RETURNS INT ", ""]


def policy(data: bytes) -> None:
    """Hostile text: answered (a reach, or None: not sent), never raised."""
    if not data:
        return
    sql = _BODY_HEADS[data[0] % len(_BODY_HEADS)] + data[1:].decode("utf-8", "surrogateescape")
    policy_bound.statement_reach(sql, "db1")


def policy_corpus(directory: Path) -> None:
    seeds = [b"\x00BEGIN UPDATE t SET a = NEW.a WHERE id = OLD.id; IF NEW.x > 0 THEN DELETE FROM s.b; END IF; END",
             b"\x00FOLLOWS o BEGIN INSERT INTO t VALUES (f(1)); REPLACE INTO `a``b` SET c = 'x;y'; END",
             b"\x01BEGIN DECLARE x INT; SELECT c INTO x FROM secret.u; CALL q(NEXTVAL(s)); END",
             b"\x02UPDATE t SET a = a + 1 /* c */; DELETE FROM t WHERE b = \"q\".\"r\"",
             b"\x03RETURN (SELECT 1)"]
    for i, seed in enumerate(seeds):
        (directory / f"seed{i}").write_bytes(seed)


# -- rpc: the Register message as the service receives it ------------------------------------------
_SERVICE = None


def rpc(data: bytes) -> None:
    global _SERVICE
    from google.protobuf.message import DecodeError

    from dumpfilter.v1 import dump_pb2

    if _SERVICE is None:
        directory = Path(tempfile.mkdtemp(prefix="atheris-rpc-"))
        from dumpfilter.workload.generator import WorkloadSpec, generate

        generate(WorkloadSpec(seed=3, transactions=5), directory)
        _SERVICE = DumpService(directory, lint_bytes=0)
    try:
        request = dump_pb2.RegisterRequest.FromString(data)
    except DecodeError:
        return  # grpc refuses what does not parse before the service sees it
    try:
        _SERVICE.register(registration_from_proto(request))
        _SERVICE.stats(request.server_id)
        _SERVICE.list_filters(request.server_id)
        _SERVICE.unregister(request.server_id)
    except DumpFilterError:
        pass


def rpc_corpus(directory: Path) -> None:
    from dumpfilter.v1 import dump_pb2

    rule = dump_pb2.FilterRule(type=dump_pb2.REPLICATE_WILD_DO_TABLE, value="db%.t_")
    filters = [dump_pb2.ChannelFilters(rules=dump_pb2.RuleList(rules=[rule]))]
    for i, req in enumerate([dump_pb2.RegisterRequest(server_id=5, filters=filters, flavor="mariadb"),
                             dump_pb2.RegisterRequest(server_id=7, channels=["", "c"], filters=filters,
                                                      lower_case_table_names=1, skip_policy=2)]):
        (directory / f"seed{i}").write_bytes(req.SerializeToString())


TARGETS = {"binlog": (binlog, binlog_corpus), "rules": (rules, rules_corpus), "rpc": (rpc, rpc_corpus),
           "policy": (policy, policy_corpus)}
CPU_BOUND = float(os.environ.get("FUZZ_CPU_BOUND", "5.0"))


def cpu_bounded(target):
    """The target, failing an input that uses more than CPU_BOUND seconds of this thread's CPU
    time (wall-clock time is the machine's load as much as the input's)."""
    def run(data: bytes) -> None:
        started = time.thread_time()
        target(data)
        used = time.thread_time() - started
        if used >= CPU_BOUND:
            raise AssertionError(f"one input used {used:.2f} s of CPU (bound {CPU_BOUND} s)")
    return run


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in TARGETS:
        sys.exit(f"usage: {argv[0]} {{{','.join(TARGETS)}}} [libFuzzer flags]")
    target, make_corpus = TARGETS[argv[1]]
    corpus = Path(os.environ.get("ATHERIS_CORPUS") or tempfile.mkdtemp(prefix=f"atheris-{argv[1]}-"))
    corpus.mkdir(parents=True, exist_ok=True)
    if not any(corpus.iterdir()):
        make_corpus(corpus)
    atheris.Setup([argv[0], *argv[2:], str(corpus)], cpu_bounded(target))
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
