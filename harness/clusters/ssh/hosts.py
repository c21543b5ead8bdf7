"""The hosts file of `leaseline run --hosts FILE`: which machines are the cluster's nodes.

    known_hosts = "~/.ssh/known_hosts"   # optional; the default shown
    [defaults]                           # optional; every field of a node but name/address
    user = "leaseline"
    port = 22
    key_file = "~/.ssh/id_ed25519"
    sudo = true                          # iptables, tc and signals through `sudo -n`
    [[node]]
    name = "n1"
    address = "10.0.0.11"                # what the other nodes and Leaseline reach it at

A file that cannot work is refused (exit 254) with one sentence naming the field. Secrets
never live here: a key's passphrase or a password is read from the environment variable
named by `passphrase_env` / `password_env`, and only when connecting.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leaseline.harness.errors import BadArguments

NODE_FIELDS = {"name", "address", "port", "user", "key_file", "passphrase_env", "password_env",
               "sudo", "connect_timeout_s", "command_timeout_s"}
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


@dataclass(frozen=True)
class HostSpec:
    """One node of the cluster, reached over SSH. Holds no secret, only where to find one."""

    name: str
    address: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    passphrase_env: str | None = None
    password_env: str | None = None
    sudo: bool = False
    connect_timeout_s: float = 10.0
    command_timeout_s: float = 120.0

    def public(self) -> dict[str, Any]:
        """What a run folder may record about the node (test.json): no path to a key."""
        return {"name": self.name, "address": self.address, "port": self.port,
                "user": self.user, "sudo": self.sudo}


@dataclass(frozen=True)
class HostsFile:
    path: Path
    nodes: tuple[HostSpec, ...]
    known_hosts: Path

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.nodes)

    def host(self, name: str) -> HostSpec:
        return next(h for h in self.nodes if h.name == name)


def _field(where: str, key: str, value: Any, kind: type | tuple[type, ...]) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise BadArguments(f"{where}: {key} must be a {_kind_name(kind)}, got {value!r}.")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "string", int: "whole number", float: "number", bool: "true or false"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def _node(where: str, raw: dict[str, Any], base: Path) -> HostSpec:
    unknown = sorted(set(raw) - NODE_FIELDS)
    if unknown:
        raise BadArguments(f"{where}: unknown field {unknown[0]!r} "
                           f"(valid: {', '.join(sorted(NODE_FIELDS))}).")
    for key in ("name", "address"):
        if key not in raw:
            raise BadArguments(f"{where}: {key} is missing.")
    name = _field(where, "name", raw["name"], str)
    address = _field(where, "address", raw["address"], str)
    if not name.strip() or not address.strip():
        raise BadArguments(f"{where}: name and address must not be empty.")
    if "/" in name or any(ord(ch) < 32 for ch in name) or name in (".", ".."):
        # It names the node's folder in the run folder (nodes/<name>/).
        raise BadArguments(f"{where}: name {name!r} cannot be a folder name (no / or control "
                           "characters).")
    port = _field(where, "port", raw.get("port", 22), int)
    if not 0 < port < 65536:
        raise BadArguments(f"{where}: port must be between 1 and 65535, got {port}.")
    key_file = raw.get("key_file")
    if key_file is not None:
        key_file = _field(where, "key_file", key_file, str)
        resolved = (base / Path(key_file).expanduser()).resolve()
        if not resolved.is_file():
            raise BadArguments(f"{where}: key_file {key_file} does not exist.")
        key_file = str(resolved)
    for env_key in ("passphrase_env", "password_env"):
        if env_key in raw:
            _field(where, env_key, raw[env_key], str)
    timeouts = {}
    for t in ("connect_timeout_s", "command_timeout_s"):
        if t in raw:
            timeouts[t] = float(_field(where, t, raw[t], (int, float)))
            if timeouts[t] <= 0:
                raise BadArguments(f"{where}: {t} must be positive, got {raw[t]}.")
    return HostSpec(
        name=name, address=address, port=port,
        user=_field(where, "user", raw.get("user", "root"), str),
        key_file=key_file, passphrase_env=raw.get("passphrase_env"),
        password_env=raw.get("password_env"),
        sudo=_field(where, "sudo", raw.get("sudo", False), bool), **timeouts,
    )


def load_hosts(path: Path | str) -> HostsFile:
    """Parses and checks a hosts file; BadArguments (one sentence) when it cannot work."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise BadArguments(f"hosts file {path} does not exist.") from None
    except OSError as e:
        raise BadArguments(f"hosts file {path} cannot be read ({e.strerror}).") from None
    except tomllib.TOMLDecodeError as e:
        raise BadArguments(f"hosts file {path} is not valid TOML ({e}).") from None
    unknown = sorted(set(raw) - {"known_hosts", "defaults", "node"})
    if unknown:
        raise BadArguments(f"hosts file {path}: unknown field {unknown[0]!r} "
                           "(valid: known_hosts, defaults, node).")
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        raise BadArguments(f"hosts file {path}: [defaults] must be a table.")
    if {"name", "address"} & set(defaults):
        raise BadArguments(f"hosts file {path}: [defaults] cannot set a node's name or address.")
    nodes_raw = raw.get("node")
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise BadArguments(f"hosts file {path} names no node (add [[node]] tables).")
    base = path.resolve().parent
    nodes = []
    for i, entry in enumerate(nodes_raw):
        where = f"hosts file {path}, node {i + 1}"
        if not isinstance(entry, dict):
            raise BadArguments(f"{where} must be a table.")
        nodes.append(_node(where, {**defaults, **entry}, base))
    names = [n.name for n in nodes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BadArguments(f"hosts file {path}: node name {dupes[0]!r} is used twice.")
    known = raw.get("known_hosts", DEFAULT_KNOWN_HOSTS)
    _field(f"hosts file {path}", "known_hosts", known, str)
    return HostsFile(path, tuple(nodes), (base / Path(os.path.expanduser(known))).resolve())
