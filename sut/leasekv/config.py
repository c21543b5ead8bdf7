"""Node configuration: command-line flags, peer addresses and the bug switches."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

# The bugs elastickv's reviewers found, each switchable with --bug NAME.
BUG_EXTEND_AFTER_ROUND = "extend-after-round"
BUG_KEEP_LEASE_ON_STEP_DOWN = "keep-lease-on-step-down"
BUG_LEASE_LONGER_THAN_ELECTION = "lease-longer-than-election"
BUG_LOCAL_READ = "local-read"
# Not a lease bug: a follower proxies writes to the leader and retries them (forward.py).
BUG_RETRY_FORWARDED_WRITE = "retry-forwarded-write"
BUGS = (
    BUG_EXTEND_AFTER_ROUND,
    BUG_KEEP_LEASE_ON_STEP_DOWN,
    BUG_LEASE_LONGER_THAN_ELECTION,
    BUG_LOCAL_READ,
    BUG_RETRY_FORWARDED_WRITE,
)


class ConfigError(ValueError):
    """A flag that cannot work; the message is one sentence for the operator."""


@dataclass(frozen=True)
class Peer:
    """One cluster member: where its Raft, Redis, DynamoDB and admin endpoints listen."""

    node_id: int
    host: str
    raft_port: int
    redis_port: int
    dynamo_port: int
    admin_port: int

    @property
    def raft_addr(self) -> str:
        return f"{self.host}:{self.raft_port}"

    @property
    def redis_addr(self) -> str:
        return f"{self.host}:{self.redis_port}"

    @property
    def dynamo_addr(self) -> str:
        return f"{self.host}:{self.dynamo_port}"

    @property
    def admin_addr(self) -> str:
        return f"{self.host}:{self.admin_port}"


@dataclass(frozen=True)
class NodeConfig:
    node_id: int
    peers: tuple[Peer, ...]
    election_timeout_ms: int = 1000
    lease_margin_ms: int = 300
    bug: str | None = None
    data_dir: str | None = None
    lease_keepalive_ms: int = 200
    op_timeout_ms: int = 3000
    bind_host: str = "0.0.0.0"
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def me(self) -> Peer:
        return self.peers[self.node_id - 1]

    @property
    def others(self) -> tuple[Peer, ...]:
        return tuple(p for p in self.peers if p.node_id != self.node_id)

    def peer_by_raft_addr(self, addr: str) -> Peer | None:
        for p in self.peers:
            if p.raft_addr == addr:
                return p
        return None

    def lease_ms(self) -> int:
        """The lease window: election timeout minus margin, or the buggy 3x timeout."""
        if self.bug == BUG_LEASE_LONGER_THAN_ELECTION:
            return 3 * self.election_timeout_ms
        return self.election_timeout_ms - self.lease_margin_ms


def parse_peers(spec: str, redis_port: int, dynamo_port: int, admin_port: int) -> tuple[Peer, ...]:
    """Peers are `host:raft[:redis:dynamo:admin]`, comma separated, in node-id order (1-based).

    Only the Raft port is needed when every node uses the same client ports (compose);
    on one host (tests) each peer names all four ports.
    """
    peers = []
    for i, item in enumerate(x.strip() for x in spec.split(",") if x.strip()):
        parts = item.rsplit(":", 4) if item.count(":") >= 4 else item.rsplit(":", 1)
        try:
            host = parts[0]
            ports = [int(p) for p in parts[1:]]
        except ValueError:
            raise ConfigError(f"peer {item!r} is not host:port[:redis:dynamo:admin]") from None
        if len(ports) == 1:
            ports += [redis_port, dynamo_port, admin_port]
        if len(ports) != 4 or not host:
            raise ConfigError(f"peer {item!r} is not host:port[:redis:dynamo:admin]")
        peers.append(Peer(i + 1, host, *ports))
    if not peers:
        raise ConfigError("--peers names no node")
    return tuple(peers)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sut.leasekv", description=__doc__)
    p.add_argument("--id", type=int, required=True, help="this node's 1-based index in --peers")
    p.add_argument("--peers", required=True, help="host:raftport[:redis:dynamo:admin],...")
    p.add_argument("--redis-port", type=int, default=6379)
    p.add_argument("--dynamo-port", type=int, default=8000)
    p.add_argument("--raft-port", type=int, default=None, help="defaults to this node's peer port")
    p.add_argument("--admin-port", type=int, default=8080)
    p.add_argument("--election-timeout-ms", type=int, default=1000)
    p.add_argument("--lease-margin-ms", type=int, default=300)
    p.add_argument("--lease-keepalive-ms", type=int, default=200,
                   help="leader commits a no-op this often to keep the lease warm (0 = never)")
    p.add_argument("--op-timeout-ms", type=int, default=3000)
    p.add_argument("--bug", choices=(*BUGS, "none", ""), default=None,
                   help="inject one of the reviewers' bugs ('none' or '' = the correct build)")
    p.add_argument("--data-dir", default=None, help="Raft journal directory (default: memory)")
    p.add_argument("--bind-host", default="0.0.0.0")
    return p


def config_from_args(argv: list[str] | None = None) -> NodeConfig:
    args = build_parser().parse_args(argv)
    peers = parse_peers(args.peers, args.redis_port, args.dynamo_port, args.admin_port)
    if not 1 <= args.id <= len(peers):
        raise ConfigError(f"--id {args.id} is not between 1 and {len(peers)} (the number of peers)")
    me = peers[args.id - 1]
    # The explicit flags win for this node (on one host the peer list repeats them anyway).
    me = Peer(me.node_id, me.host, args.raft_port or me.raft_port, args.redis_port,
              args.dynamo_port, args.admin_port)
    peers = tuple(me if p.node_id == me.node_id else p for p in peers)
    if args.election_timeout_ms < 400:
        raise ConfigError("--election-timeout-ms must be at least 400 (4 heartbeats of 100 ms)")
    if not 0 < args.lease_margin_ms < args.election_timeout_ms:
        raise ConfigError("--lease-margin-ms must be positive and below the election timeout")
    return NodeConfig(
        node_id=args.id,
        peers=peers,
        election_timeout_ms=args.election_timeout_ms,
        lease_margin_ms=args.lease_margin_ms,
        bug=None if args.bug in (None, "", "none") else args.bug,
        data_dir=args.data_dir,
        lease_keepalive_ms=args.lease_keepalive_ms,
        op_timeout_ms=args.op_timeout_ms,
        bind_host=args.bind_host,
    )
