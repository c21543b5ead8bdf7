"""delay: add latency to the target nodes' packets with `tc qdisc ... netem`.

Needs the kernel's sch_netem qdisc. Kernels without it (like the one Leaseline's own CI
runs on) cannot delay packets at all: asking for `delay` there fails before the run with
one sentence (the probe runs `tc qdisc add dev lo root netem` in a throwaway, network-less
helper container); use `loss` instead, whose retransmissions also stretch quorum rounds.
`delay:all:ms=200` (default target all, ms defaults to 100).
"""

from __future__ import annotations

from typing import Any

from docker.errors import ContainerError, DockerException, ImageNotFound

from harness.docker_client import client
from harness.errors import BadArguments
from harness.profiles.base import Profile
from nemesis.base import FaultNotApplied, Nemesis
from nemesis.netns import NEMESIS_IMAGE, in_parallel, run_in_netns
from nemesis.spec import TARGETS, NemesisSpec
from nemesis.targets import pick_nodes

NO_NETEM = (
    "nemesis delay needs the kernel's netem qdisc (sch_netem), which this kernel does not "
    "have (`tc qdisc add ... netem` failed: {why}); use loss instead."
)
DEVICES = "for dev in $(ls /sys/class/net | grep -v '^lo$'); do "


def netem_missing() -> str | None:
    """Why netem cannot be used here, or None if it can (or the probe cannot run yet)."""
    try:
        client().containers.run(
            NEMESIS_IMAGE,
            ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            network_mode="none", cap_add=["NET_ADMIN"], remove=True, stderr=True,
        )
    except ContainerError as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else str(e.stderr)
        return err.strip().splitlines()[-1] if err.strip() else f"exit {e.exit_status}"
    except (ImageNotFound, DockerException):
        return None  # no image/engine yet: the run's own checks report that; start() re-checks
    return None


class Delay(Nemesis):
    name = "delay"
    start_f = "start-delay"
    stop_f = "stop-delay"
    fault_kind = "partition"
    targets = TARGETS
    default_target = "all"
    params = ("ms",)

    @classmethod
    def check(cls, profile: type[Profile], spec: NemesisSpec) -> None:
        super().check(profile, spec)
        if spec.param("ms", 100) <= 0:
            raise BadArguments(f"nemesis delay: ms= must be positive, got {spec.params['ms']}.")
        why = netem_missing()
        if why is not None:
            raise BadArguments(NO_NETEM.format(why=why))

    def start(self) -> Any:
        if self.active:
            return self.active
        ms = self.spec.param("ms", 100)
        nodes = [n for n in pick_nodes(self.target or "all", self.ctx.profile, self.rng)
                 if self.ctx.cluster.is_running(n)]
        if not nodes:
            raise FaultNotApplied("no running node to delay")
        script = DEVICES + f"tc qdisc replace dev $dev root netem delay {ms:g}ms; done"
        try:
            in_parallel(lambda n: run_in_netns(self.ctx.cluster, n, script), nodes)
        except Exception as e:
            self.heal()
            raise FaultNotApplied(NO_NETEM.format(why=e)) from None
        self.active = {"nodes": nodes, "delay_ms": ms}
        return self.active

    def stop(self) -> Any:
        nodes = list(self.active["nodes"]) if self.active else []
        if self.active:
            self.heal()
        self.active = None
        return {"nodes": nodes}

    def heal(self) -> None:
        script = DEVICES + "tc qdisc del dev $dev root 2>/dev/null || true; done"
        in_parallel(lambda n: run_in_netns(self.ctx.cluster, n, script),
                    [n for n in self.ctx.profile.nodes if self.ctx.cluster.is_running(n)])
        self.active = None
