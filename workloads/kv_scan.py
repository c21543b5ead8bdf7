"""The `kv-scan` workload: writers upsert unique values into a primary-key table while
scanners read whole buckets through KV scan sessions (Apache Fluss's ScanKv: a
point-in-time RocksDB snapshot of one bucket and a cursor on its leader, continued batch by
batch, evicted when idle longer than the server's scanner ttl).

Roles are per worker thread: the first, third, ... worker writes, the others scan. A
scanner opens a scan of one bucket (each scan the next bucket in turn), asks for its
batches one continuation at a time and pauses before each: mostly a fraction of the ttl,
and in one scan of LONG_EVERY once past ttl + the expiration interval, after which the
session must be gone. In one scan of RETRY_EVERY it sends a continuation it already had the
answer to again, as a client whose reply was lost would (and keeps the second answer); one
whose reply did not come is always resent, once (the scan is given up when that one gets
no answer either). In one scan of CLOSE_EVERY it closes the
session after two batches; every other scan is read to its end (or its error) and then
closed. How the system spells the pause lengths: the profile's `scanner_ttl_ms` and
`scanner_expiration_ms`.

Clients talk JSON lines to the system's lease client service (protocol "fluss"; for Fluss
sut/fluss/LeaseClient.java and KvScanCalls.java), one connection per worker. Records
(checkers/kv_scan.py reads them), key and value:

- upsert, key the row's key: invoke value the value (unique per key); ok value {value,
  bucket, log_end}, the bucket's log end offset after it.
- scan-open, key the scan id: {bucket, ttl_ms, expiration_ms} (the server's, as the
  profile configured it); ok value adds rows [[key, value], ...] (the first
  batch), has_more, log_offset, leader and scanner (absent for an empty bucket).
- scan-next, key the scan id: {seq, pause_ms} (continuation seq, after pausing pause_ms);
  ok value adds rows and has_more. scan-retry is the same request again, {seq, pause_ms}:
  its answer replaces the earlier one's. A fail adds code (the server's error, e.g.
  SCANNER_EXPIRED) and leader_now; an info (no reply, or the service gave up on Fluss
  without a server's error) may have moved the cursor.
- scan-close, key the scan id.
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass
from typing import Any, Protocol, cast

from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.systems.profile import Profile
from leaseline.workloads.base import (
    FAIL,
    INFO,
    OK,
    Client,
    Completion,
    Op,
    PerThread,
    Workload,
)
from leaseline.workloads.kv_snapshot_lease import (
    SETUP_TIMEOUT_S,
    LeaseConnection,
    WritersAndOthers,
)

TABLE = "leaseline.kvscan"
BUCKETS = 3
ROWS_PER_BUCKET = 8  # per --keys: about 8 rows a bucket for each
BATCH_BYTES = 1  # one row a batch (the server always sends one): a scan takes many batches
DEFAULT_TTL_MS = 3000
DEFAULT_EXPIRATION_MS = 1000
LONG_EVERY = 3  # one scan in three pauses once past ttl + expiration interval
RETRY_EVERY = 4  # one scan in four resends a continuation it had the answer to
CLOSE_EVERY = 6  # one scan in six is closed after two batches
SHORT_PAUSE = (0.05, 0.5)  # fractions of the ttl
LONG_EXTRA = (0.3, 0.6)  # past ttl + expiration interval by this fraction of the ttl
SCAN_FS = frozenset({"scan-open", "scan-next", "scan-retry", "scan-close"})


class ScanHost(Protocol):
    """What a profile tells this workload about its scan sessions."""

    scanner_ttl_ms: int
    scanner_expiration_ms: int


@dataclass
class ScanState:
    """One scanner thread's scan, shared by its generator calls and its client."""

    scan: str | None = None
    number: int = 0
    seq: int = 0  # the last continuation sent (0: the open)
    open: bool = False  # the session may be open on the server
    more: bool = False  # the last answer said there is more
    resend: bool = False  # the last continuation got no answer: send it again
    retried: bool = False
    batches: int = 0
    long_at: int | None = None  # the continuation before which the long pause comes
    closing: bool = False


