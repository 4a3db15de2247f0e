"""`dumpfilter master serve`: the gRPC dump service over a binlog directory (WL#2387 master side)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def register(subparsers) -> None:
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
    serve.add_argument("--metrics-port", type=int, metavar="N", help="serve Prometheus /metrics on 127.0.0.1:N")
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
    serve.add_argument("--grace", type=float, default=5.0, help="seconds to drain streams at shutdown")
    serve.set_defaults(func=serve_command)


def _schema(args: argparse.Namespace):
    from dumpfilter.rule_options import schema_from_args

    return schema_from_args(args) if args.schema else None


def serve_command(args: argparse.Namespace) -> int:
    # grpc's C core logs a failed bind itself; the one line below (exit 2) says it for the operator.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    from master.grpc_server import create_server
    from master.metrics import serve_metrics

    master, port = create_server(args.binlog_dir, args.listen, policy=args.policy, tls_cert=args.tls_cert,
                                 tls_key=args.tls_key, tls_client_ca=args.tls_client_ca,
                                 max_streams=args.max_streams, max_streams_per_identity=args.max_streams_per_identity,
                                 stall_timeout=args.stall_timeout or None,
                                 verify_checksums=args.verify_checksums, schema=_schema(args))
    if args.metrics_port is not None:
        serve_metrics(master.service, args.metrics_port)
    host = args.listen.rpartition(":")[0]
    print(f"dumpfilter master: serving {args.binlog_dir} on {host}:{port}", file=sys.stderr, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    print("dumpfilter master: shutting down, draining streams", file=sys.stderr, flush=True)
    master.stop(args.grace)
    return 0
