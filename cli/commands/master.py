"""`dumpfilter master serve|filters|status|change-filter|shadow`: the gRPC dump service over a binlog
directory (WL#2387 master side), and the operator's view of a running one."""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from typing import TYPE_CHECKING

from dumpfilter.cli.options import (add_json_option, check_side_files, count_in, emit_json, number_in, port_type,
                                    seconds_in, side_file, size_in)
from dumpfilter.cli.process import StopSignals, Terminated, raise_open_files_limit
from dumpfilter.errors import DumpFilterError
from dumpfilter.cli.master_client import add_connection_options, server_id_type
from dumpfilter.cli.commands.shadow import add_serve_option as add_shadow_option, register as register_shadow
from dumpfilter.cli.commands.shadow import load_shadow, print_shadows, shadow_row, start_shadow

if TYPE_CHECKING:
    from collections.abc import Callable

    from dumpfilter.cli.options import Subparsers
    from dumpfilter.cli.master_client import Row
    from dumpfilter.master.endpoint import MysqlEndpoint, ReplicaMap
    from dumpfilter.master.endpoint.admission import EndpointLimits
    from dumpfilter.master.endpoint.auth import RsaKeys
    from dumpfilter.master.endpoint.tls import EndpointTls
    from dumpfilter.master.serve.grpc_server import MasterServer
    from dumpfilter.master.service import DumpService
    from dumpfilter.master.upstream.retention import SeriesRetention
    from dumpfilter.master.upstream.source import SourceReplicator, SourceURL

    # --mysql-listen's settings, checked before anything starts: the replica map, TLS, the RSA keys, the limits.
    MysqlOptions = tuple[ReplicaMap, EndpointTls, RsaKeys, EndpointLimits]


SOURCE_PASSWORD_ENV = "DUMPFILTER_SOURCE_PASSWORD"


# --mysql-* limits of the MySQL endpoint: (option, EndpointLimits field, type, help)
_MYSQL_LIMITS: list[tuple[str, str, Callable[[str], object], str, str]] = [
    ("--mysql-connect-timeout", "connect_timeout", seconds_in(0, 31_536_000), "SECONDS",
     "close a socket that has not finished the handshake and authenticated within this many seconds, however "
     "slowly it sends (MySQL's connect_timeout; default 10)"),
    ("--mysql-wait-timeout", "wait_timeout", seconds_in(0, 31_536_000), "SECONDS",
     "close an authenticated session that sends no command for this long; a dumping replica is never idle "
     "(MySQL's wait_timeout; default 600)"),
    ("--mysql-max-connections", "max_connections", count_in(0, 1 << 20), "N",
     "authenticated sessions, dumps included; one more gets error 1040 (MySQL's max_connections; default 256)"),
    ("--mysql-max-handshakes", "max_handshakes", count_in(0, 1 << 20), "N",
     "sockets still in the handshake, counted apart from sessions; when full, a newcomer replaces the oldest "
     "socket of the address holding the most (default 128)"),
    ("--mysql-max-handshakes-per-host", "max_handshakes_per_host", count_in(0, 1 << 20), "N",
     "sockets in the handshake from one client address (default 16)"),
    ("--mysql-max-packet", "max_packet", size_in(0, 1 << 30), "BYTES",
     "the largest command a client may send; a longer one gets error 1153 and is disconnected "
     "(MySQL's max_allowed_packet; default 1M)"),
]


