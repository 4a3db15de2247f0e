"""`dumpfilter binlog inspect` (one line or JSON object per event) and `dumpfilter binlog generate`
(the built-in workload as real binlog files)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from dumpfilter.cli.options import (add_json_option, add_out_dir, count_in, json_sink, number_in, series_basename,
                                    size_in)
from dumpfilter.codec import Event, EventType
from dumpfilter.binlogs import BinlogFile, input_paths
from dumpfilter.workload import WorkloadSpec, generate
from dumpfilter.workload.generator import FLAVORS, FORMATS

if TYPE_CHECKING:
    from collections.abc import Callable

    from dumpfilter.cli.options import Subparsers


def register(subparsers: Subparsers) -> None:
    binlog = subparsers.add_parser("binlog", help="read binlog files")
    sub = binlog.add_subparsers(dest="binlog_command", metavar="ACTION", required=True)
    inspect = sub.add_parser("inspect", help="list events: offset, type, size, log_pos, db/table/SQL/GTID")
    inspect.add_argument("files", nargs="+", metavar="FILE", help="binlog files or directories (.gz is read too)")
    add_json_option(inspect, "the events, one JSON object a line")
    inspect.add_argument("--no-verify-checksums", dest="verify_checksums", action="store_false",
                         help="do not check event CRC32s")
    inspect.set_defaults(func=run_inspect)

    gen = sub.add_parser("generate", help="write the built-in deterministic workload as real binlog files")
    add_out_dir(gen, "directory for <basename>.NNNNNN and <basename>.index (created if missing)", required=True)
    gen.add_argument("--basename", type=series_basename, default="master-bin", help="binlog base name (default %(default)s)")
    gen.add_argument("--seed", type=_workload("seed"), default=1,
                     help="random seed: the same options and seed give the same bytes (default %(default)s)")
    gen.add_argument("--schemas", type=_workload("schemas"), default=6, help="databases db1..dbN (default %(default)s)")
    gen.add_argument("--tables-per-schema", type=_workload("tables_per_schema"), default=4,
                     help="tables t1..tN in each database (default %(default)s)")
    gen.add_argument("--transactions", type=_workload("transactions"), default=2000,
                     help="transactions to write, DDL included (default %(default)s: about 1 MB in ROW format)")
    gen.add_argument("--binlog-format", choices=FORMATS, default="row", type=str.lower,
                     help="row, statement or mixed, as binlog_format (default %(default)s)")
    gen.add_argument("--flavor", choices=FLAVORS, default="mariadb",
                     help="the server whose binlog format is written: GTIDs, checksums, event types "
                          "(default %(default)s)")
    gen.add_argument("--ddl-share", type=_SHARE, default=0.02,
                     help="share of transactions that are DDL, 0..1 (default %(default)s)")
    gen.add_argument("--cross-db-share", type=_SHARE, default=0.1,
                     help="share of statements changing a table outside the default database, 0..1 "
                          "(default %(default)s)")
    gen.add_argument("--max-binlog-size", type=_workload("max_binlog_size", size_in), default=1 << 30, metavar="BYTES",
                     help="rotate to the next file after this many bytes, as max_binlog_size: 4K to 1G "
                          "(default %(default)s = 1 GiB)")
    gen.set_defaults(func=run_generate)


_SHARE = number_in(0, 1, what="a share")


def _workload(key: str, kind: Callable[[int, int], Callable[[str], Any]] = count_in) -> Callable[[str], Any]:
    """An argparse type: `kind` in the range a topology's [master.workload] gives `key` (the one home:
    dumpfilter.topology.WORKLOAD_RANGES, imported when the option is given, not at every start):
    `--schemas 100000` is the option's one line, not a 70 MB binlog."""
    def parse(text: str) -> Any:
        from dumpfilter.topology import WORKLOAD_RANGES

        return kind(*WORKLOAD_RANGES[key])(text)

    return parse


