"""The nemeses, unchanged, acting on leasekv on three sshd machines through SshCluster: what
each fault does to the machine (rules, signals, timing) and that healing removes exactly
Leaseline's chains, never the machine's own firewall. `delay` takes the NFQUEUE path where
the kernel has no netem (the reference machine's), and its netem path is shown with a
pfifo leaf in netem's place (Delay.leaf_kind, the one seam): the same probe, per-sender
classes and heals on the machines, only without the holding."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from conftest import wait_until_ready
from ssh_machines import Machines, ssh_machines

from leaseline.harness.clusters import netem
from leaseline.harness.clusters.ssh.cluster import SshCluster
from leaseline.harness.clusters.ssh.remote import remote_cluster
from leaseline.harness.systems.leasekv import LeaseKV
from leaseline.harness.systems.registry import profile_class
from leaseline.nemesis.base import Nemesis, NemesisContext
from leaseline.nemesis.delay import Delay
from leaseline.nemesis.registry import nemesis_classes

pytestmark = [pytest.mark.docker, pytest.mark.slow]
USER_RULE = "-A INPUT -p tcp -m tcp --dport 9999 -j ACCEPT"


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Machines, SshCluster, LeaseKV]]:
    with ssh_machines(3) as m:
        for n in m.names:  # the machine's own firewall, which healing must leave alone
            m.exec(n, "iptables -w -N USERCHAIN; iptables -w -A INPUT -p tcp --dport 9999 "
                      "-j ACCEPT; iptables -w -A USERCHAIN -j RETURN")
        cls = profile_class("leasekv")
        c = remote_cluster(cls, m.hosts_toml(), {}, False, lambda _m: None)
        c.down()
        c.up()
        profile = cls(c, {})
        assert isinstance(profile, LeaseKV)
        wait_until_ready(profile, 60)
        try:
            yield m, c, profile
        finally:
            c.down()
            c.close()


def make(spec: str, c: SshCluster, profile: LeaseKV) -> Nemesis:
    (factory,) = nemesis_classes([spec], type(profile), SshCluster)
    return factory(NemesisContext(profile, c))  # type: ignore[arg-type]


def rules(m: Machines, node: str) -> str:
    return m.exec(node, "iptables -w -S")[1]


def netem_left(m: Machines, node: str) -> str:
    """netem's mangle rules and HTB roots on the machine ('' if none)."""
    return m.exec(node, "iptables -w -t mangle -S | grep LEASELINE; "
                        "tc qdisc show | grep 'htb 11ee:'")[1].strip()


def kernel_has_netem(m: Machines) -> bool:
    """Asked of the machines' kernel directly (a veth pair made and removed), not through
    Leaseline's probe."""
    code, out = m.exec("m1", "ip link add llt0 type veth peer name llt1 || exit 90; "
                              "tc qdisc add dev llt0 root netem delay 1ms; r=$?; "
                              "ip link del llt0; exit $r")
    assert code != 90, out
    return code == 0


def test_partition_rules_live_in_our_chain_and_healing_removes_only_it(
        cluster: tuple[Machines, SshCluster, LeaseKV]) -> None:
    m, c, profile = cluster
    nem = make("partition-leader", c, profile)
    done = nem.start()
    (leader,) = done["nodes"]
    text = rules(m, leader)
    for peer in profile.peers(leader):
        assert f"-A LEASELINE -s {c.ip(peer)}/32 -j DROP" in text
    assert "-A INPUT -j LEASELINE" in text and "-A OUTPUT -j LEASELINE" in text
    nem.stop()
    for n in m.names:
        text = rules(m, n)
        assert "LEASELINE" not in text
        assert USER_RULE in text and "-N USERCHAIN" in text
    wait_until_ready(profile, 60)


