"""What one slave is told (`SlaveConfig`: its master, rules, skip policy, relay log, apply
target) and what it counts as it receives (`Counters`, behind SHOW SLAVE STATUS and the metrics)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.skip_policy import DEFAULT as DEFAULT_SKIP_POLICY
from dumpfilter.slave.relay_log import DEFAULT_COMMIT_INTERVAL

if TYPE_CHECKING:  # loaded when a schema travels
    from dumpfilter.rules.schema import SchemaModel


@dataclass
class SlaveConfig:
    master: str
    server_id: int
    relay_dir: Path
    rules: RuleSet = field(default_factory=RuleSet)
    settings: Settings = field(default_factory=Settings)
    channel: str = ""
    skip_policy: str = DEFAULT_SKIP_POLICY
    user: str = ""
    password: str = ""
    hostname: str = ""
    until_caught_up: bool = False
    apply_url: str | None = None
    relay_log_size: int = 64 << 20
    relay_commit_interval: float = DEFAULT_COMMIT_INTERVAL  # group commit of relay-log.info (slave.relay_log)
    heartbeat_period: float = 1.0
    tls_ca: Path | None = None
    tls_cert: Path | None = None     # mTLS: this slave's client certificate and key
    tls_key: Path | None = None
    start_gtid: str | None = None
    connect_retry: float = 1.0       # first backoff (MASTER_CONNECT_RETRY); doubles up to MAX_BACKOFF
    net_timeout: float | None = 60.0  # slave_net_timeout: reconnect after this long without a batch
    rpc_timeout: float = 10.0
    connect_timeout: float | None = None  # give up after this many seconds without reaching the master
    retry_count: int | None = None        # give up after this many failed attempts in a row (MASTER_RETRY_COUNT)
    report: Callable[[str], None] | None = None  # where failed attempts are told (default: stderr)
    schema: SchemaModel | None = None  # starting schema for the slave's own check of what it receives
    on_disagreement: str = "error"     # that check drops what the master sent: error | warn (slave/trust.py)
    replica_schema: SchemaModel | None = None  # this replica's own starting schema, for lint at Register
    # --until-caught-up: how long to wait, once caught up, for the master's background lint of this
    # slave's rules (asked through Stats) before ending; 0: do not wait.
    lint_wait: float = 0.0
    # Ask for runs of placeholders, and for skipped transactions in a row, each sent as one event
    # (DumpRequest.placeholder_runs and skip_stretches in dump.proto): the relay log, positions and
    # counts are the same. Stretches are not asked by a slave that rewrites databases (Slave._stream).
    placeholder_runs: bool = True
    skip_stretches: bool = True


@dataclass
class Counters:
    batches: int = 0
    events_received: int = 0       # as a replica is sent them: a placeholder run counts as its placeholders
    bytes_received: int = 0
    wire_bytes: int = 0            # the event bytes that came over the wire
    heartbeats: int = 0
    placeholders: int = 0
    events_relayed: int = 0
    bytes_relayed: int = 0
    rewritten: int = 0
    check_disagreements: int = 0   # events the slave's own rules drop that the master sent (slave/trust.py)
    master_schema_kept: int = 0    # statements they drop that the master decided with its schema model