class ScanGenerator(WritersAndOthers):
    def __init__(self, workload: KvScan) -> None:
        super().__init__(workload.opts, ROWS_PER_BUCKET * BUCKETS * max(1, workload.opts.keys))
        self.w = workload
        self._scans = itertools.count(1)

    def other_op(self, rng: random.Random) -> Op:
        op, pause_s = self.scanner_op(self.w.state(), rng)
        if pause_s > 0:
            time.sleep(pause_s)  # before the invocation: the history shows the idle time
        return op

    def scanner_op(self, st: ScanState, rng: random.Random) -> tuple[Op, float]:
        """The scanner's next operation and how long to pause before it (s)."""
        ttl_s = self.w.ttl_ms / 1000
        if st.scan is None or (not st.open and not st.closing):
            if st.scan is not None:
                self.w.reset_state()
                st = self.w.state()
            with self.lock:
                st.number = next(self._scans)
            st.scan = f"S{st.number}"
            if st.number % LONG_EVERY == 0:
                st.long_at = rng.randint(1, 3)
            return Op("scan-open", st.scan, {"bucket": st.number % BUCKETS,
                                             "ttl_ms": self.w.ttl_ms,
                                             "expiration_ms": self.w.expiration_ms}), 0.0
        if st.closing or (st.number % CLOSE_EVERY == 0 and st.batches >= 2 and st.more):
            st.closing = True
            return Op("scan-close", st.scan), 0.0
        if st.resend:
            pause = rng.uniform(*SHORT_PAUSE) * ttl_s
            return Op("scan-retry", st.scan, {"seq": st.seq, "pause_ms": round(pause * 1000)}), \
                pause
        if st.number % RETRY_EVERY == 0 and not st.retried and st.seq >= 1:
            st.retried = True
            pause = rng.uniform(*SHORT_PAUSE) * ttl_s
            return Op("scan-retry", st.scan, {"seq": st.seq, "pause_ms": round(pause * 1000)}), \
                pause
        if st.long_at is not None and st.seq + 1 == st.long_at:
            # past ttl + the expiration interval, well before 3 ttl (the id is remembered
            # for 2 ttl after its eviction)
            pause = (self.w.ttl_ms + self.w.expiration_ms) / 1000 + rng.uniform(*LONG_EXTRA) * ttl_s
        else:
            pause = rng.uniform(*SHORT_PAUSE) * ttl_s
        return Op("scan-next", st.scan, {"seq": st.seq + 1, "pause_ms": round(pause * 1000)}), \
            pause

    def all_keys(self) -> list[str]:
        return []  # scans are read during the run; nothing is read at the end


