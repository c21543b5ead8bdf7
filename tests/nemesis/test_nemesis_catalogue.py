"""Each fault of the catalogue has its effect on a real 5-node leasekv cluster, and its stop
and its blind heal leave nothing behind (no frozen container, no iptables rule)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import booted_cluster, wait_until_ready

from leaseline.harness.clusters.docker.client import client
from leaseline.harness.clusters.docker.cluster import Cluster
from leaseline.harness.clusters.docker.netns import HELPER_LABEL, list_rules, run_in_netns
from leaseline.harness.clusters.netrules import CHAIN
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis import delay
from leaseline.nemesis.base import FaultNotApplied, Nemesis, NemesisContext
from leaseline.nemesis.registry import NEMESES, nemesis_classes

pytestmark = pytest.mark.docker
RAFT = 4321
Setup = tuple[Cluster, Profile]


@pytest.fixture(scope="module")
def lk() -> Iterator[Setup]:
    yield from booted_cluster("leasekv", f"ll-g-{os.getpid()}-cat", timeout=60)


def wait_ready(p: Profile) -> None:
    wait_until_ready(p, 60)


def make(p: Profile, c: Cluster, text: str, seed: int = 0) -> Nemesis:
    (factory,) = nemesis_classes([text], type(p))
    return factory(NemesisContext(p, c, seed=seed))


def reach(c: Cluster, src: str, dsts: list[str]) -> dict[str, bool]:
    """Which of dsts src can open a TCP connection to, tested inside src's namespace."""
    script = "; ".join(
        f"if timeout 1 bash -c 'exec 3<>/dev/tcp/{c.ip(d)}/{RAFT}'; then echo {d}=1; "
        f"else echo {d}=0; fi"
        for d in dsts
    )
    out = run_in_netns(c, src, script)
    return {k: v == "1" for k, v in (ln.split("=") for ln in out.split() if "=" in ln)}


def assert_clean(c: Cluster, p: Profile) -> None:
    for node in p.nodes:
        assert c.container(node).status == "running", f"{node} left {c.container(node).status}"
        assert CHAIN not in list_rules(c, node), f"rule left in {node}"


def wait_for_leader_other_than(p: Profile, old: str, within_s: float) -> str | None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        leader = p.leader()
        if leader not in (None, old):
            return leader
        time.sleep(0.1)
    return None


