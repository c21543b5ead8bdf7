"""A DynamoDB client (boto3) whose every outcome is classified, shared by the Dynamo workloads.

One attempt per operation: botocore's retries would re-send a write whose first attempt may
have taken effect. Note `retries={"max_attempts": 1}` means ONE RETRY (two attempts) in
botocore; `total_max_attempts: 1` is what makes it a single attempt (tests/
test_workload_dynamo.py checks this against a loopback server). The split is:
- cannot connect (refused, connect timeout) -> fail: nothing was sent;
- an error response below 500 (ConditionalCheckFailed, NotLeader "MOVED 0 host:port",
  NotApplied, Validation, ...) -> fail: the server says it did not happen;
- 500 (leasekv: InternalServerError "UNKNOWN ...", the outcome is unknown), a read timeout,
  a connection lost after sending, or a reply cut short (its body ended before its
  Content-Length: the node died while answering) -> info for writes, fail for reads (a
  read changes nothing, so it may be dropped). botocore itself accepts a cut reply as
  whole and parses an empty body as {}: a GetItem's would read as "no item", a stale read
  that never happened, so the client checks each reply's length before botocore parses
  it (_whole_reply).
Items are {k: S key, v: N value} in one table; the workloads' values are integers.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
import botocore.exceptions as bex
from botocore.config import Config

from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.systems.profile import Endpoint, Profile
from leaseline.workloads.base import FAIL, INFO, Client, Completion, Op

TABLE = "leaseline"
KEY, VALUE = "k", "v"
CONFIG = Config(
    retries={"total_max_attempts": 1, "mode": "standard"},
    connect_timeout=1.0,
    read_timeout=2.0,  # leasekv answers an unknown commit after 3 s: a timeout comes first
    max_pool_connections=2,
)
SETUP_TIMEOUT_S = 20.0

_session_lock = threading.Lock()
_session: boto3.session.Session | None = None


def real_dynamo(endpoint: Endpoint) -> Any:
    """A boto3 DynamoDB client for one node. Clients come from one shared Session (it caches
    the service model, so a reconnect costs milliseconds); Session.client is not
    thread-safe, hence the lock."""
    global _session
    with _session_lock:
        if _session is None:
            _session = boto3.session.Session()
        client = _session.client(
            "dynamodb",
            endpoint_url=f"http://{endpoint.host}:{endpoint.port}",
            region_name="us-east-1",
            aws_access_key_id="leaseline",  # leasekv checks no signature
            aws_secret_access_key="leaseline",
            config=CONFIG,
        )
    client.meta.events.register("before-parse.dynamodb", _whole_reply)
    return client


class CutShort(Exception):
    """A reply whose body ended before its Content-Length."""


def _whole_reply(response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's before-parse hook: raises CutShort where the body is shorter than the
    Content-Length the reply announced (botocore reads the body without holding it to
    that length). Raised there, it reaches `call` as the operation's exception."""
    length = response_dict["headers"].get("content-length")
    got = len(response_dict["body"] or b"")
    if length is not None and length.isdigit() and got < int(length):
        raise CutShort(f"the reply was cut short ({got} of {length} bytes)")


def error_code(e: bex.ClientError) -> tuple[str, str, int]:
    err = e.response.get("Error", {})
    status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    return str(err.get("Code", "")), str(err.get("Message", "")), int(status)


def classify(e: BaseException, op: Op, writes: bool) -> Completion:
    """The completion for an operation that raised e."""
    value = op.value if writes else None
    unknown = INFO if writes else FAIL
    if isinstance(e, bex.ClientError):
        code, message, status = error_code(e)
        text = f"{code}: {message}" if message else code
        if status >= 500:
            return Completion(unknown, value, f"unknown outcome: {text}")
        # A compare that did not hold (also a cancelled transaction's): the node answered.
        return Completion(FAIL, value, text, answered=code in (
            "ConditionalCheckFailedException", "TransactionCanceledException"))
    if isinstance(e, bex.ConnectionError):  # refused, DNS, connect timeout: nothing was sent
        return Completion(FAIL, value, f"connect: {e}")
    if isinstance(e, bex.ReadTimeoutError):
        return Completion(unknown, value, f"timeout: {e}")
    if isinstance(e, bex.HTTPClientError | CutShort):  # ConnectionClosedError and the like
        return Completion(unknown, value, f"connection lost: {e}")
    return Completion(unknown, value, repr(e))  # anything else: we cannot know what happened