def test_loss_and_delay_act_on_peer_links_only(
        cluster: tuple[Machines, SshCluster, LeaseKV]) -> None:
    m, c, profile = cluster
    loss = make("loss:all:p=0.3", c, profile)
    loss.start()
    assert "-m statistic --mode random --probability 0.29999" in rules(m, "m1")
    loss.stop()
    assert "LEASELINE" not in rules(m, "m1")

    delay = make("delay:one:ms=400:dir=in", c, profile)
    done = delay.start()
    (target,) = done["nodes"]
    # This kernel has no netem (the reference machine's): every host's probe says so, and
    # the target's NFQUEUE handler holds its peers' packets, as the record says.
    assert done["via"] == ("netem" if kernel_has_netem(m) else "nfqueue"), done
    if done["via"] == "nfqueue":
        why = c.netem_support([target], netem.leaf(1, 0))[target]
        assert why and "qdisc kind is unknown" in why, why
    other = next(n for n in m.names if n != target)
    probe = (f"python3 -c \"import socket, time; t = time.monotonic(); "
             f"socket.create_connection(('{c.ip(target)}', 22), 5).close(); "
             f"print(time.monotonic() - t)\"")
    slow = float(m.exec(other, probe)[1])
    assert slow >= 0.35, slow  # the SYN-ACK's reply waits 400 ms in the handler
    delay.stop()
    fast = float(m.exec(other, probe)[1])
    assert fast < 0.2, fast
    assert m.exec(target, "ps -eo args | grep -c '[n]fqueue.py'")[1].strip() == "0"
    wait_until_ready(profile, 60)


def test_delay_via_netem_classifies_each_senders_packets_and_heals_on_every_host(
        cluster: tuple[Machines, SshCluster, LeaseKV], monkeypatch: pytest.MonkeyPatch) -> None:
    m, c, profile = cluster
    monkeypatch.setattr(Delay, "leaf_kind", "pfifo limit 1000")
    wait_until_ready(profile, 60)
    delay = make("delay:one:dir=in", c, profile)
    done = delay.start()
    (target,) = done["nodes"]
    senders = [n for n in m.names if n != target]
    assert done["via"] == "netem" and done["egress"] == {s: [target] for s in senders}
    cid, ip = netem.classid(delay.id), c.ip(target)
    for s in senders:
        assert f"-A {netem.chain(delay.id)} -d {ip}/32 -j CLASSIFY" in netem_left(m, s)
        before = counters(m, s, cid)
        m.exec(s, udp(ip, 25))
        chosen = counters(m, s, cid)
        # The chosen link's 25 (and the nodes' own traffic on it) go through the class...
        assert chosen[0] >= before[0] + 25, (before, chosen)
        m.exec(s, udp(c.ip(next(n for n in senders if n != s)), 500))
        after = counters(m, s, cid)
        # ...another link's 500 through HTB's direct queue, untouched.
        assert after[1] >= chosen[1] + 500 and after[0] - chosen[0] < 500, (chosen, after)
    # The target sends nothing through a class and runs no handler.
    assert netem_left(m, target) == "" and "LEASELINE" not in rules(m, target)
    assert m.exec(target, "ps -eo args | grep -c '[n]fqueue.py'")[1].strip() == "0"
    delay.stop()
    assert all(netem_left(m, n) == "" for n in m.names)
    # A crashed run's delay goes with the blind heal, and with the end-of-run heal.
    make("delay:all:dir=both", c, profile).start()
    assert all("htb 11ee:" in netem_left(m, n) for n in m.names)
    make("delay:all:dir=both", c, profile).heal()
    assert all(netem_left(m, n) == "" for n in m.names)
    make("delay:one:dir=out", c, profile).start()
    c.heal_everything()
    assert all(netem_left(m, n) == "" and "LEASELINE" not in rules(m, n) for n in m.names)
    wait_until_ready(profile, 60)


def udp(ip: str, count: int) -> str:
    """A command sending count UDP datagrams to ip (port 9: nothing needs to answer)."""
    return ("python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            f"[s.sendto(b'x', ('{ip}', 9)) for _ in range({count})]\"")


def counters(m: Machines, node: str, classid: str) -> tuple[int, int]:
    """(packets through the class, packets through HTB's direct queue) on eth0."""
    out = m.exec(node, f"tc -s class show dev eth0 classid {classid}")[1]
    root = m.exec(node, "tc qdisc show dev eth0 root")[1]
    return (int(out.split(" bytes ", 1)[1].split(" pkt", 1)[0]),
            int(root.split("direct_packets_stat ", 1)[1].split()[0]))


