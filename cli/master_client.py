"""The operator's side of a running master: connection options shared by `slave run` and the
`master filters|status|change-filter` commands, and the unary RPCs (ListFilters, Stats,
ChangeFilter) turned into plain rows the commands print as tables or JSON. grpc and the
generated messages are imported by the calls, not here: the commands' parsers (`--help`, a bad
option) do without them (about a tenth of a second)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dumpfilter.cli.options import seconds_in, whole_in

if TYPE_CHECKING:
    from dumpfilter.v1 import dump_pb2

# A row of the operator calls' answers, as JSON and the tables print it.
Row = dict[str, Any]


def add_connection_options(parser: argparse.ArgumentParser, *, master_required: bool = True) -> None:
    """--master, --user, --password, --ssl-ca, --ssl-cert/--ssl-key: the same spelling for every
    command that talks to a master."""
    parser.add_argument("--master", required=master_required, metavar="HOST:PORT", help="the master's gRPC address")
    parser.add_argument("--user", default="", help="identity for the master policy (default: none)")
    parser.add_argument("--password", default="", help="password of --user (default: none)")
    parser.add_argument("--ssl-ca", type=Path, metavar="FILE",
                        help="TLS: the CA that signed the master's certificate (default: plaintext)")
    parser.add_argument("--ssl-cert", type=Path, metavar="FILE",
                        help="mTLS: this client's certificate (its CN is the policy identity)")
    parser.add_argument("--ssl-key", type=Path, metavar="FILE", help="mTLS: this client's private key")
    parser.add_argument("--rpc-timeout", type=seconds_in(0.001, 86_400), default=10.0, metavar="SECONDS",
                        help="deadline of each call (default 10)")


@dataclass
class MasterClient:
    """One connection to a master; every call maps a gRPC error to the CLI's error types."""

    master: str
    user: str = ""
    password: str = ""
    ssl_ca: Path | None = None
    timeout: float = 10.0
    ssl_cert: Path | None = None
    ssl_key: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MasterClient:
        return cls(args.master, args.user, args.password, args.ssl_ca, args.rpc_timeout, args.ssl_cert, args.ssl_key)

    def __enter__(self) -> MasterClient:
        from dumpfilter.v1 import dump_pb2_grpc
        from dumpfilter.wire import client_channel

        self.channel = client_channel(self.master, [("grpc.max_receive_message_length", 64 << 20)], self.ssl_ca,
                                      self.ssl_cert, self.ssl_key)
        # (generated without annotations: its calls are looked up by name in `call`)
        self.stub = dump_pb2_grpc.DumpFilterStub(self.channel)  # type: ignore[no-untyped-call]
        return self

    def __exit__(self, *exc: object) -> None:
        self.channel.close()

    def call(self, method: str, timeout: float | None = None, **fields: Any) -> Any:
        """The reply of the RPC `method` (the message dump.proto declares for it) to its request
        (`<method>Request`) made of `fields`."""
        import grpc

        from dumpfilter.slave.master_link import master_error
        from dumpfilter.v1 import dump_pb2
        from dumpfilter.wire import credentials

        request = getattr(dump_pb2, f"{method}Request")(**fields)
        try:
            return getattr(self.stub, method)(request, timeout=timeout or self.timeout,
                                              metadata=credentials(self.user, self.password))
        except grpc.RpcError as exc:
            raise master_error(exc) from None

    # -- the three operator calls ----------------------------------------------------------
    def list_filters(self, server_id: int = 0) -> dict[str, list[Row]]:
        """performance_schema.replication_applier_filters and _global_filters, one row per slave and channel."""
        reply = self.call("ListFilters", server_id=server_id)
        return {"replication_applier_filters": [_filter_row(r, counter=True) for r in reply.filters],
                "replication_applier_global_filters": [_filter_row(r, counter=False) for r in reply.global_filters]}

    def status_source_shadows(self, server_id: int = 0) -> tuple[list[Row], Row | None, list[Any]]:
        """SHOW SLAVE HOSTS plus each slave's stream counters; the state of the live primary a
        `master serve --source` keeps its series from (SourceStatus's fields), else None; and the
        shadow candidates (ShadowCandidate messages; an admin's call)."""
        reply = self.call("Stats", server_id=server_id)
        rows = [_status_row(s) for s in sorted(reply.slaves, key=lambda s: s.server_id)]
        if not reply.HasField("source"):
            return rows, None, list(reply.shadows)
        return rows, {f.name: getattr(reply.source, f.name) for f in reply.source.DESCRIPTOR.fields}, list(reply.shadows)

    def change_filter(self, server_id: int, statement: str, timeout: float | None = None) -> Row:
        reply = self.call("ChangeFilter", timeout, server_id=server_id, change_replication_filter=statement)
        return {"server_id": server_id,
                "effective_at": {"file": reply.effective_at.file, "pos": reply.effective_at.pos}
                if reply.HasField("effective_at") else None,
                "applied_to_running_stream": reply.applied_to_running_stream,
                "effective": [{"channel": e.channel, "change_replication_filter": e.change_replication_filter,
                               "policy_allow": list(e.policy_allow)} for e in reply.effective]}


