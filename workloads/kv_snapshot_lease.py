"""The `kv-snapshot-lease` workload: writers upsert into a primary-key table of several
buckets while lease holders lease its KV snapshots and read them (Apache Fluss, FIP-22).

Roles are per worker thread: the first, third, ... worker writes, the others hold leases.
A holder's lease goes through acquire (the latest snapshot of every bucket), reads of the
snapshots it holds (every file, then the rows), renewals every third of the lease's
duration, and finally release and drop. One lease in three is held by a lazy holder that
never renews and keeps reading until half a lease past its deadline: a stalled client,
whose reads the checker requires whole only before the deadline.

Clients talk JSON lines over TCP to the system's lease client service, the endpoint of
protocol "fluss" (for Fluss: Fluss's own Java client in the cluster's client container,
sut/fluss/LeaseClient.java), one connection per worker. Records (checkers/snapshot_lease.py
reads them), key and value:

- upsert, key the row's key: invoke value the value (unique per key); ok value {value,
  bucket, log_end}, the bucket's log end offset after it.
- acquire, key the lease id: {duration_ms}; ok value adds table_id, snapshots [{bucket,
  snapshot, log_offset}] (the latest of each bucket) and unavailable [{bucket, snapshot}].
- renew and drop: {duration_ms}; release: {buckets}.
- read-snapshot, key the lease id: {bucket, snapshot}; ok value adds log_offset, files,
  bytes and rows {key: value}; a fail adds gone: true when Fluss said the snapshot or one
  of its files does not exist.

A lease's deadline, as its holder counts it, is the invocation of its latest acknowledged
acquire or renew plus duration_ms on the history's clock; the checker computes it from the
records (workers do not see that clock).
"""

from __future__ import annotations

import itertools
import json
import random
import socket
import threading
import time
import weakref
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.systems.profile import Endpoint, Profile
from leaseline.workloads.base import (
    FAIL,
    INFO,
    OK,
    Client,
    Completion,
    Generator,
    Op,
    PerThread,
    Workload,
)

TABLE = "leaseline.kv"
BUCKETS = 3
DEFAULT_DURATION_MS = 4000
CONNECT_TIMEOUT_S = 5.0
REPLY_TIMEOUT_S = 25.0  # the service gives up on Fluss after 10 s per call
SETUP_TIMEOUT_S = 120.0
ROWS_PER_BUCKET = 4
LAZY_EVERY = 3  # one lease in three is held by a holder that never renews
READS_PER_LEASE = 12


class LeaseClientHost(Protocol):
    """What a profile offers this workload besides the endpoint of its lease client
    service (protocol "fluss"): how long holders lease."""

    lease_duration_ms: int


class LeaseConnection:
    """One connection to the system's lease client service: a request line out, its reply
    line in. Never shared between threads."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.sock: socket.socket | None = None
        self.reader: Any = None

    def call(self, request: dict[str, Any], timeout_s: float = REPLY_TIMEOUT_S) -> dict[str, Any]:
        """The reply; ConnectionError when the service cannot be reached or hangs up,
        TimeoutError when it does not answer in time (the connection is then unusable)."""
        try:
            if self.sock is None:
                self.sock = socket.create_connection((self.endpoint.host, self.endpoint.port),
                                                     timeout=CONNECT_TIMEOUT_S)
                self.reader = self.sock.makefile("r", encoding="utf-8")
            self.sock.settimeout(timeout_s)
            self.sock.sendall((json.dumps(request) + "\n").encode())
            line = self.reader.readline()
        except TimeoutError:
            self.close()
            raise TimeoutError(f"no reply within {timeout_s:.0f} s") from None
        except OSError as e:
            self.close()
            raise ConnectionError(f"the lease client service: {e}") from None
        if not line:
            self.close()
            raise ConnectionError("the lease client service hung up")
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self.close()
            raise ConnectionError(f"the lease client service said {line.strip()[:200]!r}")
        return reply

    def close(self) -> None:
        for closable in (self.reader, self.sock):
            try:
                if closable is not None:
                    closable.close()
            except OSError:
                pass
        self.sock = self.reader = None


@dataclass
class HolderState:
    """One holder thread's lease, shared by its generator calls and its client."""

    lease: str | None = None
    lazy: bool = False
    acquired_at: float = 0.0  # monotonic s of the last acknowledged acquire or renew
    table_id: int | None = None
    held: list[dict[str, int]] = field(default_factory=list)  # {bucket, snapshot}
    reads: int = 0
    ending: list[str] = field(default_factory=list)  # "release", "drop" still to do


