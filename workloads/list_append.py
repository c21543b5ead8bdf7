"""The `list-append` workload: transactions of appends to lists and reads of whole lists.

Jepsen's list-append (as Elle checks it): each operation is one transaction (f "txn") of
micro-operations `[f, key, value]`, each an `append` of a value unique per key or an `r`
(read) of the key's whole list, over a rotating set of keys (`--keys`, default 12): a key
retires after `--writes-per-key` appends (default 128) and a fresh key takes its slot.
An ok completion carries the lists read; a fail the value as invoked; an info the value as
invoked (its reads unknown: null). After the last heal every key is read once from every
node, each as a one-read transaction.

How a transaction reaches the system is the `client` option (`--workload-opt client=...`,
recorded in test.json): `multi` (MULTI/EXEC of RPUSH and LRANGE), `lua` (one EVALSHA per
transaction), `plain` (one-op transactions as bare RPUSH / LRANGE) in
workloads/list_append_redis.py, and `dynamo` (UpdateItem list_append, GetItem, and
TransactWriteItems / TransactGetItems where the system offers them) in
workloads/list_append_dynamo.py. A system says what it speaks in its profile's `features`;
a client kind it cannot serve is refused in one sentence before anything starts.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.profile import Profile
from leaseline.workloads import list_append_dynamo, list_append_redis
from leaseline.workloads.base import (
    Client,
    Op,
    ReadShare,
    Workload,
    WorkloadOption,
    WorkloadOptions,
)

CLIENTS = ("multi", "lua", "plain", "dynamo")
DYNAMO_TXN = ("auto", "transact", "single")
DEFAULT_KEYS = 12  # Jepsen's list-append and elastickv's own suite
DEFAULT_APPENDS_PER_KEY = 128
# What each client kind needs of the system (Profile.features), and why, for the refusal.
NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "plain": (("lists", "RPUSH and LRANGE"),),
    "multi": (("lists", "RPUSH and LRANGE"), ("multi", "MULTI/EXEC")),
    "lua": (("lists", "RPUSH and LRANGE"), ("scripts", "EVALSHA scripts")),
    "dynamo": (("dynamo-lists", "DynamoDB list_append"),),
}


def txn(mops: list[list[Any]]) -> Op:
    return Op("txn", None, mops)


def read_only_share(text: str) -> float | None:
    """`--workload-opt read-only`: None for `mix`, else a share from 0 to 1."""
    if text == "mix":
        return None
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise BadArguments(f"--workload-opt read-only must be mix or a share from 0 to 1, "
                           f"got {text!r}.")
    return share


class ListAppendGenerator(ReadShare):
    """Transactions of min_len..max_len micro-ops; each picks one of the active keys at
    random (a key may come twice in one transaction) and reads it or appends the key's next
    value. With `read_only` (a share), that share of transactions only reads and every
    other one appends at least once (unless a phase makes every micro-op a read), so the
    share of transactions a leader may answer from its lease is set outright; without it,
    it follows from the micro-ops' mix (about a quarter for 1-4 micro-ops, half reads).
    Thread-safe (self.lock)."""

    def __init__(self, opts: WorkloadOptions, min_len: int = 1, max_len: int = 4,
                 read_ratio: float = 0.5, read_only: float | None = None) -> None:
        super().__init__(opts)
        self.min_len, self.max_len = min_len, max_len
        self.read_only = read_only
        self.appends_per_key = opts.writes_per_key or DEFAULT_APPENDS_PER_KEY
        self.own_read_ratio = self.read_ratio = read_ratio
        self._next_key = 0
        self._active = [self._new_key() for _ in range(max(1, opts.keys))]
        self._all = list(self._active)
        self._last: dict[str, int] = {}

    def _new_key(self) -> str:
        name = f"k{self._next_key}"
        self._next_key += 1
        return name

    def next_op(self, rng: random.Random) -> Op:
        with self.lock:
            length = rng.randint(self.min_len, self.max_len)
            if self.read_only is None:  # Jepsen's mix: each micro-op drawn on its own
                return txn([self._mop(rng.randrange(len(self._active)),
                                      rng.random() < self.read_ratio) for _ in range(length)])
            if rng.random() < self.read_only:
                reads = [True] * length
            else:
                reads = [rng.random() < self.read_ratio for _ in range(length)]
                if all(reads) and self.read_ratio < 1.0:
                    reads[rng.randrange(length)] = False
            return txn([self._mop(rng.randrange(len(self._active)), read) for read in reads])

    def _mop(self, slot: int, read: bool) -> list[Any]:
        """A read of the key in `slot`, or its next append; call with self.lock held."""
        key = self._active[slot]
        if read:
            return ["r", key, None]
        value = self._last[key] = self._last.get(key, 0) + 1
        if value >= self.appends_per_key:  # retired: later ops take a fresh key
            self._active[slot] = fresh = self._new_key()
            self._all.append(fresh)
        return ["append", key, value]

    def all_keys(self) -> list[str]:
        with self.lock:
            return list(self._all)

    def final_op(self, key: str) -> Op:
        return txn([["r", key, None]])


class ListAppend(Workload):
    name = "list-append"
    protocol = "redis"  # the class's; an instance with client=dynamo speaks dynamodb
    default_keys = DEFAULT_KEYS
    final_reads_everywhere = True
    options: ClassVar[dict[str, WorkloadOption]] = {
        "client": WorkloadOption("multi", "how transactions are sent: multi (MULTI/EXEC), "
                                 "lua (EVALSHA), plain (one-op, bare commands), dynamo",
                                 CLIENTS),
        "min-txn-length": WorkloadOption("1", "fewest micro-ops in a transaction"),
        "max-txn-length": WorkloadOption("4", "most micro-ops in a transaction"),
        "read-only": WorkloadOption("mix", "share of transactions that only read (0-1; the "
                                    "rest append at least once), or mix: as the micro-ops "
                                    "fall"),
        "dynamo-txn": WorkloadOption("auto", "client=dynamo: transact (TransactGetItems/"
                                     "TransactWriteItems), single (one-op transactions), "
                                     "auto (transact where the system offers it)", DYNAMO_TXN),
    }

    def __init__(self, opts: WorkloadOptions) -> None:
        super().__init__(opts)
        self.kind = opts.extra.get("client", "multi")
        self.protocol = "dynamodb" if self.kind == "dynamo" else "redis"  # type: ignore[misc]
        self.min_len = int(opts.extra.get("min-txn-length", "1"))
        self.max_len = int(opts.extra.get("max-txn-length", "4"))
        self.read_only = read_only_share(opts.extra.get("read-only", "mix"))
        if self.kind == "plain" or opts.extra.get("dynamo-txn") == "single":
            self.min_len = self.max_len = 1  # no transactions: one micro-op each
        self._impl = (list_append_dynamo.DynamoSide() if self.kind == "dynamo"
                      else list_append_redis.RedisSide(self.kind, opts.redis_protocol))

    @classmethod
    def protocol_for(cls, opts: dict[str, str]) -> str:
        return "dynamodb" if opts.get("client") == "dynamo" else "redis"

    @classmethod
    def resolve_options(cls, opts: dict[str, str], profile: type[Profile]) -> dict[str, str]:
        """Every option with its default, `auto` decided for this system; one sentence for
        a value out of range or a client kind the system cannot serve."""
        full = super().resolve_options(opts, profile)
        lengths = {}
        for name in ("min-txn-length", "max-txn-length"):
            text = full[name]
            if not text.isdigit() or not 1 <= int(text) <= 16:
                raise BadArguments(f"--workload-opt {name} must be a whole number from 1 to "
                                   f"16, got {text!r}.")
            lengths[name] = int(text)
        read_only_share(full["read-only"])
        if lengths["min-txn-length"] > lengths["max-txn-length"]:
            raise BadArguments("--workload-opt min-txn-length must not exceed max-txn-length "
                               f"({lengths['min-txn-length']} > {lengths['max-txn-length']}).")
        kind = full["client"]
        features = profile.features
        for feature, what in NEEDS[kind]:
            if feature not in features:
                raise BadArguments(
                    f"list-append with client={kind} needs {what}, which {profile.name} does "
                    f"not speak (it offers: {', '.join(sorted(features)) or 'none of them'}).")
        one_op = kind == "plain"
        if kind == "dynamo":
            mode = full["dynamo-txn"]
            offered = "dynamo-transactions" in features
            if mode == "transact" and not offered:
                raise BadArguments(f"list-append with dynamo-txn=transact needs "
                                   f"TransactWriteItems/TransactGetItems, which {profile.name} "
                                   f"does not offer (dynamo-txn=single sends one-op "
                                   f"transactions).")
            full["dynamo-txn"] = mode = ("transact" if offered else "single") \
                if mode == "auto" else mode
            one_op = mode == "single"
        elif "dynamo-txn" in opts:
            raise BadArguments(f"--workload-opt dynamo-txn applies to client=dynamo only, "
                               f"not client={kind}.")
        else:
            del full["dynamo-txn"]  # a Redis run has no DynamoDB transactions to record
        if one_op:
            if "max-txn-length" in opts and lengths["max-txn-length"] > 1:
                raise BadArguments(f"list-append with client={kind} "
                                   f"{'dynamo-txn=single ' if kind == 'dynamo' else ''}sends "
                                   f"one micro-op per transaction: max-txn-length must be 1.")
            full["min-txn-length"] = full["max-txn-length"] = "1"
        return full

    def new_client(self) -> Client:
        return self._impl.new_client()

    def new_generator(self) -> ListAppendGenerator:
        return ListAppendGenerator(self.opts, self.min_len, self.max_len,
                                   read_only=self.read_only)

    def setup(self, profile: Profile, leader: str) -> None:
        self._impl.setup(profile, leader, self)
