"""pause-client: freeze the system's client service (where the workload's clients' calls
run, e.g. Fluss's lease client service flcl) for longer than a lease, then thaw it.

Every lease holder stalls at once, past its lease's deadline unless the fault is short:
the default hold is 1.5 leases (the profile's `lease_duration_ms`), `d=` sets another.
When it resumes, holders renew late and read on; the checker must accept snapshots gone
after the deadline and flag only reads that failed before it. A system offers this fault
by naming its client services (`client_services`) and supporting pauses.
"""

from __future__ import annotations

from typing import Any

from harness.errors import BadArguments
from harness.systems.profile import Profile
from nemesis.base import FaultNotApplied, Nemesis
from nemesis.spec import NemesisSpec

PAST_LEASE = 1.5  # the default hold, in leases


class PauseClient(Nemesis):
    name = "pause-client"
    start_f = "pause"
    stop_f = "resume"
    fault_kind = "pause"

    @classmethod
    def check(cls, profile: type[Profile], spec: NemesisSpec) -> None:
        super().check(profile, spec)
        if not getattr(profile, "client_services", ()):
            raise BadArguments(f"nemesis {cls.name} needs a client service to pause, and "
                               f"{profile.name} has none (its clients run in Leaseline).")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        lease_ms = getattr(self.ctx.profile, "lease_duration_ms", 0)
        if self.duration_s is None and lease_ms:
            self.duration_s = PAST_LEASE * lease_ms / 1000

    def services(self) -> list[str]:
        return list(getattr(self.ctx.profile, "client_services", ()))

    def start(self) -> Any:
        if self.active:
            return self.active
        paused = [s for s in self.services() if self.ctx.cluster.pause(s)]
        if not paused:
            raise FaultNotApplied("no client service running to pause")
        self.active = {"nodes": paused}
        self.ctx.log(f"paused the client service {', '.join(paused)}")
        return self.active

    def stop(self) -> Any:
        return self.stop_on_nodes(self.ctx.cluster.thaw, "resumed")

    def heal(self) -> None:
        for service in self.services():
            if self.ctx.cluster.thaw(service):
                self.ctx.log(f"healed: resumed {service}")
        self.active = None
