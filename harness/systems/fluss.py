"""Apache Fluss (incubating): ZooKeeper, one coordinator and three tablet servers sharing a
remote data directory, from the release's jars (sut/fluss; no Fluss code in this
repository). The coordinator is the leader (kill-leader, partition-leader and pause-leader
hit it); fltsN are the tablet servers; flzk (ZooKeeper) and flcl (the lease client service
the workload's clients talk to, on the test network with the shared volume mounted) are
aux services. Besides kill, pause and partition, Fluss offers the faults of the lease's own
questions: partition-coordination (coordinator from ZooKeeper alone), cut-storage (a
server from the shared remote directory), pause-client (every holder at once) and
clock-skew (a server's clock, through libfaketime), and move-leadership: every bucket
leadership moved off a tablet server that keeps running (a server tag and a rebalance, the
way Fluss drains a server before an upgrade), asked of flcl (`drain_leadership`).

Readiness and the leader come from ZooKeeper's own view (`dump`: the session holding
/fluss/coordinators/active, the tablet servers' ids) plus a TCP connect to each server's
port, so a killed coordinator whose session has not expired yet is not taken for a leader.

The image is the pinned release's (sut/fluss/jars.lock, staged by scripts/setup.sh).
`version=` runs another release without another image: its jars, fetched with Maven into a
folder of the user's cache (staged_folders, which the Docker backend fills), are mounted at
/opt/fluss/user-lib, which fluss-node prefers to the image's own lib (and compiles the
lease client against). `dist=` mounts a user's own distribution's lib/ there the same way,
and `source=` a Fluss checkout's own build: its server and client modules built with Maven
(sut/fluss/source_build.py, in a copy of the checkout) into a folder of the user's cache
named by the checkout's commit, so a commit is built once; test.json records the commit
(`sut_build`). The KV scan sessions the kv-scan workload needs (ScanKv) exist only in such
builds: `scanner-ttl-ms=` and `scanner-expiration-ms=` set the tablet servers'
kv.scanner.ttl and kv.scanner.expiration-interval.
`lease=off` is the negative control: the lease client answers lease calls without asking
Fluss, so nothing keeps the snapshots the holders read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

from leaseline.harness.errors import BadArguments, EnvironmentProblem
from leaseline.harness.systems.profile import Endpoint, Option, Profile, StagedFolder
from leaseline.harness.user_cache import USER_CACHE

PORT = 9123
ZK_PORT = 2181
CLIENT_PORT = 7700  # flcl's lease client service (sut/fluss/LeaseClient.java)
LOG_DIR = "/var/log/fluss"
REMOTE_LINK = "/remote"  # remote.data.dir: the same path on every server
REMOTE_VOLUME = "/fluss-remote"  # where the shared volume is mounted
USER_LIB_ENV = "LL_FLUSS_USER_LIB"  # a host folder of jars mounted at /opt/fluss/user-lib
# The KV snapshot lease API (FIP-22) the workload needs came with 0.9.0-incubating.
FIRST_LEASE_RELEASE = (0, 9, 0)
RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-[A-Za-z0-9.]+)?$")
DATABASE = "leaseline"  # where the workloads' tables live (the leaders move-leadership reads)
DRAIN_TIMEOUT_S = 20.0  # how long a drain's rebalance may take before it is given up


def _tcp_open(ip: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return True
    except OSError:
        return False


def zk_command(ip: str, command: str, timeout: float = 1.0) -> str:
    """A ZooKeeper four-letter command's answer ("" when ZooKeeper does not answer)."""
    try:
        with socket.create_connection((ip, ZK_PORT), timeout=timeout) as s:
            s.sendall(command.encode())
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


