"""A worker that dies from an exception (a client raising instead of classifying) stops the
run: the cluster is torn down as usual, the history stays readable, and the command says
so in one sentence and exits 255. The cluster and images are faked; the runner, workers,
history writer and the CLI's guard are the real ones."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from leaseline import cli
from leaseline.harness.run import runner
from leaseline.harness.run.runner import RunConfig
from leaseline.harness.systems.profile import Endpoint, Profile
from leaseline.harness.systems.registry import PROFILES
from leaseline.workloads.base import Completion, Op
from leaseline.workloads.register import Register, RegisterClient
from leaseline.workloads.registry import WORKLOADS


class FakeCluster:
    node_names = None
    downs = 0

    @classmethod
    def for_system(cls, *_args: object) -> FakeCluster:
        """Stands in for system_cluster (no image, no compose)."""
        return cls()

    def up(self) -> None:
        pass

    def down(self) -> None:
        FakeCluster.downs += 1

    def node_logs(self, service: str, listed: list[str]) -> dict[str, bytes]:
        return {"container.log": b""}

    def close(self) -> None:
        pass


class Steady(Profile):
    name = "steady"
    compose_profile = "steady"
    protocols = frozenset({"redis"})
    nodes = ("n1", "n2")
    lease_ms = 100
    images = ()
    fault_kinds = frozenset()

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return Endpoint("127.0.0.1", 1)

    def leader(self) -> str | None:
        return "n1"

    def readiness(self) -> str | None:
        return None


class RaisingClient(RegisterClient):
    def invoke(self, op: Op) -> Completion:
        raise RuntimeError("a reply nobody\nexpected")


class Raising(Register):
    name = "raising"

    def new_client(self) -> RegisterClient:
        return RaisingClient()


def test_a_worker_that_dies_ends_the_run_with_255_and_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(PROFILES, Steady.name, Steady)
    monkeypatch.setitem(WORKLOADS, Raising.name, Raising)
    monkeypatch.setattr(runner, "system_cluster", FakeCluster.for_system)
    FakeCluster.downs = 0
    cfg = RunConfig(sut="steady", workload="raising", results_dir=tmp_path, time_limit=60,
                    concurrency=2, check=False)
    started = time.monotonic()
    with pytest.raises(SystemExit) as exited:
        cli._guard(lambda: runner.run(cfg).exit_code)()
    assert exited.value.code == 255
    assert time.monotonic() - started < 20  # stopped at once, not at the time limit
    assert FakeCluster.downs == 2  # leftovers before the run, and the teardown

    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    m = re.fullmatch(r"leaseline: client worker [01] died from RuntimeError: a reply nobody "
                     r"expected \(traceback in (\S+)\); the run stopped and the history up to "
                     r"then is in (\S+)\.", last)
    assert m, last
    crash_log, history = Path(m.group(1)), Path(m.group(2))
    try:
        assert "RaisingClient" not in last and "Traceback" in crash_log.read_text()
    finally:
        crash_log.unlink()
    records: list[dict[str, Any]] = [json.loads(line) for line in history.read_text().splitlines()]
    assert records and records[0]["type"] == "invoke"  # what happened is kept, readable
    assert not any(r["process"] != "nemesis" and r["type"] != "invoke" for r in records)


def test_a_final_read_that_raises_is_said_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final reads run in the cleanup: a raise there must not skip the teardown."""

    class RaisesLate(RegisterClient):
        def invoke(self, op: Op) -> Completion:
            if op.f == "read" and self.node == "final":
                raise RuntimeError("late surprise")
            return Completion("ok", None if op.f == "read" else op.value)

    class Late(Register):
        name = "late"

        def new_client(self) -> RegisterClient:
            return RaisesLate()

    monkeypatch.setitem(PROFILES, Steady.name, Steady)
    monkeypatch.setitem(WORKLOADS, Late.name, Late)
    monkeypatch.setattr(runner, "system_cluster", FakeCluster.for_system)
    monkeypatch.setattr(runner.LeaderTracker, "refresh", lambda _self: "final")
    FakeCluster.downs = 0
    cfg = RunConfig(sut="steady", workload="late", results_dir=tmp_path, time_limit=1,
                    concurrency=2, check=False)
    with pytest.raises(runner.EnvironmentProblem, match="^the final reads died from "
                       "RuntimeError: late surprise") as raised:
        runner.run(cfg)
    assert raised.value.exit_code == 255
    assert FakeCluster.downs == 2
    Path(re.search(r"traceback in (\S+)\)", str(raised.value)).group(1)).unlink()  # type: ignore[union-attr]
