"""The lua-cas workload and the cas generator without a cluster: scripts, NOSCRIPT fallback,
error mapping, values; and that the checker models a key with cas ops as a cas-register."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import FakeConnection
from lupa import LuaRuntime

from leaseline.checkers.decide import check_key
from leaseline.checkers.importers.jsonl import read_jsonl
from leaseline.checkers.ops import KeyHistory
from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import FAIL, INFO, OK, Op, WorkloadOptions
from leaseline.workloads.cas_ops import DEFAULT_WRITES_PER_KEY, CasGenerator
from leaseline.workloads.lua_cas import CAS_SCRIPT, CAS_SHA, READ_SHA, LuaCasClient
from leaseline.workloads.registry import WORKLOADS, workload_class


def client_with(conn: FakeConnection) -> LuaCasClient:
    c = LuaCasClient(connect=lambda _ep, _proto: conn)
    c.open("lk1", Endpoint("127.0.0.1", 6379))
    return c


def test_cas_read_write_use_evalsha_and_set() -> None:
    conn = FakeConnection(replies=[1, 0, b"5", None, b"OK"])
    c = client_with(conn)
    swapped = c.invoke(Op("cas", "c0", [None, 5]))
    assert (swapped.type, swapped.value) == (OK, [None, 5])
    mismatch = c.invoke(Op("cas", "c0", [3, 6]))
    assert mismatch.type == FAIL and "compare failed" in (mismatch.error or "")
    assert c.invoke(Op("read", "c0")).value == 5
    assert c.invoke(Op("read", "c1")).value is None
    assert c.invoke(Op("write", "c0", 7)).type == OK
    assert conn.sent == [
        ("EVALSHA", CAS_SHA, 1, "c0", "", "5"),  # '' = expected absent
        ("EVALSHA", CAS_SHA, 1, "c0", "3", "6"),
        ("EVALSHA", READ_SHA, 1, "c0"),
        ("EVALSHA", READ_SHA, 1, "c1"),
        ("SET", "c0", "7"),
    ]
    assert conn.connects == 1 and c.evals == 0


def test_noscript_falls_back_to_eval_then_reloads() -> None:
    noscript = redis.exceptions.NoScriptError("No matching script. Please use EVAL.")
    conn = FakeConnection(replies=[noscript, 1, CAS_SHA.encode(), 0])
    c = client_with(conn)
    done = c.invoke(Op("cas", "c0", [1, 2]))
    assert done.type == OK and c.evals == 1
    assert [s[0] for s in conn.sent] == ["EVALSHA", "EVAL", "SCRIPT"]
    assert conn.sent[1] == ("EVAL", CAS_SCRIPT, 1, "c0", "1", "2")
    assert conn.sent[2] == ("SCRIPT", "LOAD", CAS_SCRIPT)
    # the next op uses the SHA again
    assert c.invoke(Op("cas", "c0", [2, 3])).type == FAIL
    assert conn.sent[3][0] == "EVALSHA"


def test_noscript_fallback_whose_eval_is_lost_is_info() -> None:
    noscript = redis.exceptions.NoScriptError("No matching script. Please use EVAL.")
    conn = FakeConnection(replies=[noscript, redis.ConnectionError("closed")])
    c = client_with(conn)
    done = c.invoke(Op("cas", "c0", [1, 2]))
    assert (done.type, done.value) == (INFO, [1, 2])
    assert [s[0] for s in conn.sent] == ["EVALSHA", "EVAL"]  # no reload on a dead link


def test_other_error_replies_do_not_trigger_eval() -> None:
    moved = redis.exceptions.MovedError("0 lk2:6379")
    conn = FakeConnection(replies=[moved, redis.exceptions.ResponseError("TRYAGAIN no leader")])
    c = client_with(conn)
    first = c.invoke(Op("cas", "c0", [1, 2]))
    assert first.type == FAIL and "lk2:6379" in (first.error or "")
    assert c.invoke(Op("write", "c0", 3)).type == FAIL
    assert [s[0] for s in conn.sent] == ["EVALSHA", "SET"] and c.evals == 0


@pytest.mark.parametrize("err", [redis.TimeoutError("slow"), redis.ConnectionError("reset")])
def test_lost_cas_is_info_lost_read_is_fail(err: Exception) -> None:
    conn = FakeConnection(replies=[err, err])
    c = client_with(conn)
    assert c.invoke(Op("cas", "c0", [None, 1])).type == INFO
    read = c.invoke(Op("read", "c0"))
    assert read.type == FAIL and read.value is None
    assert conn.connects == 2  # the broken connection was replaced


def test_refused_connection_is_fail() -> None:
    c = client_with(FakeConnection(connect_error=redis.ConnectionError("refused")))
    assert c.invoke(Op("cas", "c0", [None, 1])).type == FAIL


def _run_script(script: bytes, store: dict[bytes, bytes], key: bytes, *args: bytes) -> Any:
    """Runs a workload script in a real Lua runtime with a dict for redis.call."""
    lua = LuaRuntime(encoding=None, unpack_returned_tuples=True)

    def call(name: bytes, k: bytes, *rest: bytes) -> Any:
        if name == b"GET":
            return store.get(k, False)  # Redis hands Lua false for a missing key
        store[k] = rest[0]
        return b"OK"

    g = lua.globals()
    g.redis = lua.table_from({b"call": call})
    g.KEYS = lua.table_from([key])
    g.ARGV = lua.table_from(list(args))
    return lua.execute(script)


def test_cas_script_semantics_in_real_lua() -> None:
    store: dict[bytes, bytes] = {}
    assert _run_script(CAS_SCRIPT, store, b"k", b"1", b"2") == 0  # absent != 1
    assert _run_script(CAS_SCRIPT, store, b"k", b"", b"1") == 1  # absent -> 1
    assert store[b"k"] == b"1"
    assert _run_script(CAS_SCRIPT, store, b"k", b"", b"9") == 0  # present, expected absent
    assert _run_script(CAS_SCRIPT, store, b"k", b"2", b"3") == 0
    assert _run_script(CAS_SCRIPT, store, b"k", b"1", b"3") == 1
    assert store[b"k"] == b"3"


def test_load_scripts_checks_the_sha() -> None:
    good = FakeConnection(replies=[CAS_SHA.encode(), READ_SHA.encode()])
    client_with(good).load_scripts()
    assert good.disconnects == 1
    bad = FakeConnection(replies=[b"0" * 40])
    with pytest.raises(EnvironmentProblem, match="SHA1"):
        client_with(bad).load_scripts()


def test_a_node_without_script_gets_eval() -> None:
    unknown = redis.ResponseError("unknown command 'SCRIPT'")
    conn = FakeConnection(replies=[unknown, 1])
    c = client_with(conn)
    c.load_scripts()
    assert c.eval_only == {"lk1"}
    assert c.invoke(Op("cas", "c0", [1, 2])).type == OK
    assert [s[0] for s in conn.sent] == ["SCRIPT", "EVAL"]


def test_cas_generator_values_unique_and_retirement() -> None:
    gen = CasGenerator(WorkloadOptions(keys=2, writes_per_key=10))
    rng = random.Random(3)
    proposed: dict[str, list[int]] = {}
    fs: set[str] = set()
    absent_expected = stale_expected = 0
    for _ in range(2000):
        op = gen.next_op(rng)
        fs.add(op.f)
        if op.f == "write":
            proposed.setdefault(op.key, []).append(op.value)
        elif op.f == "cas":
            expected, new = op.value
            prior = proposed.get(op.key, [])
            assert expected is None or expected in prior  # only values proposed before
            absent_expected += expected is None
            stale_expected += bool(prior) and expected is not None and expected != prior[-1]
            proposed.setdefault(op.key, []).append(new)
    assert fs == {"read", "write", "cas"}
    for key, values in proposed.items():
        assert values == list(range(1, len(values) + 1)), key
        assert len(values) <= 10
    assert absent_expected > 0 and stale_expected > 0  # compares that will fail exist too
    assert len(gen.all_keys()) > 2 and set(proposed) <= set(gen.all_keys())


def test_registry_has_the_protocol_workloads() -> None:
    assert {"register", "lua-cas", "dynamo-register", "dynamo-cas"} <= set(WORKLOADS)
    assert workload_class("lua-cas").protocol == "redis"
    assert workload_class("dynamo-cas").protocol == "dynamodb"


def _rec(index: int, t: int, process: int, type_: str, f: str, value: Any) -> dict[str, Any]:
    return {"index": index, "time": t, "process": process, "type": type_, "f": f, "key": "c0",
            "value": value, "node": "lk1"}


def _key(path: Path) -> KeyHistory:
    histories, _nemesis = read_jsonl(path)
    (h,) = histories
    return h


def test_checker_models_a_key_with_cas_as_cas_register(tmp_path: Path) -> None:
    """What lua-cas / dynamo-cas record: a failed compare is dropped (it changed nothing),
    yet the key is still a cas-register checked by the WGL search, never the zone method."""
    recs = [
        _rec(0, 0, 0, "invoke", "cas", [None, 1]), _rec(1, 10, 0, "ok", "cas", [None, 1]),
        _rec(2, 20, 1, "invoke", "cas", [5, 2]), _rec(3, 30, 1, "fail", "cas", [5, 2]),
        _rec(4, 40, 2, "invoke", "write", 3), _rec(5, 50, 2, "ok", "write", 3),
        _rec(6, 60, 0, "invoke", "read", None), _rec(7, 70, 0, "ok", "read", 3),
    ]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    h = _key(path)
    assert h.model == "cas-register"
    result = check_key(h, 0)
    assert (result.method, result.status) == ("wgl", "linearizable")
    # a read of the value the failed cas proposed is a violation: that cas never happened
    recs[-1] = _rec(7, 70, 0, "ok", "read", 2)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert check_key(_key(path), 0).status == "violation"


def test_cas_keys_retire_by_default() -> None:
    gen = CasGenerator(WorkloadOptions(keys=1))
    assert gen.opts.writes_per_key == DEFAULT_WRITES_PER_KEY
    rng = random.Random(1)
    keys = {gen.next_op(rng).key for _ in range(4 * DEFAULT_WRITES_PER_KEY)}
    assert len(keys) > 1  # the first key retired after DEFAULT_WRITES_PER_KEY proposals
    assert CasGenerator(WorkloadOptions(writes_per_key=7)).opts.writes_per_key == 7
