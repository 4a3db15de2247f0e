"""Prometheus metrics of a running slave (`slave run --metrics-port`), read from its counters at
scrape time, totals over every run of this relay directory (as `slave status` shows them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily

if TYPE_CHECKING:
    from dumpfilter.slave.node import Slave

# (counter of slave.config.Counters, metric name, help)
_COUNTERS = (
    ("events_received", "dumpfilter_slave_events_received_total", "Events received from the master"),
    ("bytes_received", "dumpfilter_slave_bytes_received_total", "Event bytes received from the master"),
    ("wire_bytes", "dumpfilter_slave_wire_bytes_total",
     "Event bytes on the wire (a placeholder run is one placeholder; bytes_received counts it as the run)"),
    ("events_relayed", "dumpfilter_slave_events_relayed_total", "Events written to the relay log"),
    ("bytes_relayed", "dumpfilter_slave_bytes_relayed_total", "Bytes written to the relay log"),
    ("heartbeats", "dumpfilter_slave_heartbeats_total", "Heartbeat events received"),
    ("placeholders", "dumpfilter_slave_placeholders_total", "Placeholder events received"),
    ("rewritten", "dumpfilter_slave_rewritten_events_total", "Events renamed by replicate-rewrite-db"),
    ("check_disagreements", "dumpfilter_slave_check_disagreements_total",
     "Events the master sent that the slave's own rules drop (relayed under --on-disagreement warn)"),
    ("master_schema_kept", "dumpfilter_slave_master_schema_kept_total",
     "Statements the slave's own rules drop, kept because the master decided them with its schema model"),
)


class SlaveCollector:
    def __init__(self, slave: Slave) -> None:
        self.slave = slave

    def collect(self) -> Iterator[CounterMetricFamily]:
        slave = self.slave
        earlier, counters = slave._earlier_stats, slave.counters
        label = str(slave.config.server_id)
        for attr, name, doc in _COUNTERS:
            family = CounterMetricFamily(name, doc, labels=["server_id"])
            family.add_metric([label], earlier.get(attr, 0) + getattr(counters, attr))
            yield family


def registry_for(slave: Slave) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(SlaveCollector(slave))
    return registry