# master.lint_jobs.LINT_MAX_BYTES in MiB, written out: the client commands (`master status`,
# `filters`, `change-filter`) start without the lint planner (tests/cli/test_startup_imports.py
# checks the two agree).
LINT_MAX_MB = 1024


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("master", help="run the master-side dump service (gRPC)")
    sub = parser.add_subparsers(dest="master_command", metavar="SUBCOMMAND", required=True)
    serve = sub.add_parser("serve", help="serve a binlog directory to registered slaves",
                           description="Tails DIR (a live server may be writing it) and streams each registered "
                                       "slave only what its rules and the master policy keep.")
    serve.add_argument("--binlog-dir", required=True, metavar="DIR")
    serve.add_argument("--listen", default="127.0.0.1:4306", metavar="HOST:PORT",
                       help="address to listen on (default 127.0.0.1:4306; port 0 picks a free port)")
    serve.add_argument("--policy", metavar="FILE", help="TOML master policy: what each slave identity may receive")
    serve.add_argument("--tls-cert", metavar="FILE",
                       help="TLS: the master's certificate (PEM), for gRPC, /metrics and --mysql-listen alike "
                            "(real replicas: MASTER_SSL=1)")
    serve.add_argument("--tls-key", metavar="FILE", help="TLS: the master's private key (PEM)")
    serve.add_argument("--tls-client-ca", metavar="FILE",
                       help="mTLS: require client certificates signed by this CA; a certificate's CN is "
                            "the slave's policy identity (no password needed over gRPC; over --mysql-listen the "
                            "user must be the CN and its password is checked too, and plain connections are "
                            "refused)")
    metrics = serve.add_mutually_exclusive_group()
    metrics.add_argument("--metrics-port", type=port_type, metavar="N",
                         help="serve Prometheus /metrics on 127.0.0.1:N (default: no metrics; 0 picks a free port)")
    metrics.add_argument("--metrics-listen", metavar="HOST:PORT",
                         help="serve Prometheus /metrics on this address (HTTPS with --tls-cert; client "
                              "certificates required with --tls-client-ca)")
    serve.add_argument("--metrics-token-file", metavar="FILE",
                       help="/metrics answers only scrapers sending 'Authorization: Bearer <the token in FILE>' "
                            "(or, under mTLS, a client certificate); the token sees every slave. Without it, "
                            "under --policy, /metrics names no slave: it shows totals only")
    serve.add_argument("--max-streams", type=count_in(1, 1 << 20), default=64, help="concurrent Dump streams (default 64)")
    serve.add_argument("--max-streams-per-identity", type=count_in(1, 1 << 20), metavar="N",
                       help="concurrent Dump streams of one policy identity (default: its share, --max-streams "
                            "divided by the policy's sections; a policy entry's max_streams wins)")
    serve.add_argument("--max-calls", type=count_in(1, 1 << 20), default=8, metavar="N",
                       help="concurrent Register, ChangeFilter and Unregister calls of every identity together "
                            "(default 8); each policy identity gets its share or its entry's max_calls")
    serve.add_argument("--stall-timeout", type=seconds_in(0, 31_536_000), default=60.0, metavar="SECONDS",
                       help="end a stream whose slave has taken no batch for this long (default 60; 0: never)")
    serve.add_argument("--no-verify-checksums", dest="verify_checksums", action="store_false",
                       help="do not check event CRC32s while reading the binlog (MySQL's default "
                            "source_verify_checksum=OFF); slaves still check what they receive")
    serve.add_argument("--schema", metavar="FILE|mysql://USER@HOST:PORT",
                       help="the master's schema before its binlog (mysqldump --no-data file or a server): "
                            "multi-table UPDATE decisions use its columns and triggers")
    serve.add_argument("--lint-max-mb", type=number_in(0, 1 << 20, what="a number of MiB"), default=float(LINT_MAX_MB), metavar="MB",
                       help="lint each new slave's rules over the binlog in the background, and follow the "
                            "binlog as it grows: the most one look reads, in MiB (the first reads the whole "
                            "binlog, so a larger one is not linted at Register; each later one what was appended "
                            "since, going on in the next look); the predictions reach the slave in its Register "
                            "reply or stream, `master status` (`no break up to FILE:POS`) and the log "
                            "(default %(default)g; 0: off)")
    serve.add_argument("--binlog-huge-pages", action="store_true",
                       help="map closed binlog files asking for 2 MB pages: what is read from disk stays in the "
                            "page cache in 2 MB folios, and every later pass of a slave over it takes one page fault "
                            "per 2 MB instead of one per 64 KB (eight do-db slaves: half the master's faults and "
                            "about a third less CPU than over 4 KB pages). Off by default: on a VM that hands its "
                            "free memory back to the host (free page reporting), the first touch of each 2 MB page "
                            "read into such memory costs more than it saves")
    serve.add_argument("--grace", type=seconds_in(0, 86_400), default=5.0, help="seconds to drain streams at shutdown")
    serve.add_argument("--mysql-listen", metavar="HOST:PORT",
                       help="also serve real MySQL/MariaDB replicas (CHANGE MASTER TO) over the MySQL protocol here")
    serve.add_argument("--source", metavar="mysql://USER[:PASS]@HOST:PORT", action="append",
                       help="replicate a live primary into --binlog-dir (a local binlog series) and serve from it. "
                            "Repeat it to name failover candidates, in order: when the primary stays unreachable "
                            "the master moves to the first candidate whose binlog holds the series' last GTID (a "
                            "promoted standby with log_slave_updates) and continues by GTID in a new file; one "
                            "that has diverged is refused with a line naming the GTID (MariaDB primaries). A MySQL "
                            "primary with gtid_mode ON is read by GTID with the series' executed set, as a MySQL 8.4 "
                            "replica with SOURCE_AUTO_POSITION; its TLS and caching_sha2_password options are "
                            "URL parameters: ?ssl-mode=DISABLED|PREFERRED|REQUIRED|VERIFY_CA|VERIFY_IDENTITY, "
                            "ssl-ca, ssl-cert, ssl-key, public-key=PEM (RSA without TLS), get-public-key=1; "
                            "a password here shows in ps until the master scrubs it: prefer --source-password-file "
                            f"or {SOURCE_PASSWORD_ENV}. When a full disk or a file size limit stops the series "
                            "from growing, the master stops taking from the primary (one warning; "
                            "dumpfilter_source_series_full, `master status`), serves what it has, and resumes "
                            "after its last whole transaction once it can write again")
    serve.add_argument("--source-password-file", metavar="FILE",
                       help=f"--source: the primary's password, the first line of FILE (else {SOURCE_PASSWORD_ENV} "
                            "from the environment; MYSQL_PWD is not read)")
    serve.add_argument("--source-file", metavar="NAME", help="--source: start the series at this primary binlog")
    serve.add_argument("--source-pos", type=count_in(0, (1 << 64) - 1), default=4, metavar="N",
                       help="--source: start position in --source-file (a transaction boundary; the series "
                       "keeps the primary's offsets, its file opening with fillers up to there)")
    serve.add_argument("--source-gtid", metavar="GTID_POS",
                       help="--source: start at the primary file a replica at this GTID position needs (a "
                            "MariaDB position, from its start; or a MySQL GTID set: in the file MySQL's dump thread "
                            "starts at, at the first transaction the set lacks)")
    serve.add_argument("--source-failover-tries", type=count_in(0, 1 << 20), default=3, metavar="N",
                       help="--source given more than once: give the current source up after N failed "
                            "reconnection tries in a row (waits of 0.2, 0.5, 1, 2, then 5 s before them; a try "
                            "of a host that does not answer takes up to 5 s more) for the first other candidate "
                            "that continues the series (default 3: about 2 s after a primary that refuses "
                            "connections was lost)")
    serve.add_argument("--source-server-id", type=server_id_type, default=2387, metavar="N",
                       help="--source: the server_id the master registers with on the primary (default 2387)")
    serve.add_argument("--expire-logs-seconds", type=seconds_in(0, 10 * 31_536_000), metavar="SECONDS",
                       help="--source: purge series files last written longer ago than this, oldest first, as "
                            "binlog_expire_logs_seconds does; never the file being written, nor one a registered "
                            "slave or real replica still reads (default: keep every file)")
    serve.add_argument("--max-series-bytes", type=size_in(0, 1 << 50), metavar="BYTES",
                       help="--source: a hard cap on the series' size, as max_binlog_total_size: the oldest files "
                            "go until it fits, even one a slave still reads (a warning names the file and the "
                            "slave, which then gets 1236 / OUT_OF_RANGE naming it)")
    serve.add_argument("--replicas", metavar="TOPOLOGY",
                       help="topology TOML whose [[slaves]] give each real replica's rules by server_id (or user)")
    for option, dest, kind, metavar, text in _MYSQL_LIMITS:
        serve.add_argument(option, dest=f"mysql_{dest}", type=kind, metavar=metavar, help=text)
    serve.add_argument("--mysql-require-secure-transport", action="store_true",
                       help="refuse --mysql-listen clients that do not start TLS (error 3159, as MySQL's "
                            "require_secure_transport; a replica shows it in Last_IO_Error); needs --tls-cert")
    serve.add_argument("--mysql-rsa-key", metavar="FILE",
                       help="caching_sha2_password's RSA private key (PEM) for clients without TLS that ask "
                            "for the server's public key (GET_SOURCE_PUBLIC_KEY=1); default: a 2048-bit key "
                            "generated at start")
    add_shadow_option(serve)
    serve.set_defaults(func=serve_command)

    filters = sub.add_parser("filters", help="the filter tables of a running master (performance_schema style)",
                             description="The rows of performance_schema.replication_applier_filters and "
                                         "replication_applier_global_filters, one row per slave and channel.")
    status = sub.add_parser("status", help="SHOW SLAVE HOSTS of a running master, with each slave's stream counters")
    for viewer, what, func in ((filters, "the tables", filters_command), (status, "the rows", status_command)):
        add_connection_options(viewer)
        viewer.add_argument("--server-id", type=server_id_type, default=0, help="only this slave (default: every slave)")
        add_json_option(viewer, what)
        viewer.set_defaults(func=func)

    change = sub.add_parser("change-filter", help="CHANGE REPLICATION FILTER on a registered slave, live",
                            description="The change takes effect at the next transaction boundary of the "
                                        "slave's running stream (at once without one); prints that position.")
    add_connection_options(change)
    change.add_argument("--server-id", type=server_id_type, required=True, help="the slave to change")
    change.add_argument("statement", metavar="SQL",
                        help="CHANGE REPLICATION FILTER ... [FOR CHANNEL 'c'] (or WL#2516 CHANGE MASTER ... TO DO=...)")
    change.add_argument("--wait", type=seconds_in(0, 86_400), default=30.0, metavar="SECONDS",
                        help="how long to wait for the stream to reach a transaction boundary (default 30)")
    add_json_option(change, "where and how the change took effect")
    change.set_defaults(func=change_filter_command)

    hashed = sub.add_parser("hash-password", help="a password_hash for the policy file (PBKDF2-HMAC-SHA256)",
                            description="Reads the password from standard input (one line; a terminal is not "
                                        "echoed) and prints a password_hash value for a [slave.NAME] section. "
                                        "--mysql-listen checks it with caching_sha2_password; for "
                                        "mysql_native_password store MySQL's own '*' hash instead.")
    hashed.set_defaults(func=hash_password_command)
    register_shadow(sub)


