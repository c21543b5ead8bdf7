"""The probes profiles ask a system with, from the control machine: one Redis command on a
fresh RESP2 connection, one HTTP request, the fields of an INFO reply. Short timeouts and
no retries: a slow answer means "not ready", and a probe must never wait out a fault.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

PROBE_TIMEOUT_S = 1.0


def redis_command(host: str, port: int, *args: str, timeout: float = PROBE_TIMEOUT_S) -> Any:
    """One command in RESP2 (no HELLO, so servers without RESP3 answer it too) on a fresh
    connection; the reply, text decoded. An error reply or a lost connection raises
    OSError."""
    conn = redis.Connection(host=host, port=port, protocol=2, socket_timeout=timeout,
                            socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0),
                            decode_responses=True, encoding_errors="replace")
    try:
        conn.connect()
        conn.send_command(*args)
        return conn.read_response()
    except redis.RedisError as e:
        raise OSError(str(e)) from None
    finally:
        conn.disconnect()


def http(method: str, url: str, timeout: float = PROBE_TIMEOUT_S) -> tuple[int, bytes]:
    """(status, body) of one request; an error status is an answer too. OSError when
    nothing answers."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method),
                                    timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def info_fields(text: str) -> dict[str, str]:
    """The `name:value` lines of an INFO reply (sections and empty values left out)."""
    return {k.strip(): v.strip() for k, _, v in
            (line.partition(":") for line in text.splitlines() if not line.startswith("#"))
            if v.strip()}
