"""The shadow candidates' Prometheus series (per candidate: the bytes and events it would be sent,
the bytes it saves, how far it has counted, its state and lint), for an administrator's scrape of
/metrics (master.serve.metrics adds them)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from dumpfilter.master.shadow.board import CandidateStatus

LINT_STATES = ("pending", "done", "not run", "failed", "off")
_COUNTS = (
    ("bytes_all", "dumpfilter_shadow_bytes_read", "Binlog bytes a candidate's count has read since it was added"),
    ("bytes_sent", "dumpfilter_shadow_bytes_sent", "Bytes the candidate would be sent (skip-policy events included)"),
    ("events_sent", "dumpfilter_shadow_events_sent", "Events the candidate would be sent"),
    ("saving_bytes", "dumpfilter_shadow_bytes_saved", "Binlog bytes read less the bytes it would be sent"),
)


def shadow_metrics(statuses: Sequence[CandidateStatus]) -> Iterator[Metric]:
    """One series per candidate (label `candidate`) and family."""
    families = [(key, GaugeMetricFamily(name, doc, labels=["candidate"])) for key, name, doc in _COUNTS]
    counting = GaugeMetricFamily("dumpfilter_shadow_counting",
                                 "1 while a candidate counts, 0 once it stopped (`master shadow list` says why)",
                                 labels=["candidate"])
    position = GaugeMetricFamily("dumpfilter_shadow_counted_offset_bytes",
                                 "Where a candidate has counted to in its binlog file", labels=["candidate"])
    number = GaugeMetricFamily("dumpfilter_shadow_counted_file_number",
                               "The sequence number of the binlog file a candidate has counted to",
                               labels=["candidate"])
    lint = GaugeMetricFamily("dumpfilter_shadow_lint_state", "1 for a candidate's lint state",
                             labels=["candidate", "state"])
    breaks = GaugeMetricFamily("dumpfilter_shadow_lint_breaks", "Breaks lint predicted for a candidate",
                               labels=["candidate"])
    diverges = GaugeMetricFamily("dumpfilter_shadow_diverges",
                                 "Writes a replica with the candidate's rules would silently get wrong",
                                 labels=["candidate"])
    for s in statuses:
        label = [s.name]
        for key, family in families:
            family.add_metric(label, s.counts.get(key, 0))
        counting.add_metric(label, s.state == "counting")
        if s.counted_to is not None:
            position.add_metric(label, s.counted_to[1])
            tail = s.counted_to[0].rpartition(".")[2]
            if tail.isdigit():
                number.add_metric(label, int(tail))
        for state in LINT_STATES:
            lint.add_metric([s.name, state], s.lint_state == state)
        breaks.add_metric(label, s.lint_breaks)
        diverges.add_metric(label, s.diverges)
    yield from (family for _, family in families)
    yield from (counting, position, number, lint, breaks, diverges)
