"""A system in one file: the TOML description `leaseline run --sut path.toml` reads
(docs/system-files.md), checked completely before anything starts.

`load_system(path, opts)` returns a SystemDescription with the options filled in: node
names, image source, each node's command and environment (templates, harness/systems/templates.py),
ports per protocol, how to find the leader, when the cluster is ready, the lease window,
fault kinds, an optional transfer command and log files. Anything wrong or missing is
BadArguments with one sentence naming the field ("system.toml: [leader] kind must be ...").
The `[host]` table of the same file (harness/systems/host_system.py) describes SSH runs; `[ports]`
and `[lists]` are shared between the two.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.client_models import MODELS, NAMES, canonical
from leaseline.harness.systems.profile import FEATURES
from leaseline.harness.systems.templates import (
    Command,
    TemplateProblem,
    check_field,
    fail,
    list_values,
    parse_command,
    parse_env,
    parse_lists,
    parse_ports,
    render,
)

TOP_FIELDS = {"name", "lease_ms", "protocols", "features", "fault_kinds", "redis_protocol",
              "default_client_routing", "options", "nodes", "image", "node", "ports", "lists",
              "leader", "ready", "transfer", "host"}
PROTOCOLS = ("redis", "dynamodb")
FAULT_KINDS = ("kill", "partition", "pause", "transfer-leader", "clock")
LEADER_KINDS = ("redis-info", "http", "http-json", "command")
IMAGE_SOURCES = ("name", "build", "binary", "source")
OPT_VARS = ("opt.",)
NODE_VARS = ("name", "id", "ip", "port.", "opt.", "list.", "exe")
URL_VARS = ("name", "id", "ip", "port.", "opt.")
CONTROL_VARS = ("port.", "opt.", "list.", "file.")
TRANSFER_VARS = (*CONTROL_VARS, "leader", "leader_ip")


@dataclass(frozen=True)
class OptionSpec:
    default: str
    help: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImageSpec:
    """Where the nodes' image comes from: exactly one source (after options are filled in)."""

    source: str  # one of IMAGE_SOURCES
    value: str  # an image name, or a path (absolute) for build, binary, source
    exe: str  # the server's path inside the image ({exe})
    # More files put into the image and usable on this machine ({file.NAME}): found beside
    # the binary (those missing are left out) or built from source; none for name/build.
    files: tuple[str, ...] = ()
    build: tuple[Command, ...] = ()  # source: commands run in the checkout, {out} the output
    # A folder on this machine where files not beside the binary are found (`tools`), e.g.
    # raftadmin for an image given by name, which has none of them on this machine.
    tools: str = ""


@dataclass(frozen=True)
class LeaderSpec:
    kind: str  # one of LEADER_KINDS
    key: str = ""  # redis-info, http-json: the field naming the leader
    confirm: tuple[str, str] | None = None  # (field, value) the named leader must show
    url: str = ""  # http, http-json
    section: str = ""  # redis-info: the INFO section asked for
    command: Command = field(default_factory=Command)


@dataclass(frozen=True)
class ReadySpec:
    http: str = ""  # every node answers 200
    leader_http: str = ""  # the leader answers 200
    command: Command = field(default_factory=Command)  # on the control machine, exit 0


@dataclass(frozen=True)
class SystemDescription:
    name: str
    path: Path
    options: dict[str, OptionSpec]
    opts: dict[str, str]  # every option's value, defaults included
    nodes: tuple[str, ...]
    protocols: frozenset[str]
    features: frozenset[str]  # what its endpoints speak beyond single keys (profile.FEATURES)
    ports: dict[str, int]
    lists: dict[str, tuple[str, str]]
    image: ImageSpec
    command: Command
    env: dict[str, str]
    data_dir: str | None
    log_files: tuple[str, ...]
    leader: LeaderSpec
    ready: ReadySpec
    lease_ms: float
    fault_kinds: frozenset[str]
    unavailable_faults: dict[str, str]  # fault kind -> why this configuration lacks it
    transfer: Command
    redis_protocol: int | None
    default_client_routing: str

    def base_values(self) -> dict[str, str]:
        return ({f"port.{k}": str(v) for k, v in self.ports.items()}
                | {f"opt.{k}": v for k, v in self.opts.items()})


