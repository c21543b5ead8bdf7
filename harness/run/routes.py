"""Where a worker's operations go: the one place that decides it (docs/commands.md).

Each worker owns one Route for the run, holding its own clients and its own idea of where
to send. Before an operation the worker asks `target()` (None: nowhere to send now; it
waits a moment), takes `client(node)`, and afterwards tells `settled(node, done)` how the
operation ended. Only the oracle's route reads the harness's LeaderTracker; the models an
application could have never see it:
- node: one node for the whole run (Jepsen binds a thread to a node);
- follow: asks who leads (the system's own leader probe, asked by this worker alone) when
  it does not know, and keeps sending there until an operation ends in an error, a
  timeout or a redirect;
- sentinel: redis-py's own Sentinel client (`Sentinel(...).master_for(...)`): it finds the
  primary when it connects and stays on that connection until the connection fails or the
  node answers READONLY, whatever Sentinel decides meanwhile;
- oracle: whom the tracker's poll of every node or Sentinel names leader now.
"""

from __future__ import annotations

import contextlib
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

from leaseline.harness.errors import BadArguments
from leaseline.harness.run.leader import LeaderTracker
from leaseline.harness.systems.profile import Profile
from leaseline.workloads.base import OK, Client, Completion, Workload
from leaseline.workloads.redis_client import CONNECT_TIMEOUT_S, REPLY_TIMEOUT_S, RedisClient


class Route:
    """One worker's way of choosing a node, and its clients (one per node it talked to)."""

    def __init__(self, profile: Profile, workload: Workload) -> None:
        self.profile, self.workload = profile, workload
        self.clients: dict[str, Client] = {}

    def target(self) -> str | None:
        """The node the next operation goes to; None when there is none to send to now."""
        raise NotImplementedError

    def client(self, node: str) -> Client:
        """The client for `node`, opened on first use (may raise: e.g. its container is
        gone); the address is resolved on every (re)open: a restarted container may have a
        new one."""
        c = self.clients.get(node)
        if c is None:
            c = self.workload.new_client()
            c.open(node, self.profile.endpoint(node, self.workload.protocol))
            self.clients[node] = c
        return c

    def reached(self, node: str, client: Client) -> str:
        """The node the operation went to (the one `target` named, unless the client chose)."""
        return node

    def settled(self, node: str, done: Completion) -> None:
        """After each operation: a client whose operation did not end well reconnects (and
        re-resolves its address) next time, unless the node answered for the data."""
        if done.type != OK and not done.answered:
            self.drop(node)

    def drop(self, node: str) -> None:
        c = self.clients.pop(node, None)
        if c is not None:
            c.close()

    def close(self) -> None:
        for node in list(self.clients):
            self.drop(node)


class NodeRoute(Route):
    def __init__(self, profile: Profile, workload: Workload, node: str) -> None:
        super().__init__(profile, workload)
        self.node = node

    def target(self) -> str:
        return self.node


class OracleRoute(Route):
    def __init__(self, profile: Profile, workload: Workload, tracker: LeaderTracker) -> None:
        super().__init__(profile, workload)
        self.tracker = tracker

    def target(self) -> str | None:
        return self.tracker.current


class FollowRoute(Route):
    def __init__(self, profile: Profile, workload: Workload) -> None:
        super().__init__(profile, workload)
        self.leader: str | None = None

    def target(self) -> str | None:
        if self.leader is None:
            try:
                self.leader = self.profile.leader()
            except Exception:  # noqa: BLE001 - no answer (any probe's error): look again
                self.leader = None
        return self.leader

    def settled(self, node: str, done: Completion) -> None:
        super().settled(node, done)
        if done.type != OK and not done.answered:
            self.leader = None  # an error, a timeout or a redirect: ask again


