"""Deterministic synthetic workloads written as real binlog files (no server needed)."""

from binlog_workload.generator import WorkloadSpec, generate

__all__ = ["WorkloadSpec", "generate"]
