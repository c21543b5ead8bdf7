"""The promise of a resource lease: what a KV snapshot lease (Apache Fluss) must keep.

Beside the read lease (how stale a read may be, checkers/decide.py) this checks a lease on
a resource, from the records of the `kv-snapshot-lease` workload:

1. While a lease is unreleased, every read of a snapshot it holds completes with the
   snapshot whole, until the lease's deadline minus a stated clock margin. The deadline
   a holder may count on is invoke + duration of the latest acquire or renew that was
   acknowledged before the read began: the server starts its own clock after receiving
   the request, so this is the earliest it may expire the lease. A snapshot is held from
   its acquire's acknowledgement (when Fluss did not name it unavailable) until the
   release of its bucket or the lease's drop is invoked. A read that Fluss answers with
   "gone" (the snapshot or one of its files does not exist) inside that window is a
   violation; release and expiry allow deletion, never require it.
2. The rows a snapshot read returns are the table as of the snapshot's log offset: per
   key, the last acknowledged upsert whose log end offset is at most the snapshot's (none:
   no row), never a value written after it or overwritten before it, never a value
   nobody wrote.

Unknown outcomes count both ways: an info renew extends nothing, an info release or drop
may have ended the hold at its invocation, an info upsert's value may or may not be in
any snapshot, an info read (or one that failed for another reason: a timeout, a lost
connection) is undecided. A history in which no read of a held snapshot completed is
unknown: a gate must not pass a run that checked nothing.

Records are history.jsonl's (ARCHITECTURE.md, "History format"); the workload's value
fields are documented in workloads/kv_snapshot_lease.py. Room is left for Fluss's KV scan
sessions (one point-in-time state per session, which expire): they would be another
holder kind whose reads rule 1 covers unchanged.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaseline.checkers.faults import fault_periods
from leaseline.checkers.importers.jsonl import nemesis_events, parse_line

DEFAULT_CLOCK_MARGIN_MS = 500
LEASE_FS = frozenset({"acquire", "renew", "release", "drop"})
WORKLOAD_FS = LEASE_FS | {"upsert", "read-snapshot"}


@dataclass
class Op:
    """One invocation with its completion (type "info" and complete None when it never
    completed)."""

    index: int
    process: Any
    f: str
    key: Any
    invoke: int  # ns
    complete: int | None  # ns
    type: str  # "ok" | "fail" | "info"
    value: Any  # the invocation's value
    result: Any  # the completion's value
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.type == "ok"


def pair(records: Iterable[dict[str, Any]], fs: frozenset[str] = WORKLOAD_FS) -> list[Op]:
    """The workload's operations (those whose f is in `fs`) from history records, in
    invocation order (a process has one operation in flight; nemesis records and other f's
    are skipped)."""
    open_ops: dict[Any, Op] = {}
    ops: list[Op] = []
    for r in records:
        if r.get("f") not in fs or r.get("process") == "nemesis":
            continue
        if r["type"] == "invoke":
            op = Op(r["index"], r["process"], r["f"], r.get("key"), r["time"], None, "info",
                    r.get("value"), None)
            open_ops[r["process"]] = op
            ops.append(op)
            continue
        op = open_ops.pop(r["process"], None)
        if op is None:
            continue
        op.type, op.complete = r["type"], r["time"]
        op.result, op.error = r.get("value"), r.get("error")
    return ops


@dataclass
class Hold:
    """A snapshot held by a lease from `since` (ns) until `until` (ns; None: not ended by
    the holder)."""

    lease: str
    bucket: int
    snapshot: int
    log_offset: int | None
    since: int
    acquire_index: int
    until: int | None = None


@dataclass
class Violation:
    kind: str  # "lease" | "rows"
    read_index: int
    bucket: int
    snapshot: int
    lease: str | None
    text: str
    ops: list[int] = field(default_factory=list)  # indices of the operations that force it
    invoke: int = 0  # the read's, ns
    complete: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "read": self.read_index, "bucket": self.bucket,
                "snapshot": self.snapshot, "lease": self.lease, "explanation": self.text,
                "ops": self.ops, "invoke_ms": self.invoke / 1e6,
                "complete_ms": None if self.complete is None else self.complete / 1e6}


def _one(values: set[Any]) -> str:
    return " or ".join(map(str, sorted(values, key=str)))


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.0f} ms"


class _Leases:
    """Per lease: its holds and the deadlines its acknowledged acquires and renews give.

    Grants (acknowledged acquires and renewals) form chains: the next one belongs to the
    same chain when it was invoked before the chain's deadline minus the margin. A later
    one may find the lease expired (Fluss then answers a renewal ok, but what the lease
    held is no longer kept), so a hold lasts only as long as the chain of its acquire."""

    def __init__(self, ops: list[Op], margin_ns: int) -> None:
        self.holds: dict[str, list[Hold]] = defaultdict(list)
        # (acknowledged at, deadline, index, chain) per lease, in acknowledgement order
        self.grants: dict[str, list[tuple[int, int, int, int]]] = defaultdict(list)
        self.chain_of: dict[int, int] = {}  # grant index -> its chain
        # acknowledged renewals invoked after the latest expiration time the server can
        # have given the lease (the last grant's completion + its duration, plus the margin)
        # (op, that time): once Fluss's expiration check has dropped the lease, a renewal
        # makes a new, empty one and is answered ok
        self.late_renewals: list[tuple[Op, int]] = []
        ends: dict[str, int] = {}  # lease -> the latest expiration time the server can have set
        chains: dict[str, tuple[int, int | None]] = {}  # lease -> (chain, its deadline)
        for op in ops:
            if op.f not in LEASE_FS or op.type == "fail":
                continue  # failed: certainly did not happen
            lease = str(op.key)
            if op.f in ("acquire", "renew") and op.ok:
                duration_ns = int((op.value or {}).get("duration_ms", 0)) * 1_000_000
                chain, until = chains.get(lease, (0, None))
                if op.f == "renew" and lease in ends and op.invoke > ends[lease] + margin_ns:
                    self.late_renewals.append((op, ends[lease]))
                ends[lease] = (op.complete or op.invoke) + duration_ns
                if until is not None and op.invoke > until - margin_ns:
                    chain, until = chain + 1, None  # the lease may have expired before it
                end = op.invoke + duration_ns
                chains[lease] = (chain, end if until is None else max(until, end))
                self.chain_of[op.index] = chain
                self.grants[lease].append((op.complete or 0, end, op.index, chain))
            if op.f == "acquire" and op.ok:
                self._acquired(lease, op)
            elif op.f == "release":
                buckets = set((op.value or {}).get("buckets", []))
                self._end(lease, op.invoke, lambda h, b=buckets: h.bucket in b)
            elif op.f == "drop":
                self._end(lease, op.invoke, lambda h: True)
        for grants in self.grants.values():
            grants.sort()

    def _acquired(self, lease: str, op: Op) -> None:
        result = op.result or {}
        unavailable = {(u["bucket"], u["snapshot"]) for u in result.get("unavailable", [])}
        for s in result.get("snapshots", (op.value or {}).get("snapshots", [])):
            b, sid = int(s["bucket"]), int(s["snapshot"])
            if (b, sid) in unavailable:
                continue
            # a bucket holds one snapshot per lease: a new acquire replaces the old one
            self._end(lease, op.invoke, lambda h, b=b: h.bucket == b)
            self.holds[lease].append(Hold(lease, b, sid, s.get("log_offset"), op.complete or 0,
                                          op.index))

    def _end(self, lease: str, at: int, which: Any) -> None:
        for h in self.holds[lease]:
            if h.until is None and which(h):
                h.until = at

    def deadline(self, hold: Hold, before: int) -> tuple[int, int] | None:
        """(deadline, index of the grant) the holder of `hold` could count on at time
        `before`: the latest its chain's grants acknowledged by then give."""
        chain = self.chain_of.get(hold.acquire_index)
        best = None
        for acked, deadline, index, grant_chain in self.grants.get(hold.lease, []):
            if acked > before:
                break
            if grant_chain == chain and (best is None or deadline > best[0]):
                best = (deadline, index)
        return best

    def covering(self, lease: str, bucket: int, snapshot: int, start: int) -> Hold | None:
        for h in self.holds.get(lease, []):
            if (h.bucket, h.snapshot) == (bucket, snapshot) and h.since <= start and (
                    h.until is None or start < h.until):
                return h
        return None


