"""The pure replication filter rule engine: rule sets, parsers, per-channel filters and rpl_filter.cc decisions."""