def serve_command(args: argparse.Namespace) -> int:
    from dumpfilter.master.serve.grpc_server import create_server
    from dumpfilter.master.serve.malloc_arenas import limit_arenas, steady_thresholds, trim_freed
    from dumpfilter.rules.options import schema_from_args

    # Regular files of a sane size in UTF-8 (never a FIFO or /dev/zero), each read where it is needed
    # (--metrics-token-file, --source-password-file, --replicas and --mysql-rsa-key after their "needs").
    check_side_files(args, "--policy", "--tls-cert", "--tls-key", "--tls-client-ca", "--shadow")
    shadow = load_shadow(args)
    limit_arenas()  # before any thread of the master's starts: its RSS stays flat (malloc_arenas.py)
    steady_thresholds()
    trim_freed()
    raise_open_files_limit()
    metrics_at, token = _metrics_options(args)
    mysql = _mysql_options(args)
    replicator = _source_replicator(args)
    try:
        master, port = create_server(args.binlog_dir, args.listen, policy=args.policy, tls_cert=args.tls_cert,
                                     tls_key=args.tls_key, tls_client_ca=args.tls_client_ca,
                                     max_streams=args.max_streams,
                                     max_streams_per_identity=args.max_streams_per_identity,
                                     max_calls=args.max_calls,
                                     stall_timeout=args.stall_timeout or None,
                                     verify_checksums=args.verify_checksums,
                                     schema=schema_from_args(args) if args.schema else None,
                                     lint_bytes=int(max(0.0, args.lint_max_mb) * (1 << 20)))
    except BaseException:
        if replicator is not None:
            replicator.stop()
        raise
    # its state in `master status` and the metrics (DumpService declares `source = None` untyped
    # yet: this ignore goes, as warn_unused_ignores will say, once master/service.py types it)
    master.service.source = replicator  # type: ignore[assignment]
    master.service.segments.mappings.huge_pages = args.binlog_huge_pages
    retention = _retention(args, replicator, master.service)
    start_shadow(args, master, shadow)
    if replicator is not None:  # each transaction it writes wakes the streams at once
        replicator.mirror.on_unit = master.service.watch.changed
    metrics = None
    if metrics_at is not None:
        from dumpfilter.master.serve.metrics_http import MetricsEndpoint

        option, (metrics_host, metrics_port) = metrics_at
        try:
            metrics = MetricsEndpoint(master.service, metrics_host, metrics_port, token=token, tls_cert=args.tls_cert,
                                      tls_key=args.tls_key, tls_client_ca=args.tls_client_ca)
        except (OSError, ValueError) as exc:
            master.stop(0)
            raise DumpFilterError(f"{option}: cannot listen on {metrics_host}:{metrics_port}: "
                                  f"{getattr(exc, 'strerror', None) or exc}") from None
    # SIGTERM and SIGINT drain from the moment "serving" is printed (a supervisor may stop the
    # master while its --mysql-listen endpoint is still starting): the handlers come first.
    signals = StopSignals()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signals.handler)
    host = args.listen.rpartition(":")[0]
    print(f"dumpfilter master: serving {args.binlog_dir} on {host}:{port}", file=sys.stderr, flush=True)
    if metrics is not None:
        print(f"dumpfilter master: metrics on {metrics.url}", file=sys.stderr, flush=True)
    endpoint = _mysql_endpoint(args, master, mysql)
    # Once every port listens (a client may connect at once): what the first slave would pay.
    threading.Thread(target=master.service.warm_up, args=(True,), name="warm-up", daemon=True).start()
    received = signals.wait()
    print("dumpfilter master: shutting down, draining streams", file=sys.stderr, flush=True)
    if endpoint is not None:
        endpoint.stop()
    master.stop(args.grace)
    for part in (metrics, retention, replicator):
        if part is not None:
            part.stop()
    # Drained, it ends as every command ends at that signal (cli.app): one line, exit 143 for
    # SIGTERM, 130 for SIGINT (issue #62).
    raise Terminated if received == signal.SIGTERM else KeyboardInterrupt


