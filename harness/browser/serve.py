"""`leaseline serve`: browse every run under a results directory (stdlib http.server).

    /                         all runs in a table, coloured by verdict, filterable
    /runs/<test>/<stamp>/...  a run's files (report.html is written on demand if missing)
    /zip/<test>/<stamp>       the run folder as a zip download
    /api/runs.json            the same list as JSON

Loopback by default: run folders hold histories and node logs that are nobody else's business.
Files are served only from inside the results directory (resolved paths are checked). Files and
zips are streamed in chunks, never read whole: a history may be gigabytes.
"""

from __future__ import annotations

import errno
import html
import json
import mimetypes
import os
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, BinaryIO
from urllib.parse import quote, unquote, urlsplit

from leaseline.harness.browser.runs_index import RunInfo, RunsIndex
from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.store.run_dir import MARKERS, REPORT, TEXT_FILES

TEXT_TYPES = {
    ".jsonl": "text/plain",
    ".log": "text/plain",
    ".txt": "text/plain",
    ".json": "application/json",
    ".xml": "application/xml",
    ".html": "text/html",
    ".edn": "text/plain",
}


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _fmt_ms(v: Any) -> str:
    return "" if v is None else f"{float(v):,.1f} ms"


def _asset(name: str) -> str:
    assets = resources.files("leaseline.checkers.report").joinpath("assets")
    return assets.joinpath(name).read_text(encoding="utf-8")


def _options(field: str, label: str, values: set[str]) -> str:
    opts = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in sorted(values) if v)
    return (
        f'<label>{label} <select id="filter-{field}" data-field="{field}">'
        f'<option value="">all</option>{opts}</select></label>'
    )


# The run folder's text files, labelled by what they are (harness.store.run_dir.TEXT_FILES).
FILE_LINKS = tuple(zip(TEXT_FILES, ("history", "jsonl", "results", "junit", "nemesis"),
                       strict=True))


def _links(r: RunInfo) -> str:
    base = "/runs/" + quote(r.rel) + "/"
    links = []
    if set(MARKERS) & set(r.files):  # report.html is written on demand if missing
        links.append(f'<a href="{base}{REPORT}">report</a>')
    links += [f'<a href="{base}{f}">{label}</a>' for f, label in FILE_LINKS if f in r.files]
    links += [f'<a href="{base}nodes/{quote(n)}/">{_e(n)}</a>' for n in r.nodes]
    links.append(f'<a href="/zip/{quote(r.rel)}" download>zip</a>')
    if r.problem:
        links.append(f' <span class="muted">{_e(r.problem)}</span>')
    return "".join(links)


def _summary(s: dict[str, int]) -> str:
    if not s:
        return ""
    parts = [("l", "linearizable"), ("lb", "lease-bounded"), ("v", "violation"), ("u", "unknown")]
    inner = " / ".join(f'<b class="{c}">{s.get(k, 0)}</b>' for c, k in parts)
    return f'<span class="summary">{inner}</span>'


def _words(items: list[str]) -> str:
    """Items that wrap between, never inside, one another (`pause-isolate:freeze=2`)."""
    return " ".join(f'<span class="nw">{_e(i)}</span>' for i in items if i)


def _row(r: RunInfo) -> str:
    nem = " ".join(r.nemesis)
    data = f'data-verdict="{_e(r.verdict)}" data-sut="{_e(r.sut)}" '
    data += f'data-workload="{_e(r.workload)}" data-clients="{_e(r.clients)}" '
    data += f'data-nemesis="{_e(nem)}"'
    warn = ""
    if r.warnings:
        warn = f' <span class="warn" title="{_e(" ".join(r.warnings))}">⚠</span>'
    # Names may be long (campaign cases, nemesis specs, a system's options): those cells wrap,
    # so the table fits a 1400-px window; verdicts, stamps and numbers stay on one line.
    cells = [
        ("", f'<span class="badge {r.verdict}">{_e(r.verdict)}</span>{warn}'),
        ("wrap", _e(r.test)),
        ("", _e(r.stamp)),
        ("wrap", _e(r.sut)),
        ("wrap", _e(r.workload)),
        ("", _e(r.clients)),
        ("wrap", _words(r.nemesis) or "none"),
    ]
    num = ["" if r.ops is None else f"{r.ops:,}"]
    tds = "".join(f'<td class="{c}">{v}</td>' if c else f"<td>{v}</td>" for c, v in cells)
    tds += f'<td class="num">{num[0]}</td>'
    # keys per anomaly type under the counts: the table must fit a 1400-px window
    types = ", ".join(f"{t} {n}" for t, n in r.anomaly_types.items())
    tds += f"<td>{_summary(r.summary)}" + (
        f'<div class="types">{_e(types)}</div>' if types else "") + "</td>"
    tds += (
        f'<td class="num">{_fmt_ms(r.max_delta_ms)}</td><td class="num">{_fmt_ms(r.lease_ms)}</td>'
    )
    return f'<tr class="{r.verdict}" {data}>{tds}<td class="links">{_links(r)}</td></tr>'


def render_index(runs: list[RunInfo], results_dir: Path) -> str:
    nemeses = {n for r in runs for n in r.nemesis}
    filters = (
        _options("sut", "system", {r.sut for r in runs})
        + _options("workload", "workload", {r.workload for r in runs})
        + _options("clients", "clients", {r.clients for r in runs})
        + _options("nemesis", "nemesis", nemeses)
        + _options("verdict", "verdict", {r.verdict for r in runs})
        + '<label>search <input id="filter-text" type="search" placeholder="test, stamp, …">'
        + "</label>"
        + f'<span class="muted"><span id="shown">{len(runs)}</span> of {len(runs)} runs</span>'
    )
    rows = "".join(_row(r) for r in runs)
    return Template(_asset("index.html")).substitute(
        css=_asset("index.css"),
        js=_asset("index.js"),
        results_dir=_e(results_dir),
        filters=filters,
        rows=rows or '<tr><td colspan="12" class="muted">No runs yet.</td></tr>',
    )