def _table(label: str, data: dict[str, Any], key: str, fields: set[str],
           required: bool = True) -> dict[str, Any]:
    raw = data.get(key)
    if raw is None and not required:
        return {}
    if not isinstance(raw, dict):
        raise fail(label, f"[{key}]", "is missing" if raw is None else "must be a table")
    unknown = sorted(set(raw) - fields)
    if unknown:
        raise fail(label, f"[{key}] {unknown[0]}",
                   f"is not a field of [{key}] (valid: {', '.join(sorted(fields))})")
    return raw


def _opt_text(label: str, where: str, raw: Any, opts: Mapping[str, str]) -> str:
    """A string field that may use {opt.NAME}, filled in."""
    if not isinstance(raw, str):
        raise fail(label, where, "must be a string")
    check_field(label, where, raw, OPT_VARS)
    return render(raw, {f"opt.{k}": v for k, v in opts.items()})


def _number(label: str, where: str, raw: Any, opts: Mapping[str, str]) -> float:
    text = _opt_text(label, where, raw, opts) if isinstance(raw, str) else raw
    try:
        if isinstance(text, bool):
            raise ValueError
        return float(text)
    except (TypeError, ValueError):
        raise fail(label, where, f"must be a number, got {text!r}") from None


def _options(label: str, data: dict[str, Any], given: Mapping[str, str],
             system: str) -> tuple[dict[str, OptionSpec], dict[str, str]]:
    raw = data.get("options") or {}
    if not isinstance(raw, dict):
        raise fail(label, "[options]", "must be a table of [options.NAME] tables")
    specs: dict[str, OptionSpec] = {}
    for key, spec in raw.items():
        where = f"[options.{key}]"
        if not isinstance(spec, dict) or not isinstance(spec.get("default", ""), str | int):
            raise fail(label, where, "must be a table with default (a string) and help")
        choices = spec.get("choices", [])
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise fail(label, f"{where} choices", "must be a list of strings")
        specs[key] = OptionSpec(str(spec.get("default", "")), str(spec.get("help", "")),
                                tuple(choices))
    unknown = sorted(set(given) - set(specs))
    if unknown:
        raise BadArguments(f"--sut-opt {unknown[0]} is not an option of {system} "
                           f"(valid: {', '.join(sorted(specs)) or 'none'}).")
    opts = {k: s.default for k, s in specs.items()} | {k: str(v) for k, v in given.items()}
    for key, spec in specs.items():
        if spec.choices and opts[key] not in spec.choices:
            raise BadArguments(f"--sut-opt {key}={opts[key]} is not one of "
                               f"{', '.join(spec.choices)}.")
    return specs, opts


def _nodes(label: str, data: dict[str, Any], opts: Mapping[str, str]) -> tuple[str, ...]:
    t = _table(label, data, "nodes", {"count", "name", "names"})
    if "names" in t:
        names = t["names"]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise fail(label, "[nodes] names", "must be a non-empty list of strings")
    else:
        count = _number(label, "[nodes] count", t.get("count", 3), opts)
        if count != int(count) or not 1 <= count <= 9:
            raise fail(label, "[nodes] count", f"must be a whole number from 1 to 9, got {count:g}")
        pattern = t.get("name", "n{id}")
        if not isinstance(pattern, str):
            raise fail(label, "[nodes] name", "must be a string")
        check_field(label, "[nodes] name", pattern, ("id",))
        names = [render(pattern, {"id": str(i)}) for i in range(1, int(count) + 1)]
    for n in names:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", n):
            raise fail(label, "[nodes]", f"names a node {n!r}: node names must be lowercase "
                                         "letters, digits and '-' (they are host names)")
    if len(set(names)) != len(names):
        raise fail(label, "[nodes]", "names a node twice")
    return tuple(names)


def _path(label: str, where: str, text: str, base: Path, folder: bool) -> Path:
    path = (base / Path(text).expanduser()).resolve()
    if folder and not path.is_dir():
        raise fail(label, where, f"names {text}, which is not a folder")
    if not folder and not path.is_file():
        raise fail(label, where, f"names {text}, which is not a file")
    return path


