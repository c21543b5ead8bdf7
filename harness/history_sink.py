"""The history's writer process: turns the harness's records into JSON lines on disk.

HistoryWriter (harness/history.py) sends batches of record tuples down a pipe, each batch a
little-endian u32 length and a marshal blob (a record marshal cannot carry arrives already
formatted, as its line). This process formats them (the costly part, now off the harness's
GIL), appends whole lines to the history and fsyncs every FSYNC_INTERVAL_S and at the end.
It ends when the pipe does: at close(), or when the harness dies, after writing everything
the harness had handed over, so a SIGKILLed harness loses only what it had not yet sent.
A write error is printed as `errno strerror` on stderr, exit status 1.

Started as a script (`python -S history_sink.py PATH`), so stdlib only.
"""

from __future__ import annotations

import marshal
import os
import signal
import struct
import sys
import time

# typing costs this process's start ~10 ms (it imports re); annotations are strings here
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FSYNC_INTERVAL_S = 1.0
HEADER = struct.Struct("<I")
_STRING_CACHE_MAX = 100_000  # keys retire and new ones appear: bound the cache

_encoders: dict[bool, Any] = {}  # strict / lenient JSON encoders, made on first use
_strings: dict[str, str] = {}
_line_parts: dict[tuple[Any, ...], tuple[str, str]] = {}
# (process, type, f, key, node) of the usual record, whose field types are fixed (int, str):
# no type in the key needed, unlike _line_parts
_usual_parts: dict[tuple[Any, ...], tuple[str, str]] = {}

if TYPE_CHECKING:
    Pending = tuple[int, int, Any, str, str, Any, Any, Any, Any]
else:
    Pending = tuple  # (index, time, process, type, f, key, value, node, error)


def _encode(x: Any, lenient: bool = False) -> str:
    """json's compact text of x; lenient: repr for what JSON cannot spell (e.g. a set in a
    nemesis result: a readable line beats a writer that dies and stops the history).
    json is imported on first use: it is a third of this process's start (re, enum...), and
    a history of integers and plain strings never needs it."""
    encode = _encoders.get(lenient)
    if encode is None:
        import json

        options: dict[str, Any] = {"default": repr} if lenient else {}
        encode = _encoders[lenient] = json.JSONEncoder(separators=(",", ":"), **options).encode
    return encode(x)


def _plain(s: str) -> bool:
    """A string JSON spells as itself in quotes (printable ASCII, no quote or backslash)."""
    return s.isascii() and s.isprintable() and '"' not in s and "\\" not in s


def _text(x: Any) -> str:
    """JSON text of one field value; strings (which repeat a lot) from a cache."""
    if type(x) is str:
        t = _strings.get(x)
        if t is None:
            t = f'"{x}"' if _plain(x) else _encode(x)
            if len(_strings) < _STRING_CACHE_MAX:
                _strings[x] = t
        return t
    if type(x) is int:  # not bool: json spells that true/false
        return str(x)
    if x is None:
        return "null"
    return _encode(x)


def _parts(process: Any, type_: str, f: str, key: Any, node: Any) -> tuple[str, str]:
    """The text around a line's value for one (process, type, f, key, node): a few hundred
    combinations per run, so it is built once; the types are in the cache key because
    1 == True == 1.0 would otherwise share one text."""
    cache_key = (process, type(process), type_, f, key, type(key), node)
    try:
        parts = _line_parts.get(cache_key)
    except TypeError:  # a list as key or node (unhashable): built each time
        cache_key, parts = None, None
    if parts is None:
        parts = (
            f'"process":{_text(process)},"type":{_text(type_)},"f":{_text(f)},'
            f'"key":{_text(key)},"value":',
            f',"node":{_text(node)}',
        )
        if cache_key is not None and len(_line_parts) < _STRING_CACHE_MAX:
            _line_parts[cache_key] = parts
    return parts


def format_line(rec: Pending) -> str:
    """One history line, byte for byte what json.dumps(dict, separators=(",", ":")) gives for
    {"index", "time", "process", "type", "f", "key", "value", "node"[, "error"]}."""
    index, time_, process, type_, f, key, value, node, error = rec
    before, after = _parts(process, type_, f, key, node)
    text = str(value) if type(value) is int else "null" if value is None else _text(value)
    if error is None:
        return f'{{"index":{index},"time":{time_},{before}{text}{after}}}\n'
    return f'{{"index":{index},"time":{time_},{before}{text}{after},"error":{_text(error)}}}\n'


def format_batch(batch: list[Pending | str]) -> str:
    """format_lenient over a batch. The usual record (integer process; type, f, key and
    node strings; no error) is formatted inline from a cache keyed by those fields, with no
    function call per line: this loop is most of the writer process's CPU, and on 2 cores
    that CPU is taken from the clients and the system under test."""
    out: list[str] = []
    append = out.append
    cached = _usual_parts.get
    for rec in batch:
        if rec.__class__ is tuple:
            index, time_, process, type_, f, key, value, node, error = rec
            if (error is None and process.__class__ is int and type_.__class__ is str
                    and f.__class__ is str and key.__class__ is str and node.__class__ is str):
                parts = cached((process, type_, f, key, node))
                if parts is None:
                    parts = _parts(process, type_, f, key, node)
                    if len(_usual_parts) < _STRING_CACHE_MAX:
                        _usual_parts[(process, type_, f, key, node)] = parts
                text = (str(value) if value.__class__ is int
                        else "null" if value is None else _text(value))
                append(f'{{"index":{index},"time":{time_},{parts[0]}{text}{parts[1]}}}\n')
                continue
        append(format_lenient(rec))
    return "".join(out)


def format_lenient(rec: Pending | str) -> str:
    """format_line, falling back to repr for what JSON cannot spell; a str is a done line."""
    if type(rec) is str:
        return rec
    try:
        return format_line(rec)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        index, time_, process, type_, f, key, value, node, error = rec
        fields = {"index": index, "time": time_, "process": process, "type": type_, "f": f,
                  "key": key, "value": value, "node": node}
        if error is not None:
            fields["error"] = error
        return _encode(fields, lenient=True) + "\n"


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # a regular file or pipe rarely writes short, but never drop the rest
        view = view[os.write(fd, view):]


def main(path: str) -> int:
    # Ctrl-C and the harness's signals are the harness's to handle: this process ends when
    # the pipe does, after writing everything it was sent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The clients and the system under test come first; this process only has to keep up
    # on average (the pipe and the harness's pending list absorb a burst).
    os.nice(10)
    source = sys.stdin.buffer
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        last_fsync = time.monotonic()
        while header := source.read(HEADER.size):
            size = HEADER.unpack(header)[0] if len(header) == HEADER.size else -1
            blob = source.read(size) if size >= 0 else b""
            if len(blob) != size:
                break  # the harness died mid-batch: what it sent whole is written
            write_all(fd, format_batch(marshal.loads(blob)).encode())
            if time.monotonic() - last_fsync >= FSYNC_INTERVAL_S:
                os.fsync(fd)
                last_fsync = time.monotonic()
        os.fsync(fd)
        os.close(fd)
    except OSError as e:
        print(f"{e.errno} {e.strerror}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
