"""Deterministic synthetic workloads written as real binlog files (no server needed)."""

from dumpfilter.workload.generator import WorkloadSpec, generate

__all__ = ["WorkloadSpec", "generate"]
