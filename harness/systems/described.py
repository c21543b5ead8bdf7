"""A system described in one TOML file (harness/systems/system_file.py) as a Profile.

`described_profile(path, opts)` makes a Profile subclass from the description: its nodes,
ports, lease window and fault kinds are class attributes (they depend on the options, e.g.
`nodes=5`), and its instances answer leader(), readiness() and transfer_leader() by the
probes the file names: a Redis INFO field, an HTTP status, a JSON field, or a command run
on the control machine. The compose document of a run is made here (`compose_document`)
with a static address per node and every node's name in every container's /etc/hosts, so
a node keeps its name and address across kill, restart and pause. What the run learns
later (the subnet, the files taken out of the image) the cluster holds, never the class.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.parallel import in_parallel
from leaseline.harness.systems.probes import PROBE_TIMEOUT_S, http, info_fields, redis_command
from leaseline.harness.systems.profile import Endpoint, Option, Profile
from leaseline.harness.systems.system_file import SystemDescription, load_system
from leaseline.harness.systems.templates import Command, TemplateProblem, list_values, render

T = TypeVar("T")
CONTROL_TIMEOUT_S = 30.0
TRANSFER_SETTLE_S = 5.0


def json_field(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


class DescribedProfile(Profile):
    """The Profile of a described system; `described_profile` makes its subclasses."""

    description: ClassVar[SystemDescription]

    @classmethod
    def check_options(cls, opts: dict[str, str]) -> None:
        load_system(cls.description.path, opts)  # the file refuses unknown options, bad values

    # -- addresses and templates ------------------------------------------------------
    def node_id(self, node: str) -> int:
        return self.nodes.index(node) + 1

    def address(self, node: str) -> str:
        """The node's address, kept while it is down where the cluster fixed it."""
        return str(self.cluster.address(node))

    @classmethod
    def values_for(cls, nodes: tuple[str, ...], ip_of: Callable[[str], str],
                   host_files: dict[str, Path], node: str | None = None) -> dict[str, str]:
        """Template values: ports, options, lists, files, and those of `node` if given."""
        d = cls.description
        base = d.base_values()
        values = base | list_values(d.lists, base, [(n, i, ip_of(n))
                                                    for i, n in enumerate(nodes, 1)])
        values |= {f"file.{f}": str(p) for f, p in host_files.items()}
        if node is not None:
            values |= {"name": node, "id": str(nodes.index(node) + 1), "ip": ip_of(node),
                       "exe": d.image.exe}
        return values

    def _values(self, node: str | None = None) -> dict[str, str]:
        return self.values_for(self.nodes, self.address, self.cluster.host_files, node)

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return Endpoint(self.address(node), self.description.ports[protocol])

    def log_files(self, service: str) -> list[str]:
        return list(self.description.log_files)

    # -- probes -------------------------------------------------------------------------
    def _control(self, command: Command, values: dict[str, str]
                 ) -> subprocess.CompletedProcess[str]:
        try:
            argv = command.args(values)
            return subprocess.run(argv, capture_output=True, text=True, timeout=CONTROL_TIMEOUT_S)
        except TemplateProblem as e:
            raise EnvironmentProblem(f"{self.name}: a command {e}.") from None
        except (OSError, subprocess.TimeoutExpired) as e:
            raise EnvironmentProblem(f"{self.name}: a command on this machine failed: {e}.") \
                from None

    def _node_named(self, value: Any) -> str | None:
        """The node a value names: its name, id, address, or address:port."""
        text = str(value).strip() if value is not None else ""
        if not text:
            return None
        candidates = [text]
        if ":" in text:
            candidates.append(text.rsplit(":", 1)[0].strip("[]"))
        for c in candidates:
            for n in self.nodes:
                if c in (n, str(self.node_id(n)), self.address(n)):
                    return n
        return None

    def _redis_info(self, node: str) -> dict[str, str] | None:
        spec = self.description.leader
        try:
            args = ("INFO", spec.section) if spec.section else ("INFO",)
            return info_fields(str(redis_command(self.address(node),
                                                 self.description.ports["redis"], *args) or ""))
        except (OSError, ValueError):
            return None

    def _json(self, node: str) -> Any:
        try:
            code, body = http("GET", render(self.description.leader.url, self._values(node)))
            return json.loads(body) if code == 200 else None
        except (OSError, ValueError):
            return None

    def _by_majority(self, views: dict[str, Any], field: str) -> str | None:
        """The node a majority of all nodes name in `field`, if it confirms it leads."""
        votes = Counter(n for v in views.values()
                        if (n := self._node_named(json_field(v, field))) is not None)
        if not votes:
            return None
        node, count = votes.most_common(1)[0]
        if count <= len(self.nodes) // 2:
            return None
        confirm = self.description.leader.confirm
        if confirm is not None and str(json_field(views.get(node), confirm[0])) != confirm[1]:
            return None
        return node

    def _each(self, probe: Callable[[str], T]) -> dict[str, T]:
        """probe(node) for every node at once: a frozen node costs one timeout, not n."""
        return in_parallel(probe, self.nodes)

    def leader(self) -> str | None:
        spec = self.description.leader
        if spec.kind == "redis-info":
            return self._by_majority(self._each(self._redis_info), spec.key)
        if spec.kind == "http-json":
            return self._by_majority(self._each(self._json), spec.key)
        if spec.kind == "http":
            answering = [n for n, ok in self._each(lambda n: self._answers(spec.url, n)).items()
                         if ok]
            return answering[0] if len(answering) == 1 else None
        r = self._control(spec.command, self._values())
        return self._node_named(r.stdout.strip().splitlines()[0]) \
            if r.returncode == 0 and r.stdout.strip() else None

    def _answers(self, url: str, node: str) -> bool:
        try:
            return http("GET", render(url, self._values(node)))[0] == 200
        except OSError:
            return False

    def readiness(self) -> str | None:
        d = self.description
        for node in self.nodes:
            ip = self.address(node)
            if self.cluster.known_stopped(node):
                return f"{node} is not running"
            if "redis" in d.protocols:
                try:
                    redis_command(ip, d.ports["redis"], "PING")
                except (OSError, ValueError) as e:
                    return f"{node} does not answer PING on its Redis port ({e})"
            if "dynamodb" in d.protocols:
                try:
                    socket.create_connection((ip, d.ports["dynamodb"]), PROBE_TIMEOUT_S).close()
                except OSError as e:
                    return f"{node} does not accept connections on its DynamoDB port ({e})"
            if d.ready.http and not self._answers(d.ready.http, node):
                return f"{node} does not answer 200 at {render(d.ready.http, self._values(node))}"
        leader = self.leader()
        if leader is None:
            return "the nodes do not agree on a leader"
        if d.ready.leader_http and not self._answers(d.ready.leader_http, leader):
            return f"the leader {leader} does not answer 200 at its leader URL"
        if not d.ready.command.empty:
            r = self._control(d.ready.command, self._values())
            if r.returncode != 0:
                return f"the readiness command says no ({(r.stdout + r.stderr).strip()[-200:]})"
        return None

    def transfer_leader(self, to: str | None = None) -> str:
        """The description's transfer command, run on this machine against the leader; then
        waits until another node leads (a few seconds at most)."""
        old = self.leader()
        if old is None:
            raise EnvironmentProblem(f"{self.name} has no leader to transfer leadership from.")
        values = self._values() | {"leader": old, "leader_ip": self.address(old)}
        r = self._control(self.description.transfer, values)
        if r.returncode != 0:
            why = (r.stderr or r.stdout).strip().splitlines()
            raise EnvironmentProblem(f"{self.name} refused to transfer leadership: "
                                     f"{why[-1][:200] if why else f'exit {r.returncode}'}")
        deadline = time.monotonic() + TRANSFER_SETTLE_S
        while time.monotonic() < deadline:
            new = self.leader()
            if new is not None and new != old:
                return new
            time.sleep(0.1)
        raise EnvironmentProblem(f"{self.name}: {old} still leads {TRANSFER_SETTLE_S:g} s after "
                                 "the transfer command.")

    # -- the compose file of a run --------------------------------------------------------
    @classmethod
    def compose_document(cls, image: str, subnet: str, host_files: dict[str, Path]
                         ) -> dict[str, Any]:
        """The compose project of one run: each node on `subnet` at a fixed address, every
        node's name in every container's /etc/hosts (so a killed node's name still
        resolves), its data in an anonymous volume that a restart keeps."""
        d = cls.description
        ips = {n: static_ip(subnet, i) for i, n in enumerate(cls.nodes, 1)}
        services: dict[str, Any] = {}
        for node in cls.nodes:
            values = cls.values_for(cls.nodes, ips.__getitem__, host_files, node)
            service: dict[str, Any] = {
                "image": image,
                "hostname": node,
                "entrypoint": d.command.args(values),
                "command": [],
                "environment": {k: render(v, values) for k, v in d.env.items()},
                "labels": {"io.leaseline.role": "node"},
                "networks": {"net": {"ipv4_address": ips[node]}},
                "extra_hosts": [f"{n}:{ip}" for n, ip in ips.items() if n != node],
            }
            if d.data_dir:
                service["volumes"] = [d.data_dir]
            services[node] = service
        # Containers that are not nodes take addresses from the upper half only: a killed
        # node's address stays free for its restart.
        ip_range = subnet.rsplit(".", 1)[0] + ".128/25"
        return {"services": services,
                "networks": {"net": {"ipam": {"config": [{"subnet": subnet,
                                                          "ip_range": ip_range}]}}}}


