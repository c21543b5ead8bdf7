"""cut-storage: the target nodes (default: the leader) lose the shared storage every node
reads and writes (Fluss's remote data directory), the other nodes keep it.

A system offers this fault by reaching that storage through a link in each node's own
filesystem (`shared_storage`: the link's path, and where it points): the fault points the
target's link at a path nothing can create, so every file the node opens there from then on
is missing and every write fails, while files it already holds open stay readable (as
with a network filesystem gone away). Stopping the fault points the link back.
"""

from __future__ import annotations

import shlex
from typing import Protocol, cast

from leaseline.nemesis.node_script import NodeScriptFault

# Under /proc nothing can be created, so no mkdirs can quietly make a private copy.
NOWHERE = "/proc/leaseline-storage-cut"


class SharedStorageHost(Protocol):
    shared_storage: tuple[str, str]  # (link, what it points at)


def link_script(link: str, to: str) -> str:
    return f"ln -sfn {shlex.quote(to)} {shlex.quote(link)}"


class CutStorage(NodeScriptFault):
    name = "cut-storage"
    start_f = "cut-storage"
    stop_f = "restore-storage"
    fault_kind = "storage"
    nobody = "no running node to cut from the storage"
    undid = "restored the shared storage of"
    requires = ("shared_storage", "shared storage reached through a link")

    def storage(self) -> tuple[str, str]:
        return cast(SharedStorageHost, self.ctx.profile).shared_storage

    def fault_script(self) -> str:
        return link_script(self.storage()[0], NOWHERE)

    def undo_script(self) -> str:
        return link_script(*self.storage())

    def did(self, nodes: list[str]) -> str:
        return f"cut {', '.join(nodes)} off the shared storage ({self.storage()[0]})"
