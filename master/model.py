"""The dump service's requests and results: what a slave registers, what a stream yields, and what
is counted per slave. Plain data, no behaviour."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import cast

from dumpfilter._core import SentBytes, join_parts
from dumpfilter.rules.ruleset import RuleSet, Settings
from dumpfilter.rules.schema import SchemaModel
from dumpfilter.skip_policy import DEFAULT as DEFAULT_SKIP_POLICY
from dumpfilter.rules.gate import Gate
from dumpfilter.sent import SentCounts
from dumpfilter.master.read.units import Pos


@dataclass(frozen=True)
class ChannelSpec:
    """Requested filters for one channel (None: global), as structured rules or CRF text."""

    channel: str | None
    rules: RuleSet | None = None
    text: str | None = None


@dataclass(frozen=True)
class Registration:
    server_id: int
    hostname: str = ""
    channels: tuple[str, ...] = ("",)
    filters: tuple[ChannelSpec, ...] = ()
    settings: Settings = Settings()
    skip_policy: str = DEFAULT_SKIP_POLICY
    user: str = ""
    password: str = ""
    # The replica's own starting schema (RegisterRequest.replica_schema), for lint at Register.
    replica_schema: SchemaModel | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Effective:
    channel: str
    rules: RuleSet
    gate: Gate


@dataclass
class RegisterResult:
    server_id: int
    effective: list[Effective]
    warnings: list[str]
    replaced: bool


Part = bytes | memoryview | SentBytes  # a piece of a batch's events (`Batch.parts`)


@dataclass
class Batch:
    """What one Dump reply carries. The raw events come as the pieces the stream assembled
    them in (`parts`: bytes, views of the binlog, and the compiled walk's SentBytes, copied
    once): the gRPC face writes them straight into the reply's wire bytes, on its own thread,
    and `events` joins them for any other reader."""

    parts: list[Part]
    position: Pos
    transactions: int = 0
    skipped_bytes: int = 0
    caught_up: bool = False
    heartbeat: bool = False
    gtid_state: str = ""
    filter_changed_at: Pos | None = None
    # Statements kept by a decision that read the master's schema model: (file, end position).
    schema_decided: list[Pos] = field(default_factory=list)

    @property
    def events(self) -> bytes:
        """The raw events, joined on first use."""
        if len(self.parts) != 1 or isinstance(self.parts[0], SentBytes):
            self.parts = [join_parts(b"", self.parts, b"")]
        return cast(bytes, self.parts[0])


@dataclass
class SlaveStats(SentCounts):
    """The sent counts `experiment` computes too (dumpfilter.sent), and the master's own."""

    rule_hits: Counter[str] = field(default_factory=Counter)
    assumed_decisions: int = 0   # statement decisions that assumed what the schema model lacks
