"""The Redis front end: RESP2 over TCP, one thread per connection (enough for redis-py).

redis-py 6+ opens connections with `HELLO 3` (RESP3): the connection then gets RESP3
nulls and maps; everything else leasekv sends is the same in both protocols.

Redirects: a follower answers `-MOVED 0 host:port` naming the leader's Redis endpoint
(redis-py raises MovedError with .node_addr), or `-TRYAGAIN no leader` when it knows
none; with the `retry-forwarded-write` bug it proxies writes to the leader instead
(forward.py). MULTI/EXEC: Transaction below. A command that may or may not have taken
effect (commit timeout, leader change) gets no reply: the connection is closed.
NotApplied answers `-TRYAGAIN ...` (it certainly did not happen).
"""

from __future__ import annotations

import logging
import socketserver
from collections.abc import Callable
from typing import Any, BinaryIO

from sut.leasekv import forward
from sut.leasekv.config import BUG_RETRY_FORWARDED_WRITE
from sut.leasekv.node import LeaseKV, NoScript, NotApplied, NotLeader, UnknownOutcome
from sut.leasekv.replies import ReplyError, Status
from sut.leasekv.state import arity_problem

log = logging.getLogger("leasekv.resp")


class ProtocolError(Exception):
    pass


def read_command(f: BinaryIO) -> list[bytes] | None:
    """One command: a RESP array of bulk strings, or an inline command. None at EOF."""
    line = f.readline()
    if not line:
        return None
    if not line.endswith(b"\r\n"):
        raise ProtocolError("Protocol error: line not terminated by CRLF")
    if line[:1] != b"*":
        return line.strip().split()
    try:
        n = int(line[1:-2])
    except ValueError:
        raise ProtocolError("Protocol error: invalid multibulk length") from None
    argv = []
    for _ in range(n):
        head = f.readline()
        if head[:1] != b"$":
            raise ProtocolError("Protocol error: expected '$'")
        size = int(head[1:-2])
        data = f.read(size + 2)
        if len(data) != size + 2:
            return None
        argv.append(data[:-2])
    return argv


DROP_CONNECTION = object()


class Raw(bytes):
    """A reply already encoded (the leader's, passed on by a proxying follower)."""


class Resp3Map(dict):
    """A map reply (RESP3 `%`; flattened to an array under RESP2)."""


def encode(reply: Any, proto: int = 2) -> bytes:
    if isinstance(reply, Raw):
        return bytes(reply)
    if isinstance(reply, ReplyError):
        return b"-" + str(reply).replace("\r\n", " ").encode() + b"\r\n"
    if isinstance(reply, Status):
        return b"+" + str(reply).encode() + b"\r\n"
    if reply is None:
        return b"_\r\n" if proto == 3 else b"$-1\r\n"
    if isinstance(reply, Resp3Map):
        items = [x for kv in reply.items() for x in kv]
        if proto == 3:
            return b"%%%d\r\n" % len(reply) + b"".join(encode(x, proto) for x in items)
        return encode(items, proto)
    if isinstance(reply, bool):
        return b":%d\r\n" % int(reply)
    if isinstance(reply, int):
        return b":%d\r\n" % reply
    if isinstance(reply, str):
        reply = reply.encode()
    if isinstance(reply, bytes):
        return b"$%d\r\n%s\r\n" % (len(reply), reply)
    if isinstance(reply, list | tuple):
        return b"*%d\r\n" % len(reply) + b"".join(encode(x, proto) for x in reply)
    raise TypeError(f"cannot encode {type(reply)}")


def _arity(argv: list[bytes], n: int, exact: bool = True) -> ReplyError | None:
    ok = len(argv) == n if exact else len(argv) >= n
    if ok:
        return None
    return ReplyError(f"ERR wrong number of arguments for '{argv[0].decode().lower()}' command")


def _split_script_args(argv: list[bytes]) -> tuple[list[bytes], list[bytes]] | ReplyError:
    try:
        numkeys = int(argv[2])
    except ValueError:
        return ReplyError("ERR value is not an integer or out of range")
    if numkeys < 0 or numkeys > len(argv) - 3:
        return ReplyError("ERR Number of keys can't be greater than number of args")
    return argv[3:3 + numkeys], argv[3 + numkeys:]


