"""How a system runs on a user's own machines: the `[host]` table of a system description.

    [host]
    dir = "~/.leaseline/leasekv"              # each node's folder (created; a template)
    upload = [{ from = "../sut/leasekv", to = "app/sut/leasekv" }]   # local -> dir/to
    setup = "test -x venv/bin/python3 || python3 -m venv venv"      # shell, or an argv list
    command = ["venv/bin/python3", "-m", "sut.leasekv", "--id", "{id}", "--peers",
               "{list.peers}"]                # the node in the foreground; Leaseline detaches it
    env = { PYTHONPATH = "{dir}/app" }
    stop = []                                 # default: SIGTERM to its process group, then KILL
    wipe = "rm -rf data"
    logs = ["node.log"]                       # relative to dir; node.log is the command's output
    timeout_s = 120                           # each command, on each node

    [lists.peers]                             # as in the system file: one item per node
    item = "{ip}:{port.raft}"                 # ([host.lists.peers] wins over [lists.peers])
    separator = ","

Templates use `{name}`, `{id}`, `{ip}` (the address from the hosts file), `{port.NAME}`,
`{opt.NAME}`, `{list.NAME}`, `{dir}` and `{home}` (the login's $HOME); `{{`/`}}` are
braces. In an argv list each element is filled in and then quoted as one word; in a shell
string each value is quoted as one word where it is put, so a node named `n 1; rm -rf ~`
stays one harmless word. Every command runs in the node's folder.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.templates import (
    Command,
    check_field,
    fail,
    list_values,
    parse_command,
    parse_env,
    parse_lists,
    parse_ports,
    render,
)

HOST_FIELDS = {"dir", "upload", "setup", "command", "env", "stop", "wipe", "logs", "timeout_s",
               "setup_timeout_s", "stop_grace_s", "lists"}
VARS = ("name", "id", "ip", "dir", "home", "port.", "opt.", "list.")
DIR_VARS = ("name", "id", "opt.")
@dataclass(frozen=True)
class Upload:
    local: Path
    remote: str  # relative to the node's folder


@dataclass(frozen=True)
class HostCommands:
    dir: str = "~/.leaseline/{name}"
    uploads: tuple[Upload, ...] = ()
    setup: Command = field(default_factory=Command)
    command: Command = field(default_factory=Command)
    env: dict[str, str] = field(default_factory=dict)
    stop: Command = field(default_factory=Command)
    wipe: Command = field(default_factory=Command)
    logs: tuple[str, ...] = ("node.log",)
    timeout_s: float = 120.0
    setup_timeout_s: float = 600.0
    stop_grace_s: float = 5.0
    ports: dict[str, int] = field(default_factory=dict)
    lists: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (item, separator)
    opts: dict[str, str] = field(default_factory=dict)

    def values(self, node: str, node_id: int, ip: str, directory: str, home: str,
               peers: list[tuple[str, int, str]]) -> dict[str, str]:
        """The template values of one node; peers: (name, id, ip) of every node in order."""
        base = {f"port.{k}": str(v) for k, v in self.ports.items()}
        base |= {f"opt.{k}": v for k, v in self.opts.items()}
        lists = list_values(self.lists, base, peers)
        return base | lists | {"name": node, "id": str(node_id), "ip": ip, "dir": directory,
                              "home": home}

    def node_dir(self, node: str, node_id: int) -> str:
        """The folder template filled in (raw: it is quoted wherever it is used)."""
        return render(self.dir, {"name": node, "id": str(node_id)}
                      | {f"opt.{k}": v for k, v in self.opts.items()})


def parse_host_table(data: dict[str, Any], base: Path, label: str,
                     opts: Mapping[str, str] | None = None) -> HostCommands:
    """The `[host]`, `[ports]` and `[lists]` tables of a description; BadArguments (one
    sentence naming the field) when they cannot work. base: the file's folder."""
    host = data.get("host")
    if not isinstance(host, dict):
        raise fail(label, "host", "is missing (the table of commands that set up, start, stop "
                                   "and wipe a node on a machine of its own)")
    unknown = sorted(set(host) - HOST_FIELDS)
    if unknown:
        raise fail(label, f"host.{unknown[0]}", f"is not a field of [host] "
                                                 f"(valid: {', '.join(sorted(HOST_FIELDS))})")
    ports = parse_ports(label, data.get("ports"))
    # [host.lists.NAME] overrides [lists.NAME]: in Docker a peer list may name the nodes'
    # host names, which the user's machines need not resolve ({ip} then).
    lists = parse_lists(label, [("lists", data.get("lists")), ("host.lists", host.get("lists"))])

    directory = host.get("dir", "~/.leaseline/{name}")
    if not isinstance(directory, str) or not directory.strip():
        raise fail(label, "host.dir", "must be a non-empty string")
    check_field(label, "host.dir", directory, DIR_VARS)
    if not (directory.startswith("/") or directory.startswith("~/")):
        raise fail(label, "host.dir", "must be absolute or start with ~/")

    uploads = []
    for i, up in enumerate(host.get("upload") or []):
        where = f"host.upload[{i}]"
        if not isinstance(up, dict) or not isinstance(up.get("from"), str) \
                or not isinstance(up.get("to"), str):
            raise fail(label, where, "must be a table with from (here) and to (on the node)")
        local = (base / up["from"]).resolve()
        if not local.exists():
            raise fail(label, f"{where}.from", f"names {up['from']}, which does not exist")
        if up["to"].startswith("/") or ".." in Path(up["to"]).parts:
            raise fail(label, f"{where}.to", "must be a path inside the node's folder")
        uploads.append(Upload(local, up["to"]))

    command = parse_command(label, "host.command", host.get("command"), VARS)
    if command.empty:
        raise fail(label, "host.command", "is missing (the node's server, in the foreground)")
    env_raw = parse_env(label, "host.env", host.get("env"), VARS)
    logs = host.get("logs", ["node.log"])
    if not isinstance(logs, list) or not all(isinstance(p, str) for p in logs):
        raise fail(label, "host.logs", "must be a list of paths")
    numbers = {}
    for key in ("timeout_s", "setup_timeout_s", "stop_grace_s"):
        if key in host:
            v = host[key]
            if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
                raise fail(label, f"host.{key}", "must be a positive number of seconds")
            numbers[key] = float(v)
    return HostCommands(
        dir=directory, uploads=tuple(uploads),
        setup=parse_command(label, "host.setup", host.get("setup"), VARS), command=command,
        env=dict(env_raw), stop=parse_command(label, "host.stop", host.get("stop"), VARS),
        wipe=parse_command(label, "host.wipe", host.get("wipe"), VARS), logs=tuple(logs),
        ports=ports, lists=lists, opts=dict(opts or {}), **numbers,
    )


def load_host_commands(path: Path, opts: Mapping[str, str] | None = None) -> HostCommands:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise BadArguments(f"{path.name}: cannot be read as TOML ({e}).") from None
    return parse_host_table(data, path.parent, path.name, opts)