def test_pause_leader_freezes_it_until_resumed(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    nem = make(p, c, "pause-leader:d=2")
    assert nem.duration_s == 2.0
    old = p.leader()
    value = nem.start()
    try:
        assert value == {"nodes": [old]}
        assert c.container(old).status == "paused"
        assert p.status(old) is None, "a paused node must not answer"
        # Longer than the 1 s election timeout: the others elect someone else.
        assert wait_for_leader_other_than(p, old, 8) is not None
    finally:
        assert nem.stop() == {"nodes": [old]}
    assert c.container(old).status == "running" and p.status(old) is not None
    # A blind heal thaws what a crashed harness left frozen.
    c.container(old).pause()
    nem.heal()
    assert_clean(c, p)
    wait_ready(p)


def test_pause_minority_freezes_two_nodes(lk: Setup) -> None:
    c, p = lk
    nem = make(p, c, "pause:minority", seed=3)
    value = nem.start()
    try:
        assert len(value["nodes"]) == 2
        assert {c.container(n).status for n in value["nodes"]} == {"paused"}
        assert all(p.status(n) is None for n in value["nodes"])
        wait_ready_majority = [n for n in p.nodes if n not in value["nodes"]]
        assert all(p.status(n) is not None for n in wait_ready_majority)
    finally:
        nem.stop()
    assert_clean(c, p)


def test_partition_halves_cuts_exactly_between_the_halves(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    nem = make(p, c, "partition-halves", seed=1)
    value = nem.start()
    try:
        small = value["nodes"]
        big = [n for n in p.nodes if n not in small]
        assert len(small) == 2
        seen = reach(c, small[0], [small[1], *big])
        assert seen == {small[1]: True, **{b: False for b in big}}
        seen = reach(c, big[0], [*big[1:], *small])
        assert seen == {**{b: True for b in big[1:]}, **{s: False for s in small}}
    finally:
        nem.stop()
    assert all(reach(c, p.nodes[0], list(p.nodes[1:])).values())
    assert_clean(c, p)


def test_majorities_ring_each_node_reaches_its_two_neighbours_only(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    nem = make(p, c, "partition-majorities-ring", seed=2)
    value = nem.start()
    try:
        grudge = value["grudge"]
        assert sorted(grudge) == sorted(p.nodes) and all(len(v) == 2 for v in grudge.values())
        for node in p.nodes[:3]:
            others = [n for n in p.nodes if n != node]
            assert reach(c, node, others) == {n: n not in grudge[node] for n in others}
    finally:
        nem.stop()
    assert_clean(c, p)


def test_partition_one_and_bridge(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    leader = p.leader()
    one = make(p, c, "partition-one", seed=4)
    value = one.start()
    try:
        (node,) = value["nodes"]
        assert node != leader
        others = [n for n in p.nodes if n != node]
        assert not any(reach(c, node, others).values())
        assert all(reach(c, others[0], others[1:]).values())
    finally:
        one.stop()
    br = make(p, c, "partition-bridge", seed=5)
    value = br.start()
    try:
        (middle,) = value["nodes"]
        others = [n for n in p.nodes if n != middle]
        assert all(reach(c, middle, others).values())  # the bridge sees everyone
        cut = value["grudge"][others[0]]
        assert reach(c, others[0], cut) == {n: False for n in cut}
    finally:
        br.stop()
    assert_clean(c, p)


def test_loss_drops_packets_on_the_chosen_links(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    total = make(p, c, "loss:one:p=1", seed=6)  # p=1: every packet, so the effect is certain
    value = total.start()
    try:
        (node,) = value["nodes"]
        others = [n for n in p.nodes if n != node]
        assert not any(reach(c, node, others).values())
        assert all(reach(c, others[0], others[1:]).values())
    finally:
        total.stop()
    assert_clean(c, p)
    half = make(p, c, "loss:all:p=0.5")
    half.start()
    try:
        rules = list_rules(c, p.nodes[0])
        assert "--probability 0.5" in rules and "LEASELINE-loss" in rules
    finally:
        half.stop()
    assert_clean(c, p)


def start_transfer(nem: Nemesis) -> dict[str, Any]:
    for _ in range(5):  # the leader refuses while the target is not fully caught up
        try:
            return nem.start()
        except FaultNotApplied:
            time.sleep(0.5)
    raise AssertionError("the leader refused every hand-over")


def test_transfer_leader_moves_leadership(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    nem = make(p, c, "transfer-leader")
    old = p.leader()
    value = start_transfer(nem)
    assert value["from"] == old and value["to"] != old
    deadline = time.monotonic() + 5
    while p.leader() != value["to"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert p.leader() == value["to"]
    nem.stop()
    wait_ready(p)


def test_transfer_isolate_hands_over_then_cuts_the_old_leader_off(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    nem = make(p, c, "transfer-isolate:d=1.5")
    old = p.leader()
    value = start_transfer(nem)
    assert value["from"] == old == value["nodes"][0]
    peers = [n for n in p.nodes if n != old]
    try:
        assert wait_for_leader_other_than(p, old, 5) in peers
        assert reach(c, old, peers) == dict.fromkeys(peers, False)
        assert p.status(old) is not None, "clients still reach the deposed leader"
    finally:
        nem.stop()
    assert all(reach(c, old, peers).values())
    assert_clean(c, p)
    wait_ready(p)


def test_pause_isolate_freezes_then_thaws_the_leader_still_cut_off(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    nem = make(p, c, "pause-isolate:freeze=1.5:d=2")
    old = p.leader()
    began = time.monotonic()
    value = nem.start()
    peers = [n for n in p.nodes if n != old]
    try:
        assert time.monotonic() - began >= 1.5 and value["frozen_s"] >= 1.5
        assert value["nodes"] == [old]
        assert c.container(old).status == "running", "thawed at the end of the start"
        assert reach(c, old, peers) == dict.fromkeys(peers, False)
        # Frozen longer than the 1 s election timeout: the others elect a rival, and the
        # thawed node, cut off, steps down by its check quorum (within 2 election timeouts).
        assert wait_for_leader_other_than(p, old, 5) in peers
        deadline = time.monotonic() + 3
        while (p.status(old) or {}).get("role") == "leader" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (p.status(old) or {}).get("role") != "leader"
    finally:
        nem.stop()
    assert all(reach(c, old, peers).values())
    # A blind heal thaws a node left frozen and removes the cut a crashed harness left.
    run_in_netns(c, old, f"iptables -w -N {nem.chain}; iptables -w -I INPUT 1 -j {nem.chain}")
    c.container(old).pause()
    nem.heal()
    assert_clean(c, p)  # CHAIN is a prefix of the nemesis's own chain name
    wait_ready(p)


def test_kill_minority_and_heal(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    nem = make(p, c, "kill:minority", seed=7)
    value = nem.start()
    assert len(value["nodes"]) == 2 and not any(c.is_running(n) for n in value["nodes"])
    nem.stop()
    assert all(c.is_running(n) for n in value["nodes"])
    c.kill(value["nodes"][0])
    NEMESES["kill"](NemesisContext(p, c)).heal()
    assert_clean(c, p)
    wait_ready(p)


def rtts_ms(c: Cluster, src: str, dst: str, port: int = RAFT, n: int = 3) -> list[float]:
    """TCP connect times (one SYN, one SYN-ACK) from src's namespace to dst, in ms."""
    code = (
        "import socket, time\n"
        f"for _ in range({n}):\n"
        "    t = time.monotonic()\n"
        f"    socket.create_connection(('{c.ip(dst)}', {port}), 5).close()\n"
        "    print((time.monotonic() - t) * 1000)\n"
    )
    return [float(x) for x in run_in_netns(c, src, f"python3 -c \"{code}\"").split()]


def host_rtt_ms(c: Cluster, dst: str, port: int = RAFT, n: int = 3) -> float:
    """The fastest of n TCP connects from the host (the clients' side) to dst, in ms."""
    best = float("inf")
    for _ in range(n):
        t = time.monotonic()
        socket.create_connection((c.ip(dst), port), 5).close()
        best = min(best, (time.monotonic() - t) * 1000)
    return best


def assert_no_delay_left(c: Cluster, p: Profile) -> None:
    assert_clean(c, p)
    left = client().containers.list(all=True, filters={"label": f"{HELPER_LABEL}={c.project}"})
    assert left == [], f"helpers left: {[h.name for h in left]}"


def test_delay_leader_ingress_holds_peer_packets_not_clients(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    nem = make(p, c, "delay:leader:ms=300:dir=in")
    leader = p.leader()
    value = nem.start()
    try:
        peers = [n for n in p.nodes if n != leader]
        assert value["nodes"] == [leader] and value["dir"] == "in"
        assert value["delay_ms"] == 300 and value["jitter_ms"] == 0
        assert value["links"] == {leader: {"in": peers, "out": []}}
        assert "NFQUEUE" in list_rules(c, leader)
        # The SYN from a peer reaches the leader 300 ms late: every round trip takes >= 300 ms.
        # (A load spike can only lengthen a round trip, so lower bounds are exact and "not
        # delayed" is shown by one fast sample: a delay would hold back every one.)
        assert min(rtts_ms(c, peers[0], leader)) >= 300
        assert min(rtts_ms(c, peers[1], peers[2])) < 50  # links between others: untouched
        assert host_rtt_ms(c, leader) < 50  # clients are never delayed
        assert nem.start() is value  # idempotent
    finally:
        assert nem.stop() == {"nodes": [leader]}
    assert min(rtts_ms(c, peers[0], leader)) < 50
    assert_no_delay_left(c, p)
    assert nem.stop() == {"nodes": []}
    wait_ready(p)


def test_delay_jitter_and_directions(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    spec = "delay:one:ms=200:jitter=100:dir=out"
    out = make(p, c, spec, seed=8)
    value = out.start()
    (node,) = value["nodes"]
    if node == p.leader():
        # A held packet never leaves before an earlier one of its link, and a leader's links
        # to its peers carry its heartbeats: a probe's SYN-ACK would wait for the latest of
        # several draws. Make the node a follower (the same seed picks it again).
        out.stop()
        p.transfer_leader()
        wait_ready(p)
        out = make(p, c, spec, seed=8)
        value = out.start()
        assert value["nodes"] == [node]
    try:
        # Followers do not talk to each other, so node's link to another follower is quiet.
        other = next(n for n in p.nodes if n not in (node, p.leader()))
        assert value["links"][node] == {"in": [], "out": [n for n in p.nodes if n != node]}
        # Only the SYN-ACK (node's egress) waits, 100..300 ms (uniform): of 10 samples one is
        # below 200 ms but for a 2^-10 chance; the median allows 50 ms of scheduling noise.
        samples = sorted(rtts_ms(c, other, node, n=10))
        assert samples[0] >= 100 and samples[0] < 200 and samples[5] < 350, samples
    finally:
        out.stop()
    both = make(p, c, "delay:all:ms=200:dir=both")
    value = both.start()
    try:
        assert sorted(value["nodes"]) == sorted(p.nodes)
        # SYN and SYN-ACK each wait once (at their receiver), not twice: 400 ms, not 800.
        samples = sorted(rtts_ms(c, p.nodes[0], p.nodes[1]))
        assert samples[0] >= 400 and samples[1] < 600, samples
    finally:
        both.stop()
    assert_no_delay_left(c, p)
    wait_ready(p)


def test_two_delays_on_one_node_add_up_and_heal_apart(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    inbound, outbound = make(p, c, "delay:leader:ms=200:dir=in"), make(p, c, "delay:leader:dir=out")
    leader = inbound.start()["nodes"][0]
    peer = next(n for n in p.nodes if n != leader)
    try:
        assert outbound.start()["nodes"] == [leader]
        assert min(rtts_ms(c, peer, leader)) >= 300  # SYN waits 200 ms, SYN-ACK 100 ms
        inbound.stop()  # the other delay's chain and handler stay
        assert 100 <= min(rtts_ms(c, peer, leader)) < 200
    finally:
        inbound.stop()
        outbound.stop()
    assert min(rtts_ms(c, peer, leader)) < 50
    assert_no_delay_left(c, p)


def test_delay_blind_heal_after_a_crash(lk: Setup) -> None:
    c, p = lk
    wait_ready(p)
    make(p, c, "delay:minority:ms=100", seed=9).start()  # then "crash": the object is lost
    fresh = make(p, c, "delay:minority:ms=100")  # the same --nemesis, as the next heal_all has
    fresh.heal()
    fresh.heal()  # idempotent
    assert_no_delay_left(c, p)
    assert min(rtts_ms(c, p.nodes[0], p.nodes[1])) < 50


def test_delay_is_offered_on_this_kernel(lk: Setup) -> None:
    _, p = lk
    # nfnetlink_queue is there, even though netem is not
    assert Cluster.queue_missing(delay.QUEUE) is None
    assert len(nemesis_classes(["delay:leader:ms=300:dir=in"], type(p), Cluster)) == 1
