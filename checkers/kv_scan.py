"""The promises of a KV scan session (Apache Fluss's ScanKv), checked on the records of
the `kv-scan` workload (workloads/kv_scan.py documents their value fields).

1. One state. A scan's rows are one state of its bucket as of a single moment t between
   its open's invocation and its first batch's completion: each row the last acknowledged
   upsert of its key at t (an upsert acknowledged before t is there, or overwritten by one
   invoked before t), nothing written after t, no key twice, no key of another bucket, no
   value nobody wrote; a scan read to its end also misses no key whose upsert was
   acknowledged before t. Upserts are ordered per key by the log end offset their
   acknowledgements carry; an upsert of unknown outcome may or may not be there. A scan
   that ended early is held to the rows it got.
2. Idle time. A continuation sent within the ttl of the previous answer (at most ttl minus
   the clock margin between that request's invocation and this one's completion) goes on;
   one whose session was idle past ttl + the expiration interval (plus the margin, from
   the previous completion to this invocation) never gets rows, and within 3 ttl of the
   previous request (eviction, then 2 ttl of remembering the id) it gets SCANNER_EXPIRED,
   not UNKNOWN_SCANNER_ID. A session the server ended early is excused when the bucket's
   leader changed (the client's metadata names another leader afterwards) or a fault that
   moves leadership (any but clock-skew and pause-client) was in force meanwhile.
   A change of the bucket's leader ends the session with an error: a continuation sent
   after a recorded move of its bucket's leadership (a nemesis record whose value lists it
   under "moved", as move-leadership's does; the move done at that record's completion)
   never gets rows when the session was opened before the move began (its leader then
   lost the bucket by the move's end at the latest, or earlier, which closed the session
   then), or on the old leader before the move was done (its open named the move's
   from_id as leader; a server opens a session only while it leads the bucket, so it lost
   the bucket after the open).
3. Retries. A continuation sent again after its answer arrived gets an error or the same
   rows, never the next batch or another; its answer replaces the first, and the scan's
   rows are then checked by rule 1 like any other's.
4. Offset. A scan read to its end whose open reported a log offset holds, per key, the
   last upsert acknowledged at or below it (what checkers/snapshot_lease.py asks of a KV
   snapshot).

Verdict: invalid on any violation, valid when some scan's rows or some session's idle time
was put to the test, unknown otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaseline.checkers.faults import fault_periods
from leaseline.checkers.snapshot_lease import (
    SNIFF_LINES,
    Op,
    _ms,
    _records,
    _Writes,
    first_records,
    keyless_report,
    pair,
)

DEFAULT_CLOCK_MARGIN_MS = 500
SCAN_FS = frozenset({"scan-open", "scan-next", "scan-retry", "scan-close"})
WORKLOAD_FS = SCAN_FS | {"upsert"}
EXPIRED, UNKNOWN_ID = "SCANNER_EXPIRED", "UNKNOWN_SCANNER_ID"
# What cannot move a bucket's leader, so does not excuse a session ended early: a clock
# fault, and a fault that hit only the client service (pause-client).
CLIENT_SERVICES = frozenset({"flcl"})
INF = float("inf")


@dataclass
class Violation:
    kind: str  # one-state | twice | other-bucket | unwritten | early-expiry | ...
    scan: str
    bucket: int
    op: int  # the operation it is about
    text: str
    ops: list[int] = field(default_factory=list)
    invoke: int = 0
    complete: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "scan": self.scan, "bucket": self.bucket, "op": self.op,
                "explanation": self.text, "ops": self.ops, "invoke_ms": self.invoke / 1e6,
                "complete_ms": None if self.complete is None else self.complete / 1e6}


@dataclass
class LeaderMove:
    """A bucket's leadership moved by a fault: begun at `invoke`, done by `complete` (ns)."""

    table: str
    bucket: int
    src: str
    dst: str
    src_id: Any  # the old leader as the system's clients name it (None: not recorded)
    invoke: int
    complete: int
    index: int  # the nemesis record that reported it


