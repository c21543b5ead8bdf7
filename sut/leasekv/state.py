"""The replicated state machine: a key -> value map and DynamoDB tables.

Every method decorated with @replicated runs on each replica when its log entry is
applied (pysyncobj's tick thread), in log order; reads done as a log entry ("barrier
reads") return the state at exactly that log position, which is what makes the slow
read path linearizable. The lock lets the client threads read the same dicts for the
lease fast path without seeing a half-applied command.
"""

from __future__ import annotations

import threading
from typing import Any

from pysyncobj import SyncObjConsumer, replicated

from sut.leasekv import dynamo_expr as dx
from sut.leasekv.lua_engine import LuaEngine
from sut.leasekv.replies import ReplyError, Status

# A DynamoDB result: ("ok", payload) or ("err", short exception name, message).
DynamoResult = tuple


def key_of(schema: list[list[str]], item: dict[str, Any]) -> tuple | None:
    """The hashable primary key of an item, or None if a key attribute is missing."""
    parts = []
    for name, _kind in schema:
        v = item.get(name)
        if v is None:
            return None
        parts.append(dx.normalize(v))
    return tuple(parts)


class KVState(SyncObjConsumer):
    def __init__(self) -> None:
        # Set before SyncObjConsumer.__init__: these are not part of the replicated state
        # (pysyncobj snapshots every attribute created after it).
        self.lock = threading.RLock()
        self.lua = LuaEngine(self._command)
        super().__init__()
        self.kv: dict[bytes, bytes] = {}
        self.tables: dict[str, dict[str, Any]] = {}

    # --- Redis commands (shared by the protocol and by redis.call in Lua) -----------------
    def _command(self, argv: list[bytes]) -> Any:
        name = argv[0].upper()
        args = argv[1:]
        if name == b"GET" and len(args) == 1:
            return self.kv.get(args[0])
        if name == b"SET" and len(args) >= 2:
            flags = {a.upper() for a in args[2:]}
            if flags - {b"NX", b"XX"}:
                return ReplyError("ERR syntax error")
            exists = args[0] in self.kv
            if (b"NX" in flags and exists) or (b"XX" in flags and not exists):
                return None
            self.kv[args[0]] = args[1]
            return Status("OK")
        if name == b"DEL" and args:
            return sum(1 for k in args if self.kv.pop(k, None) is not None)
        if name == b"EXISTS" and args:
            return sum(1 for k in args if k in self.kv)
        if name in (b"INCR", b"INCRBY") and len(args) == (1 if name == b"INCR" else 2):
            try:
                n = int(self.kv.get(args[0], b"0")) + (int(args[1]) if len(args) == 2 else 1)
            except ValueError:
                return ReplyError("ERR value is not an integer or out of range")
            self.kv[args[0]] = str(n).encode()
            return n
        return ReplyError(f"ERR unknown command or wrong number of arguments for "
                          f"'{name.decode(errors='replace').lower()}' in leasekv")

    @replicated
    def apply_command(self, argv: list[bytes]) -> Any:
        with self.lock:
            return self._command(argv)

    @replicated
    def apply_eval(self, script: bytes, keys: list[bytes], args: list[bytes]) -> Any:
        with self.lock:
            return self.lua.run(script, keys, args)

    @replicated
    def barrier_get(self, key: bytes) -> bytes | None:
        with self.lock:
            return self.kv.get(key)

    @replicated
    def noop(self) -> None:
        return None

    def local_get(self, key: bytes) -> bytes | None:
        with self.lock:
            return self.kv.get(key)

    # --- DynamoDB --------------------------------------------------------------------
    @replicated
    def create_table(self, name: str, description: dict[str, Any]) -> DynamoResult:
        with self.lock:
            if name in self.tables:
                return ("err", "ResourceInUseException", f"Table already exists: {name}")
            self.tables[name] = {"description": description, "items": {}}
            return ("ok", description)

    def describe_table(self, name: str) -> dict[str, Any] | None:
        with self.lock:
            t = self.tables.get(name)
            if t is None:
                return None
            return dict(t["description"], ItemCount=len(t["items"]))

    def table_names(self) -> list[str]:
        with self.lock:
            return sorted(self.tables)

    def _table(self, name: str) -> dict[str, Any] | None:
        return self.tables.get(name)

    def _schema(self, table: dict[str, Any]) -> list[list[str]]:
        return [[k["AttributeName"], k["KeyType"]] for k in table["description"]["KeySchema"]]

    def _locate(self, name: str, key: dict[str, Any]) -> tuple[dict | None, tuple | None, Any]:
        """(table, primary key, error result)."""
        table = self._table(name)
        if table is None:
            return None, None, ("err", "ResourceNotFoundException",
                                "Requested resource not found")
        schema = self._schema(table)
        if set(key) != {n for n, _ in schema}:
            return None, None, ("err", "ValidationException",
                                "The provided key element does not match the schema")
        return table, key_of(schema, key), None

    @staticmethod
    def _check(cond: str | None, names: dict, values: dict, item: dict | None) -> Any:
        if not cond:
            return None
        try:
            ok = dx.evaluate(dx.parse_condition(cond, names, values), item)
        except dx.ExpressionError as e:
            return ("err", "ValidationException", str(e))
        if not ok:
            return ("err", "ConditionalCheckFailedException", "The conditional request failed")
        return None

    def _read_item(self, name: str, key: dict[str, Any]) -> DynamoResult:
        table, pk, err = self._locate(name, key)
        if err:
            return err
        return ("ok", table["items"].get(pk))  # type: ignore[index]

    @replicated
    def barrier_get_item(self, name: str, key: dict[str, Any]) -> DynamoResult:
        with self.lock:
            return self._read_item(name, key)

    def local_get_item(self, name: str, key: dict[str, Any]) -> DynamoResult:
        with self.lock:
            return self._read_item(name, key)

    @replicated
    def put_item(self, name: str, item: dict[str, Any], cond: str | None,
                 names: dict, values: dict) -> DynamoResult:
        with self.lock:
            table = self._table(name)
            if table is None:
                return ("err", "ResourceNotFoundException", "Requested resource not found")
            pk = key_of(self._schema(table), item)
            if pk is None:
                return ("err", "ValidationException",
                        "One of the required keys was not given a value")
            old = table["items"].get(pk)
            err = self._check(cond, names, values, old)
            if err:
                return err
            table["items"][pk] = item
            return ("ok", {"old": old, "new": item})

    @replicated
    def update_item(self, name: str, key: dict[str, Any], update: str | None, cond: str | None,
                    names: dict, values: dict) -> DynamoResult:
        with self.lock:
            table, pk, err = self._locate(name, key)
            if err:
                return err
            old = table["items"].get(pk)  # type: ignore[index]
            err = self._check(cond, names, values, old)
            if err:
                return err
            try:
                actions = dx.parse_update(update, names, values) if update else []
                new = dx.apply_update(actions, dict(old or key))
            except dx.ExpressionError as e:
                return ("err", "ValidationException", str(e))
            if any(new.get(k) != v for k, v in key.items()):
                return ("err", "ValidationException",
                        "Cannot update attribute: it is part of the key")
            table["items"][pk] = new  # type: ignore[index]
            return ("ok", {"old": old, "new": new})

    @replicated
    def delete_item(self, name: str, key: dict[str, Any], cond: str | None,
                    names: dict, values: dict) -> DynamoResult:
        with self.lock:
            table, pk, err = self._locate(name, key)
            if err:
                return err
            old = table["items"].get(pk)  # type: ignore[index]
            err = self._check(cond, names, values, old)
            if err:
                return err
            table["items"].pop(pk, None)  # type: ignore[index]
            return ("ok", {"old": old, "new": None})