class RedisFrontend:
    def __init__(self, node: LeaseKV) -> None:
        self.node = node

    def hello(self, argv: list[bytes]) -> tuple[int | None, Any]:
        """(new protocol version or None to keep it, reply)."""
        proto = argv[1] if len(argv) > 1 else b"2"
        if proto not in (b"2", b"3"):
            return None, ReplyError("NOPROTO unsupported protocol version")
        role = b"master" if self.node.raft.is_leader() else b"replica"
        return int(proto), Resp3Map({
            b"server": b"redis", b"version": b"7.0.0", b"proto": int(proto),
            b"id": 1, b"mode": b"standalone", b"role": role, b"modules": [],
        })

    def execute(self, argv: list[bytes]) -> Any:
        return self._answer(lambda: self._dispatch(argv), [argv])

    def execute_transaction(self, commands: list[list[bytes]]) -> Any:
        """EXEC of the commands queued since MULTI: their replies as one array."""
        return self._answer(lambda: self.node.exec(commands), commands)

    def _answer(self, run: Callable[[], Any], commands: list[list[bytes]]) -> Any:
        try:
            return run()
        except NotLeader as e:
            if e.leader is None:
                return ReplyError("TRYAGAIN no leader is known; retry later")
            if self.node.cfg.bug == BUG_RETRY_FORWARDED_WRITE \
                    and any(argv[0].upper() in forward.WRITES for argv in commands):
                reply = forward.forward(e.leader, commands)
                return DROP_CONNECTION if reply is None else Raw(reply)
            return ReplyError(f"MOVED 0 {e.leader.redis_addr}")
        except NotApplied as e:
            return ReplyError(f"TRYAGAIN not applied: {e}")
        except UnknownOutcome:
            # No reply at all: a client must not mistake "maybe happened" for an error
            # reply (which means "refused"). A dropped connection is what Redis clients
            # already treat as an unknown outcome.
            return DROP_CONNECTION
        except NoScript:
            return ReplyError("NOSCRIPT No matching script. Please use EVAL.")

    def _dispatch(self, argv: list[bytes]) -> Any:
        name = argv[0].upper()
        node = self.node
        if name == b"PING":
            return Status("PONG") if len(argv) == 1 else argv[1]
        if name == b"ECHO":
            return _arity(argv, 2) or argv[1]
        if name == b"GET":
            return _arity(argv, 2) or node.get(argv[1])
        if name in (b"SET", b"DEL", b"INCR", b"INCRBY", b"EXISTS", b"RPUSH"):
            err = _arity(argv, 3 if name in (b"SET", b"RPUSH") else 2, exact=False)
            return err or node.command([name, *argv[1:]])
        if name in (b"LRANGE", b"LLEN"):
            return arity_problem(argv) or node.read_commands([[name, *argv[1:]]])[0]
        if name in (b"EVAL", b"EVALSHA"):
            err = _arity(argv, 3, exact=False)
            if err:
                return err
            split = _split_script_args(argv)
            if isinstance(split, ReplyError):
                return split
            keys, args = split
            if name == b"EVAL":
                return node.eval(argv[1], keys, args)
            return node.evalsha(argv[1].decode(errors="replace"), keys, args)
        if name == b"SCRIPT":
            return self._script(argv)
        if name == b"INFO":
            return self._info().encode()
        if name == b"SELECT":
            ok = argv[1:] == [b"0"]
            return Status("OK") if ok else ReplyError("ERR DB index is out of range")
        if name == b"CLIENT":
            sub = argv[1].upper() if len(argv) > 1 else b""
            return None if sub == b"GETNAME" else (1 if sub == b"ID" else Status("OK"))
        if name == b"COMMAND":
            return []
        if name == b"DBSIZE":
            return len(node.state.kv)
        return ReplyError(f"ERR unknown command '{argv[0].decode(errors='replace')}'")

    def _script(self, argv: list[bytes]) -> Any:
        sub = argv[1].upper() if len(argv) > 1 else b""
        if sub == b"LOAD" and len(argv) == 3:
            return self.node.script_load(argv[2]).encode()
        if sub == b"EXISTS" and len(argv) >= 3:
            return [int(a.decode(errors="replace").lower() in self.node.scripts) for a in argv[2:]]
        if sub == b"FLUSH":
            self.node.scripts.clear()
            return Status("OK")
        return ReplyError("ERR unknown SCRIPT subcommand or wrong number of arguments")

    def _info(self) -> str:
        s = self.node.status()
        leader = s["leader_redis"] or ""
        lines = [
            "# Server",
            "redis_version:7.0.0",
            "leasekv_version:1",
            f"leasekv_node_id:{s['id']}",
            "# Replication",
            f"role:{'master' if s['role'] == 'leader' else 'slave'}",
            f"raft_role:{s['role']}",
        ]
        if s["role"] != "leader" and leader:
            host, port = leader.rsplit(":", 1)
            lines += [f"master_host:{host}", f"master_port:{port}"]
        lines += [
            f"leader_addr:{leader}",
            f"leader_id:{s['leader'] or ''}",
            f"raft_term:{s['term']}",
            f"commit_index:{s['commit_index']}",
            f"lease_ms:{s['lease_ms']}",
            f"lease_remaining_ms:{s['lease_remaining_ms']}",
            f"bug:{s['bug'] or 'none'}",
        ]
        return "\r\n".join(lines) + "\r\n"


