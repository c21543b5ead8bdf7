"""transfer-isolate works with any profile that offers transfer; its armed cut hooks the
rules only when told, and a refused hand-over leaves no cut behind (no Docker: the real
fault runs in tests/nemesis/test_nemesis_catalogue.py)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from leaseline.harness.clusters.netrules import armed_cut_script
from leaseline.harness.errors import BadArguments, EnvironmentProblem
from leaseline.harness.systems.redis_sentinel import RedisSentinel
from leaseline.harness.systems.registry import PROFILES, profile_class
from leaseline.nemesis.base import FaultNotApplied, NemesisContext
from leaseline.nemesis.spec import parse_spec
from leaseline.nemesis.transfer_isolate import TransferIsolate


class TransferringSentinel(RedisSentinel):
    """Another system that says it can hand leadership over (e.g. by a command)."""

    name = "transferring"
    fault_kinds = RedisSentinel.fault_kinds | {"transfer-leader"}


def test_any_profile_that_offers_transfer_can_be_asked() -> None:
    spec = parse_spec("transfer-isolate:d=1.5")
    TransferIsolate.check(profile_class("leasekv"), spec)
    TransferIsolate.check(TransferringSentinel, spec)
    with pytest.raises(BadArguments) as e:
        TransferIsolate.check(PROFILES["redis-sentinel"], spec)
    assert "redis-sentinel cannot (use kill-leader or partition-leader" in str(e.value)


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs sh")
def test_the_armed_cut_hooks_its_rules_only_on_the_signal(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    fake = tmp_path / "iptables"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    fake.chmod(0o755)
    proc = subprocess.Popen(["sh", "-ec", armed_cut_script(["10.0.0.2"], "LL-T")],
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        prepared = calls.read_text()
        assert "-A LL-T -s 10.0.0.2 -j DROP" in prepared and "INPUT" not in prepared
        time.sleep(0.1)
        proc.send_signal(signal.SIGUSR1)
        assert proc.stdout.readline().strip() == "cut"
        assert proc.wait(5) == 0
    finally:
        proc.kill()
    hooked = calls.read_text()[len(prepared):]
    assert "-I INPUT 1 -j LL-T" in hooked and "-I OUTPUT 1 -j LL-T" in hooked


class FakeProfile:
    nodes = ("n1", "n2", "n3")

    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse

    def leader(self) -> str:
        return "n1"

    def peers(self, node: str) -> list[str]:
        return [n for n in self.nodes if n != node]

    def transfer_leader(self, to: str | None = None) -> str:
        if self.refuse:
            raise EnvironmentProblem("the target is not caught up")
        return "n2"


class FakeCluster:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def is_running(self, _service: str) -> bool:
        return True

    def ip(self, service: str) -> str:
        return f"10.0.0.{service[1:]}"

    @contextlib.contextmanager
    def armed_cut(self, node: str, ips: list[str], chain: str) -> Iterator[Callable[[], None]]:
        self.seen.append(("armed", node, ips, chain))
        yield lambda: self.seen.append("cut")


@pytest.mark.parametrize("refuse", [False, True])
def test_the_cut_follows_an_accepted_hand_over_only(refuse: bool) -> None:
    cluster = FakeCluster()
    seen = cluster.seen
    ctx = NemesisContext(FakeProfile(refuse), cluster)  # type: ignore[arg-type]
    nem = TransferIsolate(ctx, parse_spec("transfer-isolate"))
    if refuse:
        with pytest.raises(FaultNotApplied, match="not caught up"):
            nem.start()
        assert seen == [("armed", "n1", ["10.0.0.2", "10.0.0.3"], "LEASELINE-TI")]
        assert nem.active is None
    else:
        value = nem.start()
        assert seen[-1] == "cut"
        assert value["from"] == "n1" and value["to"] == "n2" and value["nodes"] == ["n1"]
