"""A system in one file (harness/systems/system_file.py, harness/systems/described.py): the
descriptions shipped in the repository load, and every wrong or incomplete file is refused
before anything starts with one sentence naming the field (exit 254)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

from leaseline.harness.clusters.docker.compose import _escaped
from leaseline.harness.errors import EXIT_BAD_ARGS, BadArguments
from leaseline.harness.run.config import RunConfig, validate
from leaseline.harness.systems.described import described_profile, static_ip
from leaseline.harness.systems.host_system import load_host_commands
from leaseline.harness.systems.registry import SYSTEM_FILES, option_defaults, profile_class


@pytest.fixture(autouse=True)
def named_images_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    """The images these files name by name (example/kv:1) stand in for the user's own:
    validate asks Docker for them, which is faked here (one test fakes their absence)."""
    from leaseline.harness.clusters.docker import images

    monkeypatch.setattr(images, "image_exists", lambda tag: True)

LEASEKV_FILE = ROOT / "harness" / "systems" / "leasekv.toml"

MINIMAL = """
lease_ms = 500
[nodes]
count = 3
name = "kv{id}"
[image]
name = "example/kv:1"
exe = "/kv"
[ports]
redis = 6379
peer = 7000
[lists.peers]
item = "{name}:{port.peer}"
[node]
command = ["{exe}", "--id", "{id}", "--peers", "{list.peers}", "--flag", "$HOME"]
[leader]
kind = "redis-info"
field = "leader_addr"
confirm = "role:master"
"""


def write(tmp_path: Path, text: str, name: str = "system.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refusal(tmp_path: Path, text: str, opts: dict[str, str] | None = None) -> str:
    with pytest.raises(BadArguments) as e:
        described_profile(write(tmp_path, text), opts or {})
    assert e.value.exit_code == EXIT_BAD_ARGS
    message = str(e.value)
    assert "\n" not in message
    return message


def test_minimal_description_makes_a_profile(tmp_path: Path) -> None:
    cls = described_profile(write(tmp_path, MINIMAL))
    assert cls.name == "system"
    assert cls.nodes == ("kv1", "kv2", "kv3")
    assert cls.lease_ms == 500
    assert cls.protocols == frozenset({"redis"})
    assert cls.fault_kinds == frozenset({"kill", "partition", "pause"})
    assert cls.redis_protocol is None
    assert cls.default_client_routing == "node"  # what an application of it would do
    follow = described_profile(write(tmp_path, MINIMAL.replace(
        "lease_ms = 500", "lease_ms = 500\ndefault_client_routing = \"follow\""), "f.toml"))
    assert follow.default_client_routing == "follow"


def test_compose_document_fixes_addresses_and_names(tmp_path: Path) -> None:
    cls = described_profile(write(tmp_path, MINIMAL))
    doc = cls.compose_document("img:1", "10.97.5.0/24", {})
    kv2 = doc["services"]["kv2"]
    assert kv2["networks"]["net"]["ipv4_address"] == "10.97.5.12" == static_ip("10.97.5.0/24", 2)
    assert kv2["extra_hosts"] == ["kv1:10.97.5.11", "kv3:10.97.5.13"]
    assert kv2["entrypoint"] == ["/kv", "--id", "2", "--peers", "kv1:7000,kv2:7000,kv3:7000",
                                 "--flag", "$HOME"]
    # other containers take addresses from the upper half: a killed node's stays free
    assert doc["networks"]["net"]["ipam"]["config"] == [{"subnet": "10.97.5.0/24",
                                                         "ip_range": "10.97.5.128/25"}]
    # compose interpolates $VAR: the file says $$ so the node gets the literal text
    assert _escaped(kv2["entrypoint"])[-1] == "$$HOME"


def test_shipped_descriptions_load() -> None:
    leasekv = profile_class(str(LEASEKV_FILE), {"bug": "local-read", "nodes": "3"})
    assert leasekv.nodes == ("lk1", "lk2", "lk3")
    assert leasekv.lease_ms == 700
    assert "transfer-leader" in leasekv.fault_kinds
    assert option_defaults(str(LEASEKV_FILE)) == {"bug": "none", "nodes": "5"}
    # the same file describes an SSH run: [ports] and [lists] shared, [host.lists] overriding
    host = load_host_commands(LEASEKV_FILE, {"bug": "none"})
    assert host.lists["peers"] == ("{ip}:{port.raft}", ",")
    assert host.ports["raft"] == 4321


def test_leasekv_is_described_once() -> None:
    """`--sut leasekv` is its file plus leasekv's own probes: the same nodes, command and
    options as `--sut harness/systems/leasekv.toml`, and no compose service of its own."""
    from leaseline.harness.clusters.docker.cluster import COMPOSE_FILE
    from leaseline.harness.systems.leasekv import LeaseKV

    builtin, described = profile_class("leasekv"), profile_class(str(LEASEKV_FILE))
    assert issubclass(builtin, LeaseKV) and not issubclass(described, LeaseKV)
    assert builtin.name == "leasekv" and builtin.description.path == LEASEKV_FILE.resolve()
    assert builtin.nodes == described.nodes == ("lk1", "lk2", "lk3", "lk4", "lk5")
    assert builtin.compose_document("img", "10.97.5.0/24", {}) == \
        described.compose_document("img", "10.97.5.0/24", {})
    assert option_defaults("leasekv") == option_defaults(str(LEASEKV_FILE))
    three = profile_class("leasekv", {"nodes": "3", "bug": "local-read"})
    lk3 = three.compose_document("img", "10.97.5.0/24", {})["services"]["lk3"]
    assert lk3["entrypoint"][lk3["entrypoint"].index("--peers") + 1] == \
        "lk1:4321,lk2:4321,lk3:4321"
    assert lk3["entrypoint"][-2:] == ["--bug", "local-read"]
    with pytest.raises(BadArguments, match="bug=nope"):
        validate(RunConfig(sut="leasekv", sut_opts={"bug": "nope"}))
    assert "leasekv" not in COMPOSE_FILE.read_text().split("\nservices:")[1]


def test_elastickv_options(tmp_path: Path) -> None:
    binary = tmp_path / "elastickv"
    binary.write_bytes(b"\x7fELF")
    ek = profile_class("elastickv", {"binary": str(binary)})
    assert ek.name == "elastickv" and ek.nodes == ("ek1", "ek2", "ek3")
    assert ek.lease_ms == 1700 and ek.redis_protocol == 2
    assert ek.protocols == frozenset({"redis", "dynamodb"})
    # no raftadmin beside the binary: no leadership transfer, and a run asking says why
    assert "transfer-leader" not in ek.fault_kinds
    with pytest.raises(BadArguments, match=r"elastickv here: its transfer command needs "
                                           r"raftadmin, which is neither beside .*/elastickv "
                                           r"nor in \[image\] tools\.$"):
        validate(RunConfig(sut="elastickv", sut_opts={"binary": str(binary)},
                           nemesis=["transfer-leader"]))
    (tmp_path / "raftadmin").write_bytes(b"\x7fELF")
    ek5 = profile_class("elastickv", {"binary": str(binary), "nodes": "5", "lease-ms": "1500"})
    assert len(ek5.nodes) == 5 and ek5.lease_ms == 1500
    assert "transfer-leader" in ek5.fault_kinds
    assert profile_class("elastickv", {"image": "mine/ek:dev"}).description.image.exe == "/app"
    # an image of the user's own lends this machine no raftadmin: tools= names a folder with one
    by_name = profile_class("elastickv", {"image": "mine/ek:dev"})
    assert "transfer-leader" not in by_name.fault_kinds
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "raftadmin").write_bytes(b"\x7fELF")
    with_tools = profile_class("elastickv", {"image": "mine/ek:dev", "tools": str(tools)})
    assert "transfer-leader" in with_tools.fault_kinds
    assert with_tools.description.image.tools == str(tools)


def test_option_paths_are_relative_to_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "elastickv").write_bytes(b"\x7fELF")
    monkeypatch.chdir(tmp_path)
    image = profile_class("elastickv", {"binary": "bin/elastickv"}).description.image
    assert image.value == str(tmp_path / "bin" / "elastickv")
    assert set(SYSTEM_FILES) == {"elastickv", "leasekv"}


@pytest.mark.parametrize("opts, words", [
    ({}, "elastickv.toml: [image] needs exactly one of --sut-opt binary=, source=, image= "
         "(got none)."),
    ({"binary": "/nonexistent/elastickv"}, "[image] binary names /nonexistent/elastickv"),
    ({"image": "a", "binary": "/bin/sh"}, "(got name and binary)"),
    ({"image": "a", "nodes": "4"}, "--sut-opt nodes=4 is not one of 3, 5"),
    ({"image": "a", "colour": "red"}, "--sut-opt colour is not an option of elastickv"),
])
def test_elastickv_refusals(opts: dict[str, str], words: str) -> None:
    with pytest.raises(BadArguments) as e:
        profile_class("elastickv", opts)
    assert words in str(e.value)


@pytest.mark.parametrize("change, words", [
    (("kind = \"redis-info\"", "kind = \"guess\""),
     "system.toml: [leader] kind must be one of redis-info, http, http-json, command."),
    (("command = [\"{exe}\"", "commando = [\"{exe}\""), "[node] commando is not a field of [node]"),
    (("lease_ms = 500", ""), "system.toml: lease_ms is missing"),
    (("lease_ms = 500", "lease_ms = -1"), "lease_ms must not be negative"),
    (("count = 3", "count = 0"), "[nodes] count must be a whole number from 1 to 9"),
    (("name = \"kv{id}\"", "name = \"KV_{id}\""), "node names must be lowercase"),
    (("\"--id\", \"{id}\"", "\"--id\", \"{idx}\""), "[node] command refers to {idx}"),
    (("{list.peers}", "{list.members}"), "[node] command has no value for {list.members}"),
    (("redis = 6379", "redis = 70000"), "ports.redis must be a port number"),
    (("{port.peer}", "{port.nope}"), "system.toml: lists.peers.item has no value for {port.nope}"),
    (("name = \"example/kv:1\"", ""), "[image] needs exactly one of"),
    (("field = \"leader_addr\"", ""), "[leader] field is missing"),
    (("confirm = \"role:master\"", "confirm = \"master\""), "[leader] confirm must be FIELD:VALUE"),
    (("lease_ms = 500", "lease_ms = 500\nredis_protocol = 4"), "redis_protocol must be 2 or 3"),
    (("lease_ms = 500", "lease_ms = 500\ndefault_client_routing = \"nearest\""),
     "default_client_routing must be one of node, follow, sentinel, oracle"),
    (("lease_ms = 500", "lease_ms = 500\ndefault_client_routing = \"sentinel\""),
     "default_client_routing cannot be sentinel"),
    (("lease_ms = 500", "lease_ms = 500\nprotocols = [\"dynamodb\"]"),
     "ports.dynamodb is missing"),
    (("lease_ms = 500", "lease_ms = 500\nfault_kinds = [\"kill\", \"transfer-leader\"]"),
     "fault_kinds lists transfer-leader, but [transfer] command is missing"),
    (("lease_ms = 500", "lease_ms = 500\nfault_kinds = [\"meteor\"]"), "fault_kinds must be among"),
    (("lease_ms = 500", "lease_ms = 500\ncolour = 1"), "colour is not a field"),
    (("lease_ms = 500", "lease_ms = 500\nfeatures = [\"graphs\"]"), "features must be among"),
    (("lease_ms = 500", "lease_ms = 500\nfeatures = [\"dynamo-lists\"]"),
     "features lists dynamo-lists, but the system has no dynamodb port"),
    (("[leader]\nkind = \"redis-info\"\nfield = \"leader_addr\"\nconfirm = \"role:master\"\n", ""),
     "system.toml: [leader] is missing."),
])
def test_refusals_name_the_field(tmp_path: Path, change: tuple[str, str], words: str) -> None:
    old, new = change
    assert old in MINIMAL
    assert words in refusal(tmp_path, MINIMAL.replace(old, new, 1))


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    assert "system.toml: is not TOML" in refusal(tmp_path, "[nodes\n")
    with pytest.raises(BadArguments, match="cannot be read"):
        profile_class(str(tmp_path / "absent.toml"))


def test_validate_refuses_before_anything_starts(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace("kind = \"redis-info\"", "kind = \"guess\""))
    with pytest.raises(BadArguments, match=r"\[leader\] kind"):
        validate(RunConfig(sut=str(path)))
    good = write(tmp_path, MINIMAL, "good.toml")
    with pytest.raises(BadArguments, match="speaks dynamodb"):
        validate(RunConfig(sut=str(good), workload="dynamo-register"))
    with pytest.raises(BadArguments, match="transfer-leader"):
        validate(RunConfig(sut=str(good), nemesis=["transfer-leader"]))
    assert validate(RunConfig(sut=str(good), nemesis=["kill-leader"])).nodes == (
        "kv1", "kv2", "kv3")
    # a system that does not say it speaks lists gets one sentence for list-append
    with pytest.raises(BadArguments, match="needs RPUSH and LRANGE, which good does not"):
        validate(RunConfig(sut=str(good), workload="list-append"))
    lists = write(tmp_path, MINIMAL.replace("lease_ms = 500", "lease_ms = 500\nfeatures = "
                                            "[\"lists\"]"), "lists.toml")
    assert validate(RunConfig(sut=str(lists), workload="list-append",
                              workload_opts={"client": "plain"})).features == {"lists"}
    with pytest.raises(BadArguments, match="needs MULTI/EXEC"):
        validate(RunConfig(sut=str(lists), workload="list-append"))


def test_cli_exit_254_with_one_sentence(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace("count = 3", "count = \"many\""))
    r = subprocess.run([sys.executable, "-m", "leaseline", "run", "--sut", str(path),
                        "--results-dir", str(tmp_path / "results"), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == EXIT_BAD_ARGS, r.stderr
    assert r.stdout == ""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "system.toml: [nodes] count must be a number" in lines[0]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "results").exists()


def test_campaign_case_names_a_file(tmp_path: Path) -> None:
    from leaseline.harness.run.campaign import load_campaign

    write(tmp_path, MINIMAL)
    campaign = write(tmp_path, json.dumps({"cases": [{"sut": "system.toml"}]}), "c.json")
    _, cases = load_campaign(campaign)
    assert Path(cases[0].settings["sut"]) == tmp_path / "system.toml"
    validate(RunConfig(**cases[0].settings))


def test_documented_example_loads(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "system-files.md").read_text()
    example = text.split("```toml\n", 1)[1]
    path = write(tmp_path, example.split("```", 1)[0])
    for name in ("mykv", "kvadmin"):
        (tmp_path / name).write_bytes(b"\x7fELF")
    cls = described_profile(path, {"binary": str(tmp_path / "mykv"), "nodes": "5"})
    assert cls.nodes == ("kv1", "kv2", "kv3", "kv4", "kv5")
    assert cls.fault_kinds == frozenset({"kill", "partition", "pause", "transfer-leader"})
    assert cls.redis_protocol == 2 and cls.lease_ms == 1700


def test_ssh_runs_read_the_same_file() -> None:
    from leaseline.harness.clusters.ssh.remote import host_commands

    commands = host_commands(profile_class(str(LEASEKV_FILE)), {"bug": "local-read"})
    assert commands.opts == {"bug": "local-read", "nodes": "5"}
    assert "sut.leasekv" in commands.command.argv


def test_source_build_runs_once_per_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    from leaseline.harness.clusters.docker import system_images

    monkeypatch.setattr(system_images, "BUILD_CACHE", tmp_path / "cache")
    source = tmp_path / "checkout"
    source.mkdir()
    (source / "main.txt").write_text("v1")
    path = write(tmp_path, MINIMAL.replace('name = "example/kv:1"', f'''source = "{source}"
server = "kv"
files = ["kvadmin"]
build_commands = ["cat main.txt > {{out}}/kv; echo built >> {{out}}/../count",
                  ["cp", "main.txt", "{{out}}/kvadmin"]]'''))
    spec = described_profile(path).description.image
    out = system_images.build_source("kv", spec, {}, lambda m: None)
    assert (out / "kv").read_text() == "v1" and (out / "kvadmin").is_file()
    assert system_images.build_source("kv", spec, {}, lambda m: None) == out
    (source / "main.txt").write_text("v2")  # a changed checkout is built again
    out2 = system_images.build_source("kv", spec, {}, lambda m: None)
    assert out2 != out and (out2 / "kv").read_text() == "v2"
    assert (tmp_path / "cache" / "count").read_text().count("built") == 2


def test_leader_is_named_by_a_majority_and_confirms(tmp_path: Path) -> None:
    from leaseline.harness.clusters.docker.cluster import Cluster

    cls = described_profile(write(tmp_path, MINIMAL))
    before = dict(vars(cls))
    cluster = Cluster("ll-test", cls.compose_profile, compose_file=tmp_path / "compose.yml",
                      document=lambda subnet: cls.compose_document("img", subnet, {}))
    cluster.use_subnet("10.97.9.0/24")  # writes the file, which fixes the addresses
    profile = cls(cluster, {})
    assert dict(vars(cls)) == before  # what the run learns, the cluster holds: not the class
    assert [profile._node_named(v) for v in ("kv2", "2", "10.97.9.13", "kv1:6379",
                                             "10.97.9.12:6379", "", None, "kv9")] == [
        "kv2", "kv2", "kv3", "kv1", "kv2", None, None, None]
    master = {"leader_addr": "kv2:6379", "role": "master"}
    slave = {"leader_addr": "kv2:6379", "role": "slave"}
    assert profile._by_majority({"kv1": slave, "kv2": master, "kv3": None}, "leader_addr") == "kv2"
    # a majority of ALL nodes must name it, and it must say it leads
    assert profile._by_majority({"kv1": None, "kv2": master, "kv3": None}, "leader_addr") is None
    assert profile._by_majority({"kv1": slave, "kv2": slave, "kv3": None}, "leader_addr") is None
    assert profile.endpoint("kv3", "redis").host == "10.97.9.13"


def test_an_image_name_not_in_docker_is_refused_by_validate(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong image= is an argument problem (254) found before anything starts."""
    from leaseline.harness.clusters.docker import images

    asked: list[str] = []
    monkeypatch.setattr(images, "image_exists", lambda tag: asked.append(tag) or False)
    with pytest.raises(BadArguments, match=r"^the image mine/ek:typo is not in this machine's "
                                           r"Docker \(Leaseline never pulls"):
        validate(RunConfig(sut="elastickv", sut_opts={"image": "mine/ek:typo"}))
    assert asked == ["mine/ek:typo"]
    monkeypatch.setattr(images, "image_exists", lambda tag: True)
    validate(RunConfig(sut="elastickv", sut_opts={"image": "mine/ek:dev"}))
