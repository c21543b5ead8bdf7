"""The list-append workload without a server: its generator, its options as a system
allows them, the history lines it makes (the agreed format: f "txn", no key field), and
how its Redis and DynamoDB clients classify every reply (scripted connections)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import botocore.exceptions as bex
import pytest
import redis
from conftest import FakeConnection

from leaseline.harness.errors import BadArguments
from leaseline.harness.store.history import HistoryWriter, MonotonicClock
from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import FAIL, INFO, OK, Op, WorkloadOptions
from leaseline.workloads.list_append import ListAppend, ListAppendGenerator
from leaseline.workloads.list_append_dynamo import ListDynamoClient
from leaseline.workloads.list_append_redis import (
    TXN_SCRIPT,
    TXN_SHA,
    ListLuaClient,
    ListRedisClient,
)

EP = Endpoint("127.0.0.1", 6379)


def generator(keys: int = 3, appends: int | None = 5, lo: int = 1, hi: int = 4
              ) -> ListAppendGenerator:
    return ListAppendGenerator(WorkloadOptions(keys=keys, writes_per_key=appends), lo, hi)


def test_transactions_append_unique_values_and_keys_retire() -> None:
    gen, rng = generator(), random.Random(7)
    ops = [gen.next_op(rng) for _ in range(400)]
    assert all(op.f == "txn" and op.key is None and 1 <= len(op.value) <= 4 for op in ops)
    appended: dict[str, list[int]] = {}
    for op in ops:
        for f, key, value in op.value:
            assert f in ("append", "r")
            if f == "r":
                assert value is None
            else:
                appended.setdefault(key, []).append(value)
    # values 1, 2, 3, ... per key, each once; a key takes 5 appends and then retires
    for key, values in appended.items():
        assert values == list(range(1, len(values) + 1)), key
        assert len(values) <= 5
    assert len(appended) > 3 and sum(len(v) == 5 for v in appended.values()) >= 3
    assert set(appended) <= set(gen.all_keys())
    assert gen.final_op("k1") == Op("txn", None, [["r", "k1", None]])


def test_phases_set_the_share_of_reads() -> None:
    gen, rng = generator(appends=None), random.Random(1)
    gen.set_reads(1.0)
    assert all(f == "r" for _ in range(50) for f, _k, _v in gen.next_op(rng).value)
    gen.set_reads(None)
    assert gen.reads() == 0.5
    assert gen.appends_per_key == 128  # the default, as in Jepsen's list-append


def test_read_only_sets_the_share_of_transactions_that_only_read() -> None:
    def share(gen: ListAppendGenerator) -> tuple[float, int]:
        ops = [gen.next_op(rng) for _ in range(4000)]
        only_reads = [all(f == "r" for f, _k, _v in op.value) for op in ops]
        lengths = {len(op.value) for op, ro in zip(ops, only_reads, strict=True) if not ro}
        return sum(only_reads) / len(ops), min(lengths, default=0)

    rng = random.Random(3)
    mixed, _ = share(generator(appends=None))
    assert 0.19 < mixed < 0.28  # the micro-ops' mix: (1/2 + 1/4 + 1/8 + 1/16) / 4
    gen = ListAppendGenerator(WorkloadOptions(keys=3), 1, 4, read_only=0.75)
    ro, shortest = share(gen)
    assert 0.72 < ro < 0.78 and shortest == 1  # every other transaction appends
    gen.set_reads(1.0)  # a phase of reads only wins over the appends the share asks for
    assert share(gen)[0] == 1.0
    assert ListAppend(WorkloadOptions(extra={"read-only": "0.5"})).new_generator().read_only \
        == 0.5


class Features:
    name = "sys"
    features: frozenset[str] = frozenset()

    @classmethod
    def with_(cls, *names: str) -> type[Features]:
        return type("P", (cls,), {"features": frozenset(names)})


ALL = Features.with_("lists", "multi", "scripts", "dynamo-lists", "dynamo-transactions")


def test_options_are_resolved_for_the_system() -> None:
    full = ListAppend.resolve_options({}, ALL)  # type: ignore[arg-type]
    assert full == {"client": "multi", "min-txn-length": "1", "max-txn-length": "4",
                    "read-only": "mix"}
    plain = ListAppend.resolve_options({"client": "plain"}, ALL)  # type: ignore[arg-type]
    assert plain["max-txn-length"] == plain["min-txn-length"] == "1"
    dyn = ListAppend.resolve_options({"client": "dynamo"}, ALL)  # type: ignore[arg-type]
    assert dyn["dynamo-txn"] == "transact"
    lists_only = Features.with_("dynamo-lists")
    dyn = ListAppend.resolve_options({"client": "dynamo"}, lists_only)  # type: ignore[arg-type]
    assert (dyn["dynamo-txn"], dyn["max-txn-length"]) == ("single", "1")
    assert ListAppend.protocol_for({"client": "dynamo"}) == "dynamodb"
    assert ListAppend.protocol_for({}) == "redis"


@pytest.mark.parametrize(("opts", "system", "says"), [
    ({"client": "multi"}, Features.with_("lists"), "needs MULTI/EXEC, which sys does not"),
    ({"client": "lua"}, Features.with_("lists"), "needs EVALSHA scripts"),
    ({}, Features, "needs RPUSH and LRANGE, which sys does not speak (it offers: none"),
    ({"client": "dynamo", "dynamo-txn": "transact"}, Features.with_("dynamo-lists"),
     "dynamo-txn=transact needs"),
    ({"client": "plain", "max-txn-length": "3"}, ALL, "max-txn-length must be 1"),
    ({"client": "lua", "dynamo-txn": "single"}, ALL, "applies to client=dynamo only"),
    ({"client": "pipeline"}, ALL, "client must be one of"),
    ({"max-txn-length": "x"}, ALL, "max-txn-length must be a whole number"),
    ({"min-txn-length": "3", "max-txn-length": "2"}, ALL, "must not exceed"),
    ({"keys": "3"}, ALL, "keys is not an option of list-append"),
    ({"read-only": "1.5"}, ALL, "read-only must be mix or a share from 0 to 1"),
    ({"read-only": "most"}, ALL, "read-only must be mix or a share from 0 to 1"),
])
def test_options_a_system_cannot_serve_are_refused_in_one_sentence(
        opts: dict[str, str], system: type, says: str) -> None:
    with pytest.raises(BadArguments) as e:
        ListAppend.resolve_options(opts, system)  # type: ignore[arg-type]
    assert says in str(e.value) and "\n" not in str(e.value)


def test_history_lines_have_the_agreed_shape(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, MonotonicClock()) as h:
        h.record(3, "invoke", "txn", None, [["append", "k3", 7], ["r", "k1", None]], "n1")
        h.record(3, "ok", "txn", None, [["append", "k3", 7], ["r", "k1", [1, 2, 7]]], "n1")
        h.record("nemesis", "invoke", "start-kill", value={"fault": 1})
        h.record(4, "invoke", "write", "r0", 5, "n2")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0] == {"index": 0, "time": lines[0]["time"], "process": 3, "type": "invoke",
                        "f": "txn", "value": [["append", "k3", 7], ["r", "k1", None]],
                        "node": "n1"}
    assert lines[1]["value"] == [["append", "k3", 7], ["r", "k1", [1, 2, 7]]]
    assert "key" not in lines[1]
    assert lines[3]["key"] == "r0"  # registers keep theirs


def txn(*mops: list[Any]) -> Op:
    return Op("txn", None, [list(m) for m in mops])


def redis_client(conn: FakeConnection, cls: type = ListRedisClient) -> Any:
    client = cls(lambda _e, _p: conn)
    client.open("n1", EP)
    return client


MIXED = txn(["append", "k1", 3], ["r", "k1", None], ["r", "k2", None])
READS = txn(["r", "k1", None], ["r", "k2", None])


def test_multi_exec_ok_carries_the_lists_read() -> None:
    conn = FakeConnection(replies=[b"OK", b"QUEUED", b"QUEUED", b"QUEUED",
                                   [3, [b"1", b"2", b"3"], []]])
    done = redis_client(conn).invoke(MIXED)
    assert done.type == OK
    assert done.value == [["append", "k1", 3], ["r", "k1", [1, 2, 3]], ["r", "k2", []]]
    assert conn.sent == [("MULTI",), ("RPUSH", "k1", "3"), ("LRANGE", "k1", 0, -1),
                         ("LRANGE", "k2", 0, -1), ("EXEC",)]


@pytest.mark.parametrize(("replies", "op", "kind", "why"), [
    # refused while queueing (a redirect): nothing ran
    ([b"OK", redis.exceptions.MovedError("0 10.0.0.2:6379")], MIXED, FAIL, "RPUSH"),
    ([b"OK", b"QUEUED", b"QUEUED", b"QUEUED",
      redis.exceptions.ExecAbortError("Transaction discarded")], MIXED, FAIL, "discarded"),
    ([b"OK", b"QUEUED", b"QUEUED", b"QUEUED", None], MIXED, FAIL, "nil"),
    ([b"OK", b"QUEUED", b"QUEUED", b"QUEUED", redis.ResponseError("BUSY server overloaded")],
     MIXED, FAIL, "overloaded"),
    # EXEC sent, no answer: it may have run
    ([b"OK", b"QUEUED", b"QUEUED", b"QUEUED", redis.exceptions.TimeoutError("t")], MIXED,
     INFO, "timeout"),
    ([b"OK", b"QUEUED", b"QUEUED", redis.exceptions.ConnectionError("c")], READS, FAIL,
     "connection"),
    # an error inside EXEC's reply: Redis applied the others
    ([b"OK", b"QUEUED", b"QUEUED", b"QUEUED",
      [redis.ResponseError("WRONGTYPE x"), [], []]], MIXED, INFO, "inside"),
    ([b"OK", b"QUEUED", b"QUEUED", b"QUEUED",
      [redis.exceptions.TryAgainError("not applied")] * 3], MIXED, FAIL, "every micro-op"),
    # an error reply that does not say it was refused (a commit that timed out)
    ([b"OK", b"QUEUED", b"QUEUED", b"QUEUED", redis.ResponseError("context deadline")],
     MIXED, INFO, "unknown outcome"),
    ([b"OK", b"QUEUED", b"QUEUED", redis.ResponseError("context deadline")], READS, FAIL,
     "deadline"),
])
def test_multi_exec_outcomes_follow_jepsens_rules(replies: list[Any], op: Op, kind: str,
                                                  why: str) -> None:
    done = redis_client(FakeConnection(replies=replies)).invoke(op)
    assert done.type == kind and why in (done.error or ""), done
    assert done.value == op.value  # as invoked: an info's reads are unknown (null)


@pytest.mark.parametrize(("op", "reply", "kind", "value"), [
    (txn(["append", "k1", 4]), 4, OK, [["append", "k1", 4]]),
    (txn(["r", "k1", None]), [b"1", b"4"], OK, [["r", "k1", [1, 4]]]),
    (txn(["append", "k1", 4]), redis.exceptions.TimeoutError("t"), INFO, None),
    (txn(["append", "k1", 4]), redis.exceptions.ReadOnlyError("replica"), FAIL, None),
    (txn(["append", "k1", 4]), redis.ResponseError("ERR raft: commit timed out"), INFO, None),
    (txn(["r", "k1", None]), redis.exceptions.TimeoutError("t"), FAIL, None),
])
def test_one_op_transactions_are_bare_commands(op: Op, reply: Any, kind: str,
                                               value: Any) -> None:
    conn = FakeConnection(replies=[reply])
    done = redis_client(conn).invoke(op)
    assert done.type == kind, done
    assert done.value == (value if value is not None else op.value)
    assert conn.sent[0][0] in ("RPUSH", "LRANGE") and len(conn.sent) == 1


def test_lua_is_one_evalsha_and_falls_back_to_eval() -> None:
    conn = FakeConnection(replies=[redis.exceptions.NoScriptError("no"),
                                   [3, [b"1", b"2", b"3"], []], TXN_SHA.encode()])
    client = redis_client(conn, ListLuaClient)
    done = client.invoke(MIXED)
    assert done.type == OK and done.value[1] == ["r", "k1", [1, 2, 3]], done
    assert conn.sent[0] == ("EVALSHA", TXN_SHA, 3, "k1", "k1", "k2", "3", "", "")
    assert conn.sent[1] == ("EVAL", TXN_SCRIPT, 3, "k1", "k1", "k2", "3", "", "")
    assert conn.sent[2] == ("SCRIPT", "LOAD", TXN_SCRIPT)
    lost = redis_client(FakeConnection(replies=[redis.exceptions.ConnectionError("x")]),
                        ListLuaClient).invoke(MIXED)
    assert lost.type == INFO


class FakeDynamo:
    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, method: str) -> Any:
        def call(**request: Any) -> Any:
            self.calls.append((method, request))
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return call

    def close(self) -> None:
        pass


def dynamo(fake: FakeDynamo) -> ListDynamoClient:
    client = ListDynamoClient(lambda _e: fake)
    client.open("n1", EP)
    return client


def item(*values: int) -> dict[str, Any]:
    return {"Item": {"k": {"S": "x"}, "v": {"L": [{"N": str(v)} for v in values]}}}


def canceled() -> bex.ClientError:
    return bex.ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "c"},
                            "ResponseMetadata": {"HTTPStatusCode": 400}},
                           "TransactWriteItems")


def test_dynamo_single_ops() -> None:
    fake = FakeDynamo({}, item(1, 2), {})
    c = dynamo(fake)
    assert c.invoke(txn(["append", "k1", 2])).type == OK
    assert fake.calls[0][1]["UpdateExpression"].startswith("SET #v = list_append(")
    assert c.invoke(txn(["r", "k1", None])).value == [["r", "k1", [1, 2]]]
    assert fake.calls[1][1]["ConsistentRead"] is True
    assert c.invoke(txn(["r", "k9", None])).value == [["r", "k9", None]]


def test_dynamo_transaction_reads_a_snapshot_then_writes_on_condition() -> None:
    fake = FakeDynamo({"Responses": [item(1, 2), {}]}, {})
    done = dynamo(fake).invoke(txn(["r", "k1", None], ["append", "k1", 3], ["r", "k1", None],
                                   ["r", "k2", None]))
    assert done.type == OK
    assert done.value == [["r", "k1", [1, 2]], ["append", "k1", 3], ["r", "k1", [1, 2, 3]],
                          ["r", "k2", None]]
    (get, request), (write, wrequest) = fake.calls
    assert (get, write) == ("transact_get_items", "transact_write_items")
    assert "TableName" not in request and len(request["TransactItems"]) == 2
    check, update = wrequest["TransactItems"]
    assert check["ConditionCheck"]["ConditionExpression"] == "attribute_not_exists(#v)"
    assert update["Update"]["ConditionExpression"] == "#v = :cv"
    assert update["Update"]["ExpressionAttributeValues"][":cv"] == item(1, 2)["Item"]["v"]
    # a cancelled transaction applied nothing; a lost reply to the write may have
    assert dynamo(FakeDynamo({"Responses": [item(1), {}]}, canceled())).invoke(
        txn(["r", "k1", None], ["append", "k2", 1])).type == FAIL
    lost = dynamo(FakeDynamo({"Responses": [item(1), {}]}, bex.ReadTimeoutError(
        endpoint_url="x"))).invoke(txn(["r", "k1", None], ["append", "k2", 1]))
    assert (lost.type, lost.value) == (INFO, [["r", "k1", None], ["append", "k2", 1]])
    only_appends = FakeDynamo({})
    assert dynamo(only_appends).invoke(txn(["append", "k1", 1], ["append", "k1", 2])).type == OK
    [(method, request)] = only_appends.calls
    assert method == "transact_write_items"
    [update] = request["TransactItems"]
    assert "ConditionExpression" not in update["Update"]
    assert update["Update"]["ExpressionAttributeValues"][":val"] == {"L": [{"N": "1"},
                                                                           {"N": "2"}]}
