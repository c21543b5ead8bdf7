"""A spark:// master that cannot be used is one sentence and exit 255, before any JVM starts
(the cluster cases that need Docker are in test_spark_cluster.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonl_histories import stale
from repo_paths import ROOT

from leaseline.checkers.spark_session import CONNECT_TIMEOUT_S


def _check(master: str, path: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    t = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "leaseline", "check", "--spark-master", master,
                          str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    return res, time.monotonic() - t


def test_unreachable_master(tmp_path: Path) -> None:
    res, seconds = _check("spark://127.0.0.1:1", stale(tmp_path))  # loopback, nothing listens
    assert res.returncode == 255 and seconds < 60
    assert res.stderr == ("leaseline: the Spark master spark://127.0.0.1:1 does not answer "
                          "(Connection refused).\n")


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never says anything (what a host that
    drops packets looks like behind something that accepts every connection)."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        yield srv.getsockname()[1]


def test_a_silent_master_is_the_same_sentence_within_the_connect_timeout(
    tmp_path: Path, silent_port: int
) -> None:
    """It costs at most the connect timeout more than a refusing one (measured beside it:
    the process's own start varies with the machine's load)."""
    _, refused_s = _check("spark://127.0.0.1:1", stale(tmp_path))
    master = f"spark://127.0.0.1:{silent_port}"
    res, seconds = _check(master, stale(tmp_path))
    assert res.returncode == 255, res.stderr
    assert seconds - refused_s < CONNECT_TIMEOUT_S + 5, (seconds, refused_s)
    assert res.stderr == (f"leaseline: the Spark master {master} does not answer "
                          f"(no reply within {CONNECT_TIMEOUT_S:g} s).\n")


@pytest.mark.docker
def test_a_master_whose_host_drops_packets(tmp_path: Path) -> None:
    """A container of the test's own whose firewall drops everything sent to port 7077."""
    from leaseline.harness.clusters.docker.client import client
    from leaseline.harness.clusters.docker.images import build_context

    box = client().containers.run(
        build_context("nemesis", lambda _m: None),
        ["sh", "-c", "iptables -A INPUT -p tcp --dport 7077 -j DROP && touch /ready && sleep 120"],
        cap_add=["NET_ADMIN"], detach=True, remove=True, labels={"io.leaseline.test": "drop"})
    try:
        deadline = time.monotonic() + 30
        while box.exec_run(["test", "-e", "/ready"]).exit_code != 0:
            assert time.monotonic() < deadline, "the dropping container never got ready"
            time.sleep(0.2)
        box.reload()
        master = f"spark://{box.attrs['NetworkSettings']['IPAddress']}:7077"
        _, refused_s = _check("spark://127.0.0.1:1", stale(tmp_path))
        res, seconds = _check(master, stale(tmp_path))
        assert res.returncode == 255, res.stderr
        assert seconds - refused_s < CONNECT_TIMEOUT_S + 5, (seconds, refused_s)
        assert res.stderr == (f"leaseline: the Spark master {master} does not answer "
                              f"(no reply within {CONNECT_TIMEOUT_S:g} s).\n")
    finally:
        box.remove(force=True)


def test_master_url_without_port(tmp_path: Path) -> None:
    res, _ = _check("spark://nowhere", stale(tmp_path))
    assert res.returncode == 255
    assert res.stderr == ("leaseline: spark://nowhere is not a Spark master URL "
                          "(spark://HOST:PORT).\n")


def test_a_master_found_unusable_is_not_tried_again(monkeypatch: Any) -> None:
    """The check after a failed warm-up gives the warm-up's sentence at once: the executor
    wait (30 s) is not paid twice, which would break the 60 s bound."""
    from leaseline.checkers import spark_session

    calls = []

    def unusable(master: str) -> None:
        calls.append(master)
        raise spark_session.SparkUnavailable(f"no executor of {master} registered")

    monkeypatch.setattr(spark_session, "_start", unusable)
    monkeypatch.setattr(spark_session, "_unusable", {})
    monkeypatch.setattr(spark_session, "_context", None)  # another test's context may be up
    for _ in range(2):
        with pytest.raises(spark_session.SparkUnavailable, match="no executor"):
            spark_session.spark_context("spark://192.0.2.1:7077")
    assert calls == ["spark://192.0.2.1:7077"]


def test_a_port_that_answers_something_else(tmp_path: Path) -> None:
    """Not a Spark RPC reply (here an HTTP server's): the same sentence, at once."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]

        def answer() -> None:
            conn, _ = srv.accept()
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        threading.Thread(target=answer, daemon=True).start()
        master = f"spark://127.0.0.1:{port}"
        res, _ = _check(master, stale(tmp_path))
    assert res.returncode == 255, res.stderr
    assert res.stderr == (f"leaseline: the Spark master {master} does not answer "
                          "(the reply on that port is not Spark's).\n")


def test_package_archive_holds_the_compiled_modules_and_is_removed_at_exit() -> None:
    """A cluster session's archive of the checkers is the package once unpacked as
    `leaseline` (its __init__ at the top), holds the compiled modules this installation
    has, stays while the driver runs (executors fetch it when they first need it) and is
    gone once the driver exits."""
    code = ("import json, zipfile; from leaseline.checkers import wgl_native; "
            "from leaseline.checkers.spark_session import _package_archive; "
            "p = _package_archive(); names = zipfile.ZipFile(p).namelist(); "
            "print(json.dumps([str(p), names, wgl_native.compiled_search is not None]))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True)
    path, names, compiled = json.loads(res.stdout)
    assert {"__init__.py", "checkers/__init__.py", "checkers/decide.py"} <= set(names)
    assert not any(n.startswith("leaseline/") or "__pycache__" in n for n in names)
    extensions = {n.split("/")[-1].split(".")[0] for n in names if not n.endswith(".py")}
    assert ("wgl_compiled" in extensions) == compiled
    assert not Path(path).parent.exists()