def _image(label: str, data: dict[str, Any], opts: Mapping[str, str], base: Path) -> ImageSpec:
    t = _table(label, data, "image", {*IMAGE_SOURCES, "exe", "server", "files",
                                      "build_commands", "tools"})
    given = {k: _opt_text(label, f"[image] {k}", t[k], opts) for k in IMAGE_SOURCES if k in t}
    chosen = [k for k, v in given.items() if v.strip()]
    if len(chosen) != 1:
        opt_names = [m for k in t if k in IMAGE_SOURCES
                     for m in re.findall(r"\{opt\.([^{}]+)\}", t[k])]
        got = "none" if not chosen else " and ".join(chosen)
        if opt_names:
            raise fail(label, "[image]", "needs exactly one of --sut-opt "
                                         f"{', '.join(n + '=' for n in opt_names)} (got {got})")
        raise fail(label, "[image]", f"needs exactly one of name, build, binary or source "
                                     f"(got {got})")
    source = chosen[0]
    value = given[source].strip()
    tools_text = _opt_text(label, "[image] tools", t.get("tools", ""), opts).strip()
    tools = ""
    if tools_text:
        tools_base = Path.cwd() if "{opt." in str(t["tools"]) else base
        tools = str(_path(label, "[image] tools", tools_text, tools_base, folder=True))
    if "{opt." in str(t[source]):  # a path given on the command line is relative to its cwd
        base = Path.cwd()
    files = t.get("files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) and "/" not in f for f in files):
        raise fail(label, "[image] files", "must be a list of file names")
    build: tuple[Command, ...] = ()
    in_tools = [f for f in files if tools and (Path(tools) / f).is_file()]
    if source == "name":
        exe = _opt_text(label, "[image] exe", t.get("exe", ""), opts)
        files = in_tools
    elif source == "build":
        value = str(_path(label, "[image] build", value, base, folder=True))
        if not (Path(value) / "Dockerfile").is_file():
            raise fail(label, "[image] build", f"names {value}, which has no Dockerfile")
        exe = _opt_text(label, "[image] exe", t.get("exe", ""), opts)
        files = in_tools
    elif source == "binary":
        path = _path(label, "[image] binary", value, base, folder=False)
        value, exe = str(path), f"/usr/local/bin/{path.name}"
        # beside the binary, else in tools; the others: not here
        files = [f for f in files if (path.parent / f).is_file() or f in in_tools]
    else:
        path = _path(label, "[image] source", value, base, folder=True)
        raw = t.get("build_commands")
        if not isinstance(raw, list) or not raw:
            raise fail(label, "[image] build_commands", "must list the commands that build "
                                                        "the source into {out}")
        build = tuple(parse_command(label, f"[image] build_commands[{i}]", c, ("out", "opt."))
                      for i, c in enumerate(raw))
        server = t.get("server", "")
        if not isinstance(server, str) or not server or "/" in server:
            raise fail(label, "[image] server", "must name the built server (a file the "
                                                "build commands put in {out})")
        value, exe = str(path), f"/usr/local/bin/{server}"
    return ImageSpec(source, value, exe, tuple(files), build, tools)


def _leader(label: str, data: dict[str, Any]) -> LeaderSpec:
    t = _table(label, data, "leader", {"kind", "field", "confirm", "url", "section", "command"})
    kind = t.get("kind")
    if kind not in LEADER_KINDS:
        raise fail(label, "[leader] kind", f"must be one of {', '.join(LEADER_KINDS)}")
    confirm = None
    if "confirm" in t:
        c = t["confirm"]
        if not isinstance(c, str) or ":" not in c:
            raise fail(label, "[leader] confirm", "must be FIELD:VALUE (e.g. role:master)")
        k, v = c.split(":", 1)
        confirm = (k.strip(), v.strip())
    spec = LeaderSpec(kind, str(t.get("field", "")), confirm, str(t.get("url", "")),
                      str(t.get("section", "")),
                      parse_command(label, "[leader] command", t.get("command"), CONTROL_VARS))
    if kind in ("redis-info", "http-json") and not spec.key:
        raise fail(label, "[leader] field", f"is missing (kind {kind} needs the field that "
                                            "names the leader)")
    if kind in ("http", "http-json"):
        if not spec.url:
            raise fail(label, "[leader] url", f"is missing (kind {kind} asks each node a URL)")
        check_field(label, "[leader] url", spec.url, URL_VARS)
    if kind == "command" and spec.command.empty:
        raise fail(label, "[leader] command", "is missing (kind command runs it to name the "
                                              "leader)")
    return spec


def _string_list(label: str, where: str, raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise fail(label, where, "must be a list of strings")
    return tuple(raw)


def parse_system(data: dict[str, Any], path: Path, given: Mapping[str, str] | None = None
                 ) -> SystemDescription:
    """The description in `data` (from `path`) with the options `given`; BadArguments with
    one sentence naming the field when it cannot work."""
    label = path.name
    unknown = sorted(set(data) - TOP_FIELDS)
    if unknown:
        raise fail(label, unknown[0], f"is not a field of a system description "
                                      f"(valid: {', '.join(sorted(TOP_FIELDS))})")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise fail(label, "name", "must be lowercase letters, digits, '_' or '-'")
    options, opts = _options(label, data, given or {}, name)
    nodes = _nodes(label, data, opts)
    ports = parse_ports(label, data.get("ports"))
    lists = parse_lists(label, [("lists", data.get("lists"))])
    raw_protocols = data.get("protocols", [p for p in PROTOCOLS if p in ports])
    protocols = _string_list(label, "protocols", raw_protocols)
    for p in protocols:
        if p not in PROTOCOLS:
            raise fail(label, "protocols", f"must be among {', '.join(PROTOCOLS)}, got {p!r}")
        if p not in ports:
            raise fail(label, f"ports.{p}", f"is missing (the port clients of {p} use)")
    if not protocols:
        raise fail(label, "ports", f"must give a client port for one of {', '.join(PROTOCOLS)}")
    features = _string_list(label, "features", data.get("features", []))
    for f in features:
        if f not in FEATURES:
            raise fail(label, "features", f"must be among {', '.join(FEATURES)}, got {f!r}")
        needs = "dynamodb" if f.startswith("dynamo") else "redis"
        if needs not in protocols:
            raise fail(label, "features", f"lists {f}, but the system has no {needs} port")

    image = _image(label, data, opts, path.parent)
    node = _table(label, data, "node", {"command", "env", "data_dir", "log_files"})
    command = parse_command(label, "[node] command", node.get("command"), NODE_VARS)
    if command.empty:
        raise fail(label, "[node] command", "is missing (the server of each node, in the "
                                            "foreground)")
    env = parse_env(label, "[node] env", node.get("env"), NODE_VARS)
    data_dir = node.get("data_dir")
    if data_dir is not None and (not isinstance(data_dir, str) or not data_dir.startswith("/")):
        raise fail(label, "[node] data_dir", "must be an absolute path inside the container")
    log_files = _string_list(label, "[node] log_files", node.get("log_files", []))

    leader = _leader(label, data)
    r = _table(label, data, "ready", {"http", "leader_http", "command"}, required=False)
    for key in ("http", "leader_http"):
        if key in r:
            if not isinstance(r[key], str):
                raise fail(label, f"[ready] {key}", "must be a URL template")
            check_field(label, f"[ready] {key}", r[key], URL_VARS)
    ready = ReadySpec(str(r.get("http", "")), str(r.get("leader_http", "")),
                      parse_command(label, "[ready] command", r.get("command"), CONTROL_VARS))

    if "lease_ms" not in data:
        raise fail(label, "lease_ms", "is missing (the read-lease window the system promises, "
                                      "0 for none)")
    lease_ms = _number(label, "lease_ms", data["lease_ms"], opts)
    if lease_ms < 0:
        raise fail(label, "lease_ms", "must not be negative")
    kinds = _string_list(label, "fault_kinds", data.get("fault_kinds", ["kill", "partition",
                                                                         "pause"]))
    for k in kinds:
        if k not in FAULT_KINDS:
            raise fail(label, "fault_kinds", f"must be among {', '.join(FAULT_KINDS)}, got {k!r}")
    t = _table(label, data, "transfer", {"command"}, required=False)
    transfer = parse_command(label, "[transfer] command", t.get("command"), TRANSFER_VARS)
    if "transfer-leader" in kinds and transfer.empty:
        raise fail(label, "fault_kinds", "lists transfer-leader, but [transfer] command is "
                                         "missing")
    needed_files = {m for text in (transfer.script or "", *transfer.argv)
                    for m in re.findall(r"\{\s*file\.([^{}]+?)\s*\}", text)}
    listed = set(_string_list(label, "[image] files", (data.get("image") or {}).get("files", [])))
    if needed_files - listed:
        missing = sorted(needed_files - listed)[0]
        raise fail(label, "[transfer] command", f"uses {{file.{missing}}}, which [image] files "
                                                "does not list")
    unavailable: dict[str, str] = {}
    if "transfer-leader" in kinds and needed_files - set(image.files):
        kinds = tuple(k for k in kinds if k != "transfer-leader")
        missing = sorted(needed_files - set(image.files))[0]
        unavailable["transfer-leader"] = (
            f"its transfer command needs {missing}, which is neither beside {image.value} nor "
            "in [image] tools" if image.source == "binary" else
            f"its transfer command needs {missing}, which an image given by [image] "
            f"{image.source} does not provide on this machine (name a folder holding it in "
            "[image] tools)")
    redis_protocol = data.get("redis_protocol")
    if redis_protocol not in (None, 2, 3):
        raise fail(label, "redis_protocol", "must be 2 or 3")
    routing = data.get("default_client_routing", "node")
    model = canonical(routing) if isinstance(routing, str) and routing in NAMES else None
    if model is None:
        raise fail(label, "default_client_routing", f"must be one of {', '.join(MODELS)}")
    if model == "sentinel":
        raise fail(label, "default_client_routing", "cannot be sentinel: a system file "
                   "describes no Redis Sentinel (node, follow or oracle)")
    if leader.kind == "redis-info" and "redis" not in protocols:
        raise fail(label, "[leader] kind", "is redis-info, but the system has no redis port")
    desc = SystemDescription(
        name=name, path=path, options=options, opts=opts, nodes=nodes,
        protocols=frozenset(protocols), features=frozenset(features), ports=ports,
        lists=lists, image=image, command=command,
        env=dict(env), data_dir=data_dir, log_files=log_files, leader=leader, ready=ready,
        lease_ms=lease_ms, fault_kinds=frozenset(kinds), unavailable_faults=unavailable,
        transfer=transfer,
        redis_protocol=redis_protocol, default_client_routing=routing)
    _try_render(desc)
    return desc


def _try_render(desc: SystemDescription) -> None:
    """Fills every node's templates once with stand-in addresses: a template naming a port or
    list the file does not define is refused now, not when the cluster starts."""
    label = desc.path.name
    base = desc.base_values()
    for key, (item, _sep) in desc.lists.items():  # first: list_values below fills them in
        try:
            render(item, base | {"name": "n", "id": "1", "ip": "192.0.2.1"})
        except TemplateProblem as e:
            raise fail(label, f"lists.{key}.item", str(e)) from None
    peers = [(n, i, f"192.0.2.{i}") for i, n in enumerate(desc.nodes, 1)]
    lists = list_values(desc.lists, base, peers) if desc.lists else {}
    values = base | lists | {"name": desc.nodes[0], "id": "1", "ip": "192.0.2.1",
                             "exe": desc.image.exe}
    checks = [("[node] command", t) for t in (desc.command.script or "", *desc.command.argv)]
    checks += [(f"[node] env.{k}", v) for k, v in desc.env.items()]
    checks += [("[leader] url", desc.leader.url), ("[ready] http", desc.ready.http),
               ("[ready] leader_http", desc.ready.leader_http)]
    for where, text in checks:
        try:
            render(text, values)
        except TemplateProblem as e:
            raise fail(label, where, str(e)) from None
    if "{exe}" in " ".join(desc.command.argv) + (desc.command.script or "") \
            and not desc.image.exe:
        raise fail(label, "[image] exe", "is missing ([node] command uses {exe}: the server's "
                                         "path inside the image)")


def load_option_defaults(path: Path) -> dict[str, str]:
    """The defaults of the options a description declares ({} when it cannot be read)."""
    try:
        data = tomllib.loads(Path(path).read_text())
        specs, _ = _options(path.name, data, {}, "")
    except (OSError, tomllib.TOMLDecodeError, BadArguments):
        return {}
    return {k: s.default for k, s in specs.items()}


def load_system(path: Path, opts: Mapping[str, str] | None = None) -> SystemDescription:
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise BadArguments(f"{path}: cannot be read ({e.strerror}).") from None
    except tomllib.TOMLDecodeError as e:
        raise BadArguments(f"{Path(path).name}: is not TOML ({e}).") from None
    return parse_system(data, Path(path).resolve(), opts)
