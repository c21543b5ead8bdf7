"""Reply values shared by the state machine and the Redis front end (RESP2 shapes)."""

from __future__ import annotations


class Status(str):
    """A simple-string reply such as +OK."""


class ReplyError(str):
    """An error reply; the text starts with its code (ERR, NOSCRIPT, ...)."""
