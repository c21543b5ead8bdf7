"""The `retry-forwarded-write` bug: a follower proxies a write (a command, a script, or a
MULTI/EXEC transaction that writes) to the leader's Redis
endpoint instead of redirecting the client, and retries it after a timeout, as a proxy
with client-side retries does.

The proxy's timeout is shorter than a commit round, so the first attempt usually times
out at the follower although the leader goes on to commit it. The follower then tells
its client nothing (the connection is dropped: the outcome is unknown, the client
records the write as info) and sends the same write again after RETRY_AFTER_S. That
second attempt commits too: the write takes effect twice, the second time after other
clients' writes may have overwritten the first, so a later read returns a value that
was already overwritten. A linearizability checker sees a read of an overwritten value;
only a duplicated write, not a stale read, explains it (the leader's lease reads are
correct in this build).
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import BinaryIO

from sut.leasekv.config import Peer

log = logging.getLogger("leasekv.forward")

# Shorter than a commit round (a Raft append to a majority and back): most forwards
# time out, which is the bug.
FORWARD_TIMEOUT_S = 0.002
# How long the proxy waits before retrying a write that timed out: longer than the
# lease, so that the second effect, read after an overwrite, looks like a read staler
# than the lease allows.
RETRY_AFTER_S = 1.5
# The retry's own wait for the leader's reply (its answer goes nowhere).
RETRY_TIMEOUT_S = 3.0

WRITES = frozenset({b"SET", b"DEL", b"INCR", b"INCRBY", b"RPUSH", b"EVAL", b"EVALSHA"})


class ForwardTimeout(Exception):
    """The leader did not answer in time: the write may or may not commit."""


def _resp_command(argv: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(argv) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in argv)


def _read_reply(f: BinaryIO) -> bytes:
    """One RESP2 reply, as the bytes it arrived in."""
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("the leader closed the connection")
    kind = line[:1]
    if kind == b"$":
        size = int(line[1:-2])
        return line + (f.read(size + 2) if size >= 0 else b"")
    if kind == b"*":
        count = int(line[1:-2])
        return line + b"".join(_read_reply(f) for _ in range(max(count, 0)))
    return line


def send(leader: Peer, commands: list[list[bytes]], timeout_s: float) -> bytes:
    """The leader's reply, raw, to one command, or to several as one MULTI ... EXEC (then
    EXEC's reply); ForwardTimeout when it takes longer than timeout_s."""
    wrapped = commands if len(commands) == 1 else [[b"MULTI"], *commands, [b"EXEC"]]
    try:
        with socket.create_connection((leader.host, leader.redis_port), timeout=1.0) as s:
            s.settimeout(timeout_s)
            s.sendall(b"".join(_resp_command(argv) for argv in wrapped))
            f = s.makefile("rb")
            replies = [_read_reply(f) for _ in wrapped]
            return replies[-1]
    except TimeoutError:
        raise ForwardTimeout(f"no reply from {leader.redis_addr} in {timeout_s:.3f} s") from None


def forward(leader: Peer, commands: list[list[bytes]]) -> bytes | None:
    """The leader's reply, or None when the first attempt timed out (the caller drops
    its client's connection) and a retry has been scheduled."""
    try:
        return send(leader, commands, FORWARD_TIMEOUT_S)
    except ForwardTimeout:
        pass
    except OSError as e:  # refused or reset: the leader is gone; same as a timeout here
        log.info("forward to %s failed: %s", leader.redis_addr, e)

    def retry() -> None:
        try:
            send(leader, commands, RETRY_TIMEOUT_S)
        except (OSError, ForwardTimeout) as e:
            log.info("retried forward to %s failed: %s", leader.redis_addr, e)

    timer = threading.Timer(RETRY_AFTER_S, retry)
    timer.daemon = True
    timer.start()
    return None
