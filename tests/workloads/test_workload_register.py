"""The register workload without a cluster: generator values and the client's error mapping."""

from __future__ import annotations

import random

import pytest
import redis
from conftest import FakeConnection

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import FAIL, INFO, OK, Op, WorkloadOptions
from leaseline.workloads.register import RegisterClient, RegisterGenerator
from leaseline.workloads.registry import WORKLOADS, workload_class


def client_with(conn: FakeConnection) -> RegisterClient:
    c = RegisterClient(connect=lambda _ep, _proto: conn)
    c.open("n1", Endpoint("127.0.0.1", 6379))
    return c


def test_write_and_read_ok() -> None:
    conn = FakeConnection(replies=[b"OK", b"7", None])
    c = client_with(conn)
    assert c.invoke(Op("write", "r0", 7)).type == OK
    done = c.invoke(Op("read", "r0"))
    assert (done.type, done.value) == (OK, 7)
    assert c.invoke(Op("read", "r1")).value is None  # absent key
    assert conn.sent == [("SET", "r0", "7"), ("GET", "r0"), ("GET", "r1")]
    assert conn.connects == 1  # one connection reused


def test_refused_connection_is_a_definite_failure() -> None:
    c = client_with(FakeConnection(connect_error=redis.ConnectionError("refused")))
    done = c.invoke(Op("write", "r0", 1))
    assert done.type == FAIL and "connect" in (done.error or "")


@pytest.mark.parametrize("err", [redis.TimeoutError("slow"), redis.ConnectionError("reset")])
def test_lost_write_is_info_but_lost_read_is_fail(err: Exception) -> None:
    conn = FakeConnection(replies=[err, err])
    c = client_with(conn)
    w = c.invoke(Op("write", "r0", 3))
    assert (w.type, w.value) == (INFO, 3)
    assert conn.disconnects == 1  # a broken connection is not reused
    r = c.invoke(Op("read", "r0"))
    assert r.type == FAIL and r.value is None
    assert conn.connects == 2


def test_error_reply_is_fail_and_keeps_the_connection() -> None:
    conn = FakeConnection(
        replies=[redis.ResponseError("READONLY You can't write against a read only replica.")]
    )
    c = client_with(conn)
    done = c.invoke(Op("write", "r0", 5))
    assert done.type == FAIL and "READONLY" in (done.error or "")
    assert conn.disconnects == 0


def test_unexpected_exception_on_write_is_info() -> None:
    c = client_with(FakeConnection(replies=[RuntimeError("parser exploded")]))
    assert c.invoke(Op("write", "r0", 1)).type == INFO


def test_generator_values_unique_per_key_and_retirement() -> None:
    gen = RegisterGenerator(WorkloadOptions(keys=2, writes_per_key=3), read_ratio=0.3)
    rng = random.Random(1)
    written: dict[str, list[int]] = {}
    for _ in range(300):
        op = gen.next_op(rng)
        if op.f == "write":
            written.setdefault(op.key, []).append(op.value)
    for key, values in written.items():
        assert values == list(range(1, len(values) + 1)), key  # unique, increasing
        assert len(values) <= 3
    keys = gen.all_keys()
    assert len(keys) > 2  # keys were retired and replaced
    assert set(written) <= set(keys)
    assert gen.final_op(keys[0]) == Op("read", keys[0])


def test_generator_without_retirement_uses_fixed_keys() -> None:
    gen = RegisterGenerator(WorkloadOptions(keys=3))
    rng = random.Random(2)
    for _ in range(200):
        gen.next_op(rng)
    assert gen.all_keys() == ["r0", "r1", "r2"]


def test_registry() -> None:
    assert workload_class("register") is WORKLOADS["register"]
    with pytest.raises(BadArguments, match="valid: .*register"):
        workload_class("nope")


@pytest.mark.parametrize("refusal", [
    redis.ResponseError("NOPROTO unsupported protocol version"),
    redis.ResponseError("unknown command 'HELLO', with args beginning with: '3'"),
    redis.ConnectionError("Invalid RESP version"),  # HELLO answered for another version
])
def test_a_refused_resp3_reconnects_in_resp2(refusal: Exception) -> None:
    resp3 = FakeConnection(connect_error=refusal)
    resp2 = FakeConnection(replies=[b"OK"])
    made: list[int] = []

    def connect(_ep: Endpoint, protocol: int) -> FakeConnection:
        made.append(protocol)
        return resp3 if protocol == 3 else resp2

    c = RegisterClient(connect=connect)
    c.open("n1", Endpoint("127.0.0.1", 6379))
    assert c.invoke(Op("write", "r0", 1)).type == OK
    assert made == [3, 2] and resp3.disconnects == 1 and resp2.sent == [("SET", "r0", "1")]


def test_other_connect_errors_do_not_change_the_protocol() -> None:
    made: list[int] = []

    def connect(_ep: Endpoint, protocol: int) -> FakeConnection:
        made.append(protocol)
        return FakeConnection(connect_error=redis.ResponseError("WRONGPASS invalid password"))

    c = RegisterClient(connect=connect)
    c.open("n1", Endpoint("127.0.0.1", 6379))
    done = c.invoke(Op("write", "r0", 1))
    assert (done.type, done.error) == (FAIL, "connect: WRONGPASS invalid password")
    assert made == [3]


def test_readonly_behind_a_sentinel_connection_is_a_refusal_not_an_unknown() -> None:
    """redis-py's Sentinel connection turns READONLY into a ConnectionError (to make its pool
    ask the Sentinels again): the write was refused, so fail; a lost reply stays info."""
    def sentinel_style() -> redis.ConnectionError:
        try:
            raise redis.ReadOnlyError("You can't write against a read only replica.")
        except redis.ReadOnlyError:
            try:
                raise redis.ConnectionError("The previous master is now a slave")
            except redis.ConnectionError as e:
                return e

    conn = FakeConnection(replies=[sentinel_style(), redis.ConnectionError("closed")])
    c = RegisterClient(connect=lambda _ep, _proto: conn)
    c.open_through(lambda _protocol: conn)
    refused, lost = c.invoke(Op("write", "r0", 1)), c.invoke(Op("write", "r0", 2))
    assert (refused.type, lost.type) == (FAIL, INFO)
    assert "read only replica" in str(refused.error) and conn.connects == 2
