"""Which mechanism `delay` uses for which link on the user's own machines: netem at the
sender's egress where the sender's probe found it, the NFQUEUE handler on the target
otherwise, and the record that says which. The hosts are a fake collaborator here (it
records the scripts it is handed); the scripts themselves run for real in
tests/nemesis/test_nemesis_netem.py and on sshd machines in tests/nemesis/test_ssh_faults.py."""

from __future__ import annotations

import pytest

from leaseline.harness.clusters.docker.cluster import Cluster as DockerCluster
from leaseline.harness.clusters.ssh.cluster import SshCluster
from leaseline.harness.clusters.ssh.transport import SshFailure
from leaseline.harness.systems.registry import profile_class
from leaseline.nemesis.base import FaultNotApplied, Nemesis, NemesisContext
from leaseline.nemesis.delay import split_links, via
from leaseline.nemesis.registry import nemesis_classes

NAMES = ["m1", "m2", "m3", "m4", "m5"]


class FakeHosts:
    """What Delay asks of an SshCluster; netem_support answers as configured."""

    project = "ll-ssh-test"

    def __init__(self, no_netem: dict[str, str] | None = None, broken: str | None = None
                 ) -> None:
        self.nodes = list(NAMES)
        self.node_names = tuple(NAMES)
        self.no_netem = no_netem or {}
        self.broken = broken  # a host whose netem script fails
        self.probes: list[tuple[str, str]] = []
        self.scripts: list[tuple[str, str]] = []
        self.handlers: list[tuple[str, str, str]] = []
        self.healed: list[tuple[list[str], str, int]] = []

    def is_running(self, name: str) -> bool:
        return True

    def ip(self, name: str) -> str:
        return f"10.0.0.{NAMES.index(name) + 11}"

    def netem_support(self, nodes: list[str], leaf: str) -> dict[str, str | None]:
        self.probes += [(name, leaf) for name in nodes]
        return {name: self.no_netem.get(name) for name in nodes}

    def run_in_netns(self, name: str, script: str) -> str:
        if name == self.broken and "CLASSIFY" in script:
            raise SshFailure(f"a fault command on node {name} failed: RTNETLINK answers: nope")
        self.scripts.append((name, script))
        return ""

    def start_delay_handler(self, name: str, rules: str, args: str, instance: int,
                            timeout_s: float) -> None:
        self.handlers.append((name, rules, args))

    def heal_delay(self, names: list[str], chain: str, instance: int) -> None:
        self.healed.append((sorted(names), chain, instance))

    def applied(self) -> dict[str, str]:
        """host -> its netem apply script (those with a CLASSIFY rule)."""
        return {n: s for n, s in self.scripts if "CLASSIFY" in s}


def make(spec: str, hosts: FakeHosts) -> Nemesis:
    leasekv = profile_class("leasekv")
    (factory,) = nemesis_classes([spec], leasekv, SshCluster)
    return factory(NemesisContext(leasekv(hosts, {}), hosts))  # type: ignore[arg-type]


def test_split_links_puts_each_link_at_its_senders_egress_where_it_has_netem() -> None:
    plan = {"m1": {"in": ["m2", "m3"], "out": []}}
    assert split_links(plan, {"m2", "m3"}) == ({"m2": ["m1"], "m3": ["m1"]}, {})
    assert split_links(plan, {"m2"}) == ({"m2": ["m1"]}, {"m1": {"in": ["m3"], "out": []}})
    assert split_links(plan, set()) == ({}, plan)
    # dir=out: the target itself is the sender.
    out = {"m1": {"in": [], "out": ["m2", "m3"]}}
    assert split_links(out, {"m1"}) == ({"m1": ["m2", "m3"]}, {})
    assert split_links(out, {"m2", "m3"}) == ({}, out)  # the receivers' netem is no use
    # dir=both on m1 and m2: m1<->m2 once per direction, each at its sender.
    both = {"m1": {"in": ["m2", "m3"], "out": ["m3"]}, "m2": {"in": ["m1", "m3"], "out": ["m3"]}}
    egress, queue = split_links(both, {"m1", "m2", "m3"})
    assert egress == {"m2": ["m1", "m3"], "m3": ["m1", "m2"], "m1": ["m3", "m2"]}
    assert queue == {}
    assert sorted((s, r) for s, rs in egress.items() for r in rs) == sorted(
        [("m2", "m1"), ("m3", "m1"), ("m1", "m3"), ("m1", "m2"), ("m3", "m2"), ("m2", "m3")])
    assert via(egress, queue) == "netem" and via({}, both) == "nfqueue"
    assert via({"m2": ["m1"]}, {"m1": {"in": ["m3"], "out": []}}) == "netem+nfqueue"


def test_dir_in_is_netem_on_each_peer_and_no_handler() -> None:
    hosts = FakeHosts()
    nem = make("delay:one:ms=300:jitter=50:dir=in", hosts)
    done = nem.start()
    (target,) = done["nodes"]
    peers = [n for n in NAMES if n != target]
    assert done["via"] == "netem" and done["egress"] == {p: [target] for p in peers}
    assert done["links"] == {target: {"in": peers, "out": []}}
    assert sorted(n for n, _leaf in hosts.probes) == peers  # only would-be senders are asked
    applied = hosts.applied()
    assert sorted(applied) == peers and hosts.handlers == []
    for script in applied.values():
        assert f"-d {hosts.ip(target)} -j CLASSIFY" in script
        assert "netem delay 300ms 50ms" in script
    nem.stop()  # heals the target and every sender: chain, class, handlers
    assert hosts.healed == [(sorted(NAMES), nem.chain, nem.id)]


def test_a_host_whose_probe_fails_gets_the_nfqueue_path() -> None:
    no = "Error: Specified qdisc kind is unknown"
    hosts = FakeHosts({n: no for n in NAMES})
    nem = make("delay:one:ms=300:dir=in", hosts)
    done = nem.start()
    (target,) = done["nodes"]
    assert done["via"] == "nfqueue" and "egress" not in done
    assert hosts.applied() == {}
    ((node, rules, args),) = hosts.handlers
    assert node == target and args.startswith(f"{7000 + nem.id} 300 0 ")
    for p in NAMES:
        assert (f"-s {hosts.ip(p)} -j NFQUEUE" in rules) == (p != target)


def test_mixed_hosts_split_the_links_and_say_so() -> None:
    hosts = FakeHosts({"m2": "no tc on this host"})
    nem = make("delay:all:ms=100:dir=out", hosts)
    done = nem.start()
    assert done["via"] == "netem+nfqueue"
    others = {n: [p for p in NAMES if p != n] for n in NAMES}
    assert done["egress"] == {n: others[n] for n in NAMES if n != "m2"}
    ((node, rules, _args),) = hosts.handlers  # m2's own sends go through its handler
    assert node == "m2" and rules.count("-j NFQUEUE") == 4 and "-s " not in rules


def test_a_failing_sender_heals_everything_it_touched() -> None:
    hosts = FakeHosts(broken="m3")
    nem = make("delay:one:dir=in", hosts)
    with pytest.raises(FaultNotApplied, match="RTNETLINK answers: nope"):
        nem.start()
    assert nem.active is None
    # The target and its four senders (m3 included, whose script failed halfway) are healed.
    assert hosts.healed == [(sorted(NAMES), nem.chain, nem.id)]


def test_docker_keeps_the_nfqueue_path_and_never_probes() -> None:
    # No Docker is reached: the Docker cluster offers no netem without asking anything.
    assert DockerCluster("ll-test", "leasekv").netem_support(["m1", "m2"], "pfifo") == {}