def _retention(args: argparse.Namespace, replicator: SourceReplicator | None,
               service: DumpService) -> SeriesRetention | None:
    """--expire-logs-seconds / --max-series-bytes: the thread purging the series (started), or None."""
    from dumpfilter.master.upstream.retention import RetentionLimits, SeriesRetention

    limits = RetentionLimits(args.expire_logs_seconds, args.max_series_bytes)
    if replicator is None or not limits.active:
        return None
    # (SourceReplicator declares `retention = None` untyped yet: this ignore goes, as
    # warn_unused_ignores will say, once master/upstream/source.py types it)
    replicator.retention = retention = SeriesRetention(replicator.mirror, service, limits)  # type: ignore[assignment]
    retention.start()
    return retention


def _metrics_options(args: argparse.Namespace) -> tuple[tuple[str, tuple[str, int]] | None, bytes | None]:
    """((the option, (host, port)) or None, the token or None), checked before anything starts."""
    from dumpfilter.master.serve.grpc_server import parse_listen
    from dumpfilter.master.serve.metrics_http import read_token

    if args.metrics_listen is not None:
        at = ("--metrics-listen " + args.metrics_listen, parse_listen(args.metrics_listen, "--metrics-listen"))
    elif args.metrics_port is not None:
        at = (f"--metrics-port {args.metrics_port}", ("127.0.0.1", args.metrics_port))
    else:
        if args.metrics_token_file:
            raise DumpFilterError("--metrics-token-file needs --metrics-port or --metrics-listen")
        return None, None
    return at, read_token(args.metrics_token_file) if args.metrics_token_file else None