def static_ip(subnet: str, node_id: int) -> str:
    """Node i's address on a /24 test network: .10 + i (the gateway is .1)."""
    return subnet.rsplit(".", 1)[0] + f".{10 + node_id}"


def described_profile(path: Path, opts: dict[str, str] | None = None,
                      name: str | None = None,
                      probes: type[DescribedProfile] = DescribedProfile) -> type[DescribedProfile]:
    """The Profile class of the system the file at `path` describes, with `opts` filled in
    (BadArguments naming the field when the file is wrong). `probes`: a subclass whose
    leader, readiness and transfer probes replace the file's (a built-in system's own)."""
    d = load_system(path, opts or {})
    attrs: dict[str, Any] = {
        "description": d,
        "name": name or d.name,
        "compose_profile": d.name,
        "protocols": d.protocols,
        "features": d.features,
        "nodes": d.nodes,
        "lease_ms": d.lease_ms,
        "images": (),
        "fault_kinds": d.fault_kinds,
        "unavailable_faults": d.unavailable_faults,
        "default_client_routing": d.default_client_routing,
        "options": {k: Option(o.default, o.help) for k, o in d.options.items()},
        "redis_protocol": d.redis_protocol,
        "hosts_description": d.path,
    }
    return type(f"Described_{d.name}", (probes,), attrs)
