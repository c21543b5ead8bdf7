"""transfer-isolate's admin call (bash /dev/tcp) against a loopback HTTP server, and its check."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.errors import BadArguments
from harness.profiles import PROFILES
from nemesis.spec import parse_spec
from nemesis.transfer_isolate import TRANSFER, TransferIsolate


def _server(code: int, seen: list[str]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.path)
            body = json.dumps({"error": "the target is not caught up"} if code != 200
                              else {"ok": True}).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture
def admin(request: pytest.FixtureRequest) -> Iterator[tuple[int, list[str]]]:
    seen: list[str] = []
    srv = _server(request.param, seen)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv.server_address[1], seen
    finally:
        srv.shutdown()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("admin", [200], indirect=True)
def test_transfer_call_succeeds_on_200(admin: tuple[int, list[str]]) -> None:
    port, seen = admin
    done = subprocess.run(["sh", "-ec", TRANSFER.format(port=port) + "\necho cut"],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cut"  # the rules that follow do run
    assert seen == ["/transfer"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("admin", [409], indirect=True)
def test_refused_transfer_stops_before_the_cut(admin: tuple[int, list[str]]) -> None:
    port, _ = admin
    done = subprocess.run(["sh", "-ec", TRANSFER.format(port=port) + "\necho cut"],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode != 0
    assert "cut" not in done.stdout
    assert "refused to transfer" in done.stderr and "409" in done.stderr


def test_only_leasekv_can_be_asked() -> None:
    spec = parse_spec("transfer-isolate:d=1.5")
    TransferIsolate.check(PROFILES["leasekv"], spec)
    others = [p for name, p in PROFILES.items() if name != "leasekv"]
    assert others
    for profile in others:
        with pytest.raises(BadArguments):
            TransferIsolate.check(profile, spec)