def _source_replicator(args: argparse.Namespace) -> SourceReplicator | None:
    """--source: the thread that replicates the live primary into --binlog-dir (started, with
    the series' first file on disk), or None."""
    if not args.source:
        if args.source_file or args.source_gtid or args.source_pos != 4 or args.source_password_file \
                or args.expire_logs_seconds is not None or args.max_series_bytes is not None \
                or args.source_failover_tries != 3:
            raise DumpFilterError("--source-file, --source-pos, --source-gtid, --source-password-file, "
                                  "--source-failover-tries, --expire-logs-seconds and --max-series-bytes need --source")
        return None
    from dumpfilter.master.upstream.binlog_mirror import BinlogMirror
    from dumpfilter.master.upstream.source import SourceReplicator

    if args.source_pos != 4 and (args.source_pos < 4 or not args.source_file):
        raise DumpFilterError(f"--source-pos {args.source_pos}: a start inside a file needs --source-file and a "
                              "position of 4 or more (a transaction boundary of that file)")
    if args.source_file and args.source_gtid:
        raise DumpFilterError("--source-file and --source-gtid: give one start")
    if args.source_failover_tries < 1:
        raise DumpFilterError(f"--source-failover-tries {args.source_failover_tries}: must be 1 or more")
    for option, value in (("--expire-logs-seconds", args.expire_logs_seconds),
                          ("--max-series-bytes", args.max_series_bytes)):
        if value is not None and value <= 0:
            raise DumpFilterError(f"{option} {value}: must be more than 0 (leave it out to keep every file)")
    urls = [_source_url(args, text) for text in args.source]
    url = urls[0]
    replicator = SourceReplicator(urls, BinlogMirror(args.binlog_dir), server_id=args.source_server_id,
                                  start_file=args.source_file, start_gtid=args.source_gtid,
                                  start_pos=args.source_pos, failover_after=args.source_failover_tries)
    replicator.start()
    if not replicator.wait_ready(30):
        replicator.stop()
        raise DumpFilterError(f"--source {url}: no binlog received ({replicator.last_error or 'timed out'})")
    print(f"dumpfilter master: replicating {url} into {args.binlog_dir}", file=sys.stderr, flush=True)
    return replicator


