"""The DynamoDB front end: the JSON 1.0 protocol over HTTP, as boto3 speaks it.

Requests are POSTs with `X-Amz-Target: DynamoDB_20120810.<Operation>`; signatures are
not checked (any dummy credentials work). Errors have DynamoDB's shape: HTTP 400 and
`{"__type": "com.amazonaws.dynamodb.v20120810#<Name>", "message": ...}`, so boto3 raises
ClientError with Error.Code = <Name>. leasekv-specific outcomes:

* NotLeaderException (400): this node is not the leader; the message is
  `MOVED 0 host:port` naming the leader's DynamoDB endpoint, or `no leader is known`.
* NotAppliedException (400): the write certainly did not take effect.
* TransactionCanceledException (400, with CancellationReasons): a TransactWriteItems whose
  conditions did not all hold; nothing of it was applied.
* InternalServerError (500): the outcome is unknown (as with real DynamoDB). boto3
  retries 5xx and connection errors by default: test clients must set
  total_max_attempts=1 (one attempt, no retry).
"""

from __future__ import annotations

import json
import logging
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sut.leasekv import dynamo_expr as dx
from sut.leasekv.node import LeaseKV, NotApplied, NotLeader, UnknownOutcome

log = logging.getLogger("leasekv.dynamo")
PREFIX = "com.amazonaws.dynamodb.v20120810#"
TARGET_PREFIX = "DynamoDB_20120810."


