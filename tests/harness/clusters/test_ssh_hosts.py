"""The hosts file and the [host] commands of a system description: parsing, refusals, and
quoting (no Docker, no SSH: what reaches a shell is checked by parsing it back)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from repo_paths import ROOT

from leaseline.harness.clusters.ssh.hosts import load_hosts
from leaseline.harness.clusters.ssh.transport import SshNode
from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.host_system import load_host_commands, parse_host_table
from leaseline.harness.systems.templates import Command

LEASEKV_HOSTS = ROOT / "harness/systems/leasekv.toml"
NASTY = "n 1'; touch /tmp/pwned; echo \"$(id)\" `id` $HOME"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "hosts.toml"
    p.write_text(text)
    return p


def test_defaults_apply_to_every_node_and_nodes_override_them(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("not read here")
    hosts = load_hosts(write(tmp_path, f"""
known_hosts = "kh"
[defaults]
user = "ll"
port = 2222
key_file = "{key.name}"
sudo = true
[[node]]
name = "n1"
address = "10.0.0.1"
[[node]]
name = "n2"
address = "10.0.0.2"
port = 22
user = "other"
"""))
    assert hosts.names == ("n1", "n2")
    n1, n2 = hosts.nodes
    assert (n1.user, n1.port, n1.sudo, n1.key_file) == ("ll", 2222, True, str(key.resolve()))
    assert (n2.user, n2.port) == ("other", 22)
    assert hosts.known_hosts == (tmp_path / "kh").resolve()
    assert "key_file" not in n1.public() and n1.public()["address"] == "10.0.0.1"


@pytest.mark.parametrize(("body", "says"), [
    ("[[node]]\nname = \"n1\"\n", "node 1: address is missing"),
    ("[[node]]\nname = \"n1\"\naddress = \"a\"\nport = 70000\n", "port must be between"),
    ("[[node]]\nname = \"n1\"\naddress = \"a\"\nport = true\n", "port must be a whole number"),
    ("[[node]]\nname = \"n1\"\naddress = \"a\"\nkey_file = \"nope\"\n", "key_file nope does not"),
    ("[[node]]\nname = \"n1\"\naddress = \"a\"\nhost = \"x\"\n", "unknown field 'host'"),
    ("[[node]]\nname = \"n\"\naddress = \"a\"\n[[node]]\nname = \"n\"\naddress = \"b\"\n",
     "node name 'n' is used twice"),
    ("[defaults]\nuser = \"x\"\n", "names no node"),
    ("nodes = 3\n", "unknown field 'nodes'"),
    ("[[node]\n", "not valid TOML"),
])
def test_a_hosts_file_that_cannot_work_is_refused_naming_the_field(
        tmp_path: Path, body: str, says: str) -> None:
    with pytest.raises(BadArguments) as e:
        load_hosts(write(tmp_path, body))
    assert says in str(e.value)
    assert e.value.exit_code == 254
    assert "\n" not in str(e.value)


def test_a_missing_hosts_file_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(BadArguments, match="does not exist"):
        load_hosts(tmp_path / "nope.toml")


def test_leasekv_host_description_fills_in_every_placeholder() -> None:
    cmds = load_host_commands(LEASEKV_HOSTS, {"bug": "local-read"})
    peers = [("a", 1, "10.0.0.1"), ("b", 2, "10.0.0.2")]
    values = cmds.values("b", 2, "10.0.0.2", "/h/.leaseline/leasekv/b", "/h", peers)
    argv = shlex.split(cmds.command.shell(values))
    assert argv[:3] == ["/h/.leaseline/leasekv-venv/bin/python3", "-m", "sut.leasekv"]
    assert argv[argv.index("--peers") + 1] == "10.0.0.1:4321,10.0.0.2:4321"
    assert argv[argv.index("--id") + 1] == "2"
    assert argv[argv.index("--bug") + 1] == "local-read"
    assert all(u.local.exists() for u in cmds.uploads)


def test_values_from_names_reach_the_shell_as_one_word_each() -> None:
    """A node name full of shell syntax stays one argument, in argv lists and in scripts."""
    argv_cmd = Command(argv=("echo", "{name}", "--dir", "{dir}/data"))
    values = {"name": NASTY, "dir": f"/tmp/{NASTY}"}
    assert shlex.split(argv_cmd.shell(values)) == ["echo", NASTY, "--dir", f"/tmp/{NASTY}/data"]
    script = Command(script="mkdir -p {dir} && printf %s {name} > f")
    words = shlex.split(script.shell(values))
    assert words == ["mkdir", "-p", f"/tmp/{NASTY}", "&&", "printf", "%s", NASTY, ">", "f"]


def test_the_remote_command_line_is_one_quoted_script(tmp_path: Path) -> None:
    hosts = load_hosts(write(tmp_path, "[[node]]\nname = \"n\"\naddress = \"a\"\nsudo = true\n"))
    node = SshNode(hosts.nodes[0], tmp_path / "kh")
    line = node.command_line(f"echo {shlex.quote(NASTY)}", privileged=True)
    assert shlex.split(line) == ["sudo", "-n", "sh", "-c", f"echo {shlex.quote(NASTY)}"]
    assert shlex.split(node.command_line("true")) == ["sh", "-c", "true"]


@pytest.mark.parametrize(("host", "says"), [
    ('command = ["x", "{nam}"]', "host.command refers to {nam}"),
    ('command = ["x"]\nsetup = 3', "host.setup must be a shell string or a list"),
    ('command = ["x"]\ndir = "rel/{name}"', "host.dir must be absolute"),
    ('command = ["x"]\ndir = "/a/{ip}"', "host.dir refers to {ip}"),
    ('command = ["x"]\nupload = [{ from = "nope", to = "x" }]', "host.upload[0].from names"),
    ('command = ["x"]\nupload = [{ from = ".", to = "../x" }]', "must be a path inside"),
    ('setup = "true"', "host.command is missing"),
    ('command = ["x"]\nreboot = "now"', "host.reboot is not a field"),
    ('command = ["x"]\ntimeout_s = -1', "host.timeout_s must be a positive"),
])
def test_a_host_table_that_cannot_work_is_refused_naming_the_field(
        tmp_path: Path, host: str, says: str) -> None:
    import tomllib

    data = tomllib.loads(f"[host]\n{host}\n")
    with pytest.raises(BadArguments) as e:
        parse_host_table(data, tmp_path, "sys.toml")
    assert says in str(e.value)


def test_a_description_without_host_table_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(BadArguments, match="host is missing"):
        parse_host_table({"name": "x"}, tmp_path, "sys.toml")


def test_run_refuses_what_cannot_run_on_the_hosts_before_anything_starts(tmp_path: Path) -> None:
    from leaseline.harness.run.config import RunConfig, validate

    hosts = write(tmp_path, "[[node]]\nname = \"n1\"\naddress = \"127.0.0.1\"\n")
    validate(RunConfig(sut="leasekv", hosts=hosts, nemesis=[
        "kill-leader", "delay:one", "pause-isolate", "transfer-isolate"]))
    for cfg, says in [
        (RunConfig(sut="redis-sentinel", hosts=hosts), "redis-sentinel cannot run on your own"),
        (RunConfig(sut="leasekv", hosts=tmp_path / "nope.toml"), "does not exist"),
    ]:
        with pytest.raises(BadArguments, match=says):
            validate(cfg)


def test_the_cli_refuses_a_bad_hosts_file_with_exit_254(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = write(tmp_path, "[[node]]\nname = \"n1\"\n")
    r = subprocess.run([sys.executable, "-m", "leaseline", "run", "--hosts", str(bad),
                        "--results-dir", str(tmp_path / "results")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 254
    assert r.stderr.strip().splitlines() == [
        f"leaseline: hosts file {bad}, node 1: address is missing."]
    assert not (tmp_path / "results").exists()


def test_host_lists_override_the_docker_lists_of_the_same_file(tmp_path: Path) -> None:
    """A system file's peer list may name Docker host names; [host.lists] gives addresses."""
    import tomllib

    data = tomllib.loads("""
[ports]
raft = 4321
[lists.peers]
item = "{name}:{port.raft}"
[host]
command = ["srv", "{list.peers}"]
[host.lists.peers]
item = "{ip}:{port.raft}"
separator = " "
""")
    cmds = parse_host_table(data, tmp_path, "sys.toml")
    values = cmds.values("a", 1, "10.0.0.1", "/d", "/h", [("a", 1, "10.0.0.1"), ("b", 2, "h b")])
    assert shlex.split(cmds.command.shell(values)) == ["srv", "10.0.0.1:4321 h b:4321"]
