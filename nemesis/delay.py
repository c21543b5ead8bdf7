"""delay: hold the packets of the target nodes' peer links for ms +- jitter milliseconds.

Two mechanisms, the same fault. On the user's own machines (harness.clusters.ssh.cluster) each
host is probed once, when a delay first needs it, for tc netem (harness.clusters.netem); a link
whose sender has it is delayed by netem at the sender's egress: an HTB class per spec with
a netem leaf, fed by iptables CLASSIFY rules in the spec's mangle chain. Every other link
goes through NFQUEUE, and so does every link of a Docker run (Docker keeps NFQUEUE only:
its nodes share the control machine's kernel, and the reference machine's has no netem to
test a second path on): iptables sends the chosen links' packets to an nfnetlink queue
(`-j NFQUEUE --queue-bypass`) and a small stdlib-only handler (harness/clusters/nfqueue.py) holds
each one and then accepts it. In Docker, rules and handler live in one helper container
per target, in the target's network namespace, which stays up while the fault is in force;
if it dies, --queue-bypass lets traffic flow again. On a host, rules and handler run on
the host itself. The start's record says which: `"via": "netem"`, `"nfqueue"` or
`"netem+nfqueue"` (hosts differ), and `"egress"` lists the links netem delays (sender ->
receivers).

    delay:leader:ms=300:jitter=50:dir=in   the leader's peers' packets reach it 250-350 ms late
    delay:all:ms=100                       (the defaults: target all, ms=100, jitter=0, dir=both)

dir=in delays what the targets receive from their peers (a leader's quorum acks come back
late), dir=out what they send, dir=both every direction of every link that touches a
target, once. Only links between nodes (and aux services) are delayed, never clients.
netem acts only on egress, so dir=in on a target is netem on each of its peers (hosts that
are not targets themselves); healing covers them too. Asking for `delay` in Docker on a
kernel without nfnetlink_queue fails before the run, in one sentence.
Each spec gets its own chains, queue number, handler label and HTB class (from a hash of
its text), so two delays overlapping on one node (--nemesis-mode overlap) neither clobber
nor heal each other.
"""

from __future__ import annotations

import zlib
from typing import Any

from leaseline.harness.clusters import netem
from leaseline.harness.clusters.netrules import queue_script
from leaseline.harness.errors import BadArguments, EnvironmentProblem
from leaseline.harness.parallel import in_parallel
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.base import CHECKING_FOR, FaultNotApplied, Nemesis
from leaseline.nemesis.spec import TARGETS, NemesisSpec
from leaseline.nemesis.targets import running_targets

CHAIN = "LEASELINE-delay"  # each spec's chain is CHAIN-<its id>
QUEUE = 7000  # each spec's queue number is QUEUE + its id
INSTANCES = 1000
BOUND_TIMEOUT_S = 20.0
MAX_MS = 10_000.0
NO_NFQUEUE = (
    "nemesis delay needs the kernel's nfnetlink_queue (iptables NFQUEUE), which this kernel "
    "does not offer ({why}); use loss instead."
)


def links(node: str, peers: list[str], targets: list[str], direction: str) -> dict[str, list[str]]:
    """Which peers' packets node's rules delay: "in" (they send to it) and "out" (it sends to
    them). With dir=both a link between two targets is delayed at its receiving end only."""
    if direction == "in":
        return {"in": list(peers), "out": []}
    if direction == "out":
        return {"in": [], "out": list(peers)}
    return {"in": list(peers), "out": [p for p in peers if p not in targets]}


def split_links(plan: dict[str, dict[str, list[str]]], netem_on: set[str]
                ) -> tuple[dict[str, list[str]], dict[str, dict[str, list[str]]]]:
    """Each link of the plan (target -> links) delayed once: at its sender's egress where the
    sender is in netem_on, else by the target's NFQUEUE rules. Returns (egress: sender ->
    receivers for netem, queue: target -> {"in", "out"} left to NFQUEUE, targets with none
    left out)."""
    egress: dict[str, list[str]] = {}
    queue: dict[str, dict[str, list[str]]] = {}
    for node, own in plan.items():
        rest: dict[str, list[str]] = {"in": [], "out": []}
        for side, sender, receiver, peer in (
                *(("in", p, node, p) for p in own["in"]),
                *(("out", node, p, p) for p in own["out"])):
            if sender in netem_on:
                egress.setdefault(sender, []).append(receiver)
            else:
                rest[side].append(peer)
        if rest["in"] or rest["out"]:
            queue[node] = rest
    return egress, queue


def via(egress: dict[str, list[str]], queue: dict[str, dict[str, list[str]]]) -> str:
    return "+".join(name for name, used in (("netem", egress), ("nfqueue", queue)) if used)


