"""The `dynamo-cas` workload: conditional UpdateItem as compare-and-set, GetItem, PutItem.

cas [expected, new] is UpdateItem SET v = :new with the condition v = :expected, or
attribute_not_exists(v) when expected is null (the key is absent). The answer
ConditionalCheckFailedException means the compare ran and did not match: a definite fail.
Reads are GetItem(ConsistentRead=True), writes PutItem; the mix is workloads/cas_ops.py's.
"""

from __future__ import annotations

from leaseline.harness.systems.profile import Profile
from leaseline.workloads.base import FAIL, Completion, Op, Workload
from leaseline.workloads.cas_ops import CasGenerator
from leaseline.workloads.dynamo_client import VALUE, DynamoClient, create_table, key_of, number


class DynamoCasClient(DynamoClient):
    def cas(self, op: Op) -> Completion:
        expected, new = op.value
        values = {":new": number(new)}
        if expected is None:
            condition = "attribute_not_exists(#v)"
        else:
            condition = "#v = :expected"
            values[":expected"] = number(expected)
        _, failed = self.call(
            op,
            "update_item",
            True,
            Key=key_of(op.key),
            UpdateExpression="SET #v = :new",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#v": VALUE},
            ExpressionAttributeValues=values,
        )
        return failed or Completion("ok", op.value)

    def invoke(self, op: Op) -> Completion:
        if op.f == "read":
            return self.get(op)
        if op.f == "write":
            return self.put(op)
        if op.f == "cas":
            return self.cas(op)
        return Completion(FAIL, op.value, f"dynamo-cas has no operation {op.f!r}")


class DynamoCas(Workload):
    name = "dynamo-cas"
    protocol = "dynamodb"

    def new_client(self) -> DynamoCasClient:
        return DynamoCasClient()

    def new_generator(self) -> CasGenerator:
        return CasGenerator(self.opts)

    def setup(self, profile: Profile, leader: str) -> None:
        create_table(profile, leader, self.protocol)