def _source_url(args: argparse.Namespace, text: str) -> SourceURL:
    """--source with its password: from --source-password-file, the URL (then scrubbed from the
    command line, with a warning) or DUMPFILTER_SOURCE_PASSWORD, in that order. MYSQL_PWD, which
    MySQL 8.0 deprecates, is not read: it is meant for the operator's own client and server."""
    import dataclasses
    import os
    from urllib.parse import urlsplit

    from dumpfilter.cli.process import scrub_argv
    from dumpfilter.master.upstream.source import SourceURL

    url = SourceURL.parse(text)
    inline = urlsplit(text).password
    if args.source_password_file:
        if inline:
            raise DumpFilterError("--source has a password and --source-password-file gives one: give it once")
        password = side_file(args.source_password_file, "--source-password-file").split("\n", 1)[0].rstrip("\r")
        return dataclasses.replace(url, password=password)
    if inline:
        scrubbed = scrub_argv(text, inline)
        print(f"dumpfilter master: warning: the --source password shows in the process list "
              f"{'until the master scrubbed it' if scrubbed else '(ps)'}: prefer --source-password-file FILE or "
              f"{SOURCE_PASSWORD_ENV}", file=sys.stderr, flush=True)
        return url
    return dataclasses.replace(url, password=os.environ.get(SOURCE_PASSWORD_ENV, ""))


