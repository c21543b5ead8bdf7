"""The Dynamo workloads without a cluster: the real boto3 client against a scripted loopback
HTTP server (one attempt per op, each failure mode's completion), request shapes, setup."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import FAIL, INFO, OK, Op
from leaseline.workloads.dynamo_cas import DynamoCasClient
from leaseline.workloads.dynamo_client import CONFIG, TABLE, create_table
from leaseline.workloads.dynamo_register import DynamoRegisterClient

PREFIX = "com.amazonaws.dynamodb.v20120810#"


class Script:
    """What the loopback server does with each request: a list of actions, in order."""

    def __init__(self) -> None:
        self.actions: list[tuple[str, Any]] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        script = self.server.script
        script.requests.append((self.headers.get("X-Amz-Target", "").split(".")[-1], body))
        kind, arg = script.actions.pop(0) if script.actions else ("reply", (200, {}))
        if kind == "close":  # the request arrived; the connection dies without an answer
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if kind == "cut":  # the node dies while answering: headers, part of the body
            data = json.dumps(arg[1]).encode()
            self.send_response(arg[0])
            self.send_header("Content-Type", "application/x-amz-json-1.0")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:arg[2]])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if kind == "sleep":
            time.sleep(arg)
            arg = (200, {})
        content_type = "application/x-amz-json-1.0"
        if kind == "raw":  # a body that is not DynamoDB's JSON (a proxy's error page, ...)
            status, data, content_type = arg
        else:
            status, payload = arg
            data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = Script()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    t = threading.Thread(target=s.serve_forever, daemon=True)
    t.start()
    yield s
    s.shutdown()
    s.server_close()


def err(name: str, message: str = "", status: int = 400) -> tuple[str, Any]:
    return ("reply", (status, {"__type": PREFIX + name, "message": message}))


def cas_client(s: _Server) -> DynamoCasClient:
    c = DynamoCasClient()
    c.open("lk1", Endpoint("127.0.0.1", s.server_address[1]))
    return c


def test_requests_and_ok_outcomes(server: _Server) -> None:
    server.script.actions = [
        ("reply", (200, {})),  # put
        ("reply", (200, {"Item": {"k": {"S": "c0"}, "v": {"N": "4"}}})),
        ("reply", (200, {})),  # get of an absent item
        ("reply", (200, {})),  # cas
        ("reply", (200, {})),  # cas from absent
    ]
    c = cas_client(server)
    assert c.invoke(Op("write", "c0", 4)).type == OK
    assert (c.invoke(Op("read", "c0")).value) == 4
    assert c.invoke(Op("read", "c1")).value is None
    assert c.invoke(Op("cas", "c0", [4, 5])).type == OK
    assert c.invoke(Op("cas", "c1", [None, 1])).type == OK
    reqs = server.script.requests
    assert [r[0] for r in reqs] == ["PutItem", "GetItem", "GetItem", "UpdateItem", "UpdateItem"]
    assert reqs[0][1]["Item"] == {"k": {"S": "c0"}, "v": {"N": "4"}}
    assert reqs[1][1]["ConsistentRead"] is True and reqs[1][1]["TableName"] == TABLE
    cas = reqs[3][1]
    assert cas["ConditionExpression"] == "#v = :expected"
    assert cas["ExpressionAttributeValues"] == {":new": {"N": "5"}, ":expected": {"N": "4"}}
    assert cas["UpdateExpression"] == "SET #v = :new"
    assert reqs[4][1]["ConditionExpression"] == "attribute_not_exists(#v)"


def test_definite_errors_are_fail_with_the_redirect(server: _Server) -> None:
    server.script.actions = [
        err("ConditionalCheckFailedException", "The conditional request failed"),
        err("NotLeaderException", "MOVED 0 lk2:8000"),
        err("NotAppliedException", "not applied: term changed"),
    ]
    c = cas_client(server)
    mismatch = c.invoke(Op("cas", "c0", [1, 2]))
    assert (mismatch.type, mismatch.value) == (FAIL, [1, 2])
    assert "ConditionalCheckFailed" in (mismatch.error or "")
    moved = c.invoke(Op("write", "c0", 3))
    assert moved.type == FAIL and "MOVED 0 lk2:8000" in (moved.error or "")
    assert c.invoke(Op("write", "c0", 4)).type == FAIL
    assert len(server.script.requests) == 3  # one attempt each


def test_500_is_one_attempt_and_unknown_for_writes(server: _Server) -> None:
    unknown = err("InternalServerError", "UNKNOWN commit timed out", 500)
    server.script.actions = [unknown, unknown, unknown]
    c = cas_client(server)
    assert c.invoke(Op("cas", "c0", [1, 2])).type == INFO
    assert len(server.script.requests) == 1  # botocore did not retry the 500
    assert c.invoke(Op("write", "c0", 3)).type == INFO
    read = c.invoke(Op("read", "c0"))
    assert (read.type, read.value) == (FAIL, None)  # a read changes nothing: dropped
    assert len(server.script.requests) == 3
    assert CONFIG.retries["total_max_attempts"] == 1


def test_500_and_503_without_a_redirect_are_classified(server: _Server) -> None:
    """What elastickv answers when the leader is unreachable, and bodies that are not
    DynamoDB's JSON: each a completion after one attempt, never an exception."""
    replies = [
        err("ServiceUnavailable", "service unavailable", 503),
        ("reply", (500, {"message": "raft: leadership lost"})),  # no __type
        ("raw", (503, b"<html>Service Unavailable</html>", "text/html")),
        ("raw", (500, b"", "text/plain")),
    ]
    c = cas_client(server)
    for action in replies:
        server.script.actions = [action, action]
        write = c.invoke(Op("write", "c0", 1))
        assert (write.type, write.value) == (INFO, 1), (action, write)
        assert (write.error or "").startswith("unknown outcome"), write.error
        read = c.invoke(Op("read", "c0"))
        assert (read.type, read.value) == (FAIL, None), (action, read)
    assert len(server.script.requests) == 2 * len(replies)  # one attempt each


