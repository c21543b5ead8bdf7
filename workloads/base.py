"""What a workload is (Jepsen-style: client and generator kept apart from nemesis and checker).

A workload is a factory of two things:
- a Client per (worker, node): open / invoke / close, mapping every outcome to exactly one
  completion type: "ok" (it happened), "fail" (it certainly did not), "info" (unknown);
- one Generator shared by all workers: the next operation (f, key, value), values unique
  per key so a read names the write it saw, and the final reads after healing.
The runner does routing, rate, history records and process ids; a workload never sees them.
"""

from __future__ import annotations

import random
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.profile import Endpoint, Profile

OK, FAIL, INFO = "ok", "fail", "info"


@dataclass(frozen=True)
class Op:
    f: str  # "read" | "write" | "cas" | "txn" | ...
    key: str | None  # None: a transaction over several keys (its value names them)
    value: Any = None  # write: the value; cas: [expected, new]; read: None; txn: micro-ops


@dataclass(frozen=True)
class Completion:
    type: str  # OK | FAIL | INFO
    value: Any = None  # read: what was read; otherwise usually the op's value
    error: str | None = None
    # A fail the data decided (a compare that did not match): the node and the link are
    # fine, so the client keeps both (harness/run/routes.py).
    answered: bool = False


@dataclass
class WorkloadOptions:
    keys: int = 4  # keys in use at any moment
    writes_per_key: int | None = None  # retire a key after this many writes (None: never)
    seed: int = 0
    extra: dict[str, str] = field(default_factory=dict)
    # The RESP version Redis clients speak: the system's Profile.redis_protocol (None: RESP3,
    # falling back to RESP2 for a node that refuses it).
    redis_protocol: int | None = None


@dataclass(frozen=True)
class WorkloadOption:
    """A `--workload-opt key=value` a workload understands (test.json records them all)."""

    default: str
    help: str
    choices: tuple[str, ...] = ()


class Client(ABC):
    """Talks to ONE node. Not shared between threads."""

    @abstractmethod
    def open(self, node: str, endpoint: Endpoint) -> None:
        """Prepare to talk to node (may connect lazily; must not raise on a down node)."""

    @abstractmethod
    def invoke(self, op: Op) -> Completion:
        """Perform op; never raises: every outcome is a Completion."""

    @abstractmethod
    def close(self) -> None: ...


class Generator(ABC):
    """Shared by every worker: implementations must be thread-safe (use self.lock)."""

    def __init__(self, opts: WorkloadOptions) -> None:
        self.opts = opts
        self.lock = threading.Lock()

    @abstractmethod
    def next_op(self, rng: random.Random) -> Op:
        """The next operation for a worker (rng is the worker's own, seeded)."""

    @abstractmethod
    def all_keys(self) -> list[str]:
        """Every key the generator has handed out, for the final reads."""

    def final_op(self, key: str) -> Op:
        return Op("read", key)

    def reads(self) -> float | None:
        """The fraction of reads in the mix now; None: the workload has no read/write mix
        (phases may then not set reads=)."""
        return None

    def set_reads(self, reads: float | None) -> None:
        """Phases set the mix here: reads become `reads` of the operations and the other
        operations keep the workload's proportions between them; None: the workload's own
        mix again. Only for generators whose reads() is not None."""
        raise NotImplementedError(f"{type(self).__name__} has no read/write mix")



class ReadShare(Generator):
    """A generator whose mix is one share of reads (the rest writes), which phases may set:
    `read_ratio` now, `own_read_ratio` the workload's own."""

    read_ratio: float
    own_read_ratio: float

    def reads(self) -> float:
        return self.read_ratio

    def set_reads(self, reads: float | None) -> None:
        with self.lock:
            self.read_ratio = self.own_read_ratio if reads is None else reads


class IndependentKeysGenerator(Generator):
    """Jepsen's independent keys: a few keys in use, each proposing values 1, 2, 3, ... so a
    read names the operation it observed; with --writes-per-key N a key retires after N
    proposals and a fresh key takes its slot, which keeps each key's history small."""

    def __init__(self, opts: WorkloadOptions, key_prefix: str) -> None:
        super().__init__(opts)
        self.key_prefix = key_prefix
        self._next_key = 0
        self._active: list[str] = [self._new_key() for _ in range(max(1, opts.keys))]
        self._all: list[str] = list(self._active)
        self._last_value: dict[str, int] = {}

    def _new_key(self) -> str:
        name = f"{self.key_prefix}{self._next_key}"
        self._next_key += 1
        return name

    def pick_key(self, rng: random.Random) -> tuple[int, str]:
        """A slot and its key; call with self.lock held."""
        slot = rng.randrange(len(self._active))
        return slot, self._active[slot]

    def propose(self, slot: int, key: str) -> tuple[int, int]:
        """(last proposed value, the new unique one); call with self.lock held. After a key's
        last proposal later operations go to a fresh key."""
        last = self._last_value.get(key, 0)
        value = self._last_value[key] = last + 1
        limit = self.opts.writes_per_key
        if limit is not None and value >= limit:
            fresh = self._new_key()
            self._active[slot] = fresh
            self._all.append(fresh)
        return last, value

    def all_keys(self) -> list[str]:
        with self.lock:
            return list(self._all)

S = TypeVar("S")


class PerThread(Generic[S]):
    """What a worker thread's client and generator share (a holder's leases, a scanner's
    session): one S per thread, made by `make` on first use and anew by `reset`."""

    def __init__(self, make: Callable[[], S]) -> None:
        self._make = make
        self._local = threading.local()

    def get(self) -> S:
        st = getattr(self._local, "state", None)
        if st is None:
            st = self._local.state = self._make()
        return st

    def reset(self) -> None:
        self._local.state = self._make()


class Workload(ABC):
    name: ClassVar[str]
    protocol: ClassVar[str]  # the profile endpoint protocol the client speaks
    default_keys: ClassVar[int] = 1  # keys in use when the run does not say (--keys)
    # The final reads: from every node (True), or once through the leader.
    final_reads_everywhere: ClassVar[bool] = False
    options: ClassVar[dict[str, WorkloadOption]] = {}  # --workload-opt

    def __init__(self, opts: WorkloadOptions) -> None:
        self.opts = opts

    @classmethod
    def protocol_for(cls, opts: dict[str, str]) -> str:
        """The protocol the workload speaks with these options."""
        return cls.protocol

    @classmethod
    def resolve_options(cls, opts: dict[str, str], profile: type[Profile]) -> dict[str, str]:
        """Every option, defaults included, for a run on `profile`; BadArguments (one
        sentence) for an unknown option or a value not among its choices."""
        unknown = sorted(set(opts) - set(cls.options))
        if unknown:
            valid = ", ".join(sorted(cls.options)) or "none"
            raise BadArguments(f"--workload-opt {unknown[0]} is not an option of {cls.name} "
                               f"(valid: {valid}).")
        full = {k: o.default for k, o in cls.options.items()} | dict(opts)
        for k, o in cls.options.items():
            if o.choices and full[k] not in o.choices:
                raise BadArguments(f"--workload-opt {k} must be one of {', '.join(o.choices)}, "
                                   f"got {full[k]!r}.")
        return full

    @abstractmethod
    def new_client(self) -> Client: ...

    @abstractmethod
    def new_generator(self) -> Generator: ...

    def setup(self, profile: Profile, leader: str) -> None:  # noqa: B027 - optional hook
        """Once, after the cluster is ready (e.g. create a table, load a script)."""
