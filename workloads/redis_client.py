"""A Redis client whose every outcome is classified, shared by the Redis workloads.

redis-py's Connection is used directly, with retries off: a library retry would re-send a
write whose first attempt may have taken effect, hiding an unknown outcome. The split is:
- cannot connect -> fail (nothing was sent);
- an error reply (READONLY, NOREPLICAS, LOADING, ...) -> fail (Redis refused it);
- timeout or connection lost after sending -> info for anything that writes (it may have
  happened), fail for reads (a read changes nothing, so it may be dropped).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Protocol

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from harness.profiles.base import Endpoint
from workloads.base import FAIL, INFO, OK, Client, Completion, Op

CONNECT_TIMEOUT_S = 0.5
REPLY_TIMEOUT_S = 1.0


class Connection(Protocol):
    def connect(self) -> None: ...
    def send_command(self, *args: Any) -> None: ...
    def read_response(self) -> Any: ...
    def disconnect(self) -> None: ...


def real_connection(endpoint: Endpoint) -> Connection:
    return redis.Connection(
        host=endpoint.host,
        port=endpoint.port,
        socket_timeout=REPLY_TIMEOUT_S,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
    )


class RedisClient(Client):
    """Base for Redis workload clients: subclasses turn an Op into commands via `call`."""

    def __init__(self, connect: Callable[[Endpoint], Connection] = real_connection) -> None:
        self._factory = connect
        self._conn: Connection | None = None
        self._connected = False
        self.node: str | None = None

    def open(self, node: str, endpoint: Endpoint) -> None:
        self.node = node
        self._conn = self._factory(endpoint)
        self._connected = False

    def close(self) -> None:
        if self._conn is not None:
            # Closing a broken socket must not fail the run.
            with contextlib.suppress(Exception):
                self._conn.disconnect()
        self._connected = False

    def call(self, op: Op, *command: Any, writes: bool) -> tuple[Any, Completion | None]:
        """(reply, None) on success, or (None, the completion that classifies the failure)."""
        assert self._conn is not None, "open() first"
        if not self._connected:
            try:
                self._conn.connect()
                self._connected = True
            except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
                self.close()
                return None, Completion(FAIL, op.value if writes else None, f"connect: {e}")
        try:
            self._conn.send_command(*command)
            return self._conn.read_response(), None
        except redis.ResponseError as e:
            return None, Completion(FAIL, op.value if writes else None, str(e))
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
            self.close()
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