class Delay(Nemesis):
    name = "delay"
    start_f = "start-delay"
    stop_f = "stop-delay"
    fault_kind = "partition"
    targets = TARGETS
    default_target = "all"
    params = ("ms", "jitter", "dir")
    leaf_kind: str = "netem"  # the one seam: tests put a qdisc the kernel has (e.g. pfifo)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.id = zlib.crc32(self.spec.text.encode()) % INSTANCES
        self.chain, self.queue = f"{CHAIN}-{self.id}", QUEUE + self.id

    @classmethod
    def check(cls, profile: type[Profile], spec: NemesisSpec) -> None:
        super().check(profile, spec)
        ms, jitter = spec.param("ms", 100), spec.param("jitter", 0)
        if not 0 < ms <= MAX_MS:
            raise BadArguments(f"nemesis delay: ms= must be in (0, {MAX_MS:g}], got {ms:g}.")
        if not 0 <= jitter <= ms:
            raise BadArguments(
                f"nemesis delay: jitter= must be between 0 and ms= ({ms:g}), got {jitter:g}."
            )
        # Known before any cluster starts only where the cluster kind can probe for it.
        kind = CHECKING_FOR.get()
        why = kind.queue_missing(QUEUE) if kind is not None else None
        if why is not None:
            raise BadArguments(NO_NFQUEUE.format(why=why))

    def start(self) -> Any:
        if self.active:
            return self.active
        profile, cluster = self.ctx.profile, self.ctx.cluster
        ms, jitter = self.spec.param("ms", 100), self.spec.param("jitter", 0)
        direction = self.spec.word("dir", "both")
        targets = running_targets(self, "no running node to delay")
        ips = {s: cluster.ip(s) for s in profile.services() if cluster.is_running(s)}
        plan = {n: links(n, [p for p in profile.peers(n) if ips.get(p)], targets, direction)
                for n in targets}
        seed = self.rng.randrange(2**32)
        egress, queue = split_links(plan, self._netem_hosts(plan))
        leaf = netem.leaf(ms, jitter, self.leaf_kind)

        def apply(node: str) -> None:
            if node in egress:
                cluster.run_in_netns(node, netem.apply_script(
                    [ips[r] for r in egress[node]], self.id, leaf))
            if node in queue:
                rules = queue_script([ips[p] for p in queue[node]["in"]],
                                     [ips[p] for p in queue[node]["out"]], self.queue,
                                     self.chain)
                cluster.start_delay_handler(node, rules,
                                            f"{self.queue} {ms:g} {jitter:g} {seed}",
                                            self.id, BOUND_TIMEOUT_S)

        touched = [*targets, *(n for n in egress if n not in targets)]
        try:
            in_parallel(apply, touched)
        except (FaultNotApplied, EnvironmentProblem) as e:
            self._heal(touched)  # the nodes where it did start must not keep half a fault
            raise FaultNotApplied(str(e)) from None
        self.active = {"nodes": targets, "delay_ms": ms, "jitter_ms": jitter, "dir": direction,
                       "links": plan, "via": via(egress, queue)}
        if egress:
            self.active["egress"] = egress
        self.ctx.log(f"delay {ms:g}+-{jitter:g} ms (dir={direction}) on the peer links of "
                     f"{', '.join(targets)} via {self.active['via']}"
                     + (f" (netem on the egress of {', '.join(egress)})" if egress else ""))
        return self.active

    def _netem_hosts(self, plan: dict[str, dict[str, list[str]]]) -> set[str]:
        """The would-be senders that can delay with netem (probed once per host; none in
        Docker, where delay keeps the NFQUEUE path)."""
        senders = {p for own in plan.values() for p in own["in"]}
        senders |= {n for n, own in plan.items() if own["out"]}
        why = self.ctx.cluster.netem_support(sorted(senders), netem.leaf(1, 0, self.leaf_kind))
        missing = {n: w for n, w in why.items() if w is not None}
        if missing:
            reasons = sorted(set(missing.values()))
            self.ctx.log(f"delay: no tc netem on {', '.join(sorted(missing))} "
                         f"({'; '.join(reasons)}): NFQUEUE there")
        return {n for n, w in why.items() if w is None}

    def stop(self) -> Any:
        nodes = list(self.active["nodes"]) if self.active else []
        if self.active:
            senders = [n for n in self.active.get("egress", {}) if n not in nodes]
            self._heal([*nodes, *senders])
            self.ctx.log(f"delay healed on {', '.join(nodes + senders)}")
        self.active = None
        return {"nodes": nodes}

    def heal(self) -> None:
        self._heal(list(self.ctx.profile.nodes))
        self.active = None

    def _heal(self, nodes: list[str]) -> None:
        self.ctx.cluster.heal_delay(nodes, self.chain, self.id)
