"""The report and the runs browser as a person sees them: Debian's headless Chromium.

Needs scripts/setup-browser.sh (chromium, chromium-driver, selenium). Chromium runs with
networking features off (this network refuses their connections) and a fresh profile.
Screenshots go to results/screenshots/ and their paths are printed.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_paths import ROOT
from report_sample import make_sample_run

from leaseline.checkers.report import write_report

pytestmark = pytest.mark.browser


SHOTS = ROOT / "results" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("chromium/chromedriver missing: run scripts/setup-browser.sh")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()


def _js_errors(drv: object) -> list[str]:
    errors = list(drv.execute_script("return window.leaselineErrors || []"))  # type: ignore[attr-defined]
    errors += [e["message"] for e in drv.get_log("browser") if e.get("level") == "SEVERE"]  # type: ignore[attr-defined]
    return errors


def _wait_ready(drv: object, timeout: float = 30.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if drv.execute_script("return document.body && document.body.dataset.ready") == "1":  # type: ignore[attr-defined]
            return
        time.sleep(0.1)
    raise AssertionError("the report's script never finished (document.body.dataset.ready unset)")


def _shot(drv: object, name: str, full_page: bool = True) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    if full_page:
        height = drv.execute_script("return document.documentElement.scrollHeight")  # type: ignore[attr-defined]
        drv.set_window_size(1400, min(int(height) + 40, 6000))  # type: ignore[attr-defined]
    drv.save_screenshot(str(path))  # type: ignore[attr-defined]
    drv.set_window_size(1400, 1000)  # type: ignore[attr-defined]
    print(f"screenshot: {path}")
    return path


def test_report_renders_timeline_graph_and_record(driver: object, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    run = make_sample_run(
        tmp_path / "t" / "20250101T000000", ops=3000, keys=6, concurrency=6, unknown_key=True
    )
    report = write_report(run)
    driver.get(report.as_uri())  # type: ignore[attr-defined]
    _wait_ready(driver)
    assert _js_errors(driver) == []
    canvas = driver.find_element(By.ID, "timeline")  # type: ignore[attr-defined]
    assert int(canvas.get_attribute("data-drawn")) == 3000
    assert driver.find_element(By.ID, "verdict").text == "INVALID"  # type: ignore[attr-defined]
    graph = driver.find_element(By.ID, "graph-0")  # type: ignore[attr-defined]
    assert int(graph.get_attribute("data-nodes")) == 3
    assert len(graph.find_elements(By.CSS_SELECTOR, "g.node")) == 3
    assert len(graph.find_elements(By.CSS_SELECTOR, "path.edge.cycle")) == 2
    _shot(driver, "report-full.png")

    # Clicking an anomaly node shows that operation's full record.
    node = graph.find_elements(By.CSS_SELECTOR, "g.node")[-1]
    node.click()
    panel = driver.find_element(By.ID, "record-panel")  # type: ignore[attr-defined]
    assert panel.is_displayed()
    text = driver.find_element(By.ID, "record").text  # type: ignore[attr-defined]
    assert '"f": "read"' in text and '"edges"' in text

    # Clicking a drawn operation on the timeline shows its record (centre of op row 0's bar).
    driver.execute_script("document.getElementById('timeline').scrollIntoView()")  # type: ignore[attr-defined]
    driver.find_element(By.ID, "zoom-in").click()  # type: ignore[attr-defined]
    driver.find_element(By.ID, "zoom-reset").click()  # type: ignore[attr-defined]
    pos = driver.execute_script("""
        const c = document.getElementById('timeline'), r = c.getBoundingClientRect();
        return window.leaselineProbe ? window.leaselineProbe() : null;""")  # type: ignore[attr-defined]
    assert pos is not None, "the page exposes leaselineProbe() for the op it can click"
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).move_to_element_with_offset(
        canvas, int(pos["x"] - canvas.size["width"] / 2), int(pos["y"] - canvas.size["height"] / 2)
    ).click().perform()
    text = driver.find_element(By.ID, "record").text  # type: ignore[attr-defined]
    assert f'"index": {pos["index"]}' in text, text

    # "Show in timeline" filters to the anomaly's key and zooms in on it.
    driver.find_element(By.ID, "show-0").click()  # type: ignore[attr-defined]
    drawn = int(canvas.get_attribute("data-drawn"))
    assert 0 < drawn < 3000
    assert _js_errors(driver) == []

    # The anomaly types' section: the stale read is outlined on the timeline, and marked
    # in the counterexample's graph.
    section = driver.find_element(By.ID, "type-stale-read")  # type: ignore[attr-defined]
    assert "stale-read (1 key)" in section.text
    assert len(graph.find_elements(By.CSS_SELECTOR, "g.node.involved")) == 1
    driver.find_element(By.CSS_SELECTOR, "#record-panel .btn").click()  # type: ignore[attr-defined]
    button = driver.find_element(By.ID, "show-type-0")  # type: ignore[attr-defined]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)  # type: ignore[attr-defined]
    button.click()
    assert int(canvas.get_attribute("data-highlighted")) == 1
    assert _js_errors(driver) == []
    _shot(driver, "report-anomaly-zoom.png", full_page=False)


def test_report_100k_operations_renders_quickly(driver: object, tmp_path: Path) -> None:
    run = make_sample_run(
        tmp_path / "big" / "20250101T000000", ops=100_000, keys=50, concurrency=10
    )
    t0 = time.monotonic()
    report = write_report(run)
    build_s = time.monotonic() - t0
    t1 = time.monotonic()
    driver.get(report.as_uri())  # type: ignore[attr-defined]
    _wait_ready(driver)
    load_s = time.monotonic() - t1
    print(
        f"100k ops: report written in {build_s:.2f} s "
        f"({report.stat().st_size / 1e6:.1f} MB), rendered in {load_s:.2f} s"
    )
    assert _js_errors(driver) == []
    drawn = driver.execute_script("return +document.getElementById('timeline').dataset.drawn")  # type: ignore[attr-defined]
    assert drawn == 100_000
    assert build_s < 15 and load_s < 15
    _shot(driver, "report-100k.png", full_page=False)


def test_report_of_a_partial_run_says_what_is_missing(driver: object, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    run = make_sample_run(tmp_path / "p" / "20250101T000000", ops=300)
    (run / "results.json").unlink()
    shutil.rmtree(run / "anomalies")
    driver.get(write_report(run).as_uri())  # type: ignore[attr-defined]
    _wait_ready(driver)
    assert _js_errors(driver) == []
    assert "results.json is missing" in driver.find_element(By.ID, "problems").text  # type: ignore[attr-defined]
    assert driver.find_element(By.ID, "verdict").text == "NO RESULTS"  # type: ignore[attr-defined]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_runs_browser_lists_filters_and_links(driver: object, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from leaseline.harness.browser.serve import make_server

    results = tmp_path / "results"
    make_sample_run(results / "reg-partition" / "20250101T000000", ops=300, name="reg-partition")
    make_sample_run(
        results / "reg-partition" / "20250102T000000",
        ops=300,
        violation=False,
        name="reg-partition",
    )
    make_sample_run(
        results / "cas-pause" / "20250103T000000",
        ops=300,
        violation=False,
        name="cas-pause",
        workload="cas-register",
        nemesis=("pause",),
        sut="redis-sentinel",
    )
    # Long names, an injected bug and a warning: what a real campaign's rows look like.
    make_sample_run(
        results / "leasekv-proof-keep-lease-on-step-down" / "20250104T000000-2",
        ops=300,
        name="leasekv-proof-keep-lease-on-step-down",
        nemesis=("transfer-isolate:d=1.5", "partition-majorities-ring", "pause-isolate:freeze=2"),
        sut_opts={"bug": "keep-lease-on-step-down"},
        warnings=("the cluster was not ready 60 s after healing (lk4 lag behind the leader's "
                  "log); the final reads ran anyway.",),
    )
    write_report(results / "reg-partition" / "20250101T000000")
    port = _free_port()
    server = make_server("127.0.0.1", port, results)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        driver.get(f"http://127.0.0.1:{port}/")  # type: ignore[attr-defined]
        _wait_ready(driver)
        assert _js_errors(driver) == []
        rows = driver.find_elements(By.CSS_SELECTOR, "tbody tr")  # type: ignore[attr-defined]
        assert len(rows) == 4
        _shot(driver, "runs-index.png", full_page=False)
        # The system's options show (an injected bug is not a plain leasekv run), and so do
        # the run's warnings; the table fits the 1400-px window without a horizontal scroll.
        assert "leasekv bug=keep-lease-on-step-down" in rows[0].text
        assert "lag behind" in rows[0].find_element(By.CLASS_NAME, "warn").get_attribute("title")  # type: ignore[attr-defined]
        widths = driver.execute_script(  # type: ignore[attr-defined]
            "return [document.querySelector('table').getBoundingClientRect().right,"
            " document.documentElement.clientWidth, document.documentElement.scrollWidth]")
        assert widths[0] <= widths[1] and widths[2] <= widths[1], widths
        Select(driver.find_element(By.ID, "filter-workload")).select_by_visible_text("cas-register")  # type: ignore[attr-defined]
        visible = [r for r in driver.find_elements(By.CSS_SELECTOR, "tbody tr") if r.is_displayed()]  # type: ignore[attr-defined]
        assert len(visible) == 1 and "cas-pause" in visible[0].text
        Select(driver.find_element(By.ID, "filter-workload")).select_by_index(0)  # type: ignore[attr-defined]
        driver.find_element(By.LINK_TEXT, "report").click()  # type: ignore[attr-defined]
        _wait_ready(driver)
        assert driver.find_element(By.ID, "verdict").text in ("INVALID", "VALID")  # type: ignore[attr-defined]
        assert _js_errors(driver) == []
    finally:
        server.shutdown()
        server.server_close()


def test_list_append_report_draws_each_cycle(driver: object, tmp_path: Path) -> None:
    """A list-append run: the cycle is drawn with one node per transaction and its edges
    labelled with kind, key and value; its button outlines the transactions."""
    from list_append_sample import WHY_RW, result, run_folder
    from selenium.webdriver.common.by import By

    run = run_folder(tmp_path, result())
    driver.get(write_report(run.path).as_uri())  # type: ignore[attr-defined]
    _wait_ready(driver)
    assert _js_errors(driver) == []
    assert driver.find_element(By.ID, "verdict").text == "INVALID"  # type: ignore[attr-defined]
    section = driver.find_element(By.ID, "list-append")  # type: ignore[attr-defined]
    assert WHY_RW in section.text
    graph = driver.find_element(By.ID, "graph-0")  # type: ignore[attr-defined]
    assert len(graph.find_elements(By.CSS_SELECTOR, "g.node")) == 2
    labels = sorted(t.text for t in graph.find_elements(By.CSS_SELECTOR, "text.elabel.cycle"))
    assert labels == ["realtime", "rw x 3"]
    graph.find_elements(By.CSS_SELECTOR, "g.node")[0].click()
    assert '"f": "txn"' in driver.find_element(By.ID, "record").text  # type: ignore[attr-defined]
    driver.find_element(By.CSS_SELECTOR, "#record-panel .btn").click()  # type: ignore[attr-defined]
    button = driver.find_element(By.ID, "show-type-0")  # type: ignore[attr-defined]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)  # type: ignore[attr-defined]
    button.click()
    canvas = driver.find_element(By.ID, "timeline")  # type: ignore[attr-defined]
    assert int(canvas.get_attribute("data-highlighted")) == 2
    assert int(driver.find_element(By.ID, "staleness").get_attribute("data-reads")) == 1  # type: ignore[attr-defined]
    assert _js_errors(driver) == []
    _shot(driver, "report-list-append.png")