class DynamoError(Exception):
    def __init__(self, name: str, message: str, status: int = 400,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.status = status
        self.extra = extra or {}  # more fields of the error body (CancellationReasons)


def _validation(message: str) -> DynamoError:
    return DynamoError("ValidationException", message)


def _unwrap(result: tuple) -> Any:
    if result[0] == "err":
        raise DynamoError(result[1], result[2])
    return result[1]


def _expr_args(req: dict[str, Any]) -> tuple[dict, dict]:
    names = req.get("ExpressionAttributeNames") or {}
    values = req.get("ExpressionAttributeValues") or {}
    return names, values


def _validate_expressions(req: dict[str, Any], update: bool = False) -> None:
    """Rejects malformed expressions before they are replicated (as DynamoDB would)."""
    names, values = _expr_args(req)
    try:
        if req.get("ConditionExpression"):
            dx.parse_condition(req["ConditionExpression"], names, values)
        if update and req.get("UpdateExpression"):
            dx.parse_update(req["UpdateExpression"], names, values)
    except dx.ExpressionError as e:
        raise _validation(str(e)) from None


def _returned(req: dict[str, Any], change: dict[str, Any], allowed: tuple[str, ...]) -> dict:
    mode = req.get("ReturnValues", "NONE")
    if mode not in allowed:
        raise _validation(f"ReturnValues {mode} is not valid for this operation")
    old, new = change["old"], change["new"]
    if mode == "ALL_OLD" and old:
        return {"Attributes": old}
    if mode == "ALL_NEW" and new:
        return {"Attributes": new}
    if mode in ("UPDATED_NEW", "UPDATED_OLD"):
        src = new if mode == "UPDATED_NEW" else old
        before = old or {}
        changed = {k: v for k, v in (src or {}).items()
                   if (new or {}).get(k) != before.get(k) or k not in before}
        return {"Attributes": changed} if changed else {}
    return {}


class DynamoFrontend:
    def __init__(self, node: LeaseKV) -> None:
        self.node = node

    def handle(self, target: str, req: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        op = target[len(TARGET_PREFIX):] if target.startswith(TARGET_PREFIX) else ""
        handler = getattr(self, f"op_{op}", None)
        try:
            if handler is None:
                raise DynamoError("UnknownOperationException", f"Unknown operation {target!r}")
            return 200, handler(req)
        except DynamoError as e:
            return e.status, {"__type": PREFIX + e.name, "message": str(e), **e.extra}
        except NotLeader as e:
            where = f"MOVED 0 {e.leader.dynamo_addr}" if e.leader else "no leader is known"
            return 400, {"__type": PREFIX + "NotLeaderException", "message": where}
        except NotApplied as e:
            return 400, {"__type": PREFIX + "NotAppliedException", "message": f"not applied: {e}"}
        except UnknownOutcome as e:
            return 500, {"__type": PREFIX + "InternalServerError",
                         "message": f"UNKNOWN outcome unknown: {e}"}

    @staticmethod
    def _table_name(req: dict[str, Any]) -> str:
        name = req.get("TableName")
        if not isinstance(name, str) or not 3 <= len(name) <= 255:
            raise _validation("TableName must be a string of 3 to 255 characters")
        return name

    def op_CreateTable(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        name = self._table_name(req)
        schema = req.get("KeySchema") or []
        defs = req.get("AttributeDefinitions") or []
        kinds = [k.get("KeyType") for k in schema]
        if kinds not in (["HASH"], ["HASH", "RANGE"]):
            raise _validation("KeySchema must be one HASH key, optionally followed by a RANGE key")
        defined = {d.get("AttributeName") for d in defs}
        if any(k.get("AttributeName") not in defined for k in schema):
            raise _validation("Every key attribute must appear in AttributeDefinitions")
        now = time.time()  # taken once, on the leader: replicas store the same value
        description = {
            "TableName": name,
            "KeySchema": schema,
            "AttributeDefinitions": defs,
            "TableStatus": "ACTIVE",
            "CreationDateTime": now,
            "TableArn": f"arn:aws:dynamodb:leasekv:000000000000:table/{name}",
            "TableId": f"leasekv-{name}",
            "ProvisionedThroughput": req.get("ProvisionedThroughput")
            or {"ReadCapacityUnits": 0, "WriteCapacityUnits": 0},
            "BillingModeSummary": {"BillingMode": req.get("BillingMode", "PROVISIONED")},
            "TableSizeBytes": 0,
        }
        desc = _unwrap(self.node.submit(self.node.state.create_table, name, description))
        return {"TableDescription": dict(desc, ItemCount=0)}

    def op_DescribeTable(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        name = self._table_name(req)
        self.node.require_leader()  # a follower may not have applied CreateTable yet
        desc = self.node.state.describe_table(name)
        if desc is None:
            raise DynamoError("ResourceNotFoundException", f"Requested resource not found: {name}")
        return {"Table": desc}

    def op_ListTables(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        self.node.require_leader()
        return {"TableNames": self.node.state.table_names()}

    def op_GetItem(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        name = self._table_name(req)
        key = req.get("Key")
        if not isinstance(key, dict) or not key:
            raise _validation("Key is required")
        item = _unwrap(self.node.get_item(name, key))
        return {"Item": item} if item is not None else {}

    def op_PutItem(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        name = self._table_name(req)
        item = req.get("Item")
        if not isinstance(item, dict) or not item:
            raise _validation("Item is required")
        _validate_expressions(req)
        names, values = _expr_args(req)
        change = _unwrap(self.node.submit(self.node.state.put_item, name, item,
                                          req.get("ConditionExpression"), names, values))
        return _returned(req, change, ("NONE", "ALL_OLD"))

    def op_UpdateItem(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        name = self._table_name(req)
        key = req.get("Key")
        if not isinstance(key, dict) or not key:
            raise _validation("Key is required")
        if req.get("AttributeUpdates"):
            raise _validation("AttributeUpdates is not supported by leasekv; use UpdateExpression")
        _validate_expressions(req, update=True)
        names, values = _expr_args(req)
        change = _unwrap(self.node.submit(
            self.node.state.update_item, name, key, req.get("UpdateExpression"),
            req.get("ConditionExpression"), names, values))
        allowed = ("NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW")
        return _returned(req, change, allowed)

    def op_TransactWriteItems(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        items = req.get("TransactItems")
        if not isinstance(items, list) or not 1 <= len(items) <= 100:
            raise _validation("TransactItems must be a list of 1 to 100 items")
        for entry in items:
            if not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in (
                    "ConditionCheck", "Put", "Update", "Delete"):
                raise _validation("each TransactItem is one of ConditionCheck, Put, Update, "
                                  "Delete")
            body = next(iter(entry.values()))
            if not isinstance(body, dict):
                raise _validation("a TransactItem's body must be an object")
            self._table_name(body)
            _validate_expressions(body, update="Update" in entry)
            if "ConditionCheck" in entry and not body.get("ConditionExpression"):
                raise _validation("a ConditionCheck needs its ConditionExpression")
        result = self.node.submit(self.node.state.transact_write, items)
        if result[0] == "cancel":
            codes = ", ".join(r["Code"] for r in result[1])
            raise DynamoError("TransactionCanceledException",
                              f"Transaction cancelled, please refer cancellation reasons "
                              f"for specific reasons [{codes}]",
                              extra={"CancellationReasons": result[1]})
        _unwrap(result)
        return {}

    def op_TransactGetItems(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        gets = req.get("TransactItems")
        if not isinstance(gets, list) or not 1 <= len(gets) <= 100:
            raise _validation("TransactItems must be a list of 1 to 100 items")
        for entry in gets:
            body = entry.get("Get") if isinstance(entry, dict) else None
            if not isinstance(body, dict) or not isinstance(body.get("Key"), dict):
                raise _validation("each TransactItem of TransactGetItems is a Get with a Key")
            self._table_name(body)
        return {"Responses": _unwrap(self.node.transact_get(gets))}

    def op_DeleteItem(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        name = self._table_name(req)
        key = req.get("Key")
        if not isinstance(key, dict) or not key:
            raise _validation("Key is required")
        _validate_expressions(req)
        names, values = _expr_args(req)
        change = _unwrap(self.node.submit(self.node.state.delete_item, name, key,
                                          req.get("ConditionExpression"), names, values))
        return _returned(req, change, ("NONE", "ALL_OLD"))


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug(format, *args)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", "leasekv")
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            req = json.loads(raw or b"{}")
            if not isinstance(req, dict):
                raise ValueError
        except ValueError:
            self._send(400, {"__type": PREFIX + "SerializationException",
                             "message": "request body is not a JSON object"})
            return
        try:
            status, body = self.server.frontend.handle(self.headers.get("X-Amz-Target", ""), req)
        except Exception as e:  # keep serving; report as DynamoDB's internal error
            log.exception("DynamoDB request failed")
            status, body = 500, {"__type": PREFIX + "InternalServerError",
                                 "message": f"UNKNOWN internal error: {type(e).__name__}"}
        self._send(status, body)

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, {"service": "leasekv-dynamodb"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], frontend: DynamoFrontend) -> None:
        self.frontend = frontend
        super().__init__(addr, _Handler)


def serve_dynamo(node: LeaseKV, host: str, port: int) -> ThreadingHTTPServer:
    return _Server((host, port), DynamoFrontend(node))
