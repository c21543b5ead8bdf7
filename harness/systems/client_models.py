"""The client models' names (docs/commands.md): how a worker finds the node it sends
to. Light on purpose: run arguments and system files validate against it before anything
heavy is imported; harness/run/routes.py is where each model decides where an operation goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# name -> what a client of that model does (the CLI's help says it)
MODELS: dict[str, str] = {
    "node": "worker w talks to nodes[w mod n] for the whole run, as Jepsen binds a thread",
    "follow": "each worker asks who leads when it needs to know, then keeps sending there "
              "until an error, a timeout or a redirect",
    "sentinel": "each worker holds its own redis-py Sentinel client (master_for): "
                "redis-py's discovery and reconnects",
    "oracle": "every operation goes to whom the harness's own 250 ms poll of the cluster "
              "names leader; no real client has that (diagnosis only)",
}
# Old names: "pinned" is what "node" was called; "leader" is the oracle, which a campaign
# file may still name (with a warning, since no application routes like that).
ALIASES = {"pinned": "node", "leader": "oracle"}
NAMES = (*MODELS, *ALIASES)


def canonical(name: str) -> str:
    """The model a name (or old alias) stands for; ValueError for an unknown name."""
    model = ALIASES.get(name, name)
    if model not in MODELS:
        raise ValueError(f"unknown client model {name!r} (valid: {', '.join(MODELS)})")
    return model


def alias_warning(name: str) -> str | None:
    """What to tell the user who named the oracle by its old name, else None."""
    if name == "leader":
        return ("client routing 'leader' is the model now called 'oracle': every operation "
                "goes to the leader the harness itself polls for, which no real client knows; "
                "the system's default (or 'node', 'follow', 'sentinel') is what applications do.")
    return None


def client_model(test: Mapping[str, Any]) -> str:
    """The client model the run's clients had (docs/commands.md), by its current name
    also when test.json has an old one ("leader", "pinned"); "" when not recorded."""
    name = str(test.get("client_routing") or "")
    return ALIASES.get(name, name)
