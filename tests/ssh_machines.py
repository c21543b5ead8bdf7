"""Stand-ins for a user's own machines: containers running Debian's sshd (tests/images/sshd).

This is the tests' own set-up, the only place the SSH tests use Docker: Leaseline itself is
then pointed at the containers' addresses with a hosts file, a fresh key pair and a
known_hosts written here, and treats them as remote machines.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import paramiko

ROOT = Path(__file__).resolve().parent.parent
LABEL = "io.leaseline.ssh-test"


@dataclass
class Machines:
    names: list[str]
    ips: dict[str, str]
    host_keys: dict[str, list[str]]  # name -> "type base64" lines
    key_file: Path
    known_hosts: Path
    folder: Path
    containers: dict[str, object]

    def hosts_toml(self, names: dict[str, str] | None = None, extra: str = "",
                   known_hosts: Path | None = None, overrides: dict[str, str] | None = None,
                   key_file: Path | None = None, user: str = "root") -> Path:
        """A hosts file for these machines; names maps a container to the node name used."""
        names = names or {n: n for n in self.names}
        kh = known_hosts or self.known_hosts
        lines = [f"known_hosts = {str(kh)!r}", "[defaults]", f"user = {_toml_str(user)}",
                 f"key_file = {str(key_file or self.key_file)!r}", "connect_timeout_s = 5",
                 extra]
        for n in self.names:
            lines += ["[[node]]", f"name = {_toml_str(names[n])}",
                      f"address = {_toml_str(self.ips[n])}"]
            if overrides and n in overrides:
                lines.append(overrides[n])
        path = self.folder / f"hosts-{time.monotonic_ns()}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def known_hosts_lines(self) -> str:
        return "".join(f"{self.ips[n]} {k}\n" for n in self.names for k in self.host_keys[n])

    def exec(self, name: str, cmd: str) -> tuple[int, str]:
        r = self.containers[name].exec_run(["sh", "-c", cmd])  # type: ignore[attr-defined]
        return r.exit_code, r.output.decode(errors="replace")


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_image() -> str:
    """The sshd image (tests/images/sshd plus leasekv's requirements); its tag."""
    from leaseline.harness.clusters.docker.images import build_base, content_tag
    from leaseline.harness.clusters.docker.images import build_image as build

    build_base(lambda _m: None)
    with tempfile.TemporaryDirectory(prefix="ll-sshd-ctx-") as tmp:
        ctx = Path(tmp)
        for f in (ROOT / "tests/images/sshd").iterdir():
            shutil.copy(f, ctx / f.name)
        shutil.copy(ROOT / "sut/leasekv/requirements-image.txt", ctx / "requirements.txt")
        tag = content_tag("sshd-test", ctx)
        build(tag, ctx, lambda _m: None)
    return tag


@contextmanager
def ssh_machines(count: int = 5, tmpfs: dict[int, str] | None = None) -> Iterator[Machines]:
    """count sshd containers on a network of their own, removed afterwards.

    tmpfs: container index -> "path:size" mounted there (a small disk to fill)."""
    from leaseline.harness.clusters.docker.client import client

    image = build_image()
    dc = client()
    tag = f"ll-sshd-{os.getpid()}-{time.monotonic_ns() % 10**8}"
    folder = Path(tempfile.mkdtemp(prefix="ll-ssh-test-"))
    key = paramiko.ECDSAKey.generate(bits=256)
    key_file = folder / "id_ecdsa"
    key.write_private_key_file(str(key_file))
    public = f"{key.get_name()} {key.get_base64()} leaseline-test"
    net = dc.networks.create(tag, driver="bridge", labels={LABEL: tag})
    containers: dict[str, object] = {}
    try:
        for i in range(count):
            name = f"m{i + 1}"
            kwargs = {}
            if tmpfs and i in tmpfs:
                path, size = tmpfs[i].split(":")
                kwargs["tmpfs"] = {path: f"size={size}"}
            containers[name] = dc.containers.run(
                image, name=f"{tag}-{name}", hostname=name, detach=True, init=True,
                cap_add=["NET_ADMIN"], network=tag, labels={LABEL: tag},
                environment={"LL_AUTHORIZED_KEY": public}, **kwargs)
        ips, keys = {}, {}
        deadline = time.monotonic() + 60
        for name, c in containers.items():
            while True:
                c.reload()  # type: ignore[attr-defined]
                logs = c.logs().decode(errors="replace")  # type: ignore[attr-defined]
                lines = [ln.split(" ", 1)[1].rsplit(" ", 1)[0] for ln in logs.splitlines()
                         if ln.startswith("host-key ")]
                if len(lines) == 3 and "Server listening" in logs:
                    break
                assert time.monotonic() < deadline, f"sshd in {name} did not start: {logs}"
                time.sleep(0.2)
            keys[name] = lines
            ips[name] = c.attrs["NetworkSettings"]["Networks"][tag]["IPAddress"]  # type: ignore[attr-defined]
        machines = Machines(list(containers), ips, keys, key_file, folder / "known_hosts",
                            folder, containers)
        machines.known_hosts.write_text(machines.known_hosts_lines())
        yield machines
    finally:
        for c in containers.values():
            c.remove(force=True)  # type: ignore[attr-defined]
        net.remove()
        shutil.rmtree(folder, ignore_errors=True)
