"""`dumpfilter slave run|status`: a slave that registers its filters with a dumpfilter master,
writes relay logs and optionally applies them; and its SHOW REPLICA STATUS."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.cli.options import add_json_option, count_in, emit_json, port_type, seconds_in, side_file, size_in
from dumpfilter.cli.master_client import add_connection_options, server_id_type
from dumpfilter.cli.process import terminate, tune_allocator
from dumpfilter.errors import DumpFilterError
from dumpfilter.rules.options import add_rule_options, add_schema_option, ruleset_from_args, schema_from_args
from dumpfilter import skip_policy
from dumpfilter.slave.relay_log import DEFAULT_COMMIT_INTERVAL

if TYPE_CHECKING:
    from dumpfilter.cli.options import Subparsers
    from dumpfilter.rules.schema import SchemaModel
    from dumpfilter.slave.node import Slave


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("slave", help="run a filtering slave, or show its status")
    sub = parser.add_subparsers(dest="slave_command", metavar="SUBCOMMAND", required=True)
    run = sub.add_parser("run", help="register with a master and stream into relay logs",
                         description="The rules are sent to the master, which filters; replicate-rewrite-db is "
                                     "applied here, on the slave, as WL#2387 specifies.")
    add_connection_options(run)
    run.add_argument("--server-id", required=True, type=server_id_type, help="this slave's server_id (1 to 4294967295)")
    run.add_argument("--report-host", default="", metavar="NAME",
                     help="the Host column of the master's SHOW SLAVE HOSTS (mysqld report_host; default none)")
    run.add_argument("--relay-log-dir", required=True, type=Path, metavar="DIR",
                     help="the relay log (relay-bin.NNNNNN, its index) and relay-log.info. The summary line's "
                          "'bytes relayed' are its events (but the Format_description and Rotate it writes "
                          "itself); 'bytes received' count what a replica is sent: placeholders, heartbeats and "
                          "the master's file headers too, which the relay log does not hold, and 'on the wire' "
                          "what came over gRPC (a run of placeholders or a stretch of skipped transactions sent "
                          "as one event)")
    run.add_argument("--skip-policy", choices=skip_policy.NAMES, default=skip_policy.DEFAULT,
                     help=f"what the master sends for skipped stretches (default {skip_policy.DEFAULT}, as MySQL)")
    run.add_argument("--placeholder-runs", action=argparse.BooleanOptionalAction, default=True,
                     help="under the placeholder policy, have each run of placeholders in a row sent as one that "
                          "counts them (default): the relay log, positions and counts are the same, the wire "
                          "carries fewer bytes. --no-placeholder-runs: every placeholder, as a replica gets it")
    run.add_argument("--skip-stretches", action=argparse.BooleanOptionalAction, default=True,
                     help="under the placeholder and empty-transaction policies, have skipped transactions in a "
                          "row sent as one event holding their GTIDs and XIDs or COMMITs (default): the relay log, "
                          "positions and counts are the same. --no-skip-stretches: each as a replica gets it")
    run.add_argument("--until-caught-up", action="store_true",
                     help="exit 0 once everything up to the master's current binlog end is relayed (and applied)")
    run.add_argument("--apply", metavar="mysql://USER@HOST:PORT", help="execute what is received on this server")
    run.add_argument("--relay-log-size", type=size_in(4096, 1 << 30), default=64 << 20, metavar="BYTES")
    run.add_argument("--relay-commit-interval", type=seconds_in(0, 3600), default=DEFAULT_COMMIT_INTERVAL, metavar="SECONDS",
                     help="group commit: record the position (fsync the relay log, then relay-log.info) at most "
                          f"once per this many seconds, covering every batch received meanwhile (default "
                          f"{DEFAULT_COMMIT_INTERVAL:g}: after each batch as soon as the disk allows). A batch that "
                          "reaches the master's end is recorded at once whatever the interval. A crash re-fetches "
                          "what was not recorded; the position is never ahead of durable relay data")
    run.add_argument("--heartbeat-period", type=seconds_in(0, 4_294_967), default=1.0, metavar="SECONDS")
    run.add_argument("--connect-retry", type=seconds_in(0, 31_536_000), default=1.0, metavar="SECONDS",
                     help="first wait after a failed attempt; doubles up to 30s (default 1)")
    run.add_argument("--connect-timeout", type=seconds_in(0, 31_536_000), metavar="SECONDS",
                     help="give up (exit 2) when the master cannot be reached for this long (default: never)")
    run.add_argument("--retry-count", type=count_in(0, (1 << 64) - 1), metavar="N",
                     help="give up (exit 2) after N failed attempts in a row (default: never)")
    run.add_argument("--net-timeout", type=seconds_in(0, 31_536_000), default=60.0, metavar="SECONDS",
                     help="reconnect when no batch or heartbeat came for this long (slave_net_timeout, "
                          "default 60; keep it above --heartbeat-period)")
    run.add_argument("--lint-wait", type=seconds_in(0, 86_400), default=10.0, metavar="SECONDS",
                     help="with --until-caught-up: wait up to this long for the master's background lint of "
                          "these rules and print its predictions (default 10; 0: do not wait)")
    run.add_argument("--gtid-start", metavar="STATE", help="start at a GTID state when there is no saved position")
    run.add_argument("--on-disagreement", choices=("error", "warn"), default="error",
                     help="when this slave's own rules drop an event the master sent (and the master did not "
                          "decide it with its schema model): error (default) stops with the statement and its "
                          "master position; warn relays what the master sent, as a replica of the master's MySQL "
                          "endpoint would, and counts it (slave status, metrics)")
    run.add_argument("--metrics-port", type=port_type, metavar="N",
                     help="serve Prometheus /metrics on 127.0.0.1:N (0 picks a free port; default none)")
    run.add_argument("--replica-schema", metavar="FILE|mysql://USER@HOST:PORT",
                     help="this replica's own starting schema, when it differs from the master's (databases or "
                          "tables created outside replication): sent at Register for the master's lint")
    add_rule_options(run)
    # The slave's own check keeps what the master decided with its schema model (slave/trust.py):
    # a --schema here only informs that check's other answers.
    add_schema_option(run)
    run.set_defaults(func=run_command)
    status = sub.add_parser("status", help="SHOW REPLICA STATUS-like fields of a slave's relay log directory")
    status.add_argument("--relay-log-dir", required=True, type=Path, metavar="DIR")
    add_json_option(status, "the fields")
    status.set_defaults(func=status_command)


def run_command(args: argparse.Namespace) -> int:
    from dumpfilter.cli.output_paths import readable_file, writable_dir
    from dumpfilter.slave.node import Slave
    from dumpfilter.slave.config import SlaveConfig

    tune_allocator()
    for option, path in (("--ssl-ca", args.ssl_ca), ("--ssl-cert", args.ssl_cert), ("--ssl-key", args.ssl_key)):
        if path:
            readable_file(path, option)  # (a FIFO: "cannot read it"), then its size and text: 1 GB is not a PEM
            side_file(path, option)
    if args.apply:
        from dumpfilter.slave.apply import parse_mysql_url

        parse_mysql_url(args.apply)  # a bad one is its line now, not after the first batch was relayed
    rules, settings = ruleset_from_args(args)
    writable_dir(args.relay_log_dir, "--relay-log-dir")  # after the rules (a bad one leaves nothing made)
    config = SlaveConfig(master=args.master, server_id=args.server_id, relay_dir=args.relay_log_dir, rules=rules,
                         settings=settings, channel=args.channel, skip_policy=args.skip_policy, user=args.user,
                         password=args.password, until_caught_up=args.until_caught_up, apply_url=args.apply,
                         relay_log_size=args.relay_log_size, heartbeat_period=args.heartbeat_period,
                         relay_commit_interval=args.relay_commit_interval,
                         tls_ca=args.ssl_ca, tls_cert=args.ssl_cert, tls_key=args.ssl_key,
                         start_gtid=args.gtid_start, connect_retry=args.connect_retry,
                         connect_timeout=args.connect_timeout, retry_count=args.retry_count,
                         net_timeout=args.net_timeout or None, hostname=args.report_host,
                         rpc_timeout=args.rpc_timeout, schema=schema_from_args(args) if args.schema else None,
                         lint_wait=args.lint_wait, on_disagreement=args.on_disagreement,
                         replica_schema=_replica_schema(args.replica_schema),
                         placeholder_runs=args.placeholder_runs, skip_stretches=args.skip_stretches)
    slave = Slave(config)
    if args.metrics_port is not None:
        from prometheus_client import start_http_server

        from dumpfilter.slave.metrics import registry_for

        try:
            server, _thread = start_http_server(args.metrics_port, addr="127.0.0.1", registry=registry_for(slave))
        except OSError as exc:
            raise DumpFilterError(f"--metrics-port {args.metrics_port}: cannot listen on "
                                  f"127.0.0.1:{args.metrics_port}: {exc.strerror or exc}") from None
        print(f"dumpfilter slave: metrics on 127.0.0.1:{server.server_port}/metrics", file=sys.stderr, flush=True)
    # `kill` ends the slave as Ctrl-C does, whatever SIGTERM's handler was: its stop recorded, the
    # summary printed, then `dumpfilter: terminated` and exit 143 (130 and `interrupted` for Ctrl-C).
    signal.signal(signal.SIGTERM, terminate)
    try:
        return slave.run()
    finally:
        print(summary_line(slave), file=sys.stderr, flush=True)


def _replica_schema(source: str | None) -> SchemaModel | None:
    if not source:
        return None  # the rule engine's modules load later (see Slave.engine)
    from dumpfilter.rules.schema import load_schema

    return load_schema(source, "--replica-schema")


def summary_line(slave: Slave) -> str:
    """One line when `slave run` ends, however it ends: this run's counters and where it stands."""
    c, info = slave.counters, slave.info
    where = f"{info.master_file}:{info.master_pos}" if info.master_file else "no position yet"
    gtid = f", gtid {info.gtid_state}" if info.gtid_state else ""
    # Two figures that differ, each named (issue #82: 295.7 MB received, a relay log of 146 MB):
    # received counts what a replica is sent, relayed what the relay log holds past its headers.
    unwritten = c.bytes_received - c.bytes_relayed
    return (f"dumpfilter slave: server_id {slave.config.server_id} stopped at {where}{gtid}; this run: "
            f"{c.events_received} events, {c.bytes_received} bytes received (as a replica is sent them; "
            f"{c.wire_bytes} on the wire), {c.events_relayed} events, {c.bytes_relayed} bytes relayed (the relay "
            f"log's events but its own Format_description and Rotate"
            + (f"; the other {unwritten} bytes received are not written to it: placeholders, heartbeats, the "
               "master's file headers" if unwritten > 0 else "")
            + f"), {c.heartbeats} heartbeats, {c.placeholders} placeholders"
            + (f", {c.check_disagreements} disagreement(s) with the master" if c.check_disagreements else "")
            + (f"; caught up {slave.caught_up_after:.3f} s after its first dump request"
               if slave.caught_up_after is not None else ""))


def status_command(args: argparse.Namespace) -> int:
    from dumpfilter.cli.output_paths import existing_dir
    from dumpfilter.slave.status import status_fields

    existing_dir(args.relay_log_dir, "--relay-log-dir")
    fields = status_fields(args.relay_log_dir)
    if emit_json(args, fields):
        return 0
    width = max(len(k) for k in fields)
    print("*************************** 1. row ***************************")
    for key, value in fields.items():
        print(f"{key.rjust(width)}: {value}")
    return 0