class _Writes:
    """What the acknowledged and unknown upserts say each key may hold."""

    def __init__(self, ops: list[Op]) -> None:
        # key -> [(log_end, value, index)] of acknowledged upserts, by log end offset
        self.acked: dict[str, list[tuple[int, Any, int]]] = defaultdict(list)
        self.bucket_of: dict[str, int] = {}
        self.maybe: dict[str, set[Any]] = defaultdict(set)  # info upserts' values
        self.written: dict[str, dict[Any, int]] = defaultdict(dict)  # value -> upsert index
        for op in ops:
            if op.f != "upsert" or op.type == "fail":
                continue
            key = str(op.key)
            self.written[key][op.value] = op.index
            if op.ok and isinstance(op.result, dict) and "log_end" in op.result:
                self.acked[key].append((int(op.result["log_end"]), op.value, op.index))
                self.bucket_of[key] = int(op.result["bucket"])
            else:
                self.maybe[key].add(op.value)
        for writes in self.acked.values():
            writes.sort()

    def expected(self, key: str, log_offset: int) -> tuple[set[Any], int] | None:
        """The values the key may hold at the offset, and an upsert's index: those of its
        acknowledged upserts with the highest log end offset at or below it (upserts sent
        in one batch share their batch's end offset, in an order the client cannot see)."""
        last: tuple[set[Any], int] | None = None
        top = None
        for log_end, value, index in self.acked.get(key, []):
            if log_end > log_offset:
                break
            if log_end != top:
                top, last = log_end, (set(), index)
            assert last is not None
            last[0].add(value)
            last = (last[0], index)
        return last

    def row_problems(self, bucket: int, log_offset: int, rows: dict[str, Any]) -> list[
            tuple[str, list[int]]]:
        problems = []
        keys = {k for k, b in self.bucket_of.items() if b == bucket} | set(rows)
        for key in sorted(keys):
            want = self.expected(key, log_offset)
            got = rows.get(key)
            if got is not None and want is not None and got in want[0]:
                continue
            if got is not None and got in self.maybe.get(key, ()):
                continue  # an upsert of unknown outcome may have been applied
            if got is None and want is None:
                continue
            if got is None:
                problems.append((f"key {key} is missing, but upsert {_one(want[0])} "
                                 f"(op {want[1]}) was acknowledged at or below log offset "
                                 f"{log_offset}", [want[1]]))
                continue
            index = self.written.get(key, {}).get(got)
            if index is None:
                problems.append((f"key {key} holds {got}, which no upsert wrote", []))
                continue
            log_end = next((e for e, v, _ in self.acked.get(key, []) if v == got), None)
            if log_end is not None and log_end > log_offset:
                problems.append((f"key {key} holds {got}, written at log end offset {log_end}, "
                                 f"after the snapshot's {log_offset}", [index]))
            elif want is not None:
                problems.append((f"key {key} holds {got} (op {index}), overwritten by "
                                 f"{_one(want[0])} (op {want[1]}) at or below log offset "
                                 f"{log_offset}",
                                 [index, want[1]]))
            else:
                problems.append((f"key {key} holds {got} (op {index}), which the table did not "
                                 f"hold at log offset {log_offset}", [index]))
        return problems