def test_kill_pause_and_transfer_act_on_the_server(
        cluster: tuple[Machines, SshCluster, LeaseKV]) -> None:
    m, c, profile = cluster
    pause = make("pause:one", c, profile)
    (node,) = pause.start()["nodes"]
    assert c.status(node) == "paused"
    assert " T" in m.exec(node, "ps -eo pid,stat,args | grep '[s]ut.leasekv'")[1]
    pause.stop()
    assert c.status(node) == "running"

    kill = make("kill-leader", c, profile)
    wait_until_ready(profile, 60)
    (leader,) = kill.start()["nodes"]
    assert c.status(leader) == "exited"
    assert m.exec(leader, "ps -eo args | grep -c '[s]ut.leasekv'")[1].strip() == "0"
    kill.stop()
    assert c.status(leader) == "running"
    wait_until_ready(profile, 60)

    transfer = make("transfer-leader", c, profile)
    for _ in range(10):  # the leader refuses while its target catches up: try again
        try:
            done = transfer.start()
            break
        except Exception:  # noqa: BLE001 - FaultNotApplied, retried
            time.sleep(0.5)
    else:
        pytest.fail("no transfer was accepted")
    deadline = time.monotonic() + 10
    while profile.leader() != done["to"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert profile.leader() == done["to"] != done["from"]


def test_an_armed_cut_is_ready_unhooked_and_hooks_on_request(
        cluster: tuple[Machines, SshCluster, LeaseKV]) -> None:
    """For pause-isolate and transfer-isolate (harness.clusters.docker.netns.armed_cut in
    Docker)."""
    m, c, profile = cluster
    peers = [c.ip(p) for p in ("m2", "m3")]
    with c.armed_cut("m1", peers, "LEASELINE-PI") as cut:
        text = rules(m, "m1")
        assert f"-A LEASELINE-PI -s {peers[0]}/32 -j DROP" in text
        assert "-j LEASELINE-PI" not in text.replace("-A LEASELINE-PI", "")
        assert c.pause("m1")
        cut()
        assert "-A INPUT -j LEASELINE-PI" in rules(m, "m1")
        assert c.thaw("m1")
    c.heal_chain(m.names, "LEASELINE-PI")
    assert "LEASELINE" not in rules(m, "m1")
    wait_until_ready(profile, 60)


def test_healing_everything_leaves_the_servers_running(
        cluster: tuple[Machines, SshCluster, LeaseKV]) -> None:
    """What --leave-running does at the end: no fault outlives the run, the servers do."""
    m, c, profile = cluster
    wait_until_ready(profile, 60)
    make("partition-one", c, profile).start()
    assert c.pause("m3")
    c.heal_everything()
    assert all("LEASELINE" not in rules(m, n) for n in m.names)
    assert [c.status(n) for n in m.names] == ["running"] * 3
    wait_until_ready(profile, 60)


def test_pause_isolate_and_transfer_isolate_cut_the_leader_off_on_its_host(
        cluster: tuple[Machines, SshCluster, LeaseKV]) -> None:
    """The Docker nemeses, unchanged: the cut is armed on the host and hooked right after the
    freeze (or the hand-over)."""
    m, c, profile = cluster
    wait_until_ready(profile, 60)
    nem = make("pause-isolate:freeze=1.2", c, profile)
    done = nem.start()
    (leader,) = done["nodes"]
    assert 1.2 <= done["frozen_s"] < 3
    assert c.status(leader) == "running"  # thawed, still cut off
    assert "-A INPUT -j LEASELINE-PI" in rules(m, leader)
    nem.stop()
    assert "LEASELINE" not in rules(m, leader)
    wait_until_ready(profile, 60)

    nem = make("transfer-isolate", c, profile)
    for _ in range(10):
        try:
            done = nem.start()
            break
        except Exception:  # noqa: BLE001 - FaultNotApplied while the target catches up
            time.sleep(0.5)
    else:
        pytest.fail("no transfer was accepted")
    assert "-A INPUT -j LEASELINE-TI" in rules(m, done["from"])
    nem.heal()
    assert all("LEASELINE" not in rules(m, n) for n in m.names)
    wait_until_ready(profile, 60)