class WritersAndOthers(Generator):
    """Worker threads by their first call: writer, other, writer, … (keyed by the Thread
    itself: an ident is reused once its thread has ended). Writers upsert values unique per
    row into `keys`; the others do what the workload is about (`other_op`)."""

    def __init__(self, opts: Any, keys: int) -> None:
        super().__init__(opts)
        self.keys = [f"k{i}" for i in range(keys)]
        self._values: dict[str, int] = {}
        self._roles: weakref.WeakKeyDictionary[threading.Thread, bool] = \
            weakref.WeakKeyDictionary()
        self._threads = 0

    def _is_writer(self) -> bool:
        with self.lock:
            me = threading.current_thread()
            if me not in self._roles:
                self._roles[me] = self._threads % 2 == 0
                self._threads += 1
            return self._roles[me]

    def next_op(self, rng: random.Random) -> Op:
        if self._is_writer():
            with self.lock:
                key = rng.choice(self.keys)
                value = self._values[key] = self._values.get(key, 0) + 1
            return Op("upsert", key, value)
        return self.other_op(rng)

    @abstractmethod
    def other_op(self, rng: random.Random) -> Op:
        """The next operation of a thread that does not write."""


class LeaseGenerator(WritersAndOthers):
    def __init__(self, workload: KvSnapshotLease) -> None:
        # --keys N: 4 rows per bucket per N, so every bucket has rows and snapshots
        super().__init__(workload.opts, ROWS_PER_BUCKET * BUCKETS * max(1, workload.opts.keys))
        self.w = workload
        self._leases = itertools.count(1)

    def other_op(self, rng: random.Random) -> Op:
        return self.holder_op(self.w.state(), rng, time.monotonic())

    def holder_op(self, st: HolderState, rng: random.Random, now: float) -> Op:
        duration = self.w.duration_ms
        if st.ending:
            f = st.ending[0]
            value = ({"buckets": sorted(h["bucket"] for h in st.held)} if f == "release"
                     else {"duration_ms": duration})
            return Op(f, st.lease, value)
        if st.lease is None or not st.held:
            if st.lease is None:
                with self.lock:
                    n = next(self._leases)
                st.lease, st.lazy = f"L{n}", n % LAZY_EVERY == 0
            return Op("acquire", st.lease, {"duration_ms": duration})
        age_s = now - st.acquired_at
        if st.lazy and age_s > 1.5 * duration / 1000 or not st.lazy and \
                st.reads >= READS_PER_LEASE:
            st.ending = ["release", "drop"]
            return self.holder_op(st, rng, now)
        if not st.lazy and age_s > duration / 3000:
            return Op("renew", st.lease, {"duration_ms": duration})
        st.reads += 1
        pick = rng.choice(st.held)
        return Op("read-snapshot", st.lease, {"bucket": pick["bucket"],
                                              "snapshot": pick["snapshot"]})

    def all_keys(self) -> list[str]:
        return []  # snapshots are read during the run; there is nothing to read at the end