def ephemerals(dump: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """From a `dump` answer: the paths each session holds, and each session's client IP."""
    held: dict[str, list[str]] = {}
    ips: dict[str, str] = {}
    section, session = "", None
    for line in dump.splitlines():
        if line.startswith("Sessions with Ephemerals"):
            section = "ephemerals"
        elif line.startswith("Connections dump"):
            section = "connections"
        elif section == "ephemerals" and line.startswith("0x"):
            session = line.rstrip(":").strip()
            held[session] = []
        elif section == "ephemerals" and line.startswith("\t/") and session:
            held[session].append(line.strip())
        elif section == "connections" and "sessionId:" in line and "ip: /" in line:
            ip = line.split("ip: /", 1)[1].split(":", 1)[0]
            ips[line.split("sessionId:", 1)[1].strip()] = ip
    return held, ips


class Fluss(Profile):
    name = "fluss"
    compose_profile = "fluss"
    protocols = frozenset({"fluss"})
    nodes = ("flco", "flts1", "flts2", "flts3")
    aux_services = ("flzk", "flcl")
    lease_ms = 0.0  # no read lease: the snapshot lease is checked by its own checker
    images = ("fluss",)  # sut/fluss
    # Five JVMs start at once (ZooKeeper first): on 2 busy cores that took over 90 s.
    ready_timeout_s = 240.0
    fault_kinds = frozenset({"kill", "partition", "pause", "storage", "clock",
                             "move-leadership"})
    # What the Fluss-specific faults reach: partition-coordination cuts the coordinator from
    # ZooKeeper; pause-client stalls every lease holder; cut-storage points a server's
    # /remote (a link in its own filesystem, fluss-node) away from the shared volume;
    # clock-skew writes the offset libfaketime gives each server's JVM (fluss-node).
    coordination_services = ("flzk",)
    client_services = ("flcl",)
    shared_storage = (REMOTE_LINK, REMOTE_VOLUME)
    options: ClassVar[dict[str, Option]] = {
        "lease": Option("on", "off: lease calls are not sent (the negative control)",
                        "LL_FLUSS_LEASE"),
        "retained": Option("2", "kv.snapshot.num-retained", "LL_FLUSS_RETAINED"),
        "snapshot-interval": Option("2s", "kv.snapshot.interval", "LL_FLUSS_SNAPSHOT_INTERVAL"),
        "lease-duration-ms": Option("4000", "how long holders lease snapshots"),
        "expiration-check": Option("1s", "kv.snapshot.lease.expiration-check-interval",
                                   "LL_FLUSS_EXPIRATION_CHECK"),
        "clock-margin-ms": Option("500", "the clock margin the lease checker allows"),
        "heap": Option("256m", "each server's JVM heap", "LL_FLUSS_HEAP"),
        "version": Option("", "another Fluss release (0.9.0-incubating or later) instead of "
                          "the image's pinned one: its two Fluss jars are fetched with Maven "
                          "(not pinned: Maven's strict checksum policy checks them against "
                          "the .sha1 beside them) and mounted into the servers"),
        "dist": Option("", "a Fluss distribution folder of your own (its lib/, or a folder of "
                       "jars, holding fluss-server-*.jar and fluss-client-*.jar) mounted "
                       "into the servers instead of the image's jars"),
        "source": Option("", "a Fluss checkout (git) whose fluss-server and fluss-client "
                         "modules are built with Maven, once per commit, in a copy of it "
                         "(your checkout is never written to), and mounted like dist="),
        "scanner-ttl-ms": Option("3000", "kv.scanner.ttl: how long a KV scan session may be "
                                 "idle (a source= build's)", "LL_FLUSS_SCANNER_TTL_MS"),
        "scanner-expiration-ms": Option("1000", "kv.scanner.expiration-interval",
                                        "LL_FLUSS_SCANNER_EXPIRATION_MS"),
    }

    @classmethod
    def check_options(cls, opts: dict[str, str]) -> None:
        super().check_options(opts)
        if opts.get("lease", "on") not in ("on", "off"):
            raise BadArguments(f"--sut-opt lease={opts['lease']} must be on or off.")
        for k in ("retained", "lease-duration-ms", "clock-margin-ms", "scanner-ttl-ms",
                  "scanner-expiration-ms"):
            if k in opts and not opts[k].isdigit():
                raise BadArguments(f"--sut-opt {k}={opts[k]} must be a whole number.")
        given = [k for k in ("version", "dist", "source") if opts.get(k)]
        if len(given) > 1:
            raise BadArguments(f"--sut-opt {' and '.join(k + '=' for k in given)} exclude each "
                               "other: each brings its own Fluss.")
        if opts.get("source"):
            checkout_state(opts["source"])
        if opts.get("version"):
            _check_release(opts["version"], "--sut-opt version=" + opts["version"])
        if opts.get("dist"):
            dist_lib(opts["dist"])

    @classmethod
    def compose_env(cls, opts: dict[str, str]) -> dict[str, str]:
        env = super().compose_env(opts)
        if opts.get("dist"):
            env[USER_LIB_ENV] = str(dist_lib(opts["dist"]))
        return env

    @classmethod
    def staged_folders(cls, opts: dict[str, str]) -> list[StagedFolder]:
        if opts.get("source"):
            root, _, _, name = checkout_state(opts["source"])
            folder = USER_CACHE / "fluss-src" / name
            return [StagedFolder(USER_LIB_ENV, folder, (
                sys.executable, "-m", "leaseline.sut.fluss.source_build", str(root),
                str(folder)))]
        version = opts.get("version")
        if not version:
            return []
        folder = USER_CACHE / "fluss-lib" / version
        return [StagedFolder(USER_LIB_ENV, folder, (
            sys.executable, "-m", "leaseline.sut.fluss.jars", str(folder), "--version", version))]

    @classmethod
    def build_info(cls, opts: dict[str, str]) -> dict[str, Any] | None:
        """What a source= run tested: the checkout, its commit, the folder of jars."""
        if not opts.get("source"):
            return None
        root, commit, dirty, name = checkout_state(opts["source"])
        return {"source": str(root), "commit": commit, "uncommitted_changes": dirty,
                "jars": str(USER_CACHE / "fluss-src" / name)}

    # -- the Profile interface --------------------------------------------------------------
    @property
    def lease_duration_ms(self) -> int:
        return int(self.opts["lease-duration-ms"])

    @property
    def scanner_ttl_ms(self) -> int:
        return int(self.opts["scanner-ttl-ms"])

    @property
    def scanner_expiration_ms(self) -> int:
        return int(self.opts["scanner-expiration-ms"])

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        """Clients reach Fluss through the lease client service in flcl, whichever node
        they were routed to: it bootstraps from every server."""
        return Endpoint(self.cluster.ip("flcl"), CLIENT_PORT)

    def _zk_view(self) -> tuple[str | None, set[str], str | None]:
        """(active coordinator's node, tablet server ids, why not known)."""
        ip = self.cluster.ip("flzk")
        if not ip:
            return None, set(), "flzk is not running"
        if zk_command(ip, "ruok") != "imok":
            return None, set(), "ZooKeeper does not answer"
        held, ips = ephemerals(zk_command(ip, "dump"))
        by_ip = {self.cluster.ip(n): n for n in self.nodes}
        active, tablets = None, set()
        for session, paths in held.items():
            for path in paths:
                if path == "/fluss/coordinators/active":
                    active = by_ip.get(ips.get(session, ""))
                elif path.startswith("/fluss/tabletservers/ids/"):
                    tablets.add(path.rsplit("/", 1)[1])
        return active, tablets, None

    def leader(self) -> str | None:
        active, _, _ = self._zk_view()
        if active is None:
            return None
        ip = self.cluster.ip(active)
        return active if ip and _tcp_open(ip, PORT) else None

    # -- move-leadership: Fluss's admin calls, made by the client service -------------------
    def _admin(self, request: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
        """One admin request to flcl (sut/fluss/LeaseClient.java) and its reply;
        EnvironmentProblem when it cannot be asked or Fluss refused. (The default wait is
        long: flcl's first request opens its Fluss connection, which took over 10 s on a
        loaded 2-core machine.)"""
        ip = self.cluster.ip("flcl")
        try:
            with socket.create_connection((ip or "", CLIENT_PORT), timeout=timeout_s) as s:
                s.sendall((json.dumps(request) + "\n").encode())
                with s.makefile("r", encoding="utf-8") as f:
                    line = f.readline()
            reply = json.loads(line)
        except (OSError, ValueError) as e:
            raise EnvironmentProblem(f"the client service flcl did not answer {request['op']}: "
                                     f"{e}") from None
        if not isinstance(reply, dict) or not reply.get("ok"):
            why = reply.get("error") if isinstance(reply, dict) else reply
            raise EnvironmentProblem(f"Fluss refused {request['op']}: {why}")
        return reply

    @staticmethod
    def tablet_node(server_id: int) -> str:
        return f"flts{server_id}"  # docker-compose.yml: tablet-server.id N on fltsN

    def bucket_leaders(self) -> dict[tuple[str, int], str | None]:
        """(table, bucket) -> the node leading it, of every table of the workloads'
        database, as the servers' metadata says now."""
        reply = self._admin({"op": "leaders", "database": DATABASE})
        return {(e["table"], int(e["bucket"])):
                self.tablet_node(e["leader"]) if e["leader"] >= 0 else None
                for e in reply.get("leaders", [])}

    def drain_leadership(self, node: str) -> str:
        """Moves every bucket leadership off `node`, which keeps running; returns how the
        rebalance ended (COMPLETED, FAILED, TIMEOUT, ...)."""
        reply = self._admin({"op": "drain", "server": self.server_id(node),
                             "timeout_ms": int(DRAIN_TIMEOUT_S * 1000)},
                            timeout_s=DRAIN_TIMEOUT_S + 10)
        return str(reply.get("status"))

    def undrain_leadership(self, node: str) -> None:
        """Lets `node` lead again (leaderships stay where they are until something moves
        them); nothing to do on the coordinator, which leads no bucket."""
        if node.startswith("flts"):
            self._admin({"op": "undrain", "server": self.server_id(node)})

    def server_id(self, node: str) -> int:
        """The tablet server id of `node`, as Fluss's clients name a bucket's leader."""
        if not node.startswith("flts"):
            raise EnvironmentProblem(f"{node} is no tablet server: no bucket leadership to move")
        return int(node.removeprefix("flts"))

    def readiness(self) -> str | None:
        active, tablets, why = self._zk_view()
        if why:
            return why
        for node in self.nodes:
            ip = self.cluster.ip(node)
            if not ip or not _tcp_open(ip, PORT):
                return f"{node} does not accept connections on {PORT}"
        if active is None:
            return "no coordinator is active in ZooKeeper"
        if len(tablets) < len(self.nodes) - 1:
            return f"{len(tablets)} of {len(self.nodes) - 1} tablet servers registered"
        ip = self.cluster.ip("flcl")
        if not ip or not _tcp_open(ip, CLIENT_PORT):
            return f"the lease client service (flcl) does not accept connections on {CLIENT_PORT}"
        return None

    def peers(self, node: str) -> list[str]:
        """Every other server and ZooKeeper; never flcl, where the clients run."""
        return [s for s in (*self.nodes, "flzk") if s != node]

    def log_files(self, service: str) -> list[str]:
        role = {"flzk": "zookeeper", "flco": "coordinator"}.get(service, "tablet")
        return [] if service == "flcl" else [f"{LOG_DIR}/{role}.log"]


def _check_release(version: str, what: str) -> None:
    m = RELEASE.match(version)
    if not m:
        raise BadArguments(f"{what} is not a Fluss release number (e.g. 0.9.1-incubating).")
    if tuple(int(g) for g in m.groups()) < FIRST_LEASE_RELEASE:
        raise BadArguments(f"{what} is older than 0.9.0-incubating, the first Fluss release "
                           "with the KV snapshot lease API the workload needs.")


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True)


def checkout_state(source: str) -> tuple[Path, str, bool, str]:
    """A Fluss checkout's root, commit, whether it has uncommitted changes, and the name of
    its build's folder: the commit's first 12 digits, plus a hash of the changes (the diff
    and the untracked files) when there are any."""
    # $VARIABLES are expanded, so a campaign file can name a checkout each machine has
    # somewhere else (campaigns/fluss-kv-scan.json: $LEASELINE_FLUSS_SOURCE).
    root = Path(os.path.expandvars(source)).expanduser().resolve()
    if not (root / "pom.xml").is_file() or not (root / "fluss-server").is_dir() or \
            not (root / "fluss-client").is_dir():
        unset = " (is the variable set?)" if "$" in os.path.expandvars(source) else ""
        raise BadArguments(f"--sut-opt source={source} is not a Fluss checkout (no pom.xml "
                           f"with fluss-server and fluss-client beside it){unset}.")
    head = _git(root, "rev-parse", "HEAD")
    if head.returncode != 0:
        raise BadArguments(f"--sut-opt source={source} is not a git checkout: its commit "
                           "names the build.")
    commit = head.stdout.decode().strip()
    changes = hashlib.sha256(_git(root, "diff", "HEAD", "--binary").stdout)
    untracked = _git(root, "ls-files", "-z", "--others", "--exclude-standard").stdout
    for name in sorted(n for n in untracked.split(b"\0") if n):
        changes.update(name)
        path = root / name.decode(errors="replace")
        if path.is_file():
            changes.update(path.read_bytes())
    dirty = bool(_git(root, "status", "--porcelain").stdout.strip())
    return root, commit, dirty, commit[:12] + (f"-{changes.hexdigest()[:8]}" if dirty else "")


def dist_lib(dist: str) -> Path:
    """The folder of a distribution's jars: DIR/lib as Fluss's binary tarball lays it out, or
    DIR itself when it holds the jars (e.g. a folder sut/fluss/jars.py staged)."""
    root = Path(dist).expanduser().resolve()
    lib = root / "lib" if (root / "lib").is_dir() else root
    servers = sorted(lib.glob("fluss-server-*.jar"))
    if not lib.is_dir() or not servers or not any(lib.glob("fluss-client-*.jar")):
        raise BadArguments(f"--sut-opt dist={dist} holds no fluss-server-*.jar and "
                           f"fluss-client-*.jar (looked in {lib}).")
    version = servers[0].name.removeprefix("fluss-server-").removesuffix(".jar")
    if RELEASE.match(version):
        _check_release(version, f"--sut-opt dist={dist} (Fluss {version})")
    return lib
