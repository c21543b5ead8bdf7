"""The process's one SparkContext, for local[N] and for a standalone cluster (spark://).

The JVM is launched with its stdout/stderr going to a log file (the Python workers it forks
inherit those), so it can start in a background thread (`warm_up`) while the rest of the
process keeps printing. The checkers package reaches a cluster's executors as an archive
the driver ships (sc.addArchive), built from the code that is running, never baked into an
image; local executors import the installation the driver runs. The archive holds the
compiled modules too: Spark unpacks it as a folder `leaseline` in each executor's files
folder, which PySpark puts on its workers' path, so they import the compiled search and
decoder from there (a zip on the path, as addPyFile ships, can hold only Python). Where
an executor cannot load them (another platform), each falls back to its pure-Python
version, as any installation without them does.

For spark://HOST:PORT the session checks what would otherwise hang or fail obscurely: the
master must accept a connection, and its JSON status page (port 8080), when it answers,
must list an alive worker; the driver advertises the address this machine uses to reach
the master (so executors on a Docker bridge reach it on the bridge), and the session is only
handed out once an executor has registered with it, which also proves executors can reach
the driver. Each failure is a SparkUnavailable with one sentence.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import importlib.machinery
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

AUTO = "auto"  # small inputs in-process, larger ones on local[*] (checkers/job.py)
_PANDAS_WARNING = "PySpark does not yet fully support pandas"
MASTER_UI_PORT = 8080
EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)  # this interpreter's
CONNECT_TIMEOUT_S = 5.0

_context_lock = threading.Lock()
_context: Any = None
_unusable: dict[str, SparkUnavailable] = {}  # master -> why it could not be used


class SparkUnavailable(Exception):
    """Spark could not be used (no master, no workers, executors that cannot reach us...)."""


def spark_log_path() -> Path:
    return Path(tempfile.gettempdir()) / f"leaseline-spark-{os.getpid()}.log"


def _log4j_config() -> Path:
    path = Path(tempfile.gettempdir()) / "leaseline-log4j2.properties"
    path.write_text(
        "rootLogger.level = error\n"
        "rootLogger.appenderRef.stderr.ref = console\n"
        "appender.console.type = Console\n"
        "appender.console.name = console\n"
        "appender.console.target = SYSTEM_ERR\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
    )
    return path


def _package_archive() -> Path:
    """leaseline/checkers/ (its Python and its compiled modules) as a zip for addArchive,
    with the package's own __init__ (which imports nothing) at its top: unpacked as the
    folder `leaseline`, it is the package."""
    import zipfile  # here: every Python worker imports this module, and only a driver
    # on a cluster zips

    checkers = Path(__file__).resolve().parent
    folder = tempfile.mkdtemp(prefix="leaseline-pyfiles-")
    # Spark's file server reads the zip from here whenever an executor first asks for it,
    # so it stays for the driver's life and no longer
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    out = Path(folder) / "leaseline-checkers.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(checkers.parent / "__init__.py", "__init__.py")
        for f in sorted(checkers.rglob("*")):
            if f.suffix == ".py" or f.name.endswith(EXTENSION_SUFFIXES):
                zf.write(f, Path("checkers") / f.relative_to(checkers))
    return out


def master_status(host: str, timeout: float = 3.0) -> dict[str, Any] | None:
    """A standalone master's JSON status page (workers, apps), or None if it does not answer."""
    # here, not at the top: every Python worker imports this module, and urllib.request
    # (http.client, ssl, email) cost its daemon's start more than the rest of it
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{MASTER_UI_PORT}/json/",
                                    timeout=timeout) as r:
            return json.loads(r.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _alive(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]


def _split_master(master: str) -> tuple[str, int]:
    host, _, port = master.removeprefix("spark://").partition(",")[0].rpartition(":")
    try:
        return host, int(port)
    except ValueError:
        raise SparkUnavailable(f"{master} is not a Spark master URL (spark://HOST:PORT).") from None


def _rpc_probe(host: str, port: int, timeout_s: float) -> str | None:
    """None when a Spark RPC server answers at host:port within timeout_s, else why not.

    A TCP connect alone proves nothing: a host that drops packets may sit behind something
    that accepts every connection and then stays silent, and a SparkContext pointed at it
    waits a minute for registration. So one RpcRequest frame goes out (frame length, type 3,
    request id, body size, body; an undecodable body is fine) and any Spark RPC server
    answers it at once, with an RpcFailure (type 5) or an RpcResponse (type 4)."""
    body = b"leaseline"
    frame = struct.pack(">qBqi", 8 + 1 + 8 + 4 + len(body), 3, 1, len(body)) + body
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(frame)
            reply = b""
            while len(reply) < 9:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(9 - len(reply))
                if not chunk:
                    return "the connection closed without a Spark reply"
                reply += chunk
    except TimeoutError:
        return f"no reply within {timeout_s:g} s"
    except OSError as e:
        return e.strerror or e.__class__.__name__
    return None if reply[8] in (4, 5) else "the reply on that port is not Spark's"


def _cluster_conf(master: str) -> tuple[dict[str, str], int]:
    """(settings for a spark:// master, alive workers or 0 if unknown); fails fast and in one
    sentence when the master does not answer or has no worker."""
    host, port = _split_master(master)
    if why := _rpc_probe(host, port, CONNECT_TIMEOUT_S):
        raise SparkUnavailable(f"the Spark master {master} does not answer ({why}).")
    status = master_status(host)
    alive = len(_alive(status)) if status else 0
    if status is not None and not alive:
        raise SparkUnavailable(f"the Spark master {master} has no alive worker to run the "
                               "check on (`leaseline spark status` shows the cluster).")
    driver_host = os.environ.get("LEASELINE_SPARK_DRIVER_HOST") or _route_to(host, port)
    conf = {
        # executors connect back to the driver: it must listen where they can reach it
        "spark.driver.host": driver_host,
        "spark.driver.bindAddress": driver_host,
        "spark.executor.memory": os.environ.get("LEASELINE_SPARK_EXECUTOR_MEMORY", "2g"),
        # the UI's REST API (/api/v1/applications/<id>/executors) shows where tasks ran
        "spark.ui.enabled": "true",
    }
    return conf, alive


def _route_to(host: str, port: int) -> str:
    """This machine's address on the way to host (on a Docker bridge: the host's bridge IP).
    A UDP connect sends nothing; it only asks the kernel which source address it would use."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, port))
        return str(s.getsockname()[0])


def _wait_for_executors(sc: Any, master: str, expected: int, timeout_s: float) -> None:
    """Until `expected` executors registered (or some did and 10 s more passed): tasks are
    then spread over the cluster from the first job on. None within timeout_s: the executors
    cannot reach this driver, or the cluster's cores are all taken."""
    start = time.monotonic()
    first: float | None = None
    while True:
        if sc._jsc.sc().isStopped():  # the master gave up on this application
            raise SparkUnavailable(f"the Spark master {master} did not accept this driver's "
                                   f"application (see {spark_log_path()}).")
        registered = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
        now = time.monotonic()
        if registered >= max(expected, 1):
            return
        if registered and first is None:
            first = now
        if first is not None and now - first > 10:
            return
        if now - start > timeout_s:
            break
        time.sleep(0.2)
    host = sc.getConf().get("spark.driver.host")
    status = master_status(_split_master(master)[0])
    free = "unknown"
    if status:
        free = str(sum(int(w.get("cores", 0)) - int(w.get("coresused", 0))
                       for w in _alive(status)))
    raise SparkUnavailable(
        f"no executor of {master} registered with this driver within {timeout_s:.0f} s (free "
        f"cores on the cluster: {free}): its executors must be able to connect to {host}, the "
        "driver's address (LEASELINE_SPARK_DRIVER_HOST sets another).")


def spark_context(master: str = "local[*]") -> Any:
    """The process's one SparkContext (created on first use, quiet, with checkers shipped).
    No SparkSession: the job uses RDDs only, and creating one cost 2.3 of an 8 s check.
    A master found unusable (for any reason) stays so for the process: the check that follows
    a failed warm-up reports the warm-up's error instead of waiting as long again."""
    global _context
    with _context_lock:
        if _context is None:
            if master in _unusable:
                raise _unusable[master]
            try:
                _context = _start(master)
            except Exception as e:
                _unusable[master] = e
                raise
        return _context


def _start(master: str) -> Any:
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if master == AUTO:
        master = "local[*]"
    extra: dict[str, str] = {}
    expected = 0
    if master.startswith("spark://"):
        extra, expected = _cluster_conf(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", message=_PANDAS_WARNING)
    # C1 only: the JVM here just moves opaque blocks between Python workers, and C2
    # compiling Spark's own code cost ~20 CPU-s of a 10 M-op check on 2 cores
    java_opts = f"-Dlog4j2.configurationFile=file:{_log4j_config()} -XX:TieredStopAtLevel=1"
    settings = {
        "spark.master": master,
        "spark.app.name": "leaseline-check",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
        "spark.driver.memory": os.environ.get("LEASELINE_SPARK_MEMORY", "3g"),
        "spark.python.worker.faulthandler.enabled": "true",
        # The Python workers allocate and free arrays of tens of MB per task; glibc's
        # defaults hand each back to the kernel and fault it in again (a fifth of the
        # workers' CPU on 10 M operations was the kernel's). Kept in the heap instead.
        "spark.executorEnv.MALLOC_MMAP_THRESHOLD_": str(32 << 20),
        "spark.executorEnv.MALLOC_TRIM_THRESHOLD_": str(1 << 30),
        "spark.executorEnv.MALLOC_TOP_PAD_": str(128 << 20),
    } | extra
    if master.startswith("local") and os.environ["PYSPARK_PYTHON"] == sys.executable:
        # the workers run this installation (not just the shipped zip): see spark_daemon
        settings["spark.python.daemon.module"] = "leaseline.checkers.spark_daemon"
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    with open(spark_log_path(), "ab") as log:
        # the JVM's own output (banner lines, warnings) goes to the log, not our stderr
        gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    sc = SparkContext(conf=conf, gateway=gateway)
    sc.setLogLevel("ERROR")
    if master.startswith("spark://"):
        # the executors' Python is the image's, not this process's interpreter path
        sc.pythonExec = os.environ.get("LEASELINE_SPARK_EXECUTOR_PYTHON", "python3")
        try:
            _wait_for_executors(sc, master, expected, float(
                os.environ.get("LEASELINE_SPARK_EXECUTOR_WAIT_S", "30")))
        except BaseException:
            sc.stop()  # else the next SparkContext of this process is refused
            raise
        # Executors elsewhere get the checker from the running code. Local ones import this
        # installation itself.
        sc.addArchive(f"{_package_archive()}#leaseline")
    return sc


def _preload(module: str, _: Any) -> None:
    importlib.import_module(module)  # the Python worker keeps it (and numpy, pandas...)


def warm_up(master: str, preload: str) -> threading.Thread:
    """Start the session in the background (the JVM takes seconds to start), and its Python
    workers, with the module `preload` imported (the job that will run there: Spark reuses
    the workers, so the check's first tasks do not pay for forking and importing); a failure
    is left for the check to meet and report when it asks for the session itself. The
    caller names the job, so the session knows no job."""

    def start() -> None:
        with contextlib.suppress(Exception):  # spark_context raises it again at check time
            sc = spark_context(master)
            cores = sc.defaultParallelism
            sc.parallelize(range(cores), cores).foreach(functools.partial(_preload, preload))

    thread = threading.Thread(target=start, name="spark-warm-up", daemon=True)
    thread.start()
    return thread
