"""The protocol workloads' clients against a real one-node leasekv run as a local process:
the Lua scripts and the conditional UpdateItem do what the history says they did,
NOSCRIPT (a node that lost its scripts) is served by the EVAL fallback, and each
list-append client kind keeps every acknowledged append."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from repo_paths import ROOT

from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import FAIL, OK, Op, WorkloadOptions
from leaseline.workloads.dynamo_cas import DynamoCasClient
from leaseline.workloads.dynamo_client import create_table
from leaseline.workloads.list_append import ListAppend
from leaseline.workloads.lua_cas import LuaCasClient


class Node:
    def __init__(self, base: Path) -> None:
        socks = [socket.socket() for _ in range(4)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        self.raft, self.redis, self.dynamo, self.admin = (s.getsockname()[1] for s in socks)
        for s in socks:
            s.close()
        log = open(base / "node.log", "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sut.leasekv", "--id", "1",
             "--peers", f"127.0.0.1:{self.raft}:{self.redis}:{self.dynamo}:{self.admin}",
             "--redis-port", str(self.redis), "--dynamo-port", str(self.dynamo),
             "--admin-port", str(self.admin), "--bind-host", "127.0.0.1",
             "--data-dir", str(base / "data")],
            cwd=ROOT, stdout=log, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def wait_leader(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                url = f"http://127.0.0.1:{self.admin}/status"
                with urllib.request.urlopen(url, timeout=1) as r:
                    if json.load(r).get("role") == "leader":
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("the one-node leasekv never became leader")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("leasekv1"))
    try:
        n.wait_leader()
        yield n
    finally:
        n.stop()


class OneNode:
    nodes = ("lk1",)
    features = frozenset({"lists", "multi", "scripts", "dynamo-lists", "dynamo-transactions"})

    def __init__(self, n: Node) -> None:
        self.n = n

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return Endpoint("127.0.0.1", self.n.dynamo if protocol == "dynamodb" else self.n.redis)


def test_lua_cas_scripts_and_noscript_fallback(node: Node) -> None:
    ep = Endpoint("127.0.0.1", node.redis)
    c = LuaCasClient()
    c.open("lk1", ep)
    c.load_scripts()
    assert c.invoke(Op("cas", "lc0", [1, 2])).type == FAIL  # absent is not 1
    assert c.invoke(Op("cas", "lc0", [None, 1])).type == OK
    assert c.invoke(Op("cas", "lc0", [None, 9])).type == FAIL  # no longer absent
    assert c.invoke(Op("cas", "lc0", [1, 2])).type == OK
    assert c.invoke(Op("read", "lc0")).value == 2
    assert c.invoke(Op("write", "lc0", 3)).type == OK
    assert c.evals == 0
    r = redis.Redis(port=node.redis)
    assert r.script_flush() is True  # as after a restart: the node forgot the scripts
    done = c.invoke(Op("cas", "lc0", [3, 4]))
    assert done.type == OK, done.error
    assert c.evals == 1  # NOSCRIPT -> EVAL
    assert c.invoke(Op("read", "lc0")).value == 4
    assert c.evals == 2  # the read script was forgotten too
    assert c.invoke(Op("cas", "lc0", [4, 5])).type == OK
    assert c.evals == 2  # reloaded: EVALSHA works again
    assert r.get("lc0") == b"5"
    c.close()


def test_dynamo_cas_against_leasekv(node: Node) -> None:
    profile = OneNode(node)
    create_table(profile, "lk1")  # type: ignore[arg-type]
    create_table(profile, "lk1")  # type: ignore[arg-type] - idempotent
    c = DynamoCasClient()
    c.open("lk1", profile.endpoint("lk1", "dynamodb"))
    assert c.invoke(Op("read", "dc0")).value is None
    miss = c.invoke(Op("cas", "dc0", [5, 1]))
    assert miss.type == FAIL and "ConditionalCheckFailed" in (miss.error or "")
    assert c.invoke(Op("cas", "dc0", [None, 1])).type == OK
    assert c.invoke(Op("cas", "dc0", [None, 2])).type == FAIL
    assert c.invoke(Op("read", "dc0")).value == 1
    assert c.invoke(Op("write", "dc0", 3)).type == OK
    assert c.invoke(Op("cas", "dc0", [3, 4])).type == OK
    assert c.invoke(Op("read", "dc0")).value == 4
    c.close()


@pytest.mark.parametrize("kind", ["multi", "lua", "plain", "dynamo"])
def test_list_append_clients_keep_every_acknowledged_append(node: Node, kind: str) -> None:
    """Each client kind's transactions through the workload's own generator: every ok
    read is a prefix of the key's final list, every ok append is in it exactly once, and a
    transaction's reads see its own earlier appends."""
    profile = OneNode(node)
    redis.Redis(port=node.redis).delete(*(f"k{i}" for i in range(100)))  # the kinds before
    extra = ListAppend.resolve_options({"client": kind}, OneNode)  # type: ignore[arg-type]
    workload = ListAppend(WorkloadOptions(keys=3, writes_per_key=20, extra=extra))
    workload.setup(profile, "lk1")  # type: ignore[arg-type]
    client = workload.new_client()
    client.open("lk1", profile.endpoint("lk1", workload.protocol))
    gen, rng = workload.new_generator(), random.Random(kind)
    done = [client.invoke(gen.next_op(rng)) for _ in range(150)]
    assert all(d.type == OK for d in done), [d for d in done if d.type != OK][:3]
    final = {}
    for key in gen.all_keys():
        [[_f, _k, items]] = client.invoke(gen.final_op(key)).value
        final[key] = items or []
    appended = [(k, v) for d in done for f, k, v in d.value if f == "append"]
    assert sorted(appended) == sorted((k, v) for k, items in final.items() for v in items)
    longest = max(len(d.value) for d in done)
    assert longest == (1 if kind == "plain" else 4)
    for d in done:
        mine: dict[str, list[int]] = {}
        for f, key, value in d.value:
            if f == "append":
                mine.setdefault(key, []).append(value)
                continue
            seen = value or []
            assert seen == final[key][:len(seen)], (key, seen)
            assert seen[len(seen) - len(mine.get(key, [])):] == mine.get(key, []), d.value
    client.close()