class LeaseClient(Client):
    def __init__(self, workload: KvSnapshotLease) -> None:
        self.w = workload
        self.conn: LeaseConnection | None = None

    def open(self, node: str, endpoint: Endpoint) -> None:
        self.conn = LeaseConnection(endpoint)  # connects on the first call

    def invoke(self, op: Op) -> Completion:
        st = self.w.state()
        if op.f == "upsert":
            return self._call(op, {"op": "upsert", "table": TABLE, "key": op.key,
                                   "value": op.value}, lambda r: {
                "value": op.value, "bucket": r["bucket"], "log_end": r["log_end"]})
        if op.f == "acquire":
            return self._acquire(op, st)
        if op.f == "read-snapshot":
            request = {"op": "read", "table": TABLE, "table_id": st.table_id} | op.value
            return self._call(op, request, lambda r: op.value | {
                k: v for k, v in r.items() if k != "ok"}, read=True)
        lease = {"lease": op.key, "duration_ms": self.w.duration_ms}
        if op.f == "renew":
            done = self._call(op, {"op": "renew"} | lease, lambda r: op.value)
            if done.type == OK:
                st.acquired_at = time.monotonic()
            return done
        if op.f in ("release", "drop"):
            request = {"op": op.f, "table_id": st.table_id} | lease | (op.value or {})
            done = self._call(op, request, lambda r: op.value)
            if done.type != FAIL and st.ending:
                st.ending.pop(0)  # an unknown outcome is not retried: the next lease starts
            if not st.ending:
                self.w.reset_state()
            return done
        return Completion(FAIL, op.value, f"kv-snapshot-lease has no operation {op.f!r}")

    def _acquire(self, op: Op, st: HolderState) -> Completion:
        assert self.conn is not None
        try:
            latest = self.conn.call({"op": "latest", "table": TABLE})
        except (ConnectionError, TimeoutError) as e:
            return Completion(FAIL, op.value, f"listing snapshots: {e}")
        if not latest.get("ok"):
            return Completion(FAIL, op.value, f"listing snapshots: {latest.get('error')}")
        snapshots = latest.get("snapshots") or []
        if not snapshots:
            return Completion(FAIL, op.value, "no snapshot yet")
        request = {"op": "acquire", "lease": op.key, "duration_ms": self.w.duration_ms,
                   "table_id": latest["table_id"], "snapshots": snapshots}
        started = time.monotonic()
        done = self._call(op, request, lambda r: op.value | {
            "table_id": latest["table_id"], "snapshots": snapshots,
            "unavailable": r.get("unavailable", [])})
        if done.type == OK:
            gone = {(u["bucket"], u["snapshot"]) for u in done.value["unavailable"]}
            st.table_id, st.acquired_at = latest["table_id"], started
            st.held = [{"bucket": s["bucket"], "snapshot": s["snapshot"]} for s in snapshots
                       if (s["bucket"], s["snapshot"]) not in gone]
        return done

    def _call(self, op: Op, request: dict[str, Any], ok_value: Any,
              read: bool = False) -> Completion:
        assert self.conn is not None
        try:
            reply = self.conn.call(request)
        except (ConnectionError, TimeoutError) as e:
            # A read changes nothing, so its failure is certain; anything else may have
            # happened.
            return Completion(FAIL if read else INFO, op.value, str(e))
        if reply.get("ok"):
            return Completion(OK, ok_value(reply))
        error = str(reply.get("error") or "failed")
        if read:
            return Completion(FAIL, op.value | {"gone": bool(reply.get("gone"))}, error)
        return Completion(INFO, op.value, error)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class KvSnapshotLease(Workload):
    name = "kv-snapshot-lease"
    protocol = "fluss"

    def __init__(self, opts: Any) -> None:
        super().__init__(opts)
        self.duration_ms = DEFAULT_DURATION_MS  # the system's, from setup() on
        self._per_thread = PerThread(HolderState)

    def state(self) -> HolderState:
        return self._per_thread.get()

    def reset_state(self) -> None:
        self._per_thread.reset()

    def new_client(self) -> LeaseClient:
        return LeaseClient(self)

    def new_generator(self) -> LeaseGenerator:
        return LeaseGenerator(self)

    def setup(self, profile: Profile, leader: str) -> None:
        """Creates the table (an earlier run's is dropped first)."""
        if not hasattr(profile, "lease_duration_ms"):
            raise EnvironmentProblem(f"{profile.name} has no lease client service, which "
                                     "kv-snapshot-lease needs.")
        self.duration_ms = int(cast(LeaseClientHost, profile).lease_duration_ms)
        conn = LeaseConnection(profile.endpoint(leader, self.protocol))
        # The service gives up on each Fluss call after 10 s, which a just-booted cluster on
        # a busy machine may need: setup (drop, then create) is asked again until it is done.
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        try:
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