def item_value(item: dict[str, Any] | None) -> Any:
    """An item's value as the history records it (None = absent)."""
    if not item or VALUE not in item:
        return None
    attr = item[VALUE]
    if "N" in attr:
        text = attr["N"]
        try:
            return int(text)
        except ValueError:
            return text
    return next(iter(attr.values()), None)  # not ours: reported verbatim


def key_of(key: str) -> dict[str, Any]:
    return {KEY: {"S": key}}


def number(v: int) -> dict[str, str]:
    return {"N": str(v)}


class DynamoClient(Client):
    """Base for the Dynamo workload clients: subclasses turn an Op into requests via `call`."""

    def __init__(self, make: Callable[[Endpoint], Any] = real_dynamo) -> None:
        self._make = make
        self._endpoint: Endpoint | None = None
        self._client: Any = None
        self.node: str | None = None

    def open(self, node: str, endpoint: Endpoint) -> None:
        self.node, self._endpoint, self._client = node, endpoint, None

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        self._client = None

    def call(
        self, op: Op, method: str, writes: bool, table: bool = True, **request: Any
    ) -> tuple[Any, Completion | None]:
        """(response, None) on success, or (None, the completion that classifies the failure).
        table=False: the request names its tables itself (the Transact* calls)."""
        assert self._endpoint is not None, "open() first"
        if self._client is None:
            try:
                if not self._endpoint.host:
                    raise ValueError(f"{self.node} has no address (its container is down)")
                self._client = self._make(self._endpoint)
            except Exception as e:  # noqa: BLE001 - nothing was sent: a definite failure
                return None, Completion(FAIL, op.value if writes else None, f"connect: {e}")
        try:
            if table:
                request["TableName"] = TABLE
            return getattr(self._client, method)(**request), None
        except Exception as e:  # noqa: BLE001 - every outcome becomes a completion
            done = classify(e, op, writes)
            if not isinstance(e, bex.ClientError):
                self.close()  # a broken connection is not reused
            return None, done

    def get(self, op: Op) -> Completion:
        resp, failed = self.call(op, "get_item", False, Key=key_of(op.key), ConsistentRead=True)
        return failed or Completion("ok", item_value(resp.get("Item")))

    def put(self, op: Op) -> Completion:
        item = {**key_of(op.key), VALUE: number(op.value)}
        _, failed = self.call(op, "put_item", True, Item=item)
        return failed or Completion("ok", op.value)


def create_table(profile: Profile, leader: str, protocol: str = "dynamodb",
                 make: Callable[[Endpoint], Any] = real_dynamo,
                 timeout_s: float = SETUP_TIMEOUT_S) -> None:
    """Creates the workloads' table (idempotent: an existing one is fine). Asks the node the
    harness thinks leads, then every other node: only the leader accepts (NotLeader
    otherwise), and leadership may move while we ask."""
    deadline = time.monotonic() + timeout_s
    order = [leader, *(n for n in profile.nodes if n != leader)]
    last = "no node answered"
    while time.monotonic() < deadline:
        for node in order:
            try:
                client = make(profile.endpoint(node, protocol))
                client.create_table(
                    TableName=TABLE,
                    KeySchema=[{"AttributeName": KEY, "KeyType": "HASH"}],
                    AttributeDefinitions=[{"AttributeName": KEY, "AttributeType": "S"}],
                    BillingMode="PAY_PER_REQUEST",
                )
                return
            except bex.ClientError as e:
                code, message, _ = error_code(e)
                if code == "ResourceInUseException":
                    return
                last = f"{node}: {code}: {message}"
            except Exception as e:  # noqa: BLE001 - a down node: try the next one
                last = f"{node}: {e}"
        time.sleep(0.3)
    raise EnvironmentProblem(f"could not create the DynamoDB table {TABLE!r} ({last}).")