def _filter_row(row: dump_pb2.FilterRow, *, counter: bool) -> Row:
    return {"SERVER_ID": row.server_id, "CHANNEL_NAME": row.channel_name, "FILTER_NAME": row.filter_name,
            "FILTER_RULE": row.filter_rule, "CONFIGURED_BY": row.configured_by, "ACTIVE_SINCE": row.active_since,
            **({"COUNTER": row.counter} if counter else {})}


def _status_row(s: dump_pb2.SlaveStats) -> Row:
    overhead = s.heartbeat_bytes + s.placeholder_bytes + s.empty_transaction_bytes
    return {
        # SHOW SLAVE HOSTS
        "Server_id": s.server_id, "Host": s.hostname, "Channels": ",".join(channel_name(c) for c in s.channels),
        "Registered_at": s.registered_at,
        # the stream
        "Streaming": "Yes" if s.streaming else "No", "Skip_policy": s.skip_policy,
        "Position": _pos(s.position) if s.HasField("position") and s.position.file else "",
        "Binlog_end": _pos(s.binlog_end) if s.HasField("binlog_end") else "",
        "Bytes_behind": s.bytes_behind,
        "Bytes_read": s.bytes_read, "Bytes_sent": s.bytes_sent, "Kept_bytes": s.kept_bytes,
        "Overhead_bytes": overhead,
        "Sent_pct": round(100.0 * s.bytes_sent / s.bytes_read, 1) if s.bytes_read else 0.0,
        "Events_read": s.events_read, "Events_sent": s.events_sent,
        "Transactions_kept": s.transactions_kept, "Transactions_partial": s.transactions_partial,
        "Transactions_skipped": s.transactions_skipped,
        "Heartbeats": s.heartbeats, "Placeholders": s.placeholders, "Empty_transactions": s.empty_transactions,
        "Rule_hits": dict(sorted(s.rule_hits.items())),
        # lint (issues #17, #44): where a replica with these rules would stop, following the binlog
        "Lint": s.lint_state, "Lint_warnings": list(s.lint_warnings),
        "Lint_position": _pos(s.lint_position) if s.HasField("lint_position") and s.lint_position.file else "",
        "Lint_breaks": s.lint_breaks, "Lint_diverges": s.lint_diverges,
        # issue #62: how far behind the live end of the binlog lint is
        # (none for a rule set lint does not read: not run, failed, off)
        **({"Lint_behind_bytes": s.lint_behind_bytes, "Lint_behind_files": s.lint_behind_files}
           if s.lint_state in ("pending", "done") else {"Lint_behind_bytes": None, "Lint_behind_files": None}),
    }


def _pos(p: dump_pb2.Position) -> str:
    return f"{p.file}:{p.pos}"


def format_table(rows: Sequence[Mapping[str, object]], columns: list[str] | None = None) -> str:
    """Rows as the mysql client prints a result set (+---+ borders); "Empty set" for none."""
    if not rows:
        return "Empty set"
    columns = columns or list(rows[0])
    cells = [[_cell(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(values: list[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths)) + " |"

    plural = "row" if len(rows) == 1 else "rows"
    return "\n".join([rule, line(columns), rule, *(line(r) for r in cells), rule, f"{len(rows)} {plural} in set"])


def channel_name(channel: str) -> str:
    """A channel as an operator reads it: its name, and `(default)` for the default channel (whose
    name is the empty string: MySQL's tables show it as an empty cell)."""
    return channel if channel else "(default)"


def _cell(value: object) -> str:
    return ",".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else str(value)


MAX_SERVER_ID = 2**32 - 1  # server_id is a 32-bit unsigned variable in mysqld
# argparse type for --server-id: 1..4294967295, as mysqld accepts for a replica.
server_id_type = whole_in(1, MAX_SERVER_ID, "a number", "a server_id")
