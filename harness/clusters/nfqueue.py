"""A userspace packet delayer on an nfnetlink queue: the `delay` fault without netem.

Runs INSIDE the nemesis helper container (joined to the target's network namespace) as
`python3 nfqueue.py QUEUE MS JITTER SEED`, so it may use nothing but the standard library.
iptables rules send the chosen links' packets to QUEUE (`-j NFQUEUE --queue-bypass`); this
process holds each one for MS +- JITTER ms (uniform) and then accepts it. Packets of one
link (source, destination) leave in their arrival order, as through a real slow link, so
jitter never reorders a TCP stream. On SIGTERM every held packet is accepted at once.
`--probe` only binds the queue and exits 0: the check that the kernel has nfnetlink_queue.

Wire format (linux/netfilter/nfnetlink_queue.h): nlmsghdr, nfgenmsg {u8 family, u8
version, be16 queue}, then attributes {u16 len, u16 type, payload padded to 4}.
"""

from __future__ import annotations

import heapq
import itertools
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
NETLINK_NO_ENOBUFS = 5
SO_RCVBUFFORCE = 33  # not in the socket module; needs CAP_NET_ADMIN, which the helper has
NFNL_SUBSYS_QUEUE = 3
MSG_PACKET, MSG_VERDICT, MSG_CONFIG = 0, 1, 2
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 1, 4
CFG_CMD, CFG_PARAMS, CFG_QUEUE_MAXLEN, CFG_MASK, CFG_FLAGS = 1, 2, 3, 4, 5
CMD_BIND, CMD_UNBIND = 1, 2
COPY_PACKET = 2
F_FAIL_OPEN, F_GSO = 1, 4
PACKET_HDR, VERDICT_HDR, PAYLOAD = 1, 2, 10
NF_ACCEPT = 1
COPY_RANGE = 20  # the IPv4 header: enough to know the link (source, destination)
QUEUE_MAXLEN = 16384  # held packets count against it; past it the kernel accepts (fail-open)


def attr(kind: int, payload: bytes) -> bytes:
    size = 4 + len(payload)
    return struct.pack("=HH", size, kind) + payload + b"\0" * (-size % 4)


def message(msg: int, queue: int, attrs: bytes, seq: int, flags: int = NLM_F_REQUEST) -> bytes:
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, queue) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq,
                       0) + body


def config_messages(queue: int) -> list[bytes]:
    """Bind the queue, copy the IP header of each packet, fail open when the queue is full."""
    flags = struct.pack("!I", F_FAIL_OPEN | F_GSO)
    return [
        message(MSG_CONFIG, queue, attr(CFG_CMD, struct.pack("!BBH", CMD_BIND, 0, 0)), 1,
                NLM_F_REQUEST | NLM_F_ACK),
        message(MSG_CONFIG, queue,
                attr(CFG_PARAMS, struct.pack("!IB", COPY_RANGE, COPY_PACKET))
                + attr(CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN))
                + attr(CFG_MASK, flags) + attr(CFG_FLAGS, flags),
                2, NLM_F_REQUEST | NLM_F_ACK),
    ]


def verdict(queue: int, packet_id: int) -> bytes:
    return message(MSG_VERDICT, queue, attr(VERDICT_HDR, struct.pack("!II", NF_ACCEPT,
                                                                     packet_id)), 0)


