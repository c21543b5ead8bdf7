"""pause-client: freeze the system's client service (where the workload's clients' calls
run, e.g. Fluss's lease client service flcl) for longer than a lease, then thaw it.

Every lease holder stalls at once, past its lease's deadline unless the fault is short:
the default hold is 1.5 leases (the profile's `lease_duration_ms`), `d=` sets another.
When it resumes, holders renew late and read on; the checker must accept snapshots gone
after the deadline and flag only reads that failed before it. A system offers this fault
by naming its client services (`client_services`) and supporting pauses. It is the pause
fault aimed at those services instead of at nodes: stop and heal are pause's.
"""

from __future__ import annotations

from typing import Any

from leaseline.nemesis.base import FaultNotApplied
from leaseline.nemesis.pause import Pause

PAST_LEASE = 1.5  # the default hold, in leases


class PauseClient(Pause):
    name = "pause-client"
    targets = ()
    default_target = None
    requires = ("client_services", "a client service to pause")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        lease_ms = getattr(self.ctx.profile, "lease_duration_ms", 0)
        if self.duration_s is None and lease_ms:
            self.duration_s = PAST_LEASE * lease_ms / 1000

    def start(self) -> Any:
        if self.active:
            return self.active
        services = getattr(self.ctx.profile, "client_services", ())
        paused = [s for s in services if self.ctx.cluster.pause(s)]
        if not paused:
            raise FaultNotApplied("no client service running to pause")
        self.active = {"nodes": paused}
        self.ctx.log(f"paused the client service {', '.join(paused)}")
        return self.active