CHUNK = 1 << 20  # bytes read and sent at a time


def zip_run(run_dir: Path, out: BinaryIO) -> None:
    """Write the run folder as a zip to `out`, which need not seek (a socket): each file is
    compressed as it is read, a chunk at a time (zipfile writes sizes after the data, and
    ZIP64 records for files of 4 GB or more)."""
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for root, _dirs, files in os.walk(run_dir):
            for f in sorted(files):
                p = Path(root) / f
                z.write(p, Path(run_dir.parent.name) / run_dir.name / p.relative_to(run_dir))


class Handler(BaseHTTPRequestHandler):
    index: RunsIndex  # set on the subclass made by make_server
    server_version = "leaseline"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet: the terminal shows the URL, not every request

    def _send(
        self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, sentence: str) -> None:
        self._send(
            status,
            f"<!DOCTYPE html><p>{_e(sentence)}</p><p><a href='/'>all runs</a></p>".encode(),
            "text/html; charset=utf-8",
        )

    def _inside(self, rel: str) -> Path | None:
        """The path under the results dir, or None if it escapes it or does not exist."""
        root = self.index.results_dir.resolve()
        p = (root / unquote(rel).lstrip("/")).resolve()
        if p != root and root not in p.parents:
            return None
        return p if p.exists() else None

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib naming
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        path = urlsplit(self.path).path
        try:
            if path in ("/", "/index.html"):
                body = render_index(self.index.runs(), self.index.results_dir).encode()
                return self._send(200, body, "text/html; charset=utf-8")
            if path == "/favicon.ico":
                return self._send(204, b"", "image/x-icon")
            if path == "/api/runs.json":
                body = json.dumps([r.to_json() for r in self.index.runs()]).encode()
                return self._send(200, body, "application/json")
            if path.startswith("/zip/"):
                return self._zip(path[len("/zip/") :])
            if path.startswith("/runs/"):
                return self._file(path[len("/runs/") :])
            return self._error(404, "No such page.")
        except (BrokenPipeError, ConnectionResetError):
            return None

    def _zip(self, rel: str) -> None:
        run = self._inside(rel)
        if run is None or not run.is_dir() or len(Path(unquote(rel).strip("/")).parts) != 2:
            return self._error(404, "No such run.")
        name = f"{run.parent.name}-{run.name}.zip"
        # No Content-Length: the zip's size is known once written; the connection's end
        # (HTTP/1.0) ends the body.
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Disposition", f'attachment; filename="{name}"')
        self.end_headers()
        if self.command != "HEAD":
            zip_run(run, self.wfile)

    def _file(self, rel: str) -> None:
        p = self._inside(rel)
        if p is None and rel.endswith(f"/{REPORT}"):
            run = self._inside(rel[: -len(REPORT)])
            if run is not None and run.is_dir():
                from leaseline.checkers.report import write_report

                p = write_report(run)  # older runs, or a runner that did not write one
        if p is None:
            return self._error(404, "No such file in the results directory.")
        if p.is_dir():
            if not self.path.endswith("/"):
                return self._send(301, b"", "text/plain", {"Location": self.path + "/"})
            entries = sorted(p.iterdir())
            items = "".join(
                f'<li><a href="{quote(e.name)}{"/" if e.is_dir() else ""}">{_e(e.name)}</a>'
                f' <span class="size">{"" if e.is_dir() else f"{e.stat().st_size:,} B"}</span></li>'
                for e in entries
            )
            return self._send(
                200,
                f"<!DOCTYPE html><meta charset=utf-8><h3>{_e(rel)}</h3><ul>{items}</ul>".encode(),
                "text/html; charset=utf-8",
            )
        ctype = (
            TEXT_TYPES.get(p.suffix)
            or mimetypes.guess_type(p.name)[0]
            or "application/octet-stream"
        )
        if ctype.startswith("text/") or ctype in ("application/json", "application/xml"):
            ctype += "; charset=utf-8"
        with p.open("rb") as f:
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            # the size of what is sent: a history still growing is sent up to here
            size = os.fstat(f.fileno()).st_size
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if self.command != "HEAD":
                _copy(f, self.wfile, size)


def _copy(src: BinaryIO, dst: BinaryIO, size: int) -> None:
    """`size` bytes of src to dst, a chunk at a time."""
    while size > 0 and (chunk := src.read(min(CHUNK, size))):
        dst.write(chunk)
        size -= len(chunk)


def make_server(host: str, port: int, results_dir: Path) -> ThreadingHTTPServer:
    handler = type("RunsHandler", (Handler,), {"index": RunsIndex(Path(results_dir))})
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise EnvironmentProblem(
                f"port {port} on {host} is already in use; pick another with --port."
            ) from e
        raise EnvironmentProblem(f"cannot listen on {host}:{port}: {e.strerror or e}.") from e
    server.daemon_threads = True
    return server


def serve(host: str, port: int, results_dir: Path, log: Any = print) -> None:
    server = make_server(host, port, results_dir)
    log(f"serving {results_dir} at http://{host}:{server.server_address[1]}/ (Ctrl-C to stop)")
    try:
        server.serve_forever()
    finally:
        server.server_close()