def test_connection_closed_after_sending_is_info(server: _Server) -> None:
    server.script.actions = [("close", None), ("close", None)]
    c = cas_client(server)
    done = c.invoke(Op("cas", "c0", [1, 2]))
    assert done.type == INFO, done.error
    assert len(server.script.requests) == 1
    assert c.invoke(Op("read", "c0")).type == FAIL


def test_a_reply_cut_short_is_not_an_answer(server: _Server) -> None:
    # botocore does not hold a body to its Content-Length, and parses an empty one as {}:
    # a GetItem reply cut off by the node's death read as "no item" (a stale read that never
    # happened), a PutItem's as acknowledged
    item = {"Item": {"k": {"S": "c0"}, "v": {"N": "4"}}}
    server.script.actions = [("cut", (200, item, 0)), ("cut", (200, item, 10)),
                             ("cut", (200, {}, 1)), ("reply", (200, item))]
    c = cas_client(server)
    for _ in range(2):
        read = c.invoke(Op("read", "c0"))
        assert (read.type, read.value) == (FAIL, None), read
        assert "cut short" in (read.error or ""), read.error
    write = c.invoke(Op("write", "c0", 5))
    assert write.type == INFO and "cut short" in (write.error or ""), write
    whole = c.invoke(Op("read", "c0"))
    assert (whole.type, whole.value) == (OK, 4), whole  # a whole reply still reads


def test_read_timeout_is_info_for_a_write(server: _Server) -> None:
    server.script.actions = [("sleep", CONFIG.read_timeout + 0.5)]
    c = cas_client(server)
    done = c.invoke(Op("write", "c0", 1))
    assert done.type == INFO and "timeout" in (done.error or "")


def test_refused_or_missing_endpoint_is_fail() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens on port now
    c = DynamoRegisterClient()
    c.open("lk1", Endpoint("127.0.0.1", port))
    done = c.invoke(Op("write", "r0", 1))
    assert done.type == FAIL and "connect" in (done.error or "")
    c.open("lk1", Endpoint("", 8000))  # a killed container has no address
    assert c.invoke(Op("write", "r0", 2)).type == FAIL


class _Profile:
    nodes = ("lk1", "lk2")

    def __init__(self, port: int) -> None:
        self.port = port

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return Endpoint("127.0.0.1", self.port)


def test_create_table_follows_not_leader_and_accepts_existing(server: _Server) -> None:
    server.script.actions = [err("NotLeaderException", "MOVED 0 lk2:8000"),
                             ("reply", (200, {"TableDescription": {}}))]
    create_table(_Profile(server.server_address[1]), "lk1")  # type: ignore[arg-type]
    assert [r[0] for r in server.script.requests] == ["CreateTable", "CreateTable"]
    server.script.actions = [err("ResourceInUseException", "Table already exists")]
    create_table(_Profile(server.server_address[1]), "lk1")  # type: ignore[arg-type]


def test_create_table_gives_up_with_one_sentence(server: _Server) -> None:
    server.script.actions = [err("NotLeaderException", "no leader is known")] * 50
    with pytest.raises(EnvironmentProblem, match="could not create the DynamoDB table"):
        create_table(_Profile(server.server_address[1]), "lk1",  # type: ignore[arg-type]
                     timeout_s=0.5)
