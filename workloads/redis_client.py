"""A Redis client whose every outcome is classified, shared by the Redis workloads.

redis-py's Connection is used directly, with retries off: a library retry would re-send a
write whose first attempt may have taken effect, hiding an unknown outcome. The split is:
- cannot connect, or any error or unexpected reply while connecting (the handshake) -> fail:
  nothing of the operation was sent;
- an error reply (READONLY, NOREPLICAS, LOADING, ...) -> fail (Redis refused it);
- timeout or connection lost after sending -> info for anything that writes (it may have
  happened), fail for reads (a read changes nothing, so it may be dropped).

Protocol: the system's `redis_protocol` (2 or 3) when it names one; else RESP3 (redis-py's
HELLO 3), and a node that refuses it (NOPROTO, or HELLO an unknown command) is spoken to in
RESP2 from then on, by every client of the workload (RespVersions).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, Protocol

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import FAIL, INFO, OK, Client, Completion, Op

CONNECT_TIMEOUT_S = 0.5
REPLY_TIMEOUT_S = 1.0


class Connection(Protocol):
    def connect(self) -> None: ...
    def send_command(self, *args: Any) -> None: ...
    def read_response(self) -> Any: ...
    def disconnect(self) -> None: ...


# How a node that cannot speak RESP3 answers HELLO 3 (redis-py drops the leading "ERR "
# and says "Invalid RESP version" when HELLO's answer names another version).
_REFUSALS = ("NOPROTO", "unknown command", "unsupported command", "Invalid RESP version")


class RespVersions:
    """The RESP version to speak to each node, shared by a workload's clients (threads):
    `fixed` when the system names one, else 3 until the node refuses it, then 2."""

    def __init__(self, fixed: int | None = None) -> None:
        if fixed not in (None, 2, 3):
            raise ValueError(f"redis_protocol must be 2, 3 or None, not {fixed!r}")
        self.fixed = fixed
        self._resp2: set[str] = set()
        self._lock = threading.Lock()

    def version(self, node: str | None) -> int:
        if self.fixed is not None:
            return self.fixed
        with self._lock:
            return 2 if node in self._resp2 else 3

    def refused(self, node: str | None, version: int, error: redis.RedisError) -> bool:
        """True (and RESP2 from now on for node) when `error`, the reply to connecting with
        `version`, says the node does not speak RESP3 and the system did not insist on it."""
        text = str(error)
        if version != 3 or self.fixed is not None or node is None:
            return False
        if not any(text.upper().startswith(r.upper()) for r in _REFUSALS):
            return False
        with self._lock:
            self._resp2.add(node)
        return True


def real_connection(endpoint: Endpoint, protocol: int) -> Connection:
    return redis.Connection(
        host=endpoint.host,
        port=endpoint.port,
        protocol=protocol,
        socket_timeout=REPLY_TIMEOUT_S,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
    )


class RedisClient(Client):
    """Base for Redis workload clients: subclasses turn an Op into commands via `call`."""

    def __init__(
        self,
        connect: Callable[[Endpoint, int], Connection] = real_connection,
        resp: RespVersions | None = None,
    ) -> None:
        self._factory = connect
        self.resp = resp or RespVersions()
        self._endpoint: Endpoint | None = None
        self._conn: Connection | None = None
        self._connected = False
        self.node: str | None = None
        self.protocol = 3  # the version this client's connection speaks

    def open(self, node: str, endpoint: Endpoint) -> None:
        self.node, self._endpoint = node, endpoint
        self._new_connection()

    def open_through(self, connect: Callable[[int], Connection]) -> None:
        """Prepare to talk through the connections `connect(protocol)` makes, which choose
        their node themselves (a Sentinel client's ask the Sentinels when they connect)."""
        self.node, self._endpoint = None, None
        self._factory = lambda _endpoint, protocol: connect(protocol)
        self._new_connection()

    def _new_connection(self) -> None:
        self.protocol = self.resp.version(self.node)
        self._conn = self._factory(self._endpoint, self.protocol)  # type: ignore[arg-type]
        self._connected = False

    def connect(self) -> str | None:
        """Connects (if not connected yet): None when connected, else why not. Never raises:
        a refusal of RESP3 reconnects in RESP2; any other error reply or a reply the
        handshake did not expect is a reason, like a refused connection."""
        assert self._conn is not None, "open() first"
        if self._connected:
            return None
        try:
            self._conn.connect()
        except (redis.ResponseError, redis.ConnectionError) as e:
            self.close()
            if self.resp.refused(self.node, self.protocol, e):
                self._new_connection()  # RESP2 now: refused() remembered it
                return self.connect()
            return f"connect: {e}"
        except (redis.TimeoutError, OSError) as e:
            self.close()
            return f"connect: {e}"
        except Exception as e:  # noqa: BLE001 - e.g. HELLO answered with something else
            self.close()
            return f"connect: unexpected reply while connecting: {e!r}"
        self._connected = True
        return None

    def close(self) -> None:
        if self._conn is not None:
            # Closing a broken socket must not fail the run.
            with contextlib.suppress(Exception):
                self._conn.disconnect()
        self._connected = False

    def set_value(self, op: Op) -> Completion:
        """A write as SET (the register workloads'): ok on OK, any other reply a fail."""
        reply, failed = self.call(op, "SET", op.key, str(op.value), writes=True)
        if failed:
            return failed
        if reply not in (b"OK", "OK", True):
            return Completion(FAIL, op.value, f"unexpected reply {reply!r}")
        return ok(op.value)

    def call(self, op: Op, *command: Any, writes: bool,
             unsure: Callable[[redis.ResponseError], bool] | None = None
             ) -> tuple[Any, Completion | None]:
        """(reply, None) on success, or (None, the completion that classifies the failure).
        An error reply is a fail, unless `unsure` says a write's error reply leaves its
        outcome unknown (info)."""
        assert self._conn is not None, "open() first"
        why = self.connect()
        if why is not None:
            return None, Completion(FAIL, op.value if writes else None, why)
        try:
            self._conn.send_command(*command)
            return self._conn.read_response(), None
        except redis.ResponseError as e:
            if writes and unsure is not None and unsure(e):
                return None, Completion(INFO, op.value, f"unknown outcome: {e}")
            return None, Completion(FAIL, op.value if writes else None, str(e))
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
            self.close()
            if isinstance(e.__context__, redis.ReadOnlyError):
                # redis-py's Sentinel connection turns READONLY (a refusal: nothing was
                # written) into a connection error so that it asks the Sentinels again.
                return None, Completion(FAIL, op.value if writes else None,
                                        f"{e.__context__} ({e})")
            kind = "timeout" if isinstance(e, redis.TimeoutError) else "connection lost"
            if writes:
                return None, Completion(INFO, op.value, f"{kind}: {e}")
            return None, Completion(FAIL, None, f"{kind}: {e}")
        except Exception as e:  # noqa: BLE001 - anything else: we cannot know what happened
            self.close()
            return None, Completion(INFO if writes else FAIL, op.value if writes else None, repr(e))


def decode_value(raw: Any) -> Any:
    """What the register workloads store is an integer; anything else is reported verbatim."""
    if raw is None:
        return None
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    try:
        return int(text)
    except ValueError:
        return text


def ok(value: Any) -> Completion:
    return Completion(OK, value)
