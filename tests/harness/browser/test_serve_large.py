"""`leaseline serve` streams a large file and a large run's zip: the server's peak memory
grows by a small fraction of the file's size (reading it whole would grow it by all of it),
and what arrives is the whole file, byte for byte, or a zip that holds it."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SIZE = 256 << 20
GROWTH_ALLOWED = 48 << 20  # the chunk, buffers, zlib's state: far below SIZE


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc")


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    run = tmp_path / "results" / "big" / "20250101T000000"
    run.mkdir(parents=True)
    history = run / "history.jsonl"
    with history.open("wb") as f:  # sparse: SIZE bytes on disk cost nothing
        f.write(b'{"index": 0}\n')
        f.truncate(SIZE)
        f.seek(SIZE - 5)
        f.write(b"end!\n")
    p = subprocess.Popen([sys.executable, "-m", "leaseline", "serve", "--port", "0",
                          "--results-dir", str(tmp_path / "results")],
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stderr is not None
        line = p.stderr.readline()
        url = line.split(" at ", 1)[1].split(" ", 1)[0].rstrip("/")
        with urllib.request.urlopen(url + "/", timeout=30) as r:
            r.read()  # the index: every module the server needs is loaded
        yield p, url, history
    finally:
        p.terminate()
        p.wait(timeout=30)


def download(url: str, out: Path | None = None) -> tuple[int, bytes]:
    """Bytes received and the last few, reading a chunk at a time."""
    n, tail = 0, b""
    with urllib.request.urlopen(url, timeout=120) as r, \
            (out.open("wb") if out else open("/dev/null", "wb")) as sink:
        while chunk := r.read(1 << 20):
            n += len(chunk)
            tail = (tail + chunk)[-16:]
            sink.write(chunk)
    return n, tail


def test_a_large_file_is_streamed(server: tuple) -> None:
    p, url, history = server
    before = peak_rss(p.pid)
    n, tail = download(url + "/runs/big/20250101T000000/history.jsonl")
    assert n == SIZE and tail.endswith(b"end!\n")
    assert peak_rss(p.pid) - before < GROWTH_ALLOWED, (before, peak_rss(p.pid))


def test_a_large_run_is_zipped_as_it_is_sent(server: tuple, tmp_path: Path) -> None:
    p, url, history = server
    before = peak_rss(p.pid)
    out = tmp_path / "run.zip"
    download(url + "/zip/big/20250101T000000", out)
    assert peak_rss(p.pid) - before < GROWTH_ALLOWED, (before, peak_rss(p.pid))
    with zipfile.ZipFile(out) as z:
        info = z.getinfo("big/20250101T000000/history.jsonl")
        assert info.file_size == SIZE
        with z.open(info) as f:  # reading it through checks its CRC
            n = 0
            while chunk := f.read(1 << 20):
                n += len(chunk)
        assert n == SIZE
