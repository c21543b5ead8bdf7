"""Admin HTTP endpoint: GET /status, GET /health, POST /transfer?to=N.

/status is JSON: role, leader (node id and addresses), term, commit index, lease
remaining (ms), read-path counters. /health is 200 once the node knows a leader (503
before): the compose healthcheck. /transfer hands leadership over (the node must be
the leader: otherwise 421 with the leader's admin address); 409 if the target is not
caught up.
"""

from __future__ import annotations

import contextlib
import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from sut.leasekv.node import LeaseKV, NotLeader, TransferFailed

log = logging.getLogger("leasekv.admin")


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug(format, *args)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        # The prober (e.g. a healthcheck that timed out) may have gone away.
        with contextlib.suppress(BrokenPipeError):
            self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        node = self.server.node
        path = urlparse(self.path).path
        if path == "/status":
            self._send(200, node.status())
        elif path == "/health":
            s = node.status()
            self._send(200 if s["leader"] is not None else 503, {"leader": s["leader"]})
        else:
            self._send(404, {"error": f"no such endpoint {path}"})

    def do_POST(self) -> None:  # noqa: N802
        node = self.server.node
        url = urlparse(self.path)
        if url.path != "/transfer":
            self._send(404, {"error": f"no such endpoint {url.path}"})
            return
        to_raw = parse_qs(url.query).get("to", [None])[0]
        try:
            to = int(to_raw) if to_raw else None
        except ValueError:
            self._send(400, {"error": f"to={to_raw!r} is not a node id"})
            return
        try:
            node.transfer(to)
        except NotLeader as e:
            self._send(421, {"error": "not the leader",
                             "leader": e.leader.node_id if e.leader else None,
                             "leader_admin": e.leader.admin_addr if e.leader else None})
            return
        except TransferFailed as e:
            self._send(409, {"error": str(e)})
            return
        self._send(200, {"ok": True, "from": node.cfg.node_id, "to": to})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], node: LeaseKV) -> None:
        self.node = node
        super().__init__(addr, _Handler)


def serve_admin(node: LeaseKV, host: str, port: int) -> ThreadingHTTPServer:
    return _Server((host, port), node)