class Transaction:
    """One connection's MULTI ... EXEC: commands are checked when queued (an unknown
    command or a wrong arity answers an error and makes EXEC answer EXECABORT, as Redis
    does) and run together at EXEC, in one log entry (node.exec)."""

    def __init__(self) -> None:
        self.queued: list[list[bytes]] | None = None  # None: no MULTI open
        self.broken = False

    def takes(self, argv: list[bytes]) -> bool:
        return self.queued is not None or argv[0].upper() in (b"MULTI", b"EXEC", b"DISCARD")

    def handle(self, argv: list[bytes], frontend: RedisFrontend) -> Any:
        name = argv[0].upper()
        if name == b"MULTI":
            if self.queued is not None:
                return ReplyError("ERR MULTI calls can not be nested")
            self.queued, self.broken = [], False
            return Status("OK")
        if name in (b"EXEC", b"DISCARD"):
            queued, broken, self.queued = self.queued, self.broken, None
            if queued is None:
                return ReplyError(f"ERR {name.decode()} without MULTI")
            if name == b"DISCARD":
                return Status("OK")
            if broken:
                return ReplyError("EXECABORT Transaction discarded because of previous errors.")
            return frontend.execute_transaction(queued) if queued else []
        problem = arity_problem(argv)
        if problem is not None:
            self.broken = True
            return problem
        assert self.queued is not None
        self.queued.append([name, *argv[1:]])
        return Status("QUEUED")


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        frontend = self.server.frontend
        proto = 2
        txn = Transaction()
        while True:
            try:
                argv = read_command(self.rfile)
            except (ProtocolError, ValueError) as e:
                self.wfile.write(encode(ReplyError(f"ERR {e}")))
                return
            except OSError:
                return
            if argv is None:
                return
            if not argv:
                continue
            if argv[0].upper() == b"QUIT":
                self.wfile.write(b"+OK\r\n")
                return
            try:
                if argv[0].upper() == b"HELLO":
                    new_proto, reply = frontend.hello(argv)
                    proto = new_proto or proto
                elif txn.takes(argv):
                    reply = txn.handle(argv, frontend)
                else:
                    reply = frontend.execute(argv)
            except Exception as e:  # a bug in one command must not kill the connection
                log.exception("command %r failed", argv[:1])
                reply = ReplyError(f"ERR internal error: {type(e).__name__}")
            if reply is DROP_CONNECTION:
                return
            try:
                self.wfile.write(encode(reply, proto))
            except OSError:
                return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], frontend: RedisFrontend) -> None:
        self.frontend = frontend
        super().__init__(addr, _Handler)


def serve_redis(node: LeaseKV, host: str, port: int) -> socketserver.BaseServer:
    return _Server((host, port), RedisFrontend(node))
