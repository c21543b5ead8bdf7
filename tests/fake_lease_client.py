"""A stand-in for sut/fluss/LeaseClient.java and the cluster behind it, for the workload's
unit tests: the same JSON-lines protocol over TCP (a thread per connection) in front of a
small in-memory model of Fluss's KV snapshots (a changelog per bucket, a snapshot of each
bucket when it is listed and has grown, the two newest kept plus every leased one). The
real service is exercised by the Docker end-to-end tests.

lease_off: lease calls are answered without effect (the negative control);
ignore_leases: leased snapshots are deleted anyway (a broken server).
"""

from __future__ import annotations

import zlib
from typing import Any

from json_lines_service import JsonLinesService

RETAINED = 2


class FakeLeaseService(JsonLinesService):
    def __init__(self, lease_off: bool = False, ignore_leases: bool = False) -> None:
        self.lease_off, self.ignore_leases = lease_off, ignore_leases
        self.model: dict[str, Any] = {"logs": {}, "snaps": {}, "next": {}, "leases": {}}
        super().__init__()

    def answer(self, req: dict[str, Any]) -> dict[str, Any]:
        return handle(req, self.model, self.lease_off, self.ignore_leases)


def table(s: dict, bucket: str) -> dict:
    rows: dict = {}
    for key, value, kind in s["logs"].get(bucket, []):
        if kind == "+":
            rows[key] = value
    return rows


def collect(s: dict, bucket: str, ignore_leases: bool) -> None:
    snaps = s["snaps"].get(bucket, {})
    leased = set() if ignore_leases else {
        str(held[bucket]) for held in s["leases"].values() if bucket in held}
    newest = sorted(snaps, key=int)[-RETAINED:]
    for sid in list(snaps):
        if sid not in newest and sid not in leased:
            del snaps[sid]


def handle(req: dict, s: dict, lease_off: bool, ignore_leases: bool) -> dict:
    op = req["op"]
    if op == "setup":
        return {"ok": True}
    if op == "upsert":
        bucket = str(zlib.crc32(req["key"].encode()) % 3)
        log = s["logs"].setdefault(bucket, [])
        if req["key"] in table(s, bucket):
            log.append([req["key"], None, "-"])  # an update is two records, as in Fluss
        log.append([req["key"], req["value"], "+"])
        return {"ok": True, "bucket": int(bucket), "log_end": len(log)}
    if op == "latest":
        out = []
        for bucket, log in sorted(s["logs"].items()):
            snaps = s["snaps"].setdefault(bucket, {})
            newest = max(snaps, key=int, default=None)
            if newest is None or snaps[newest]["log_offset"] < len(log):
                sid = s["next"].get(bucket, 0)
                s["next"][bucket] = sid + 1
                snaps[str(sid)] = {"log_offset": len(log), "rows": table(s, bucket)}
                collect(s, bucket, ignore_leases)
                newest = str(sid)
            out.append({"bucket": int(bucket), "snapshot": int(newest),
                        "log_offset": snaps[newest]["log_offset"]})
        return {"ok": True, "table_id": 0, "snapshots": out}
    if op == "acquire":
        if not lease_off:
            held = s["leases"].setdefault(req["lease"], {})
            for e in req["snapshots"]:
                held[str(e["bucket"])] = e["snapshot"]
        return {"ok": True, "unavailable": []}
    if op in ("renew",):
        return {"ok": True}
    if op == "release":
        for b in req["buckets"]:
            s["leases"].get(req["lease"], {}).pop(str(b), None)
        return {"ok": True}
    if op == "drop":
        s["leases"].pop(req["lease"], None)
        return {"ok": True}
    if op == "read":
        snap = s["snaps"].get(str(req["bucket"]), {}).get(str(req["snapshot"]))
        if snap is None:
            return {"ok": False, "gone": True, "error": "KvSnapshotNotExistException: gone"}
        return {"ok": True, "log_offset": snap["log_offset"], "files": 3, "bytes": 100,
                "rows": snap["rows"]}
    return {"ok": False, "error": f"unknown op {op}", "gone": False}