def _mysql_options(args: argparse.Namespace) -> MysqlOptions | None:
    """--mysql-listen, --replicas, the --mysql-* limits, TLS and the RSA key, checked before
    anything starts: (the replica map, the TLS settings, the RSA keys), or None."""
    if not args.mysql_listen:
        if args.replicas:
            raise DumpFilterError("--replicas names real replicas' rules: it needs --mysql-listen")
        for option, dest, *_ in _MYSQL_LIMITS:
            if getattr(args, f"mysql_{dest}") is not None:
                raise DumpFilterError(f"{option} is a limit of the MySQL endpoint: it needs --mysql-listen")
        if args.mysql_require_secure_transport or args.mysql_rsa_key:
            raise DumpFilterError("--mysql-require-secure-transport and --mysql-rsa-key need --mysql-listen")
        return None
    from dumpfilter.master.endpoint.admission import EndpointLimits
    from dumpfilter.master.endpoint.tls import endpoint_tls

    given = {dest: getattr(args, f"mysql_{dest}") for _, dest, *_ in _MYSQL_LIMITS}
    limits = EndpointLimits(**{dest: value for dest, value in given.items() if value is not None})

    tls = endpoint_tls(args.tls_cert, args.tls_key, args.tls_client_ca, args.mysql_require_secure_transport)
    from dumpfilter.master.serve.grpc_server import parse_listen
    from dumpfilter.master.endpoint import ReplicaMap
    from dumpfilter.master.endpoint.auth import RsaKeys

    parse_listen(args.mysql_listen, "--mysql-listen")
    check_side_files(args, "--replicas", "--mysql-rsa-key")
    return ReplicaMap.load(args.replicas), tls, RsaKeys(args.mysql_rsa_key), limits


def _mysql_endpoint(args: argparse.Namespace, master: MasterServer, mysql: MysqlOptions | None) -> MysqlEndpoint | None:
    """The MySQL-protocol endpoint beside gRPC (--mysql-listen), over the same dump service."""
    if mysql is None:
        return None
    from dumpfilter.master.endpoint import MysqlEndpoint

    replicas, tls, rsa_keys, limits = mysql
    try:
        endpoint = MysqlEndpoint(master.service, args.mysql_listen, replicas=replicas, limits=limits, tls=tls,
                                 rsa_keys=rsa_keys)
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
    if emit_json(args, tables):
        return 0
    for name, rows in tables.items():
        print(f"performance_schema.{name}")
        print(format_table(rows))
    return 0


