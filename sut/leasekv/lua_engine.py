"""Runs Redis Lua scripts in a real Lua runtime (lupa), bound to the replicated key space.

A script runs inside the state machine's apply step, so it is atomic and every replica
runs it against the same state in the same log position. Conversions follow Redis:
Lua number -> integer, string -> bulk, true -> 1, false/nil -> nil, {ok=..} -> status,
{err=..} -> error, table -> array (up to the first nil).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import lupa
from lupa import LuaRuntime

from sut.leasekv.replies import ReplyError, Status

Reply = Any  # bytes | int | None | list | Status | ReplyError


def sha1hex(script: bytes) -> str:
    return hashlib.sha1(script).hexdigest()


class ScriptError(Exception):
    """redis.call failed inside a script; becomes a Lua error (and an error reply)."""


class LuaEngine:
    def __init__(self, call: Callable[[list[bytes]], Reply]) -> None:
        """`call` runs one Redis command (name + args as bytes) against the key space."""
        self._call = call
        self._lua = LuaRuntime(encoding=None, unpack_returned_tuples=True)
        self._compiled: dict[str, Any] = {}
        g = self._lua.globals()
        redis = self._lua.table()
        redis.call = self._redis_call
        redis.pcall = self._redis_pcall
        redis.status_reply = lambda s: self._lua.table_from({b"ok": s})
        redis.error_reply = lambda s: self._lua.table_from({b"err": s})
        redis.sha1hex = lambda s: sha1hex(bytes(s)).encode()
        g.redis = redis
        # Scripts must be deterministic on every replica: no clocks, no randomness, no I/O.
        for name in ("os", "io", "math.random", "dofile", "loadfile", "require"):
            if "." in name:
                mod, attr = name.split(".")
                g[mod.encode()][attr.encode()] = None
            else:
                g[name.encode()] = None

    def compile(self, script: bytes) -> ReplyError | None:
        """Compiles (and caches) a script; an error reply if it does not parse."""
        sha = sha1hex(script)
        if sha in self._compiled:
            return None
        loaded = self._lua.globals().load(script, b"=user_script")
        if isinstance(loaded, tuple):
            fn, err = (loaded + (None,))[:2]
            if fn is None:
                msg = err.decode(errors="replace") if isinstance(err, bytes) else str(err)
                return ReplyError(f"ERR Error compiling script (new function): {msg}")
        else:
            fn = loaded
        self._compiled[sha] = fn
        return None

    def run(self, script: bytes, keys: list[bytes], args: list[bytes]) -> Reply:
        err = self.compile(script)
        if err is not None:
            return err
        g = self._lua.globals()
        g.KEYS = self._lua.table_from(keys)
        g.ARGV = self._lua.table_from(args)
        try:
            result = self._compiled[sha1hex(script)]()
        except (lupa.LuaError, ScriptError) as e:  # lupa re-raises a redis.call error as is
            return ReplyError(f"ERR Error running script: {_lua_error_text(e)}")
        if isinstance(result, tuple):  # several return values: Redis keeps the first
            result = result[0] if result else None
        return self._to_reply(result)

    # --- Lua -> Python ------------------------------------------------------------------
    def _to_reply(self, v: Any) -> Reply:
        if v is None or v is False:
            return None
        if v is True:
            return 1
        if isinstance(v, int | float):
            return int(v)
        if isinstance(v, bytes):
            return v
        if isinstance(v, str):
            return v.encode()
        if lupa.lua_type(v) == "table":
            if v[b"err"] is not None:
                return ReplyError(_text(v[b"err"]))
            if v[b"ok"] is not None:
                return Status(_text(v[b"ok"]))
            out = []
            i = 1
            while v[i] is not None:
                out.append(self._to_reply(v[i]))
                i += 1
            return out
        return None

    # --- Python -> Lua (results of redis.call) ------------------------------------------
    def _to_lua(self, r: Reply) -> Any:
        if r is None:
            return False
        if isinstance(r, ReplyError):
            return self._lua.table_from({b"err": r.encode()})
        if isinstance(r, Status):
            return self._lua.table_from({b"ok": r.encode()})
        if isinstance(r, list):
            return self._lua.table_from([self._to_lua(x) for x in r])
        return r

    def _args(self, raw: tuple) -> list[bytes]:
        out = []
        for a in raw:
            if isinstance(a, bytes):
                out.append(a)
            elif isinstance(a, int | float):
                out.append(str(int(a) if float(a).is_integer() else a).encode())
            elif isinstance(a, str):
                out.append(a.encode())
            else:
                raise ScriptError("Lua redis lib command arguments must be strings or integers")
        if not out:
            raise ScriptError("Please specify at least one argument for this redis lib call")
        return out

    def _redis_call(self, *raw: Any) -> Any:
        r = self._call(self._args(raw))
        if isinstance(r, ReplyError):
            raise ScriptError(str(r))
        return self._to_lua(r)

    def _redis_pcall(self, *raw: Any) -> Any:
        try:
            return self._to_lua(self._call(self._args(raw)))
        except ScriptError as e:
            return self._to_lua(ReplyError(str(e)))


def _text(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def _lua_error_text(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__
