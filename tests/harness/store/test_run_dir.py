"""The run folder's links: results/latest and results/<test>/latest, as Jepsen's store
makes them (relative, so a moved results folder keeps them)."""

from __future__ import annotations

import os
from pathlib import Path

from leaseline.harness.store.run_dir import LATEST, RunDir


def test_latest_links_follow_the_newest_run(tmp_path: Path) -> None:
    first = RunDir.create(tmp_path, "leasekv-register")
    other = RunDir.create(tmp_path, "redis-sentinel-register")
    second = RunDir.create(tmp_path, "leasekv-register")
    second.history.write_text("")
    assert (tmp_path / LATEST).resolve() == second.path
    assert (tmp_path / "leasekv-register" / LATEST).resolve() == second.path != first.path
    assert (tmp_path / "redis-sentinel-register" / LATEST).resolve() == other.path
    for link in (tmp_path / LATEST, tmp_path / "leasekv-register" / LATEST):
        assert link.is_symlink() and not os.path.isabs(os.readlink(link))
    assert RunDir.existing(tmp_path / "leasekv-register" / LATEST).path == second.path
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        LATEST, "leasekv-register", "redis-sentinel-register"]  # no temporary link left
