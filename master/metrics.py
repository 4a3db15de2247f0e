"""Prometheus metrics of the dump service, read from the service's own counters at scrape time
(nothing is counted twice and the stream loop pays nothing for them)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from dumpfilter.master.service import DumpService

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


class DumpServiceCollector:
    def __init__(self, service: DumpService):
        self.service = service

    def collect(self):
        rows = self.service.stats()
        families = {attr: CounterMetricFamily(name, doc, labels=["slave"]) for attr, name, doc in _COUNTERS}
        events = CounterMetricFamily("dumpfilter_events_total", "Events by decision", labels=["slave", "decision"])
        hits = CounterMetricFamily("dumpfilter_filter_rule_hits_total", "Times a filter type decided (P_S COUNTER)",
                                   labels=["slave", "filter_name"])
        behind = GaugeMetricFamily("dumpfilter_slave_bytes_behind", "Master binlog bytes not yet streamed",
                                   labels=["slave"])
        connected = GaugeMetricFamily("dumpfilter_connected_slaves", "Slaves with a running Dump stream")
        streaming = 0
        for slave, _end, bytes_behind in rows:
            label = str(slave.server_id)
            stats = slave.stats
            for attr, _name, _doc in _COUNTERS:
                families[attr].add_metric([label], getattr(stats, attr))
            events.add_metric([label, "read"], stats.events_read)
            events.add_metric([label, "sent"], stats.events_sent)
            events.add_metric([label, "filtered"], stats.events_skipped)
            for name, count in stats.rule_hits.items():
                hits.add_metric([label, name], count)
            behind.add_metric([label], bytes_behind)
            streaming += slave.stream is not None
        connected.add_metric([], streaming)
        yield from families.values()
        yield from (events, hits, behind, connected)


def registry_for(service: DumpService) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(DumpServiceCollector(service))
    return registry


def serve_metrics(service: DumpService, port: int, addr: str = "127.0.0.1"):
    """Start the /metrics HTTP endpoint; returns (server, thread) from prometheus_client."""
    return start_http_server(port, addr=addr, registry=registry_for(service))
