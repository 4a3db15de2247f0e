"""Prometheus metrics of the dump service, read from the service's own counters at scrape time
(nothing is counted twice and the stream loop pays nothing for them), as one caller may see them.

A scrape shows per-slave series (label `slave`, the server_id) only for the slaves its viewer may
see over gRPC (`Stats`): every slave for an administrator or the metrics token, its own slaves for
an identity, none for an anonymous scraper of a master with a policy. The slaves it may not see
are summed into one series per family whose `slave` label is empty, so the totals are the same in
every view and no server_id another identity uses is named. Per-identity use of the bounded
resources (master.shares) is shown to administrators, and to an identity for itself."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from dumpfilter.binlogs import lint_worker
from dumpfilter.master.policy import OPEN, Identity
from dumpfilter.master.read.schema_feed import order_key
from dumpfilter.master.service import DumpService
from dumpfilter.master.shares import REGISTRATIONS, RULES, STREAMS, account
from dumpfilter.master.shadow.metrics import shadow_metrics

if TYPE_CHECKING:
    from dumpfilter.master.lint_jobs import LintStatus
    from dumpfilter.master.read.units import Pos
    from dumpfilter.master.registry import RegisteredSlave

    Rows = list[tuple[RegisteredSlave, Pos, int]]  # DumpService.stats: (slave, binlog end, bytes behind)

_COUNTERS = (
    ("bytes_read", "dumpfilter_binlog_bytes_read_total", "Master binlog bytes this slave's stream read"),
    ("bytes_sent", "dumpfilter_bytes_sent_total", "Event bytes sent to the slave, skip-policy events included"),
    ("bytes_skipped", "dumpfilter_bytes_filtered_total", "Master binlog bytes not sent as themselves"),
    ("heartbeats", "dumpfilter_heartbeats_total", "Heartbeat events sent"),
    ("heartbeat_bytes", "dumpfilter_heartbeat_bytes_total", "Bytes of heartbeat events sent"),
    ("placeholders", "dumpfilter_placeholders_total", "Placeholder events sent (placeholder skip policy)"),
    ("placeholder_bytes", "dumpfilter_placeholder_bytes_total", "Bytes of placeholder events sent"),
    ("empty_transactions", "dumpfilter_empty_transactions_total", "Empty GTID transactions sent"),
    ("empty_transaction_bytes", "dumpfilter_empty_transaction_bytes_total", "Bytes of empty GTID transactions sent"),
)
_LINT_GAUGES = (  # one series per rule set: offset, number, lag, files, breaks, diverges
    ("dumpfilter_lint_position_offset_bytes", "Where lint has read to in its binlog file (the end of its last whole unit)"),
    ("dumpfilter_lint_position_file_number", "The sequence number of the binlog file lint is in (master-bin.000002: 2)"),
    ("dumpfilter_lint_behind_bytes", "Binlog bytes lint has not read yet, up to the live end"),
    ("dumpfilter_lint_behind_files", "Binlog files after the one lint is in"),
    ("dumpfilter_lint_breaks", "Breaks lint predicted up to its position"),
    ("dumpfilter_lint_diverges", "Writes lint found a replica with these rules silently gets wrong, up to its position"),
)
HIDDEN = ""  # the `slave` label of the series that sums the slaves the viewer may not see
ANONYMOUS = None  # the view of a scraper that did not authenticate (see `view_for`)


def view_for(service: DumpService, identity: Identity | None) -> Identity | None:
    """What an unauthenticated scrape sees: everything on an open master (gRPC hides nothing
    there either), no slave by name under a policy."""
    return identity if identity is not None else OPEN if service.policy is None else ANONYMOUS


class DumpServiceCollector:
    def __init__(self, service: DumpService, viewer: Identity | None = OPEN) -> None:
        self.service = service
        self.viewer = viewer  # OPEN or an admin: every slave; an identity: its own; None: none by name

    def _sees(self, slave: RegisteredSlave) -> bool:
        viewer = self.viewer
        return viewer is not None and (viewer.admin or slave.owner == viewer.name)

    def collect(self) -> Iterator[Metric]:
        rows = self.service.stats()
        families = {attr: CounterMetricFamily(name, doc, labels=["slave"]) for attr, name, doc in _COUNTERS}
        events = CounterMetricFamily("dumpfilter_events_total", "Events by decision", labels=["slave", "decision"])
        hits = CounterMetricFamily("dumpfilter_filter_rule_hits_total", "Times a filter type decided (P_S COUNTER)",
                                   labels=["slave", "filter_name"])
        behind = GaugeMetricFamily("dumpfilter_slave_bytes_behind", "Master binlog bytes not yet streamed",
                                   labels=["slave"])
        streaming, hidden_slaves = 0, 0
        hidden: Counter[str] = Counter()
        hidden_hits: Counter[str] = Counter()
        for slave, _end, bytes_behind in rows:
            stats = slave.stats
            streaming += slave.stream is not None
            values = {attr: getattr(stats, attr) for attr, _name, _doc in _COUNTERS}
            values.update(read=stats.events_read, sent=stats.events_sent, filtered=stats.events_skipped,
                          behind=bytes_behind)
            if not self._sees(slave):
                hidden_slaves += 1
                hidden.update(values)
                hidden_hits.update(stats.rule_hits)
                continue
            self._add(str(slave.server_id), values, stats.rule_hits, families, events, hits, behind)
        if hidden_slaves:
            self._add(HIDDEN, hidden, hidden_hits, families, events, hits, behind)
        yield from families.values()
        yield from (events, hits, behind,
                    GaugeMetricFamily("dumpfilter_connected_slaves", "Slaves with a running Dump stream", value=streaming),
                    GaugeMetricFamily("dumpfilter_registered_slaves", "Registered slaves", value=len(rows)))
        yield from self._segments()
        yield from self._source()
        yield from self._logins()
        yield from self._shares(rows)
        yield from self._lint(rows)
        shadow = self.service.shadow
        if shadow is not None and self.viewer is not None and self.viewer.admin:  # an admin's, as over gRPC
            yield from shadow_metrics(shadow.statuses(self.viewer))

    def _segments(self) -> Iterator[Metric]:
        """The shared segment cache: segments scanned, and segments served without a scan."""
        segments = self.service.segments
        yield from (
            CounterMetricFamily("dumpfilter_segment_scans", "Binlog segments scanned (read, CRCs checked, grouped)",
                                value=segments.reads),
            CounterMetricFamily("dumpfilter_segment_hits", "Segments a stream took without scanning them",
                                value=segments.hits),
            CounterMetricFamily("dumpfilter_segment_kept_hits",
                                "Of the hits, segments the cache had let go and kept by their scan", value=segments.kept_hits))

    def _source(self) -> Iterator[Metric]:
        """`master serve --source`: whether the series can grow, and how often it could not."""
        source = self.service.source
        if source is None:
            return
        status = source.status()
        yield from (
            GaugeMetricFamily("dumpfilter_source_series_full",
                              "1 while the local series cannot grow (a full disk, a quota, a file size limit): "
                              "nothing is taken from the primary, slaves are served what the series holds",
                              value=status["state"] == "full"),
            CounterMetricFamily("dumpfilter_source_series_full_stalls",
                                "Times the local series could not grow and taking from the primary stopped",
                                value=status["full_stalls"]),
            GaugeMetricFamily("dumpfilter_source_streaming", "1 while the primary's dump is being written",
                              value=status["state"] == "streaming"),
            CounterMetricFamily("dumpfilter_source_reconnects", "Reconnections to the primary",
                                value=status["reconnects"]),
            GaugeMetricFamily("dumpfilter_series_bytes", "The local series' size on disk", value=status["series_bytes"]),
            CounterMetricFamily("dumpfilter_series_purged_files",
                                "Series files purged by --expire-logs-seconds / --max-series-bytes",
                                value=status["purged_files"]),
            CounterMetricFamily("dumpfilter_series_forced_purges",
                                "Series files purged while a slave still read them (--max-series-bytes)",
                                value=status["forced_purges"]),
            CounterMetricFamily("dumpfilter_source_switches", "Moves to another --source candidate",
                                value=status["switches"]),
            GaugeMetricFamily("dumpfilter_source_changed_time_seconds",
                              "When the current --source became current (Unix time)",
                              value=datetime.fromisoformat(status["changed_at"]).timestamp()))
        if self.viewer is not None and self.viewer.admin:  # where the primary is: the operator's
            current = GaugeMetricFamily("dumpfilter_source_current", "The --source being read (1), by address",
                                        labels=["source"])
            current.add_metric([status["source"]], 1)
            yield current

    def _logins(self) -> Iterator[Metric]:
        """Failed logins on every face (master.login_guard, issue #62): by identity (`identity=""`:
        names the policy does not know) and by address, the logins refused without a check, the
        checks run, and the keys backing off. To an administrator; an identity sees its own row."""
        policy, viewer = self.service.policy, self.viewer
        if policy is None or viewer is None:
            return
        counts = policy.logins.snapshot()
        by_identity = CounterMetricFamily("dumpfilter_failed_logins_by_identity",
                                          "Failed logins (gRPC and the MySQL endpoint) by identity; \"\" for "
                                          "names the policy does not know", labels=["identity"])
        for name, n in sorted(counts["by_identity"].items()):
            if viewer.admin or name == viewer.name:
                by_identity.add_metric([name], n)
        yield by_identity
        if not viewer.admin:
            return
        by_address = CounterMetricFamily("dumpfilter_failed_logins_by_address",
                                         "Failed logins by source address (an IPv6 one by its /64; \"other\" past "
                                         "the first 256 addresses)", labels=["address"])
        for address, n in sorted(counts["by_address"].items()):
            by_address.add_metric([address], n)
        refused = CounterMetricFamily("dumpfilter_logins_refused_unchecked",
                                      "Logins refused without a password check: the key backing off (address, "
                                      "identity, pair) or busy (the check pool's queue was full)", labels=["reason"])
        for reason in ("address", "identity", "pair", "busy"):
            refused.add_metric([reason], counts["refused"].get(reason, 0))
        checks = CounterMetricFamily("dumpfilter_login_checks", "Password checks run: in the bounded pool "
                                     "(PBKDF2, ed25519) or inline (cheap ones)", labels=["where"])
        for where in ("pool", "inline"):
            checks.add_metric([where], counts["checks"].get(where, 0))
        held = CounterMetricFamily("dumpfilter_logins_refused_held", "Refusals without a check whose answer was "
                                   "held (up to [login] hold_seconds, on the guard's few hold slots)", value=counts["held"])
        reserved = CounterMetricFamily("dumpfilter_logins_checked_in_turn", "Logins over a fresh connection checked "
                                       "in their key's reserved turn although the key was backing off (issue #82)",
                                       value=counts["reserved"])
        backing_off = GaugeMetricFamily("dumpfilter_login_backoff_keys", "Keys waiting before their next password "
                                        "check (delayed) or refused for a while (blocked)", labels=["key", "state"])
        for key in ("addresses", "identities", "pairs"):
            for state in ("delayed", "blocked"):
                backing_off.add_metric([key, state], counts[key].get(state, 0))
        yield from (by_address, refused, checks, held, reserved, backing_off)

    @staticmethod
    def _add(label: str, values: Mapping[str, int], rule_hits: Mapping[str, int],
             families: dict[str, CounterMetricFamily], events: CounterMetricFamily, hits: CounterMetricFamily,
             behind: GaugeMetricFamily) -> None:
        for attr, family in families.items():
            family.add_metric([label], values.get(attr, 0))
        for decision in ("read", "sent", "filtered"):
            events.add_metric([label, decision], values.get(decision, 0))
        for name, count in sorted(rule_hits.items()):
            hits.add_metric([label, name], count)
        behind.add_metric([label], values.get("behind", 0))

    def _shares(self, rows: Rows) -> Iterator[Metric]:
        """Use and limit of each identity's shares (master.shares), for the identities the viewer
        may see: every one for an administrator, its own for an identity."""
        viewer = self.viewer
        if viewer is None:
            return
        use = GaugeMetricFamily("dumpfilter_identity_use", "What an identity holds of a bounded resource",
                                labels=["identity", "resource"])
        limit = GaugeMetricFamily("dumpfilter_identity_limit", "An identity's limit of a bounded resource",
                                  labels=["identity", "resource"])
        held: dict[str, dict[str, int]] = {}
        identities: dict[str, Identity] = {}
        for slave, _end, _behind in rows:
            if not self._sees(slave):
                continue
            mine = held.setdefault(slave.account, Counter())
            mine[REGISTRATIONS] += 1
            mine[RULES] += slave.rule_count
            mine[STREAMS] += slave.stream is not None
            identities.setdefault(slave.account, slave.identity)
        if not viewer.admin:
            identities.setdefault(account(viewer), viewer)
            held.setdefault(account(viewer), Counter())
        shares = self.service.shares
        for name in sorted(held):
            for resource in (REGISTRATIONS, RULES, STREAMS):
                use.add_metric([name, resource], held[name][resource])
                cap = shares.limit(identities[name], resource)
                if cap is not None:
                    limit.add_metric([name, resource], cap)
        yield use
        yield limit

    def _lint(self, rows: Rows) -> Iterator[Metric]:
        """Lint at Register (master.lint_jobs, issue #62) per followed rule set (`rule_set`: its id; which
        slaves share it in dumpfilter_lint_rule_set_slave): its position, how far behind the live end of
        the binlog it is (only for a rule set lint reads: pending or done), its state and breaks, for
        the rule sets of slaves the viewer may see; the others' states and breaks summed into
        `rule_set=""`, their lag the furthest behind of them. And the lint worker's restarts."""
        lint = self.service.lint
        seen = {slave.server_id for slave, _end, _behind in rows if self._sees(slave)}
        offset, number, lag, files, breaks, diverges = (GaugeMetricFamily(name, doc, labels=["rule_set"])
                                                         for name, doc in _LINT_GAUGES)
        state = GaugeMetricFamily("dumpfilter_lint_state", "Rule sets in each lint state (1 or 0 for a named one)",
                                  labels=["rule_set", "state"])
        shared = GaugeMetricFamily("dumpfilter_lint_rule_set_slave", "1 for each slave of a rule set", labels=["rule_set", "slave"])
        hidden: list[LintStatus] = []  # the rule sets of the slaves the viewer may not see
        for one in sorted(lint.rule_sets(), key=lambda r: r.rule_set):
            status = one.status
            mine = [server_id for server_id in one.server_ids if server_id in seen]
            if not mine:
                hidden.append(status)
                continue
            label = str(one.rule_set)
            if status.position is not None:
                offset.add_metric([label], status.position[1])
                n = order_key(status.position)[0]  # the file's sequence number (master-bin.000002: 2), -1 for none
                if n >= 0:
                    number.add_metric([label], n)
            if status.followed:  # one lint does not run (not run, failed) has no lag: its state says so
                lag.add_metric([label], status.behind_bytes)
                files.add_metric([label], status.behind_files)
            breaks.add_metric([label], status.breaks)
            diverges.add_metric([label], status.diverges)
            for name in _LINT_STATES:
                state.add_metric([label, name], status.state == name)
            for server_id in mine:
                shared.add_metric([label, str(server_id)], 1)
        followed = [status for status in hidden if status.followed]
        if followed:  # the furthest behind of them: a lag, never more than the binlog
            lag.add_metric([HIDDEN], max(status.behind_bytes for status in followed))
            files.add_metric([HIDDEN], max(status.behind_files for status in followed))
        if hidden:
            breaks.add_metric([HIDDEN], sum(status.breaks for status in hidden))
            diverges.add_metric([HIDDEN], sum(status.diverges for status in hidden))
            for name in _LINT_STATES:
                state.add_metric([HIDDEN, name], sum(status.state == name for status in hidden))
        restarts = CounterMetricFamily("dumpfilter_lint_worker_restarts",
                                       "Times the lint worker process was started again after it ended",
                                       value=lint_worker.restarts())
        yield from (offset, number, lag, files, state, breaks, diverges, shared, restarts)


_LINT_STATES = ("pending", "done", "not run", "failed")


def registry_for(service: DumpService, viewer: Identity | None = OPEN) -> CollectorRegistry:
    """The metrics `viewer` may see (default: everything, as the process itself sees it)."""
    registry = CollectorRegistry()
    registry.register(DumpServiceCollector(service, viewer))
    return registry