def leader_moves(records: Iterable[dict[str, Any]]) -> list[LeaderMove]:
    """The leadership moves nemesis records report: each completion whose value has a
    "moved" list, begun at its invocation (the invoke of the same f and fault id)."""
    invoked: dict[tuple[str, Any], int] = {}
    out: list[LeaderMove] = []
    for r in records:
        if r.get("process") != "nemesis":
            continue
        value = r.get("value") if isinstance(r.get("value"), dict) else {}
        tag = (str(r.get("f")), value.get("fault"))
        if r.get("type") == "invoke":
            invoked[tag] = int(r.get("time") or 0)
            continue
        if r.get("type") != "ok" or not isinstance(value.get("moved"), list):
            continue
        done = int(r.get("time") or 0)
        for m in value["moved"]:
            if isinstance(m, dict) and "bucket" in m:
                out.append(LeaderMove(str(m.get("table")), int(m["bucket"]), str(m.get("from")),
                                      str(m.get("to")), m.get("from_id"),
                                      invoked.get(tag, done), done, int(r.get("index") or 0)))
    return out


@dataclass
class Scan:
    id: str
    bucket: int
    open: Op
    ops: list[Op] = field(default_factory=list)  # its continuations and close, in order
    batches: dict[int, Op] = field(default_factory=dict)  # seq -> the op whose rows count
    done: bool = False  # read to its end

    def rows(self) -> list[tuple[str, Any, int]]:
        """(key, value, op index) of every kept batch, in order."""
        out = []
        for seq in sorted(self.batches):
            op = self.batches[seq]
            for key, value in (op.result or {}).get("rows") or []:
                out.append((str(key), value, op.index))
        return out


class _Upserts:
    """Each key's upserts: when invoked and acknowledged, in the log order acknowledgements
    give, and which value each wrote."""

    def __init__(self, ops: list[Op]) -> None:
        self.by_key: dict[str, list[Op]] = defaultdict(list)
        self.by_value: dict[tuple[str, Any], Op] = {}
        self.bucket_of: dict[str, int] = {}
        for op in ops:
            if op.f != "upsert" or op.type == "fail":
                continue
            key = str(op.key)
            self.by_key[key].append(op)
            self.by_value[(key, op.value)] = op
            if op.ok and isinstance(op.result, dict) and "bucket" in op.result:
                self.bucket_of[key] = int(op.result["bucket"])

    @staticmethod
    def log_end(op: Op) -> int | None:
        if op.ok and isinstance(op.result, dict) and "log_end" in op.result:
            return int(op.result["log_end"])
        return None

    def bounds(self, key: str, value: Any) -> tuple[float, float, Op | None, Op | None, Op]:
        """For a row (key, value): the earliest and latest moment it can be the key's state
        (lo, hi), the upserts that set them, and the upsert that wrote it."""
        u = self.by_value[(key, value)]
        end = self.log_end(u)
        lo, lo_op = float(u.invoke), u
        hi, hi_op = INF, None
        if end is None:
            return lo, hi, lo_op, hi_op, u
        for w in self.by_key[key]:
            w_end = self.log_end(w)
            if w_end is None:
                continue
            if w_end <= end and w.invoke > lo:  # applied no later than it: invoked before
                lo, lo_op = float(w.invoke), w
            if w_end > end and w.complete is not None and w.complete < hi:
                hi, hi_op = float(w.complete), w  # applied after it, and acknowledged
        return lo, hi, lo_op, hi_op, u

    def absent_until(self, key: str) -> tuple[float, Op | None]:
        """Until when the key may be missing: the first acknowledgement of an upsert."""
        hi, hi_op = INF, None
        for w in self.by_key[key]:
            if w.ok and w.complete is not None and w.complete < hi:
                hi, hi_op = float(w.complete), w
        return hi, hi_op


def scans_of(ops: list[Op]) -> list[Scan]:
    scans: dict[str, Scan] = {}
    for op in ops:
        if op.f not in SCAN_FS:
            continue
        sid = str(op.key)
        if op.f == "scan-open":
            scans[sid] = Scan(sid, int((op.value or {}).get("bucket", -1)), op)
            if op.ok:
                scans[sid].batches[0] = op
                scans[sid].done = not (op.result or {}).get("has_more")
            continue
        scan = scans.get(sid)
        if scan is None:
            continue
        scan.ops.append(op)
        if op.f in ("scan-next", "scan-retry") and op.ok:
            seq = int((op.value or {}).get("seq", -1))
            scan.batches[seq] = op
            scan.done = not (op.result or {}).get("has_more")
    return [s for s in scans.values() if s.open.ok]


