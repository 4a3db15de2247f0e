"""The master's dump service (WL#2387 parts 1 and 2): registrations, filtered streams, policy.

At the top, the service and what every room shares: service (DumpService), registry (each slave's
channels and rules), lint_jobs, policy, shares, model (plain data) and rate_limited_log. The rooms:
read (the binlog read once for all slaves), decide (what each slave is sent of a unit), stream (one
Dump call per slave), serve (the gRPC face and /metrics), endpoint (the MySQL protocol for real
replicas), upstream (the client of a live primary, `--source`), protocol (the MySQL protocol both
of those speak). docs/architecture.md draws the way of an event through them."""
