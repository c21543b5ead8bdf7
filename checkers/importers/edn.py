"""A small EDN reader: enough of the format for Jepsen / Knossos histories.

Vectors and lists become Python lists, maps dicts (vector keys become tuples), sets
frozensets, keywords `Keyword` (a str subclass, so :ok == Keyword("ok") and the map keys
are easy to index), nil/true/false None/True/False, integers int (N suffix allowed),
decimals float. Tagged literals (#inst "...") yield the tagged value; #_ discards the
next form; comments and commas are whitespace. Errors carry the line number.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Any


class Keyword(str):
    __slots__ = ()

    def __repr__(self) -> str:
        return ":" + str(self)


class Symbol(str):
    __slots__ = ()


class EdnError(ValueError):
    def __init__(self, line: int, what: str) -> None:
        super().__init__(f"line {line}: {what}")
        self.line, self.what = line, what


_TOKEN = re.compile(
    r"""
    (?P<ws>[\s,]+|;[^\n]*)
  | (?P<open>\#\{|[\[\(\{])
  | (?P<close>[\]\)\}])
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<discard>\#_)
  | (?P<tag>\#[A-Za-z][^\s,\[\]\(\)\{\}"]*)
  | (?P<char>\\(?:newline|space|tab|return|u[0-9a-fA-F]{4}|.))
  | (?P<atom>[^\s,\[\]\(\)\{\}";]+)
    """,
    re.VERBOSE | re.DOTALL,
)
_INT = re.compile(r"[+-]?\d+N?")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f"}
_CLOSER = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_DISCARD = object()


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.depth = 0
        self.item_lines: list[int] = []  # start line of each item of the outermost collection

    def line(self, pos: int | None = None) -> int:
        return bisect_right(self.newlines, self.pos if pos is None else pos - 1) + 1

    def token(self) -> tuple[str, str, int] | None:
        while self.pos < len(self.text):
            m = _TOKEN.match(self.text, self.pos)
            if m is None:
                bad = self.text[self.pos:self.pos + 20]
                raise EdnError(self.line(), f"unreadable text {bad!r}")
            self.pos = m.end()
            kind = m.lastgroup or ""
            if kind != "ws":
                return kind, m.group(), m.start()
        return None

    def form(self, tok: tuple[str, str, int] | None = None) -> Any:
        """Next form, or _DISCARD-free value; raises at end of input."""
        while True:
            if tok is None:
                tok = self.token()
            if tok is None:
                raise EdnError(self.line(), "unexpected end of input")
            kind, text, start = tok
            if kind == "discard":
                self.form()
                tok = None
                continue
            return self._value(kind, text, start)

    def _value(self, kind: str, text: str, start: int) -> Any:
        if kind == "open":
            return self._collection(text, start)
        if kind == "close":
            raise EdnError(self.line(start + 1), f"unexpected {text!r}")
        if kind == "string":
            return _unescape(text[1:-1], self.line(start + 1))
        if kind == "tag":
            return self.form()
        if kind == "char":
            return text[1:] if len(text) == 2 else {"newline": "\n", "space": " ", "tab": "\t",
                                                    "return": "\r"}.get(text[1:], text[1:])
        return _atom(text, self.line(start + 1))

    def _collection(self, opener: str, start: int) -> Any:
        closer = _CLOSER[opener]
        items: list[Any] = []
        self.depth += 1
        while True:
            tok = self.token()
            if tok is None:
                raise EdnError(self.line(start + 1), f"{opener!r} is never closed")
            if tok[0] == "close":
                if tok[1] != closer:
                    raise EdnError(self.line(tok[2] + 1), f"{tok[1]!r} closes {opener!r}")
                break
            if tok[0] == "discard":
                self.form()
                continue
            if self.depth == 1:
                self.item_lines.append(self.line(tok[2] + 1))
            items.append(self.form(tok))
        self.depth -= 1
        if opener == "{":
            if len(items) % 2:
                raise EdnError(self.line(start + 1), "a map needs an even number of forms")
            return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}
        if opener == "#{":
            return frozenset(_hashable(x) for x in items)
        return items


def _hashable(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_hashable(y) for y in x)
    if isinstance(x, dict):
        return tuple(sorted((str(k), _hashable(v)) for k, v in x.items()))
    return x


def _unescape(body: str, line: int) -> str:
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt == "u" and i + 6 <= len(body):
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            raise EdnError(line, f"bad escape \\{nxt} in a string")
    return "".join(out)


def _atom(text: str, line: int) -> Any:
    if text == "nil":
        return None
    if text == "true":
        return True
    if text == "false":
        return False
    if text.startswith(":"):
        if len(text) == 1:
            raise EdnError(line, "empty keyword")
        return Keyword(text[1:])
    if _INT.fullmatch(text):
        return int(text.rstrip("N"))
    if _FLOAT.fullmatch(text):
        return float(text.rstrip("M"))
    if text[0].isdigit():
        raise EdnError(line, f"bad number {text!r}")
    return Symbol(text)


def loads(text: str) -> Any:
    """The single top-level form of `text` (trailing whitespace/comments allowed)."""
    return loads_with_lines(text)[0]


def loads_with_lines(text: str) -> tuple[Any, list[int]]:
    """The single top-level form and the start line of each of its items."""
    r = _Reader(text)
    value = r.form()
    rest = r.token()
    if rest is not None:
        raise EdnError(r.line(rest[2] + 1), "more than one top-level form")
    return value, r.item_lines

