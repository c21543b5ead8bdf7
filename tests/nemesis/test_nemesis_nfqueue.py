"""The NFQUEUE packet delayer without a kernel queue: the netlink messages it sends and
parses, when it releases held packets, which links `delay` puts into the queue, and its
one-sentence refusal when the kernel probe fails."""

from __future__ import annotations

import random
import socket
import struct
from types import SimpleNamespace

import pytest

from leaseline.harness.clusters import nfqueue
from leaseline.harness.clusters.docker import netns
from leaseline.harness.clusters.docker.cluster import Cluster as DockerCluster
from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.registry import profile_class
from leaseline.nemesis.delay import links
from leaseline.nemesis.registry import nemesis_classes


def attrs_of(message: bytes) -> tuple[int, int, dict[int, bytes]]:
    ((kind, _seq, body),) = nfqueue.split_messages(message)
    (flags,) = struct.unpack_from("=H", message, 6)
    return kind, flags, nfqueue.attributes(body)


def test_config_binds_the_queue_and_fails_open() -> None:
    bind, params = nfqueue.config_messages(7411)
    kind, flags, attrs = attrs_of(bind)
    assert kind == (3 << 8) | 2 and flags == nfqueue.NLM_F_REQUEST | nfqueue.NLM_F_ACK
    assert struct.unpack_from("!H", bind, 18)[0] == 7411  # nfgenmsg res_id, big-endian
    assert attrs[nfqueue.CFG_CMD] == bytes([1, 0, 0, 0])  # BIND
    _, _, attrs = attrs_of(params)
    assert struct.unpack("!IB", attrs[nfqueue.CFG_PARAMS]) == (20, nfqueue.COPY_PACKET)
    assert struct.unpack("!I", attrs[nfqueue.CFG_FLAGS])[0] & nfqueue.F_FAIL_OPEN
    assert attrs[nfqueue.CFG_MASK] == attrs[nfqueue.CFG_FLAGS]
    assert len(params) % 4 == 0 and struct.unpack_from("=I", params)[0] == len(params)


def test_verdict_accepts_one_packet() -> None:
    kind, _, attrs = attrs_of(nfqueue.verdict(7411, 99))
    assert kind == (3 << 8) | 1
    assert struct.unpack("!II", attrs[nfqueue.VERDICT_HDR]) == (nfqueue.NF_ACCEPT, 99)


def test_packet_messages_are_parsed_in_one_datagram() -> None:
    ip = bytes(12) + socket.inet_aton("10.0.0.2") + socket.inet_aton("10.0.0.3")

    def packet(pid: int) -> bytes:
        hdr = nfqueue.attr(nfqueue.PACKET_HDR, struct.pack("!IHB", pid, 0x0800, 1))
        # The kernel sets NLA_F_NET_BYTEORDER-style flag bits on some attributes.
        return nfqueue.message(0, 7411, hdr + nfqueue.attr(nfqueue.PAYLOAD | 0x4000, ip), 0)

    found = [nfqueue.parse_packet(b) for _k, _s, b in nfqueue.split_messages(packet(5) + packet(6))]
    assert found == [(5, ip[12:20]), (6, ip[12:20])]
    error = struct.pack("=IHHII", 36, nfqueue.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -16)
    ((kind, _seq, body),) = nfqueue.split_messages(error + bytes(16))
    assert kind == nfqueue.NLMSG_ERROR and nfqueue.ack_error(body) == 16  # EBUSY


def test_scheduler_holds_delay_plus_minus_jitter_in_link_order() -> None:
    sched = nfqueue.Scheduler(300, 100, random.Random(1))
    for pid in range(200):
        sched.hold(pid, b"a" if pid % 2 else b"b", now=0.0)
    assert sched.due(0.199) == []
    released = sched.due(0.4)
    assert sorted(released) == list(range(200))  # all within 300 +- 100 ms
    for link in (0, 1):  # each link's packets leave in arrival order
        mine = [p for p in released if p % 2 == link]
        assert mine == sorted(mine)
    assert sched.wait_s(0.4) == 1.0 and sched.last == {}


def test_scheduler_without_jitter_and_drain() -> None:
    sched = nfqueue.Scheduler(50, 0, random.Random(2))
    sched.hold(1, b"x", now=10.0)
    sched.hold(2, b"y", now=10.01)
    assert abs(sched.wait_s(10.0) - 0.05) < 1e-9
    assert sched.due(10.05) == [1]
    assert sched.drain() == [2] and sched.due(99) == []


def test_links_per_direction() -> None:
    peers = ["lk2", "lk3", "s1"]
    assert links("lk1", peers, ["lk1"], "in") == {"in": peers, "out": []}
    assert links("lk1", peers, ["lk1"], "out") == {"in": [], "out": peers}
    # both: a link to another target is delayed where it is received, so once per direction.
    assert links("lk1", peers, ["lk1", "lk2"], "both") == {"in": peers, "out": ["lk3", "s1"]}


class FakeProbeHelper:
    """A probe container whose iptables cannot find the NFQUEUE target."""

    def __init__(self) -> None:
        self.removed = False

    def put_archive(self, path: str, data: bytes) -> None:
        assert path == "/" and data

    def start(self) -> None:
        pass

    def wait(self, timeout: float) -> dict[str, int]:
        return {"StatusCode": 2}

    def logs(self) -> bytes:
        return b"Warning: something\niptables: No chain/target/match by that name.\n"

    def remove(self, force: bool) -> None:
        self.removed = True


def test_delay_is_refused_in_one_sentence_without_nfqueue(monkeypatch: pytest.MonkeyPatch) -> None:
    helper = FakeProbeHelper()
    fake = SimpleNamespace(containers=SimpleNamespace(create=lambda *a, **k: helper))
    monkeypatch.setattr(netns, "client", lambda: fake)  # Docker is reached only there
    netns._queue_probe.cache_clear()
    try:
        with pytest.raises(BadArguments) as e:
            nemesis_classes(["delay:leader:ms=300:dir=in"], profile_class("leasekv"),
                            DockerCluster)
    finally:
        netns._queue_probe.cache_clear()
    assert str(e.value) == (
        "nemesis delay needs the kernel's nfnetlink_queue (iptables NFQUEUE), which this kernel "
        "does not offer (iptables: No chain/target/match by that name); use loss instead."
    )
    assert helper.removed
