"""`dumpfilter master serve|filters|status|change-filter`: the gRPC dump service over a binlog
directory (WL#2387 master side), and the operator's view of a running one."""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading

from dumpfilter.errors import DumpFilterError
from dumpfilter.cli.master_client import add_connection_options, server_id_type


def port_type(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is out of range: a TCP port is 0 to 65535")
    return value


def register(subparsers) -> None:
    from dumpfilter.master.lint_jobs import LINT_MAX_BYTES

    parser = subparsers.add_parser("master", help="run the master-side dump service (gRPC)")
    sub = parser.add_subparsers(dest="master_command", metavar="SUBCOMMAND")
    sub.required = True
    serve = sub.add_parser("serve", help="serve a binlog directory to registered slaves",
                           description="Tails DIR (a live server may be writing it) and streams each registered "
                                       "slave only what its rules and the master policy keep.")
    serve.add_argument("--binlog-dir", required=True, metavar="DIR")
    serve.add_argument("--listen", default="127.0.0.1:4306", metavar="HOST:PORT",
                       help="address to listen on (default 127.0.0.1:4306; port 0 picks a free port)")
    serve.add_argument("--policy", metavar="FILE", help="TOML master policy: what each slave identity may receive")
    serve.add_argument("--tls-cert", metavar="FILE", help="TLS: the master's certificate (PEM)")
    serve.add_argument("--tls-key", metavar="FILE", help="TLS: the master's private key (PEM)")
    serve.add_argument("--tls-client-ca", metavar="FILE",
                       help="mTLS: require client certificates signed by this CA; a certificate's CN is "
                            "the slave's policy identity (no password needed)")
    serve.add_argument("--metrics-port", type=port_type, metavar="N",
                       help="serve Prometheus /metrics on 127.0.0.1:N (default: no metrics; 0 picks a free port)")
    serve.add_argument("--max-streams", type=int, default=64, help="concurrent Dump streams (default 64)")
    serve.add_argument("--max-streams-per-identity", type=int, metavar="N",
                       help="concurrent Dump streams of one policy identity (default: no limit; a policy "
                            "entry's max_streams wins)")
    serve.add_argument("--stall-timeout", type=float, default=60.0, metavar="SECONDS",
                       help="end a stream whose slave has taken no batch for this long (default 60; 0: never)")
    serve.add_argument("--no-verify-checksums", dest="verify_checksums", action="store_false",
                       help="do not check event CRC32s while reading the binlog (MySQL's default "
                            "source_verify_checksum=OFF); slaves still check what they receive")
    serve.add_argument("--schema", metavar="FILE|mysql://USER@HOST:PORT",
                       help="the master's schema before its binlog (mysqldump --no-data file or a server): "
                            "multi-table UPDATE decisions use its columns and triggers")
    serve.add_argument("--lint-max-mb", type=float, default=LINT_MAX_BYTES / (1 << 20), metavar="MB",
                       help="lint each new slave's rules over the binlog in the background when it holds at most "
                            "this many MiB; the predictions reach the slave in its Register reply or stream and "
                            "`master status` (default %(default)g; 0: off)")
    serve.add_argument("--grace", type=float, default=5.0, help="seconds to drain streams at shutdown")
    serve.add_argument("--mysql-listen", metavar="HOST:PORT",
                       help="also serve real MySQL/MariaDB replicas (CHANGE MASTER TO) over the MySQL protocol here")
    serve.add_argument("--source", metavar="mysql://USER:PASS@HOST:PORT",
                       help="replicate a live primary into --binlog-dir (a local binlog series) and serve from it")
    serve.add_argument("--source-file", metavar="NAME", help="--source: start the series at this primary binlog")
    serve.add_argument("--source-pos", type=int, default=4, metavar="N",
                       help="--source: start position (4: the series starts at the beginning of a file)")
    serve.add_argument("--source-gtid", metavar="GTID_POS",
                       help="--source: start at the primary file a MariaDB replica at this GTID position needs")
    serve.add_argument("--source-server-id", type=int, default=2387, metavar="N",
                       help="--source: the server_id the master registers with on the primary (default 2387)")
    serve.add_argument("--replicas", metavar="TOPOLOGY",
                       help="topology TOML whose [[slaves]] give each real replica's rules by server_id (or user)")
    serve.set_defaults(func=serve_command)

    filters = sub.add_parser("filters", help="the filter tables of a running master (performance_schema style)",
                             description="The rows of performance_schema.replication_applier_filters and "
                                         "replication_applier_global_filters, one row per slave and channel.")
    add_connection_options(filters)
    filters.add_argument("--server-id", type=server_id_type, default=0, help="only this slave (default: every slave)")
    filters.add_argument("--json", action="store_true", help="print JSON instead of tables")
    filters.set_defaults(func=filters_command)

    status = sub.add_parser("status", help="SHOW SLAVE HOSTS of a running master, with each slave's stream counters")
    add_connection_options(status)
    status.add_argument("--server-id", type=server_id_type, default=0, help="only this slave (default: every slave)")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.set_defaults(func=status_command)

    change = sub.add_parser("change-filter", help="CHANGE REPLICATION FILTER on a registered slave, live",
                            description="The change takes effect at the next transaction boundary of the "
                                        "slave's running stream (at once without one); prints that position.")
    add_connection_options(change)
    change.add_argument("--server-id", type=server_id_type, required=True, help="the slave to change")
    change.add_argument("statement", metavar="SQL",
                        help="CHANGE REPLICATION FILTER ... [FOR CHANNEL 'c'] (or WL#2516 CHANGE MASTER ... TO DO=...)")
    change.add_argument("--wait", type=float, default=30.0, metavar="SECONDS",
                        help="how long to wait for the stream to reach a transaction boundary (default 30)")
    change.add_argument("--json", action="store_true", help="print JSON")
    change.set_defaults(func=change_filter_command)


def _schema(args: argparse.Namespace):
    from dumpfilter.rules.options import schema_from_args

    return schema_from_args(args) if args.schema else None


def serve_command(args: argparse.Namespace) -> int:
    from dumpfilter.master.grpc_server import create_server
    from dumpfilter.master.metrics import serve_metrics

    replicas = _mysql_options(args)
    replicator = _source_replicator(args)
    try:
        master, port = create_server(args.binlog_dir, args.listen, policy=args.policy, tls_cert=args.tls_cert,
                                     tls_key=args.tls_key, tls_client_ca=args.tls_client_ca,
                                     max_streams=args.max_streams,
                                     max_streams_per_identity=args.max_streams_per_identity,
                                     stall_timeout=args.stall_timeout or None,
                                     verify_checksums=args.verify_checksums, schema=_schema(args),
                                     lint_bytes=int(max(0.0, args.lint_max_mb) * (1 << 20)))
    except BaseException:
        if replicator is not None:
            replicator.stop()
        raise
    if args.metrics_port is not None:
        try:
            serve_metrics(master.service, args.metrics_port)
        except OSError as exc:
            master.stop(0)
            raise DumpFilterError(f"--metrics-port {args.metrics_port}: cannot listen on "
                                  f"127.0.0.1:{args.metrics_port}: {exc.strerror or exc}") from None
    host = args.listen.rpartition(":")[0]
    print(f"dumpfilter master: serving {args.binlog_dir} on {host}:{port}", file=sys.stderr, flush=True)
    endpoint = _mysql_endpoint(args, master, replicas)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    print("dumpfilter master: shutting down, draining streams", file=sys.stderr, flush=True)
    if endpoint is not None:
        endpoint.stop()
    master.stop(args.grace)
    if replicator is not None:
        replicator.stop()
    return 0


def _source_replicator(args: argparse.Namespace):
    """--source: the thread that replicates the live primary into --binlog-dir (started, with
    the series' first file on disk), or None."""
    if not args.source:
        if args.source_file or args.source_gtid or args.source_pos != 4:
            raise DumpFilterError("--source-file, --source-pos and --source-gtid need --source")
        return None
    from dumpfilter.master.mysql_protocol.binlog_mirror import BinlogMirror
    from dumpfilter.master.mysql_protocol.source import SourceReplicator, SourceURL

    if args.source_pos != 4:
        raise DumpFilterError(f"--source-pos {args.source_pos}: the local series keeps the primary's offsets, so it "
                              "starts at the beginning of a file (4); use --source-file or --source-gtid")
    if args.source_file and args.source_gtid:
        raise DumpFilterError("--source-file and --source-gtid: give one start")
    url = SourceURL.parse(args.source)
    replicator = SourceReplicator(url, BinlogMirror(args.binlog_dir), server_id=args.source_server_id,
                                  start_file=args.source_file, start_gtid=args.source_gtid)
    replicator.start()
    if not replicator.wait_ready(30):
        replicator.stop()
        raise DumpFilterError(f"--source {url}: no binlog received ({replicator.last_error or 'timed out'})")
    print(f"dumpfilter master: replicating {url} into {args.binlog_dir}", file=sys.stderr, flush=True)
    return replicator


def _mysql_options(args: argparse.Namespace):
    """--mysql-listen and --replicas, checked before anything starts: the replica map, or None."""
    if not args.mysql_listen:
        if args.replicas:
            raise DumpFilterError("--replicas names real replicas' rules: it needs --mysql-listen")
        return None
    from dumpfilter.master.grpc_server import parse_listen
    from dumpfilter.master.mysql_protocol import ReplicaMap

    try:
        parse_listen(args.mysql_listen)
    except DumpFilterError as exc:
        raise DumpFilterError(str(exc).replace("--listen", "--mysql-listen", 1)) from None
    return ReplicaMap.load(args.replicas)


def _mysql_endpoint(args: argparse.Namespace, master, replicas):
    """The MySQL-protocol endpoint beside gRPC (--mysql-listen), over the same dump service."""
    if replicas is None:
        return None
    from dumpfilter.master.mysql_protocol import MysqlEndpoint

    try:
        endpoint = MysqlEndpoint(master.service, args.mysql_listen, replicas=replicas)
    except DumpFilterError:
        master.stop(0)
        raise
    host = args.mysql_listen.rpartition(":")[0]
    print(f"dumpfilter master: MySQL protocol for real replicas on {host}:{endpoint.port}", file=sys.stderr, flush=True)
    return endpoint


# -- the operator's commands ----------------------------------------------------------------
STATUS_COLUMNS = ["Server_id", "Host", "Channels", "Streaming", "Skip_policy", "Position", "Bytes_behind",
                  "Bytes_read", "Bytes_sent", "Kept_bytes", "Overhead_bytes", "Sent_pct", "Lint"]


def filters_command(args: argparse.Namespace) -> int:
    from dumpfilter.cli.master_client import MasterClient, format_table

    with MasterClient.from_args(args) as client:
        tables = client.list_filters(args.server_id)
    if args.json:
        print(json.dumps(tables, indent=1))
        return 0
    for name, rows in tables.items():
        print(f"performance_schema.{name}")
        print(format_table(rows))
    return 0


def _lint_cell(row: dict) -> str:
    """'no break', 'N break(s)', or the job's state (pending, off, not run)."""
    if row["Lint"] != "done":
        return row["Lint"]
    breaks = [w for w in row["Lint_warnings"] if w.startswith("lint: a replica")]
    return f"{len(breaks)} break(s)" if breaks else "no break"


def status_command(args: argparse.Namespace) -> int:
    from dumpfilter.cli.master_client import MasterClient, format_table

    with MasterClient.from_args(args) as client:
        rows = client.status(args.server_id)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(format_table([{**r, "Lint": _lint_cell(r)} for r in rows], STATUS_COLUMNS))
    end = next((r["Binlog_end"] for r in rows if r["Binlog_end"]), "")
    if end:
        print(f"master binlog end: {end}")
    for row in rows:
        for warning in row["Lint_warnings"]:
            print(f"server_id {row['Server_id']}: {warning}")
    return 0


def change_filter_command(args: argparse.Namespace) -> int:
    from dumpfilter.cli.master_client import MasterClient

    with MasterClient.from_args(args) as client:
        result = client.change_filter(args.server_id, args.statement, timeout=args.wait)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    at = result["effective_at"]
    where = f"{at['file']}:{at['pos']}" if at else "the slave's first position (it has not streamed yet)"
    how = ("at the transaction boundary of its running stream" if result["applied_to_running_stream"]
           else "at once (no running stream): from its last position")
    print(f"server_id {args.server_id}: change took effect {how}, {where}")
    for effective in result["effective"]:
        channel = effective["channel"]
        # render() lists every type; the empty ones say nothing here
        rules = re.sub(r",? ?REPLICATE_\w+ = \(\)", "", effective["change_replication_filter"])
        rules = rules.replace("FILTER,", "FILTER") if not rules.endswith("FILTER") else "(no filter rules)"
        print(f"  channel {channel!r}: {rules}")
        if effective["policy_allow"]:
            print(f"    master policy allows: {', '.join(effective['policy_allow'])}")
    return 0