class NamingSentinel(Sentinel):
    """redis-py's Sentinel, except that the node names the Sentinels announce are resolved
    where Leaseline finds its nodes (this machine does not resolve the containers' names)."""

    def __init__(self, profile: Profile, **kwargs: Any) -> None:
        timeouts = {"socket_timeout": REPLY_TIMEOUT_S,
                    "socket_connect_timeout": CONNECT_TIMEOUT_S, "retry": Retry(NoBackoff(), 0)}
        super().__init__(profile.sentinel_addresses(), sentinel_kwargs=timeouts, **kwargs)
        self.profile = profile
        self.names: dict[tuple[str, int], str] = {}

    def discover_master(self, service_name: str) -> tuple[str, int]:
        host, port = super().discover_master(service_name)
        if host not in self.profile.nodes:
            return host, port
        endpoint = self.profile.endpoint(host, "redis")
        if not endpoint.host:
            raise MasterNotFoundError(f"the primary Sentinel names, {host}, is not running")
        self.names[(endpoint.host, endpoint.port)] = host
        return endpoint.host, endpoint.port


class HeldConnection:
    """A connection taken from a redis-py pool and held while it works; closing it gives it
    back, and the pool's next one connects anew (a Sentinel pool asks the Sentinels first)."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self.pool = pool
        self.conn: Any = None

    def connect(self) -> None:
        if self.conn is None:
            self.conn = self.pool.get_connection()

    def send_command(self, *args: Any) -> None:
        self.conn.send_command(*args)

    def read_response(self) -> Any:
        return self.conn.read_response()

    def disconnect(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.disconnect()
            self.pool.release(conn)

    def address(self) -> tuple[str, int] | None:
        return (self.conn.host, self.conn.port) if self.conn is not None else None


class SentinelRoute(Route):
    def __init__(self, profile: Profile, workload: Workload) -> None:
        super().__init__(profile, workload)
        client = workload.new_client()
        if not isinstance(client, RedisClient) or profile.sentinel_master is None:
            raise BadArguments(f"the sentinel client model needs a Redis workload on a system "
                               f"with Redis Sentinel, not {workload.name} on {profile.name}.")
        self.sentinel = NamingSentinel(profile)
        self.held: HeldConnection | None = None
        self.redis_client = client
        client.open_through(self._connection)

    def _connection(self, protocol: int) -> HeldConnection:
        # Retries off: redis-py would re-send a write whose first attempt may have landed.
        master = self.sentinel.master_for(
            self.profile.sentinel_master, protocol=protocol, socket_timeout=REPLY_TIMEOUT_S,
            socket_connect_timeout=CONNECT_TIMEOUT_S, retry=Retry(NoBackoff(), 0))
        self.held = HeldConnection(master.connection_pool)
        return self.held

    def _node(self) -> str | None:
        address = self.held.address() if self.held is not None else None
        return self.sentinel.names.get(address) if address is not None else None

    def target(self) -> str | None:
        """The node the worker's connection is on, connecting first (redis-py asks the
        Sentinels then) when it has none; None when that failed."""
        if self.redis_client.connect() is not None:
            return None
        return self._node()

    def client(self, node: str) -> Client:
        return self.redis_client

    def reached(self, node: str, client: Client) -> str:
        return self._node() or node

    def settled(self, node: str, done: Completion) -> None:
        """redis-py's rules, not the harness's: the client closed its connection itself on a
        connection error, a timeout or READONLY; an error reply leaves it open."""

    def close(self) -> None:
        self.redis_client.close()


def route_for(model: str, worker: int, profile: Profile, workload: Workload,
              tracker: LeaderTracker) -> Route:
    """Worker `worker`'s route under client model `model` (harness/systems/client_models.py)."""
    if model == "node":
        return NodeRoute(profile, workload, profile.nodes[worker % len(profile.nodes)])
    if model == "follow":
        return FollowRoute(profile, workload)
    if model == "sentinel":
        return SentinelRoute(profile, workload)
    if model == "oracle":
        return OracleRoute(profile, workload, tracker)
    raise ValueError(f"unknown client model {model!r}")
