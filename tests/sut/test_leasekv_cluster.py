"""A real 3-node leasekv cluster as local processes, driven by unmodified redis-py and boto3."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import redis
from botocore.config import Config
from botocore.exceptions import ClientError
from repo_paths import ROOT


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Cluster:
    def __init__(self, base: Path, size: int = 3) -> None:
        self.base = base
        ports = _free_ports(4 * size)
        self.nodes = {
            i + 1: dict(zip(("raft", "redis", "dynamo", "admin"), ports[4 * i:4 * i + 4],
                            strict=True))
            for i in range(size)
        }
        self.peers = ",".join(
            f"127.0.0.1:{p['raft']}:{p['redis']}:{p['dynamo']}:{p['admin']}"
            for p in self.nodes.values()
        )
        self.procs: dict[int, subprocess.Popen] = {}
        self.args: list[str] = []  # more arguments of every node (e.g. --bug NAME)

    def start(self, i: int) -> None:
        p = self.nodes[i]
        log = open(self.base / f"node{i}.log", "ab")  # noqa: SIM115 - owned by the process
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "sut.leasekv", "--id", str(i), "--peers", self.peers,
             "--redis-port", str(p["redis"]), "--dynamo-port", str(p["dynamo"]),
             "--admin-port", str(p["admin"]), "--bind-host", "127.0.0.1",
             "--data-dir", str(self.base / f"data{i}"), *self.args],
            cwd=ROOT, stdout=log, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def kill(self, i: int) -> None:
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop_all(self) -> None:
        for i in list(self.procs):
            self.procs[i].terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs.clear()

    def status(self, i: int) -> dict | None:
        try:
            url = f"http://127.0.0.1:{self.nodes[i]['admin']}/status"
            with urllib.request.urlopen(url, timeout=2) as r:
                return json.load(r)
        except (OSError, urllib.error.URLError):
            return None

    def transfer(self, i: int, to: int) -> tuple[int, dict]:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.nodes[i]['admin']}/transfer?to={to}", method="POST")
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    def wait_leader(self, among: list[int] | None = None, timeout: float = 20.0) -> int:
        """The leader that every live node agrees on."""
        among = among or list(self.procs)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = [self.status(i) for i in among]
            leaders = {s["leader"] for s in seen if s}
            if len(leaders) == 1 and None not in leaders and all(seen):
                (leader,) = leaders
                if self.status(leader) and self.status(leader)["role"] == "leader":
                    return leader
            time.sleep(0.1)
        raise AssertionError(f"no agreed leader among {among} within {timeout}s")

    def redis(self, i: int) -> redis.Redis:
        return redis.Redis(port=self.nodes[i]["redis"], socket_timeout=5)

    def dynamo(self, i: int):  # noqa: ANN201 - boto3 client type is generated
        return boto3.client(
            "dynamodb", endpoint_url=f"http://127.0.0.1:{self.nodes[i]['dynamo']}",
            region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y",
            config=Config(retries={"total_max_attempts": 1}, read_timeout=5, connect_timeout=2),
        )


@contextlib.contextmanager
def running_cluster(data: Path) -> Iterator[Cluster]:
    """A 3-node cluster with a leader, stopped on the way out."""
    c = Cluster(data)
    for i in c.nodes:
        c.start(i)
    try:
        c.wait_leader()
        yield c
    finally:
        c.stop_all()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("leasekv")) as c:
        yield c


def _follower(c: Cluster, leader: int) -> int:
    return next(i for i in c.procs if i != leader)


def test_set_get_and_follower_redirect(cluster: Cluster) -> None:
    leader = cluster.wait_leader()
    r = cluster.redis(leader)
    assert r.set("k1", "v1") is True
    assert r.get("k1") == b"v1"
    assert r.delete("k1") == 1
    assert r.get("k1") is None
    assert r.info()["role"] == "master"
    f = cluster.redis(_follower(cluster, leader))
    assert f.info()["role"] == "slave"
    for call in (lambda: f.get("k1"), lambda: f.set("k1", "x")):
        with pytest.raises(redis.exceptions.MovedError) as e:
            call()
        assert e.value.node_addr == ("127.0.0.1", cluster.nodes[leader]["redis"])
    # The leader serves reads from its lease once a quorum round has extended it.
    s = cluster.status(leader)
    assert s and s["lease_valid"] and 0 < s["lease_remaining_ms"] <= 700


def test_evalsha_noscript_fallback_and_atomic_cas(cluster: Cluster) -> None:
    r = cluster.redis(cluster.wait_leader())
    cas = r.register_script(
        "local v = redis.call('GET', KEYS[1]) "
        "if v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0")
    r.set("c", "a")
    r.script_flush()  # the node forgets its scripts: EVALSHA fails, redis-py reloads
    assert cas(keys=["c"], args=["a", "b"]) == 1
    assert cas(keys=["c"], args=["a", "z"]) == 0
    assert r.get("c") == b"b"
    with pytest.raises(redis.exceptions.NoScriptError):
        r.evalsha("0" * 40, 0)
    assert r.script_exists(cas.sha) == [True]


def test_dynamodb_conditional_updates(cluster: Cluster) -> None:
    leader = cluster.wait_leader()
    d = cluster.dynamo(leader)
    d.create_table(TableName="regs", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                   AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                   BillingMode="PAY_PER_REQUEST")
    assert d.describe_table(TableName="regs")["Table"]["TableStatus"] == "ACTIVE"
    key = {"k": {"S": "r1"}}
    d.put_item(TableName="regs", Item={**key, "v": {"N": "1"}},
               ConditionExpression="attribute_not_exists(k)")
    got = d.get_item(TableName="regs", Key=key, ConsistentRead=True)
    assert got["Item"]["v"] == {"N": "1"}
    cas = {"UpdateExpression": "SET #v = :new", "ConditionExpression": "#v = :old",
           "ExpressionAttributeNames": {"#v": "v"}}
    out = d.update_item(TableName="regs", Key=key, ReturnValues="ALL_NEW",
                        ExpressionAttributeValues={":old": {"N": "1"}, ":new": {"N": "2"}}, **cas)
    assert out["Attributes"]["v"] == {"N": "2"}
    with pytest.raises(d.exceptions.ConditionalCheckFailedException):
        d.update_item(TableName="regs", Key=key,
                      ExpressionAttributeValues={":old": {"N": "1"}, ":new": {"N": "3"}}, **cas)
    with pytest.raises(d.exceptions.ResourceNotFoundException):
        d.get_item(TableName="nope", Key=key)
    with pytest.raises(ClientError) as e:
        d.update_item(TableName="regs", Key=key, UpdateExpression="SET = :x")
    assert e.value.response["Error"]["Code"] == "ValidationException"
    d.delete_item(TableName="regs", Key=key, ConditionExpression="#v = :two",
                  ExpressionAttributeNames={"#v": "v"},
                  ExpressionAttributeValues={":two": {"N": "2"}})
    assert "Item" not in d.get_item(TableName="regs", Key=key, ConsistentRead=True)
    with pytest.raises(ClientError) as e:
        cluster.dynamo(_follower(cluster, leader)).get_item(TableName="regs", Key=key)
    assert e.value.response["Error"]["Code"] == "NotLeaderException"
    moved = f"MOVED 0 127.0.0.1:{cluster.nodes[leader]['dynamo']}"
    assert e.value.response["Error"]["Message"] == moved


def test_transfer_leader(cluster: Cluster) -> None:
    old = cluster.wait_leader()
    target = _follower(cluster, old)
    cluster.redis(old).set("t", "before")
    code, body = cluster.transfer(target, old)
    assert code == 421 and body["leader"] == old  # only the leader can hand over
    code, body = cluster.transfer(old, target)
    assert code == 200, body
    # The old leader fenced its lease before sending TimeoutNow: no local read from it now.
    s = cluster.status(old)
    assert s and not s["lease_valid"]
    assert cluster.wait_leader(timeout=5) == target
    assert cluster.redis(target).get("t") == b"before"
    with pytest.raises(redis.exceptions.MovedError):
        cluster.redis(old).get("t")


def test_transfer_after_idle_reaches_every_voter(cluster: Cluster) -> None:
    # Regression: pysyncobj checks a connection's read timeout (3.5 s) only when sending,
    # and followers never talk to each other. Without keepalives the target's first vote
    # request over an idle follower-follower connection closed it and was dropped.
    old = cluster.wait_leader()
    target = _follower(cluster, old)
    others = [i for i in cluster.procs if i not in (old, target)]
    time.sleep(4.5)  # longer than connectionTimeout: every follower-follower link is idle
    sizes = {i: (cluster.base / f"node{i}.log").stat().st_size for i in others}
    code, body = cluster.transfer(old, target)
    assert code == 200, body
    assert cluster.wait_leader(timeout=5) == target
    needle = f"vote request from 127.0.0.1:{cluster.nodes[target]['raft']} (term"
    for i in others:
        with open(cluster.base / f"node{i}.log", "rb") as f:
            f.seek(sizes[i])
            text = f.read().decode(errors="replace")
        assert needle in text and "for a leadership transfer" in text, (i, text[-2000:])


def test_leader_kill_elects_a_new_leader_and_keeps_acked_writes(cluster: Cluster) -> None:
    old = cluster.wait_leader()
    r = cluster.redis(old)
    for n in range(20):
        r.set(f"w{n}", str(n))
    cluster.kill(old)
    t0 = time.monotonic()
    new = cluster.wait_leader(timeout=15)
    assert new != old
    elapsed = time.monotonic() - t0
    assert elapsed < 10, elapsed
    r2 = cluster.redis(new)
    assert [r2.get(f"w{n}") for n in range(20)] == [str(n).encode() for n in range(20)]
    r2.set("after-kill", "1")
    # The killed node restarts from its journal and catches up.
    cluster.start(old)
    deadline = time.monotonic() + 15
    target = cluster.status(new)["commit_index"]
    while time.monotonic() < deadline:
        s = cluster.status(old)
        if s and s["leader"] == new and s["last_applied"] >= target:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the restarted node did not rejoin")
    assert cluster.wait_leader() in cluster.nodes
