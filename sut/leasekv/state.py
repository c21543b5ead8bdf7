"""The replicated state machine: a key -> value map, lists, and DynamoDB tables.

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

# A DynamoDB result: ("ok", payload) or ("err", short exception name, message); a
# cancelled TransactWriteItems is ("cancel", its CancellationReasons).
DynamoResult = tuple

# Redis commands and their arity (negative: at least that many words, command included).
ARITY = {b"GET": 2, b"SET": -3, b"DEL": -2, b"EXISTS": -2, b"INCR": 2, b"INCRBY": 3,
         b"RPUSH": -3, b"LRANGE": 4, b"LLEN": 2}
# Those that change nothing: a transaction or script of only these is a read.
READ_COMMANDS = frozenset({b"GET", b"EXISTS", b"LRANGE", b"LLEN"})
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def arity_problem(argv: list[bytes]) -> ReplyError | None:
    """Why argv cannot be run (unknown command, wrong arity), else None."""
    name = argv[0].upper()
    n = ARITY.get(name)
    if n is None:
        return ReplyError(f"ERR unknown command '{argv[0].decode(errors='replace')}'")
    if (n >= 0 and len(argv) != n) or (n < 0 and len(argv) < -n):
        return ReplyError(f"ERR wrong number of arguments for "
                          f"'{name.decode(errors='replace').lower()}' command")
    return None


def _index(raw: bytes) -> int | None:
    try:
        return int(raw)
    except ValueError:
        return None


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
        # A script run that must not write (deciding whether a script only reads): a write
        # command is refused and noted instead of carried out.
        self._read_only = False
        self._wanted_write = False
        super().__init__()
        self.kv: dict[bytes, bytes] = {}
        self.lists: dict[bytes, list[bytes]] = {}
        self.tables: dict[str, dict[str, Any]] = {}

    # --- Redis commands (shared by the protocol and by redis.call in Lua) -----------------
    def _command(self, argv: list[bytes]) -> Any:
        name = argv[0].upper()
        args = argv[1:]
        if self._read_only and name not in READ_COMMANDS:
            self._wanted_write = True
            return ReplyError("ERR a write in a read-only run of the script")
        if name in (b"RPUSH", b"LRANGE", b"LLEN"):
            return self._list_command(name, args)
        if name == b"GET" and len(args) == 1:
            if args[0] in self.lists:
                return ReplyError(WRONGTYPE)
            return self.kv.get(args[0])
        if name == b"SET" and len(args) >= 2:
            flags = {a.upper() for a in args[2:]}
            if flags - {b"NX", b"XX"}:
                return ReplyError("ERR syntax error")
            exists = args[0] in self.kv or args[0] in self.lists
            if (b"NX" in flags and exists) or (b"XX" in flags and not exists):
                return None
            self.lists.pop(args[0], None)  # SET replaces a value of any kind, as in Redis
            self.kv[args[0]] = args[1]
            return Status("OK")
        if name == b"DEL" and args:
            return sum(1 for k in args
                       if (self.kv.pop(k, None), self.lists.pop(k, None)) != (None, None))
        if name == b"EXISTS" and args:
            return sum(1 for k in args if k in self.kv or k in self.lists)
        if name in (b"INCR", b"INCRBY") and args and args[0] in self.lists:
            return ReplyError(WRONGTYPE)
        if name in (b"INCR", b"INCRBY") and len(args) == (1 if name == b"INCR" else 2):
            try:
                n = int(self.kv.get(args[0], b"0")) + (int(args[1]) if len(args) == 2 else 1)
            except ValueError:
                return ReplyError("ERR value is not an integer or out of range")
            self.kv[args[0]] = str(n).encode()
            return n
        return ReplyError(f"ERR unknown command or wrong number of arguments for "
                          f"'{name.decode(errors='replace').lower()}' in leasekv")

    def _list_command(self, name: bytes, args: list[bytes]) -> Any:
        problem = arity_problem([name, *args])
        if problem is not None:
            return problem
        key = args[0]
        if key in self.kv:
            return ReplyError(WRONGTYPE)
        if name == b"RPUSH":
            items = self.lists.setdefault(key, [])
            items.extend(args[1:])
            return len(items)
        items = self.lists.get(key, [])
        if name == b"LLEN":
            return len(items)
        start, stop = _index(args[1]), _index(args[2])
        if start is None or stop is None:
            return ReplyError("ERR value is not an integer or out of range")
        n = len(items)
        start, stop = max(start + n if start < 0 else start, 0), stop + n if stop < 0 else stop
        return list(items[start:stop + 1]) if start <= stop else []

    def run_commands(self, commands: list[list[bytes]]) -> list[Any]:
        """A transaction's commands in order, each reply (an error too) in its place, as
        Redis's EXEC answers; hold the lock."""
        return [self._command(argv) for argv in commands]

    @replicated
    def apply_command(self, argv: list[bytes]) -> Any:
        with self.lock:
            return self._command(argv)

    @replicated
    def apply_exec(self, commands: list[list[bytes]]) -> list[Any]:
        with self.lock:
            return self.run_commands(commands)

    @replicated
    def barrier_commands(self, commands: list[list[bytes]]) -> list[Any]:
        with self.lock:
            return self.run_commands(commands)

    def local_commands(self, commands: list[list[bytes]]) -> list[Any]:
        with self.lock:
            return self.run_commands(commands)

    def eval_read_only(self, script: bytes, keys: list[bytes], args: list[bytes]
                       ) -> tuple[bool, Any]:
        """Runs a script without letting it write: (True, its reply) when it only read,
        (False, None) when it tried to write (nothing was written)."""
        with self.lock:
            self._read_only, self._wanted_write = True, False
            try:
                reply = self.lua.run(script, keys, args)
            finally:
                self._read_only = False
            return (False, None) if self._wanted_write else (True, reply)

    def local_eval(self, script: bytes, keys: list[bytes], args: list[bytes]) -> Any:
        reads_only, reply = self.eval_read_only(script, keys, args)
        return reply if reads_only else ReplyError("ERR the script wants to write")

    @replicated
    def barrier_eval(self, script: bytes, keys: list[bytes], args: list[bytes]) -> Any:
        return self.local_eval(script, keys, args)

    @replicated
    def apply_eval(self, script: bytes, keys: list[bytes], args: list[bytes]) -> Any:
        with self.lock:
            return self.lua.run(script, keys, args)

    @replicated
    def barrier_get(self, key: bytes) -> bytes | ReplyError | None:
        return self.local_get(key)

    @replicated
    def noop(self) -> None:
        return None

    def local_get(self, key: bytes) -> bytes | ReplyError | None:
        with self.lock:
            return ReplyError(WRONGTYPE) if key in self.lists else self.kv.get(key)

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

    def _transact_plan(self, items: list[dict[str, Any]]) -> DynamoResult:
        """What a TransactWriteItems would do: ("ok", [(table, pk, new item or None)]),
        ("cancel", reasons) when a condition does not hold, or an error."""
        plan, reasons, cancelled, seen = [], [], False, set()
        for entry in items:
            (kind, body), = entry.items()
            names = body.get("ExpressionAttributeNames") or {}
            values = body.get("ExpressionAttributeValues") or {}
            key = body.get("Item") if kind == "Put" else body.get("Key")
            if not isinstance(key, dict) or not key:
                return ("err", "ValidationException", f"{kind} needs its Key or Item")
            table = self._table(body.get("TableName", ""))
            if table is None:
                return ("err", "ResourceNotFoundException", "Requested resource not found")
            pk = key_of(self._schema(table), key)
            if pk is None:
                return ("err", "ValidationException",
                        "One of the required keys was not given a value")
            if (body["TableName"], pk) in seen:
                return ("err", "ValidationException", "Transaction request cannot include "
                        "multiple operations on one item")
            seen.add((body["TableName"], pk))
            old = table["items"].get(pk)
            err = self._check(body.get("ConditionExpression"), names, values, old)
            if err and err[1] != "ConditionalCheckFailedException":
                return err
            reasons.append({"Code": "ConditionalCheckFailed", "Message": err[2]} if err
                           else {"Code": "None"})
            cancelled = cancelled or err is not None
            if kind == "Update":
                try:
                    actions = dx.parse_update(body.get("UpdateExpression", ""), names, values)
                    new = dx.apply_update(actions, dict(old or {k: v for k, v in key.items()}))
                except dx.ExpressionError as e:
                    return ("err", "ValidationException", str(e))
                plan.append((table, pk, new))
            elif kind == "Put":
                plan.append((table, pk, body["Item"]))
            elif kind == "Delete":
                plan.append((table, pk, None))
        return ("cancel", reasons) if cancelled else ("ok", plan)

    @replicated
    def transact_write(self, items: list[dict[str, Any]]) -> DynamoResult:
        """TransactWriteItems: every condition holds and every write is applied, or none is."""
        with self.lock:
            result = self._transact_plan(items)
            if result[0] != "ok":
                return result
            for table, pk, new in result[1]:
                if new is None:
                    table["items"].pop(pk, None)
                else:
                    table["items"][pk] = new
            return ("ok", None)

    def _transact_get(self, gets: list[dict[str, Any]]) -> DynamoResult:
        out = []
        for entry in gets:
            body = entry.get("Get") if isinstance(entry, dict) else None
            if not isinstance(body, dict):
                return ("err", "ValidationException", "TransactGetItems takes Get items only")
            result = self._read_item(body.get("TableName", ""), body.get("Key") or {})
            if result[0] == "err":
                return result
            out.append({"Item": result[1]} if result[1] is not None else {})
        return ("ok", out)

    @replicated
    def barrier_transact_get(self, gets: list[dict[str, Any]]) -> DynamoResult:
        with self.lock:
            return self._transact_get(gets)

    def local_transact_get(self, gets: list[dict[str, Any]]) -> DynamoResult:
        with self.lock:
            return self._transact_get(gets)

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