class ScanClient(Client):
    def __init__(self, workload: KvScan) -> None:
        self.w = workload
        self.conn: LeaseConnection | None = None

    def open(self, node: str, endpoint: Any) -> None:
        self.conn = LeaseConnection(endpoint)

    def invoke(self, op: Op) -> Completion:
        assert self.conn is not None
        if op.f == "upsert":
            request = {"op": "upsert", "table": TABLE, "key": op.key, "value": op.value}
        elif op.f == "scan-open":
            request = {"op": "scan-open", "scan": op.key, "table": TABLE,
                       "bucket": op.value["bucket"], "batch_bytes": BATCH_BYTES}
        elif op.f in ("scan-next", "scan-retry"):
            request = {"op": "scan-next", "scan": op.key, "seq": op.value["seq"]}
        elif op.f == "scan-close":
            request = {"op": "scan-close", "scan": op.key}
        else:
            return Completion(FAIL, op.value, f"kv-scan has no operation {op.f!r}")
        try:
            reply = self.conn.call(request)
        except (ConnectionError, TimeoutError) as e:
            reply = {"ok": None, "error": str(e)}
        done = self._completion(op, reply)
        if op.f != "upsert":
            self._advance(op, done)
        return done

    def _completion(self, op: Op, reply: dict[str, Any]) -> Completion:
        base = op.value if isinstance(op.value, dict) else {}
        if reply.get("ok") is None:  # no answer: it may have happened
            return Completion(INFO, op.value, str(reply.get("error")))
        if not reply.get("ok"):
            error = str(reply.get("error") or "failed")
            if op.f == "upsert":
                return Completion(INFO, op.value, error)
            if "code" not in reply and op.f in ("scan-next", "scan-retry"):
                # the service gave up on Fluss (a timeout, a lost connection): the server
                # may have handed the batch out and moved the cursor
                return Completion(INFO, op.value, error)
            value = base | {k: reply[k] for k in ("code", "leader_now") if k in reply}
            # the server answered with an error (or nothing was opened): no batch handed out
            return Completion(FAIL, value, error)
        if op.f == "upsert":
            return Completion(OK, {"value": op.value, "bucket": reply["bucket"],
                                   "log_end": reply["log_end"]})
        return Completion(OK, base | {k: v for k, v in reply.items() if k != "ok"})

    def _advance(self, op: Op, done: Completion) -> None:
        st = self.w.state()
        if op.f == "scan-close":
            if done.type != INFO:
                st.open = st.closing = False
            return
        if op.f == "scan-open":
            st.open = done.type == OK and bool(done.value.get("has_more"))
            st.more = st.open
            st.batches = 1 if done.type == OK else 0
            return
        st.seq = op.value["seq"]
        if done.type == INFO and op.f == "scan-next":
            st.resend = True  # a real client's retry: the same continuation, once
            return
        if done.type == INFO:  # the resend went unanswered too: the scan is given up
            st.open = st.more = st.resend = False
            return
        st.resend = False
        if done.type == FAIL:
            st.open = st.more = False
            return
        st.batches += 1
        st.more = bool(done.value.get("has_more"))
        st.open = True  # kept until closed: the last batch's continuation may be resent
        if not st.more:
            st.closing = True

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class KvScan(Workload):
    name = "kv-scan"
    protocol = "fluss"

    def __init__(self, opts: Any) -> None:
        super().__init__(opts)
        self.ttl_ms = DEFAULT_TTL_MS  # the system's, from setup() on
        self.expiration_ms = DEFAULT_EXPIRATION_MS
        self._per_thread = PerThread(ScanState)

    def state(self) -> ScanState:
        return self._per_thread.get()

    def reset_state(self) -> None:
        self._per_thread.reset()

    def new_client(self) -> ScanClient:
        return ScanClient(self)

    def new_generator(self) -> ScanGenerator:
        return ScanGenerator(self)

    def setup(self, profile: Profile, leader: str) -> None:
        """Creates the table (an earlier run's is dropped first) and asks the service whether
        its Fluss client has scan sessions at all."""
        if not hasattr(profile, "scanner_ttl_ms"):
            raise EnvironmentProblem(f"{profile.name} has no KV scan sessions, which kv-scan "
                                     "needs.")
        host = cast(ScanHost, profile)
        self.ttl_ms, self.expiration_ms = host.scanner_ttl_ms, host.scanner_expiration_ms
        conn = LeaseConnection(profile.endpoint(leader, self.protocol))
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        try:
            support = conn.call({"op": "scan-support"}, timeout_s=SETUP_TIMEOUT_S)
            if not support.get("scan"):
                raise EnvironmentProblem(
                    "the Fluss this run uses has no KV scan sessions (ScanKv is in Fluss's main "
                    "branch, in no release up to 0.9.1): build one with --sut-opt source=DIR.")
            while True:
                reply = conn.call({"op": "setup", "table": TABLE, "buckets": BUCKETS},
                                  timeout_s=SETUP_TIMEOUT_S)
                if reply.get("ok") or time.monotonic() > deadline:
                    break
                time.sleep(1)
        except (ConnectionError, TimeoutError) as e:
            raise EnvironmentProblem(f"the lease client could not create {TABLE}: {e}.") from None
        finally:
            conn.close()
        if not reply.get("ok"):
            raise EnvironmentProblem(f"creating the table {TABLE} failed: {reply.get('error')}.")
