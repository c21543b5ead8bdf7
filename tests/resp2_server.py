"""A tiny real RESP2 server for client tests: it speaks only RESP2 and refuses what some
Redis-compatible stores refuse (elastickv among them, in its words for SCRIPT): HELLO,
SCRIPT, CLIENT, and EVALSHA on a node that is not the leader. GET, SET and EVAL (the
script run in a real Lua runtime) work. Every command it receives is kept, in order, in
`commands`."""

from __future__ import annotations

import socketserver
import threading
from typing import Any

from lupa import LuaRuntime

HELLO_REPLIES = {
    "noproto": b"-NOPROTO unsupported protocol version\r\n",
    "unknown": b"-ERR unknown command 'HELLO', with args beginning with: '3'\r\n",
    "garbage": b"+OK\r\n",  # not the map HELLO answers with: a reply the client did not expect
}


def encode(reply: Any) -> bytes:
    if reply is None:
        return b"$-1\r\n"
    if isinstance(reply, bool):
        return b":1\r\n" if reply else b"$-1\r\n"  # Lua true is 1, false is nil
    if isinstance(reply, (int, float)):  # Lua numbers may come back as floats
        return b":%d\r\n" % int(reply)
    if isinstance(reply, str):
        reply = reply.encode()
    return b"$%d\r\n%s\r\n" % (len(reply), reply)


class _Handler(socketserver.StreamRequestHandler):
    server: Resp2Server

    def read_command(self) -> list[bytes] | None:
        line = self.rfile.readline()
        if not line:
            return None
        assert line.startswith(b"*"), line  # clients send arrays of bulk strings
        args = []
        for _ in range(int(line[1:])):
            size = int(self.rfile.readline()[1:])
            args.append(self.rfile.read(size + 2)[:-2])
        return args

    def handle(self) -> None:
        while (args := self.read_command()) is not None:
            name = args[0].decode().upper()
            self.server.commands.append(name)
            self.wfile.write(self.server.reply(name, args[1:]))


class Resp2Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, hello: str = "noproto") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hello = hello
        self.commands: list[str] = []
        self.data: dict[bytes, bytes] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def __enter__(self) -> Resp2Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    def reply(self, name: str, args: list[bytes]) -> bytes:
        if name == "HELLO":
            return HELLO_REPLIES[self.hello]
        if name == "EVALSHA":
            return b"-NOTLEADER leader is n2\r\n"
        if name == "SCRIPT":  # elastickv's words for a command it does not have
            return b"-ERR unsupported command 'SCRIPT'\r\n"
        with self._lock:
            if name == "GET":
                return encode(self.data.get(args[0]))
            if name == "SET":
                self.data[args[0]] = args[1]
                return b"+OK\r\n"
            if name == "EVAL":
                return encode(self.eval(args[0], args[2:3], args[3:]))
        return b"-ERR unknown command '%s'\r\n" % name.encode()

    def eval(self, script: bytes, keys: list[bytes], argv: list[bytes]) -> Any:
        lua = LuaRuntime(encoding=None, unpack_returned_tuples=True)

        def call(cmd: bytes, key: bytes, *rest: bytes) -> Any:
            if cmd.upper() == b"GET":
                return self.data.get(key, False)  # Redis hands Lua false for a missing key
            self.data[key] = rest[0]
            return b"OK"

        g = lua.globals()
        g.redis = lua.table_from({b"call": call})
        g.KEYS = lua.table_from(keys)
        g.ARGV = lua.table_from(argv)
        return lua.execute(script)