def _row_text(key: str, value: Any, u: Op) -> str:
    return f"key {key} holds {value} (upsert op {u.index})"


class _Checker:
    def __init__(self, ops: list[Op], margin_ns: int, periods: list[Any],
                 moves: list[LeaderMove]) -> None:
        self.moves = moves
        self.upserts = _Upserts(ops)
        self.writes = _Writes(ops)
        self.margin = margin_ns
        self.periods = periods
        self.violations: list[Violation] = []
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, kind: str, scan: Scan, op: Op, text: str, forced: list[int]) -> None:
        self.violations.append(Violation(kind, scan.id, scan.bucket, op.index,
                                         f"scan {scan.id} of bucket {scan.bucket}: {text}",
                                         forced, op.invoke, op.complete))

    # -- rule 1 and 4 --------------------------------------------------------------------
    def one_state(self, scan: Scan) -> None:
        rows = scan.rows()
        seen: dict[str, int] = {}
        lo, lo_why = float(scan.open.invoke), f"the scan was opened at {_ms(scan.open.invoke)}"
        lo_ops: list[int] = [scan.open.index]
        hi = float(scan.open.complete or INF)
        hi_why = f"its first batch completed at {_ms(scan.open.complete or 0)}"
        hi_ops: list[int] = [scan.open.index]
        broken = False
        for key, value, where in rows:
            if key in seen:
                self.add("twice", scan, scan.open, f"key {key} came twice (ops {seen[key]} and "
                         f"{where})", [seen[key], where])
                broken = True
                continue
            seen[key] = where
            bucket = self.upserts.bucket_of.get(key)
            if bucket is not None and bucket != scan.bucket:
                self.add("other-bucket", scan, scan.open, f"key {key} (op {where}) belongs to "
                         f"bucket {bucket}", [where])
                broken = True
                continue
            if (key, value) not in self.upserts.by_value:
                self.add("unwritten", scan, scan.open, f"key {key} holds {value} (op {where}), "
                         "which no upsert wrote", [where])
                broken = True
                continue
            k_lo, k_hi, lo_op, hi_op, u = self.upserts.bounds(key, value)
            if k_lo > lo and lo_op is not None:
                lo, lo_ops = k_lo, [where, lo_op.index]
                lo_why = (f"{_row_text(key, value, u)}, invoked at {_ms(lo_op.invoke)}"
                          if lo_op is u else
                          f"{_row_text(key, value, u)}, logged after upsert op {lo_op.index} "
                          f"invoked at {_ms(lo_op.invoke)}")
            if k_hi < hi and hi_op is not None:
                hi, hi_ops = k_hi, [where, u.index, hi_op.index]
                hi_why = (f"{_row_text(key, value, u)}, overwritten by {hi_op.value} "
                          f"(op {hi_op.index}) acknowledged at {_ms(hi_op.complete or 0)}")
        if scan.done:
            for key, bucket in sorted(self.upserts.bucket_of.items()):
                if bucket != scan.bucket or key in seen:
                    continue
                k_hi, hi_op = self.upserts.absent_until(key)
                if k_hi < hi and hi_op is not None:
                    hi, hi_ops = k_hi, [hi_op.index]
                    hi_why = (f"key {key} is missing, though upsert {hi_op.value} (op "
                              f"{hi_op.index}) was acknowledged at {_ms(hi_op.complete or 0)}")
        if broken:
            return
        self.counts["rows_checked"] += 1
        if lo > hi:
            self.add("one-state", scan, scan.open,
                     f"no single moment shows its rows ({len(rows)}): {lo_why}, but {hi_why}",
                     sorted(set(lo_ops + hi_ops)))
            return
        offset = (scan.open.result or {}).get("log_offset")
        if scan.done and offset is not None:
            self.counts["offsets_checked"] += 1
            got = {k: v for k, v, _ in rows}
            for text, forced in self.writes.row_problems(scan.bucket, int(offset), got):
                self.add("offset", scan, scan.open, f"opened at log offset {offset}: {text}",
                         [scan.open.index, *forced])

    # -- rule 2 and 3 --------------------------------------------------------------------
    def leadership_may_move(self, lo_ns: int, hi_ns: int) -> bool:
        for p in self.periods:
            nodes = p.value.get("nodes") if isinstance(p.value, dict) else None
            if "clock" in p.name or "clock" in p.f or (nodes and set(nodes) <= CLIENT_SERVICES):
                continue
            if p.overlaps(lo_ns / 1e6, hi_ns / 1e6):
                return True
        return False

    def sessions(self, scan: Scan) -> None:
        params = scan.open.value or {}
        ttl = int(params.get("ttl_ms", 0)) * 1_000_000
        interval = int(params.get("expiration_ms", 0)) * 1_000_000
        leader = (scan.open.result or {}).get("leader")
        answers: dict[int, Op] = {0: scan.open}  # seq -> the answer last kept
        prev: Op = scan.open
        for c in scan.ops:
            if c.f == "scan-close":
                break
            seq = int((c.value or {}).get("seq", -1))
            first = answers.get(seq)
            if c.f == "scan-retry" and first is not None and first.ok:
                self.counts["retries"] += 1
                if c.ok and (c.result or {}).get("rows") != (first.result or {}).get("rows"):
                    self.add("retry", scan, c, f"continuation {seq}, sent again (op {c.index}) "
                             f"after op {first.index} had its answer, got other rows: "
                             f"{(c.result or {}).get('rows')} instead of "
                             f"{(first.result or {}).get('rows')}", [first.index, c.index])
                elif not c.ok:
                    self.counts["retries_refused"] += 1
            if prev.ok and prev.complete is not None and c.complete is not None and ttl:
                self.idle(scan, prev, c, ttl, interval, leader)
            if self.after_move(scan, c):
                break
            if c.ok:
                answers[seq] = c
            prev = c
            if c.type == "fail":
                break

    def after_move(self, scan: Scan, c: Op) -> bool:
        """Whether continuation c is the first sent after a move of its bucket's leadership
        that the session predates (then it must not get rows, and the session is over)."""
        opened = scan.open.complete
        if opened is None:
            return False
        leader = (scan.open.result or {}).get("leader")
        for m in self.moves:
            before = opened <= m.invoke or (
                m.src_id is not None and m.src_id == leader and opened <= m.complete)
            if m.bucket == scan.bucket and before and c.invoke >= m.complete:
                self.counts["after_leader_move"] += 1
                if c.ok:
                    self.add("served-after-leader-move", scan, c,
                             f"continuation op {c.index} got rows from the session opened on "
                             f"the bucket's leader (op {scan.open.index}, completed at "
                             f"{_ms(opened)}), though the bucket's leadership moved from "
                             f"{m.src} to {m.dst} (begun at {_ms(m.invoke)}, done at "
                             f"{_ms(m.complete)}, nemesis op {m.index}) before it was sent at "
                             f"{_ms(c.invoke)}", [scan.open.index, m.index, c.index])
                else:
                    self.counts["ended_by_leader_move"] += 1
                return True
        return False

    def idle(self, scan: Scan, p: Op, c: Op, ttl: int, interval: int, leader: Any) -> None:
        assert p.complete is not None and c.complete is not None
        idle_hi, idle_lo = c.complete - p.invoke, c.invoke - p.complete
        code = (c.result or {}).get("code") if c.type == "fail" else None
        moved = (c.result or {}).get("leader_now") not in (None, leader) or \
            self.leadership_may_move(p.invoke, c.complete)
        if idle_hi <= ttl - self.margin:
            self.counts["within_ttl"] += 1
            if code in (EXPIRED, UNKNOWN_ID):
                if moved:
                    self.counts["ended_by_leadership"] += 1
                    return
                self.add("early-expiry", scan, c,
                         f"continuation op {c.index} got {code} though the session had been "
                         f"idle at most {_ms(idle_hi)} (op {p.index} invoked at "
                         f"{_ms(p.invoke)}, this one completed at {_ms(c.complete)}), within "
                         f"the ttl of {_ms(ttl)} (margin {_ms(self.margin)})",
                         [p.index, c.index])
            return
        if idle_lo <= ttl + interval + self.margin:
            return  # either outcome is allowed
        self.counts["past_ttl"] += 1
        if c.ok:
            self.add("served-after-expiry", scan, c,
                     f"continuation op {c.index} got rows though the session had been idle at "
                     f"least {_ms(idle_lo)} (op {p.index} completed at {_ms(p.complete)}, this "
                     f"one invoked at {_ms(c.invoke)}), past the ttl of {_ms(ttl)} and the "
                     f"expiration interval of {_ms(interval)}", [p.index, c.index])
        elif code == EXPIRED:
            self.counts["expired_as_promised"] += 1
        elif code == UNKNOWN_ID and idle_hi <= 3 * ttl - self.margin:
            if moved:
                self.counts["ended_by_leadership"] += 1
                return
            self.add("forgot-expiry", scan, c,
                     f"continuation op {c.index} got {UNKNOWN_ID}, not {EXPIRED}, after an idle "
                     f"time of {_ms(idle_lo)} to {_ms(idle_hi)}: an evicted id is remembered "
                     f"for 2 ttl ({_ms(2 * ttl)}) after its eviction", [p.index, c.index])