def check(records: Iterable[dict[str, Any]],
          clock_margin_ms: int = DEFAULT_CLOCK_MARGIN_MS) -> dict[str, Any]:
    """The verdict on one history: `valid` (True, False or "unknown"), counts, violations."""
    ops = pair(records)
    margin_ns = clock_margin_ms * 1_000_000
    leases, writes = _Leases(ops, margin_ns), _Writes(ops)
    violations: list[Violation] = []
    covered = undecided = rows_checked = 0
    for op in ops:
        if op.f != "read-snapshot":
            continue
        want = op.value or {}
        bucket, snapshot = int(want.get("bucket", -1)), int(want.get("snapshot", -1))
        result = op.result if isinstance(op.result, dict) else {}
        if op.ok and "rows" in result:
            rows_checked += 1
            log_offset = int(result["log_offset"])
            for text, forced in writes.row_problems(bucket, log_offset, result["rows"]):
                violations.append(Violation(
                    "rows", op.index, bucket, snapshot, op.key,
                    f"snapshot {snapshot} of bucket {bucket} (log offset {log_offset}), read by "
                    f"op {op.index}: {text}", [op.index, *forced], op.invoke, op.complete))
        lease = None if op.key is None else str(op.key)
        hold = leases.covering(lease, bucket, snapshot, op.invoke) if lease else None
        grant = leases.deadline(hold, op.invoke) if hold else None
        if hold is None or grant is None:
            continue
        deadline, grant_index = grant
        end = op.complete
        if end is None or end > deadline - margin_ns:
            continue  # past what the holder may count on (or never ended): not covered
        covered += 1
        if op.ok:
            continue
        if not result.get("gone"):
            undecided += 1
            continue
        violations.append(Violation(
            "lease", op.index, bucket, snapshot, lease,
            f"snapshot {snapshot} of bucket {bucket} was gone when read by op {op.index} "
            f"[{_ms(op.invoke)}, {_ms(end)}] ({op.error or 'gone'}), though lease {lease} "
            f"held it since op {hold.acquire_index} ({_ms(hold.since)}) and op {grant_index} "
            f"promised it until {_ms(deadline)} (margin {clock_margin_ms} ms)",
            [hold.acquire_index, grant_index, op.index], op.invoke, op.complete))
    decided = covered - undecided + rows_checked
    if violations:
        valid: bool | str = False
    elif decided > 0:
        valid = True
    else:
        valid = "unknown"
    out: dict[str, Any] = {
        "valid": valid,
        "clock_margin_ms": clock_margin_ms,
        "leases": len(set(leases.holds) | set(leases.grants)),
        "upserts": sum(1 for op in ops if op.f == "upsert"),
        "snapshot_reads": sum(1 for op in ops if op.f == "read-snapshot"),
        "covered_reads": covered,
        "undecided_reads": undecided,
        "rows_checked": rows_checked,
        "violations": [v.as_json() for v in violations],
        "late_renewals": _late_renewals(leases, ops),
    }
    if valid == "unknown":
        out["reason"] = ("no snapshot read completed, within a lease or at all, so neither "
                         "the lease's promise nor a snapshot's rows were put to the test")
    return out