def describe(event: Event, table_names: dict[int, tuple[str, str]]) -> dict[str, object]:
    """The inspect fields of one event; `table_names` maps table ids seen so far to (db, table)."""
    row: dict[str, object] = {"pos": event.pos, "type": event.type_name, "size": event.size, "log_pos": event.log_pos,
           "db": None, "table": None, "sql": None, "gtid": None}
    t = event.type_code
    if event.is_query:
        row.update(db=event.db, sql=event.sql)
    elif t == EventType.TABLE_MAP:
        table_id, db, table = event.table_map
        table_names[table_id] = (db, table)
        row.update(db=db, table=table, table_id=table_id)
    elif event.is_rows:
        names: tuple[str | None, str | None] = table_names.get(event.table_id, (None, None))
        row.update(db=names[0], table=names[1], table_id=event.table_id)
    elif event.is_gtid:
        row["gtid"] = event.gtid
    elif t in (EventType.ANNOTATE_ROWS, EventType.ROWS_QUERY):
        row["sql"] = event.sql
    elif t == EventType.ROTATE:
        position, next_file = event.rotate
        row["next"] = f"{next_file}:{position:d}"
    elif t == EventType.FORMAT_DESCRIPTION:
        table_names.clear()
    elif t in (EventType.PREVIOUS_GTIDS, EventType.MARIADB_GTID_LIST):
        row["gtid"] = str(event.gtid_set)
    return row


def _text_line(row: dict[str, object]) -> str:
    parts = [f"{row['pos']:>10}", f"{row['type']:<22}", f"size={row['size']:<7}", f"log_pos={row['log_pos']}"]
    if row.get("gtid") is not None:
        parts.append(f"gtid={row['gtid']}")
    if row.get("table_id") is not None:
        parts.append(f"table_id={row['table_id']}")
    if row.get("table") is not None:
        parts.append(f"{row['db']}.{row['table']}")
    elif row.get("db") is not None:
        parts.append(f"db={row['db']!r}")
    if row.get("sql") is not None:
        sql = " ".join(str(row["sql"]).split())
        parts.append(sql[:80] + ("…" if len(sql) > 80 else ""))
    if row.get("next"):
        parts.append(f"next={row['next']}")
    return "  ".join(parts)


def run_inspect(args: argparse.Namespace) -> int:
    from dumpfilter.errors import MalformedEventError

    paths = input_paths(args.files)  # every file once, an index's every line there: before any output
    with json_sink(args) as sink:
        text = None if sink is sys.stdout else sys.stdout  # --json alone: JSON lines instead of the text
        for path in paths:
            if text is not None and len(paths) > 1:
                print(f"# {path}", file=text)
            table_names: dict[int, tuple[str, str]] = {}
            try:
                for event in BinlogFile(path, verify_checksums=args.verify_checksums):
                    row = describe(event, table_names)
                    if text is not None:
                        text.write(_text_line(row) + "\n")
                    if sink is not None:
                        row["file"] = str(path)
                        sink.write(json.dumps(row, ensure_ascii=False) + "\n")
            except MalformedEventError as exc:  # found by a decoder, which knows no file
                raise exc.in_file(str(path)) from None
    return 0


def run_generate(args: argparse.Namespace) -> int:
    from dumpfilter.cli.output_paths import writable_dir

    writable_dir(args.out)  # (every number was read in its range: _workload, _SHARE)
    spec = WorkloadSpec(seed=args.seed, schemas=args.schemas, tables_per_schema=args.tables_per_schema,
                        transactions=args.transactions, binlog_format=args.binlog_format, flavor=args.flavor,
                        ddl_share=args.ddl_share, cross_db_share=args.cross_db_share,
                        max_binlog_size=args.max_binlog_size)
    paths = generate(spec, args.out, args.basename)
    total = sum(p.stat().st_size for p in paths)
    print(f"wrote {len(paths)} binlog file(s), {total} bytes, to {args.out} "
          f"({spec.schemas} schemas, {spec.transactions} transactions, {spec.binlog_format}, {spec.flavor})")
    return 0
