"""kill-leader: SIGKILL the current leader's container; the stop starts it again."""

from __future__ import annotations

from leaseline.nemesis.kill import Kill


class KillLeader(Kill):
    name = "kill-leader"
    targets = ("leader",)
    default_target = "leader"
