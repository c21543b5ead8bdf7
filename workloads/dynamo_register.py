"""The `dynamo-register` workload: PutItem of values unique per key, GetItem(ConsistentRead).

The operation mix and key retirement are the register workload's (workloads/register.py);
only the protocol differs. The table is created in setup.
"""

from __future__ import annotations

from leaseline.harness.systems.profile import Profile
from leaseline.workloads.base import FAIL, Completion, Op, Workload
from leaseline.workloads.dynamo_client import DynamoClient, create_table
from leaseline.workloads.register import RegisterGenerator


class DynamoRegisterClient(DynamoClient):
    def invoke(self, op: Op) -> Completion:
        if op.f == "read":
            return self.get(op)
        if op.f == "write":
            return self.put(op)
        return Completion(FAIL, op.value, f"dynamo-register has no operation {op.f!r}")


class DynamoRegister(Workload):
    name = "dynamo-register"
    protocol = "dynamodb"

    def new_client(self) -> DynamoRegisterClient:
        return DynamoRegisterClient()

    def new_generator(self) -> RegisterGenerator:
        return RegisterGenerator(self.opts)

    def setup(self, profile: Profile, leader: str) -> None:
        create_table(profile, leader, self.protocol)