def split_messages(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(message type, seq, body after nlmsghdr) of every netlink message in one datagram."""
    offset = 0
    while offset + 16 <= len(data):
        size, kind, _flags, seq, _pid = struct.unpack_from("=IHHII", data, offset)
        if size < 16:
            return
        yield kind, seq, data[offset + 16 : offset + size]
        offset += (size + 3) & ~3


def attributes(body: bytes) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    offset = 4  # after nfgenmsg
    while offset + 4 <= len(body):
        size, kind = struct.unpack_from("=HH", body, offset)
        if size < 4:
            break
        found[kind & 0x3FFF] = body[offset + 4 : offset + size]  # drop NESTED/BYTEORDER bits
        offset += (size + 3) & ~3
    return found


def parse_packet(body: bytes) -> tuple[int, bytes] | None:
    """(packet id, link key) of an NFQNL_MSG_PACKET body; the key is src+dst of IPv4."""
    attrs = attributes(body)
    if PACKET_HDR not in attrs:
        return None
    (packet_id,) = struct.unpack_from("!I", attrs[PACKET_HDR])
    payload = attrs.get(PAYLOAD, b"")
    return packet_id, payload[12:20] if len(payload) >= 20 else b""


def ack_error(body: bytes) -> int:
    """The errno of an NLMSG_ERROR reply (0 is the ack of a request that worked)."""
    (err,) = struct.unpack_from("=i", body)
    return -err


class Scheduler:
    """When each held packet may leave: delay +- jitter, never before an earlier one of its
    own link."""

    def __init__(self, delay_ms: float, jitter_ms: float, rng: random.Random) -> None:
        self.delay_s = delay_ms / 1000
        self.jitter_s = jitter_ms / 1000
        self.rng = rng
        self.last: dict[bytes, float] = {}
        self.heap: list[tuple[float, int, int]] = []
        self.order = itertools.count()

    def hold(self, packet_id: int, link: bytes, now: float) -> None:
        due = now + self.delay_s + self.rng.uniform(-self.jitter_s, self.jitter_s)
        due = max(due, self.last.get(link, 0.0))
        self.last[link] = due
        heapq.heappush(self.heap, (due, next(self.order), packet_id))

    def due(self, now: float) -> list[int]:
        ready = []
        while self.heap and self.heap[0][0] <= now:
            ready.append(heapq.heappop(self.heap)[2])
        if not self.heap:
            self.last.clear()  # an idle queue forgets its links
        return ready

    def wait_s(self, now: float) -> float:
        return max(0.0, self.heap[0][0] - now) if self.heap else 1.0

    def drain(self) -> list[int]:
        ids = [entry[2] for entry in self.heap]
        self.heap.clear()
        return ids


def open_queue(queue: int) -> socket.socket:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
    sock.bind((0, 0))
    for request in config_messages(queue):
        sock.send(request)
        for kind, _seq, body in split_messages(sock.recv(65536)):
            if kind == NLMSG_ERROR and (err := ack_error(body)):
                raise OSError(err, f"binding nfnetlink queue {queue}: {os.strerror(err)}")
    return sock


def serve(sock: socket.socket, queue: int, sched: Scheduler) -> None:
    stopping = False

    def stop(_sig: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sock.setblocking(False)
    while not stopping:
        readable, _, _ = select.select([sock], [], [], sched.wait_s(time.monotonic()))
        if readable:
            while True:
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    break
                now = time.monotonic()
                for kind, _seq, body in split_messages(data):
                    if kind == (NFNL_SUBSYS_QUEUE << 8) | MSG_PACKET and (p := parse_packet(body)):
                        sched.hold(p[0], p[1], now)
        for packet_id in sched.due(time.monotonic()):
            sock.send(verdict(queue, packet_id))
    sock.setblocking(True)
    for packet_id in sched.drain():  # healing must not cost the held packets
        sock.send(verdict(queue, packet_id))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        open_queue(int(argv[1])).close()
        return 0
    queue, delay_ms, jitter_ms, seed = int(argv[0]), float(argv[1]), float(argv[2]), argv[3]
    sock = open_queue(queue)
    print(f"bound queue {queue}: holding packets {delay_ms:g}+-{jitter_ms:g} ms", flush=True)
    serve(sock, queue, Scheduler(delay_ms, jitter_ms, random.Random(seed)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError as e:
        print(f"nfqueue: {e.strerror or e}", file=sys.stderr)
        sys.exit(1)
