"""Registry of workloads: a new workload is one module plus one entry here."""

from __future__ import annotations

from leaseline.harness.errors import BadArguments
from leaseline.workloads.base import Client, Completion, Generator, Op, Workload, WorkloadOptions
from leaseline.workloads.dynamo_cas import DynamoCas
from leaseline.workloads.dynamo_register import DynamoRegister
from leaseline.workloads.kv_scan import KvScan
from leaseline.workloads.kv_snapshot_lease import KvSnapshotLease
from leaseline.workloads.list_append import ListAppend
from leaseline.workloads.lua_cas import LuaCas
from leaseline.workloads.register import Register

WORKLOADS: dict[str, type[Workload]] = {
    Register.name: Register,
    LuaCas.name: LuaCas,
    DynamoRegister.name: DynamoRegister,
    DynamoCas.name: DynamoCas,
    KvSnapshotLease.name: KvSnapshotLease,
    ListAppend.name: ListAppend,
    KvScan.name: KvScan,
}


def workload_class(name: str) -> type[Workload]:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise BadArguments(
            f"unknown workload {name!r} (valid: {', '.join(sorted(WORKLOADS))})."
        ) from None


__all__ = [
    "WORKLOADS",
    "Client",
    "Completion",
    "Generator",
    "Op",
    "Workload",
    "WorkloadOptions",
    "workload_class",
]