def _lint_cell(row: Row) -> str:
    """'no break up to FILE:POS', 'N break(s) up to FILE:POS' (lint follows the binlog: how far it
    has read), 'failed: REASON', or the state (pending, off, not run); '; diverges: N writes' after
    it when lint found writes a replica with these rules silently gets wrong (as `lint` and
    `experiment --candidates` say); '; keeps no table' when a rule of the slave can match no table
    (`replicate-wild-do-table=db.`)."""
    state: str = row["Lint"]
    if state == "failed":
        reason = next((w[len("lint: failed: "):] for w in row["Lint_warnings"] if w.startswith("lint: failed: ")), "")
        return f"failed: {reason}" if reason else state
    if state != "done":
        return state + (_lag(row) if state == "pending" else "")
    up_to = f" up to {row['Lint_position']}" if row.get("Lint_position") else ""
    breaks = row.get("Lint_breaks", 0)
    empty = "; keeps no table" if any("keeps no table" in w for w in row["Lint_warnings"]) else ""
    diverges = f"; diverges: {row['Lint_diverges']} writes" if row.get("Lint_diverges") else ""
    return (f"{breaks} break(s){up_to}" if breaks else f"no break{up_to}") + diverges + _lag(row) + empty


def _lag(row: Row) -> str:
    """'; N bytes (M files) behind' while lint has not read to the live end of the binlog (issue #62:
    `done` read as caught up while lint was 95 MB behind), else ''."""
    lag, files = row.get("Lint_behind_bytes", 0), row.get("Lint_behind_files", 0)
    if not lag:
        return ""
    size = f"{lag / (1 << 20):.1f} MiB" if lag >= 1 << 20 else f"{lag} bytes"
    return f"; {size} ({files} file{'' if files == 1 else 's'}) behind" if files else f"; {size} behind"


def status_command(args: argparse.Namespace) -> int:
    from dumpfilter.cli.master_client import MasterClient, format_table

    with MasterClient.from_args(args) as client:
        rows, source, shadows = client.status_source_shadows(args.server_id)
    # the slaves' rows, as before; the source's state (--source) and the shadow candidates in each row
    if emit_json(args, [{**r, **({"Source": source} if source else {}),
                         **({"Shadows": [shadow_row(c) for c in shadows]} if shadows else {})} for r in rows]):
        return 0
    print(format_table([{**r, "Lint": _lint_cell(r)} for r in rows], STATUS_COLUMNS))
    end = next((r["Binlog_end"] for r in rows if r["Binlog_end"]), "")
    if end:
        print(f"master binlog end: {end}")
    if source:
        print(_source_line(source))
    for row in rows:
        for warning in row["Lint_warnings"]:
            print(f"server_id {row['Server_id']}: {warning}")
    print_shadows([shadow_row(c) for c in shadows])
    return 0


def _source_line(source: Row) -> str:
    """`master status`'s line on --source: where from, its state and since when."""
    state = {"full": "FULL: the series cannot grow (a full disk or a file size limit), slaves served what it holds"
             }.get(source["state"], source["state"])
    line = f"source {source['source'] or '(hidden)'} (current since {source['changed_at']}, switches " \
           f"{source['switches']}): {state} since {source['since']}; full stalls " \
           f"{source['full_stalls']}, reconnects {source['reconnects']}; series {source['series_bytes']} bytes, " \
           f"purged files {source['purged_files']} (forced {source['forced_purges']})"
    return line + (f"; last error: {source['last_error']}" if source["last_error"] and source["state"] != "streaming"
                   else "")


def change_filter_command(args: argparse.Namespace) -> int:
    from dumpfilter.cli.master_client import MasterClient, channel_name

    with MasterClient.from_args(args) as client:
        result = client.change_filter(args.server_id, args.statement, timeout=args.wait)
    if emit_json(args, result):
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
        print(f"  channel {channel_name(channel)}: {rules}")
        if effective["policy_allow"]:
            print(f"    master policy allows: {', '.join(effective['policy_allow'])}")
    return 0


def hash_password_command(args: argparse.Namespace) -> int:
    import getpass

    from dumpfilter.errors import InvalidArgumentError
    from dumpfilter.rules.policy_gates import hash_password

    password = getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise InvalidArgumentError("hash-password: an empty password (an identity without one needs no hash)")
    print(hash_password(password))
    return 0
