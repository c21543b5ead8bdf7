"""Workloads: one module per workload, its client and operation generator; the registry is
workloads/registry.py."""
