"""The list-append workload's DynamoDB client (workloads/list_append.py, `client=dynamo`).

An item is {k: S key, v: L [N ...]} in the workloads' table (workloads/dynamo_client.py).
- One micro-op: an append is UpdateItem `SET #v = list_append(if_not_exists(#v, :empty),
  :val)`, a read GetItem(ConsistentRead=True) (no item: null).
- More (`dynamo-txn=transact`, as elastickv's own Jepsen suite does): a transaction that
  reads first reads every key it touches with one TransactGetItems, answers its reads from
  that snapshot and its own earlier appends, then sends its appends (those of one key
  merged into one Update) as one TransactWriteItems conditioned on every key it read still
  holding what the snapshot held (a ConditionCheck for the keys it only read). A
  transaction that only appends sends the TransactWriteItems alone; one that only reads is
  the TransactGetItems alone. So a correct store serves it at the moment of the write.
Outcomes are dynamo_client's (refused -> fail, 5xx, timeout or lost connection while
writing -> info); TransactionCanceledException is a fail: DynamoDB applies nothing of a
cancelled transaction. A failure of the snapshot read is a fail: nothing was written yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leaseline.harness.systems.profile import Endpoint, Profile
from leaseline.workloads.base import FAIL, OK, Client, Completion, Op, Workload
from leaseline.workloads.dynamo_client import (
    KEY,
    TABLE,
    VALUE,
    DynamoClient,
    create_table,
    key_of,
    real_dynamo,
)
from leaseline.workloads.list_append_redis import as_invoked

APPEND = "SET #v = list_append(if_not_exists(#v, :empty), :val)"


def list_of(item: dict[str, Any] | None) -> list[Any] | None:
    """An item's list as the history records it (None: no item, or no list)."""
    if not item or VALUE not in item:
        return None
    attr = item[VALUE]
    if "L" not in attr:
        return [next(iter(attr.values()), None)]  # not ours: reported verbatim
    out: list[Any] = []
    for element in attr["L"]:
        text = element.get("N") if isinstance(element, dict) else None
        try:
            out.append(int(text))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            out.append(element)
    return out


def numbers(values: list[int]) -> dict[str, Any]:
    return {"L": [{"N": str(v)} for v in values]}


def appended(key: str, values: list[int], snapshot: list[Any] | None,
             conditioned: bool) -> dict[str, Any]:
    """One Update of a TransactWriteItems: key's appends, conditioned on the snapshot."""
    update: dict[str, Any] = {
        "TableName": TABLE, "Key": key_of(key), "UpdateExpression": APPEND,
        "ExpressionAttributeNames": {"#v": VALUE},
        "ExpressionAttributeValues": {":empty": {"L": []}, ":val": numbers(values)},
    }
    if conditioned:
        update.update(unchanged(snapshot))
        if snapshot is not None:
            update["ExpressionAttributeValues"][":cv"] = numbers(snapshot)
    return {"Update": update}


def unchanged(snapshot: list[Any] | None) -> dict[str, Any]:
    if snapshot is None:
        return {"ConditionExpression": "attribute_not_exists(#v)"}
    return {"ConditionExpression": "#v = :cv"}


def check(key: str, snapshot: list[Any] | None) -> dict[str, Any]:
    """A ConditionCheck that key still holds the snapshot's list."""
    cond: dict[str, Any] = {"TableName": TABLE, "Key": key_of(key),
                            "ExpressionAttributeNames": {"#v": VALUE}, **unchanged(snapshot)}
    if snapshot is not None:
        cond["ExpressionAttributeValues"] = {":cv": numbers(snapshot)}
    return {"ConditionCheck": cond}


class ListDynamoClient(DynamoClient):
    def invoke(self, op: Op) -> Completion:
        if op.f != "txn":
            return Completion(FAIL, op.value, f"list-append has no operation {op.f!r}")
        if len(op.value) == 1:
            return self.single(op)
        return self.transaction(op)

    def single(self, op: Op) -> Completion:
        f, key, value = op.value[0]
        if f == "r":
            resp, failed = self.call(op, "get_item", False, Key=key_of(key),
                                     ConsistentRead=True)
            if failed:
                return as_invoked(op, failed)
            return Completion(OK, [[f, key, list_of(resp.get("Item"))]])
        _, failed = self.call(
            op, "update_item", True, Key=key_of(key), UpdateExpression=APPEND,
            ExpressionAttributeNames={"#v": VALUE},
            ExpressionAttributeValues={":empty": {"L": []}, ":val": numbers([value])})
        return as_invoked(op, failed) if failed else Completion(OK, op.value)

    def transaction(self, op: Op) -> Completion:
        keys = list(dict.fromkeys(key for _f, key, _v in op.value))
        reads = any(f == "r" for f, _k, _v in op.value)
        snapshot: dict[str, list[Any] | None] = {}
        if reads:
            resp, failed = self.call(
                op, "transact_get_items", False, table=False,
                TransactItems=[{"Get": {"TableName": TABLE, "Key": key_of(k)}} for k in keys])
            if failed:
                return Completion(FAIL, op.value, f"TransactGetItems: {failed.error}",
                                  answered=failed.answered)
            responses = resp.get("Responses") or []
            if len(responses) != len(keys):
                return Completion(FAIL, op.value, f"TransactGetItems answered {len(responses)} "
                                                  f"items for {len(keys)} keys")
            snapshot = {k: list_of(r.get("Item")) for k, r in zip(keys, responses, strict=True)}
        done, mine = [], {}  # the transaction's own appends, per key, in order
        for f, key, value in op.value:
            if f == "r":
                base, own = snapshot.get(key), mine.get(key, [])
                done.append([f, key, None if base is None and not own else [*(base or []),
                                                                            *own]])
            else:
                mine.setdefault(key, []).append(value)
                done.append([f, key, value])
        if not mine:
            return Completion(OK, done)
        items = [check(k, snapshot[k]) for k in keys if k not in mine] if reads else []
        items += [appended(k, vs, snapshot.get(k), reads) for k, vs in mine.items()]
        _, failed = self.call(op, "transact_write_items", True, table=False,
                              TransactItems=items)
        return as_invoked(op, failed) if failed else Completion(OK, done)


class DynamoSide:
    """What ListAppend delegates to for client=dynamo."""

    def __init__(self, make: Callable[[Endpoint], Any] = real_dynamo) -> None:
        self.make = make

    def new_client(self) -> Client:
        return ListDynamoClient(self.make)

    def setup(self, profile: Profile, leader: str, workload: Workload) -> None:
        create_table(profile, leader, "dynamodb", self.make)


__all__ = ["KEY", "DynamoSide", "ListDynamoClient", "list_of"]
