"""Hand-made history files in the run format (history.jsonl), for the Spark job's tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MS = 1_000_000


class H:
    """A hand-made history: ops as (process, f, key, value, invoke_ms, complete_ms, type)."""

    def __init__(self) -> None:
        self.events: list[tuple[int, dict[str, Any]]] = []

    def op(self, process: int | str, f: str, value: Any, start: float, end: float | None,
           type_: str = "ok", key: str = "k") -> H:
        inv_value = None if f == "read" else value
        base = {"process": process, "f": f, "key": key, "node": "n1"}
        self.events.append((int(start * MS), dict(base, type="invoke", value=inv_value)))
        if end is not None:
            self.events.append((int(end * MS), dict(base, type=type_, value=value)))
        return self

    def nemesis(self, f: str, value: Any, at: float) -> H:
        self.events.append((int(at * MS), {"process": "nemesis", "type": "info", "f": f,
                                           "key": None, "value": value, "node": None}))
        return self

    def write(self, path: Path) -> Path:
        events = sorted(self.events, key=lambda e: e[0])
        path.write_text("".join(
            json.dumps({"index": i, "time": t, **{k: r[k] for k in
                        ("process", "type", "f", "key", "value", "node")}}) + "\n"
            for i, (t, r) in enumerate(events)))
        return path


def stale(tmp_path: Path) -> Path:
    # write 2 completes at 30 ms; a read invoked at 50 ms still returns 1: stale by 20 ms
    h = H().op(0, "write", 1, 0, 10).op(0, "write", 2, 20, 30).op(1, "read", 1, 50, 60)
    return h.write(tmp_path / "stale.jsonl")