def _late_renewals(leases: _Leases, ops: list[Op]) -> list[dict[str, Any]]:
    """Renewals acknowledged after their lease's expiration time had passed (invoked later
    than the last grant's completion + duration + the margin), each with the first later
    read by the same lease that found a snapshot gone. No violation: such a renewal holds
    nothing (rule 1 starts a new chain), but its holder was told all is well
    (docs/findings/fluss-renew-after-expiry.md)."""
    out = []
    for renew, ran_out in leases.late_renewals:
        gone = next((op for op in ops if op.f == "read-snapshot" and op.key == renew.key and
                     op.invoke > (renew.complete or renew.invoke) and op.type == "fail" and
                     (op.result or {}).get("gone")), None)
        out.append({"lease": renew.key, "renew": renew.index, "ran_out_ms": ran_out / 1e6,
                    "invoke_ms": renew.invoke / 1e6, "late_ms": (renew.invoke - ran_out) / 1e6,
                    "gone_read": None if gone is None else gone.index})
    return out


SNIFF_LINES = 10_000


def first_records(path: str | Path, lines: int = SNIFF_LINES) -> Iterator[Any]:
    """A jsonl history's first records as parsed (not only objects), to tell which
    workload wrote it; stops at the first line that is no JSON."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh):
            if n > lines:
                return
            try:
                yield json.loads(line)
            except ValueError:
                return


def is_lease_history(path: str | Path) -> bool:
    """Whether a jsonl history is the kv-snapshot-lease workload's: its first client
    record's f says so."""
    for rec in first_records(path):
        if isinstance(rec, dict) and rec.get("process") != "nemesis":
            return rec.get("f") in WORKLOAD_FS  # no register workload's f is one
    return False


def _records(path: str | Path) -> list[dict[str, Any]]:
    """Every record, checked as the register checker checks them (HistoryFormatError
    names file:line), with the error texts the explanations quote."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, text in enumerate(fh, start=1):
            if text.strip():
                rec = parse_line(text, str(path), n)
                rec["error"] = json.loads(text).get("error")
                out.append(rec)
    return out


def _faults_text(periods: list[Any], lo_ms: float, hi_ms: float) -> list[str]:
    """The faults in force in [lo, hi], each with the nodes it hit."""
    out = []
    for p in periods:
        if p.overlaps(lo_ms, hi_ms):
            nodes = p.value.get("nodes") if isinstance(p.value, dict) else None
            out.append(f"{p.name} {','.join(map(str, nodes))}" if nodes else p.name)
    return out


def file_report(path: str | Path, clock_margin_ms: int = DEFAULT_CLOCK_MARGIN_MS
                ) -> dict[str, Any]:
    """One lease history's verdict in results.json's shape (ARCHITECTURE.md, "Run
    folder"): no keys, the lease checker's findings under `snapshot_lease`, each violation
    with the faults in force during its read."""
    records = _records(path)
    out = check([r for r in records if r["process"] != "nemesis"], clock_margin_ms)
    return keyless_report(records, out, "snapshot_lease")


def keyless_report(records: list[dict[str, Any]], out: dict[str, Any], section: str
                   ) -> dict[str, Any]:
    """results.json's shape for a checker of promises other than registers' (the snapshot
    lease, kv-scan sessions): no keys, its findings `out` under `section`, each violation
    told the faults in force between its invocation and its completion."""
    nemesis = [r for r in records if r["process"] == "nemesis"]
    periods = fault_periods(nemesis)
    for v in out["violations"]:
        hi = v["complete_ms"] if v["complete_ms"] is not None else v["invoke_ms"]
        v["faults"] = _faults_text(periods, v["invoke_ms"], hi)
        if v["faults"]:
            v["explanation"] += f"; faults in force: {', '.join(v['faults'])}"
    report: dict[str, Any] = {
        "valid": out["valid"],
        "lease_ms": 0.0,
        "ops": sum(1 for r in records if r["process"] != "nemesis" and r["type"] != "invoke"),
        "summary": {},
        "max_delta_ms": None,
        "keys": {},
        "nemesis": [e.as_json() for e in nemesis_events(nemesis)],
        section: out,
    }
    if out.get("reason"):
        report["reason"] = out["reason"]
    return report
