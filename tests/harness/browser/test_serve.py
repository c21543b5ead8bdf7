"""`leaseline serve`: the runs index, files, zips; loopback; fast with 1,000 runs."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from repo_paths import ROOT
from report_sample import make_sample_run

from leaseline.harness.browser.runs_index import RunsIndex
from leaseline.harness.browser.serve import make_server
from leaseline.harness.errors import EnvironmentProblem


def _get(url: str) -> tuple[int, bytes, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    res = tmp_path / "results"
    make_sample_run(res / "reg" / "20250101T000000", ops=300, name="reg")
    make_sample_run(
        res / "cas" / "20250102T000000",
        ops=300,
        name="cas",
        violation=False,
        workload="cas-register",
        nemesis=("pause",),
        client_routing="leader",  # its old name: listed as the oracle
    )
    (res / "latest").symlink_to("cas/20250102T000000")
    return res


@pytest.fixture()
def server(results: Path) -> Iterator[tuple[ThreadingHTTPServer, str]]:
    srv = make_server("127.0.0.1", 0, results)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    host, port = srv.server_address[:2]
    try:
        yield srv, f"http://{host}:{port}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_index_lists_runs_with_verdicts_filters_and_links(server: tuple, results: Path) -> None:
    _, base = server
    status, body, headers = _get(base + "/")
    page = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert page.count("<tr class=") == 2  # latest is a link, not a third run
    assert 'class="invalid"' in page and 'class="valid"' in page
    for f in ("filter-sut", "filter-workload", "filter-clients", "filter-nemesis",
              "filter-verdict"):
        assert f'id="{f}"' in page
    assert "/runs/reg/20250101T000000/report.html" in page
    assert "/runs/reg/20250101T000000/nodes/n1/" in page and "/zip/reg/20250101T000000" in page
    runs = json.loads(_get(base + "/api/runs.json")[1])
    assert {(r["test"], r["verdict"]) for r in runs} == {("reg", "invalid"), ("cas", "valid")}
    assert {(r["test"], r["clients"]) for r in runs} == {("reg", "node"), ("cas", "oracle")}
    assert 'data-clients="oracle"' in page and '<option value="sentinel">' not in page
    # the anomaly types column: keys per type
    assert {r["test"]: r["anomaly_types"] for r in runs} == {"reg": {"stale-read": 1}, "cas": {}}
    assert '<div class="types">stale-read 1</div>' in page


def test_files_reports_on_demand_and_node_logs(server: tuple, results: Path) -> None:
    _, base = server
    run = results / "reg" / "20250101T000000"
    assert not (run / "report.html").exists()
    status, body, _ = _get(base + "/runs/reg/20250101T000000/report.html")
    assert status == 200 and b'id="verdict">INVALID<' in body and (run / "report.html").exists()
    status, body, headers = _get(base + "/runs/reg/20250101T000000/history.jsonl")
    assert status == 200 and body == (run / "history.jsonl").read_bytes()
    assert headers["Content-Type"].startswith("text/plain")
    status, body, _ = _get(base + "/runs/reg/20250101T000000/nodes/n1/")
    assert status == 200 and b"server.log" in body


def test_zip_download_holds_the_run(server: tuple, results: Path) -> None:
    _, base = server
    status, body, headers = _get(base + "/zip/cas/20250102T000000")
    assert status == 200 and headers["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    assert "cas/20250102T000000/history.jsonl" in names
    assert "cas/20250102T000000/nodes/n2/server.log" in names


@pytest.mark.parametrize(
    "path",
    [
        "/runs/../../etc/passwd",
        "/runs/%2e%2e/%2e%2e/etc/passwd",
        "/runs/reg/../../x",
        "/zip/..",
        "/zip/reg",
        "/nope",
    ],
)
def test_nothing_outside_the_results_dir_is_served(server: tuple, path: str) -> None:
    _, base = server
    status, body, _ = _get(base + path)
    assert status == 404 and b"root:" not in body


def test_port_in_use_is_one_sentence(results: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(EnvironmentProblem, match=f"port {port} .* already in use"):
            make_server("127.0.0.1", port, results)


def test_cli_serve_port_in_use_exits_non_zero(results: Path) -> None:
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "leaseline",
                "serve",
                "--port",
                str(port),
                "--results-dir",
                str(results),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
    assert p.returncode != 0 and "already in use" in p.stderr and "Traceback" not in p.stderr


def test_index_of_a_thousand_runs_is_fast_and_cached(tmp_path: Path) -> None:
    res = tmp_path / "results"
    keys = {
        f"k{i}": {
            "status": "linearizable",
            "min_delta_ms": 0.0,
            "ops": 100,
            "shifted_reads": [],
            "counterexample": None,
        }
        for i in range(200)
    }
    results_json = json.dumps(
        {
            "valid": True,
            "lease_ms": 700.0,
            "ops": 20000,
            "summary": {"linearizable": 200},
            "max_delta_ms": 0.0,
            "keys": keys,
        }
    )
    for i in range(1000):
        run = res / f"test{i % 10}" / f"20250101T{i:06d}"
        run.mkdir(parents=True)
        (run / "test.json").write_text(
            json.dumps(
                {
                    "name": f"test{i % 10}",
                    "sut": "leasekv",
                    "workload": "register",
                    "nemesis": ["kill"],
                }
            )
        )
        (run / "results.json").write_text(results_json)
        # A big history that listing must never read.
        (run / "history.jsonl").write_text("not json\n" * 10)
    index = RunsIndex(res)
    t0 = time.monotonic()
    runs = index.runs()
    first = time.monotonic() - t0
    t0 = time.monotonic()
    again = index.runs()
    second = time.monotonic() - t0
    print(f"1,000 runs: first listing {first:.2f} s, cached {second:.3f} s")
    assert len(runs) == len(again) == 1000 and all(r.verdict == "valid" for r in runs)
    assert runs[0].stamp == "20250101T000999"  # newest first
    assert first < 10 and second < 1.0
    # A rewritten results.json is picked up.
    target = res / "test9" / "20250101T000999" / "results.json"
    target.write_text(json.dumps({"valid": False}))
    assert index.runs()[0].verdict == "invalid"
