"""A stand-in for the KV scan calls of sut/fluss/LeaseClient.java and KvScanCalls.java and
the cluster behind them, for the kv-scan workload's unit tests: the same JSON-lines
protocol over TCP in front of a small in-memory model (a changelog per bucket; a scan
session holds its bucket's rows as of its open and hands them out a few at a time; a
session idle past the ttl is evicted when next asked for and its id remembered for 2 ttl;
a continuation out of sequence ends the session, as Fluss's does). The real service is
exercised by the Docker end-to-end test.

Broken modes, for the checker to catch: live (each batch is read from the table as it is
now, not as of the open), immortal (sessions never expire), forgetful (an expired id is
unknown at once).
"""

from __future__ import annotations

import itertools
import time
import zlib
from typing import Any

from json_lines_service import JsonLinesService

BUCKETS = 3
ROW_BYTES = 24  # about what a row of (string, bigint) takes in a value batch


class FakeScanService(JsonLinesService):
    def __init__(self, ttl_ms: int, mode: str = "") -> None:
        self.ttl_s, self.mode = ttl_ms / 1000, mode
        self.logs: dict[int, list[tuple[str, int]]] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.expired: dict[str, float] = {}
        self.scans: dict[str, str] = {}  # the workload's scan id -> session id
        self.ids = itertools.count(1)
        super().__init__()

    def state(self, bucket: int, upto: int | None = None) -> list[tuple[str, int]]:
        rows: dict[str, int] = {}
        for key, value in self.logs.get(bucket, [])[:upto]:
            rows[key] = value
        return sorted(rows.items())

    def answer(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req["op"]
        if op == "scan-support":
            return {"ok": True, "scan": True}
        if op == "setup":
            self.logs.clear()
            return {"ok": True}
        if op == "upsert":
            bucket = zlib.crc32(req["key"].encode()) % BUCKETS
            log = self.logs.setdefault(bucket, [])
            log.append((req["key"], req["value"]))
            return {"ok": True, "bucket": bucket, "log_end": len(log)}
        if op == "scan-open":
            return self.open(req)
        if op == "scan-next":
            return self.next(req)
        if op == "scan-close":
            self.sessions.pop(self.scans.pop(req["scan"], ""), None)
            return {"ok": True}
        return {"ok": False, "error": f"unknown op {op}"}

    def open(self, req: dict[str, Any]) -> dict[str, Any]:
        bucket = req["bucket"]
        offset = len(self.logs.get(bucket, []))
        sid = f"{next(self.ids):08x}"
        session = {"bucket": bucket, "offset": offset, "rows": self.state(bucket),
                   "pos": 0, "seq": 0, "at": time.monotonic(),
                   "per_batch": max(1, req["batch_bytes"] // ROW_BYTES)}
        reply = {"ok": True, "leader": 1, "log_offset": offset, "scanner": sid}
        self.batch(session, reply)
        if reply["has_more"]:
            self.sessions[sid] = session
            self.scans[req["scan"]] = sid
        return reply

    def next(self, req: dict[str, Any]) -> dict[str, Any]:
        sid = self.scans.get(req["scan"], "")
        now = time.monotonic()
        for old, at in list(self.expired.items()):
            if now - at > 2 * self.ttl_s:
                del self.expired[old]
        session = self.sessions.get(sid)
        if session is not None and now - session["at"] > self.ttl_s and self.mode != "immortal":
            del self.sessions[sid]
            session = None
            if self.mode != "forgetful":
                self.expired[sid] = now
        if session is None:
            code = "SCANNER_EXPIRED" if sid in self.expired else "UNKNOWN_SCANNER_ID"
            return {"ok": False, "code": code, "error": code, "gone": False, "leader_now": 1}
        if req["seq"] != session["seq"] + 1:
            del self.sessions[sid]
            return {"ok": False, "code": "INVALID_SCAN_REQUEST", "gone": False,
                    "error": "INVALID_SCAN_REQUEST: out-of-order scan request"}
        session["seq"] = req["seq"]
        session["at"] = now
        if self.mode == "live":
            done = {k for k, _ in session["rows"][:session["pos"]]}
            session["rows"] = session["rows"][:session["pos"]] + [
                r for r in self.state(session["bucket"]) if r[0] not in done]
        reply: dict[str, Any] = {"ok": True}
        self.batch(session, reply)
        if not reply["has_more"]:  # the server ends a drained session itself
            del self.sessions[sid]
        return reply

    @staticmethod
    def batch(session: dict[str, Any], reply: dict[str, Any]) -> None:
        start, n = session["pos"], session["per_batch"]
        reply["rows"] = [list(r) for r in session["rows"][start:start + n]]
        session["pos"] = start + n
        reply["has_more"] = session["pos"] < len(session["rows"])