def check(records: Iterable[dict[str, Any]], clock_margin_ms: int = DEFAULT_CLOCK_MARGIN_MS,
          periods: list[Any] | None = None, moves: list[LeaderMove] | None = None
          ) -> dict[str, Any]:
    """The verdict on one history: `valid` (True, False or "unknown"), counts, violations.
    `moves`: the leadership moves the faults made (leader_moves of the nemesis records)."""
    ops = pair(records, WORKLOAD_FS)
    checker = _Checker(ops, clock_margin_ms * 1_000_000, periods or [], moves or [])
    scans = scans_of(ops)
    for scan in scans:
        checker.one_state(scan)
        checker.sessions(scan)
    n = checker.counts
    decided = n["rows_checked"] + n["within_ttl"] + n["past_ttl"] + n["after_leader_move"]
    violations = sorted(checker.violations, key=lambda v: v.invoke)
    valid: bool | str = False if violations else (True if decided else "unknown")
    out: dict[str, Any] = {
        "valid": valid,
        "clock_margin_ms": clock_margin_ms,
        "upserts": sum(1 for op in ops if op.f == "upsert"),
        "scans": sum(1 for op in ops if op.f == "scan-open"),
        "scans_opened": len(scans),
        "scans_read_whole": sum(1 for s in scans if s.done),
        "rows_checked": n["rows_checked"],
        "offsets_checked": n["offsets_checked"],
        "continued_within_ttl": n["within_ttl"],
        "idle_past_ttl": n["past_ttl"],
        "expired_as_promised": n["expired_as_promised"],
        "ended_by_leadership": n["ended_by_leadership"],
        "after_leader_move": n["after_leader_move"],
        "ended_by_leader_move": n["ended_by_leader_move"],
        "retries": n["retries"],
        "retries_refused": n["retries_refused"],
        "violations": [v.as_json() for v in violations],
    }
    if valid == "unknown":
        out["reason"] = ("no scan's rows and no session's idle time were put to the test "
                         "(no scan opened, or none got an answer)")
    return out


def is_scan_history(path: str | Path, sniff_lines: int = SNIFF_LINES) -> bool:
    """Whether a jsonl history is the kv-scan workload's: a scan operation among its first
    records (its writers' upserts look like kv-snapshot-lease's)."""
    for rec in first_records(path, sniff_lines):
        if isinstance(rec, dict) and rec.get("f") in SCAN_FS:
            return True
        if isinstance(rec, dict) and rec.get("process") != "nemesis" and \
                rec.get("f") not in WORKLOAD_FS:
            return False
    return False


def file_report(path: str | Path, clock_margin_ms: int = DEFAULT_CLOCK_MARGIN_MS
                ) -> dict[str, Any]:
    """One kv-scan history's verdict in results.json's shape: no keys, the findings under
    `kv_scan`, each violation with the faults in force during its operations."""
    records = _records(path)
    nemesis = [r for r in records if r["process"] == "nemesis"]
    out = check([r for r in records if r["process"] != "nemesis"], clock_margin_ms,
                fault_periods(nemesis), leader_moves(nemesis))
    return keyless_report(records, out, "kv_scan")
