"""The lease client service's wire, for its stand-ins: JSON lines over TCP on loopback, a
thread per connection, each request answered under one lock by `answer`."""

from __future__ import annotations

import json
import socketserver
import threading
from typing import Any


class JsonLinesService(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def answer(self, req: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


class _Handler(socketserver.StreamRequestHandler):
    server: JsonLinesService

    def handle(self) -> None:
        for line in self.rfile:
            req = json.loads(line)
            with self.server.lock:
                reply = self.server.answer(req)
            self.wfile.write((json.dumps(reply) + "\n").encode())
