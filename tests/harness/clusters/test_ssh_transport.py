"""The SSH transport against real sshd machines (containers from tests/images/sshd): host key
checking, credentials, quoting on the wire, command failures and a full disk, each one
sentence naming the node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest
from repo_paths import ROOT
from ssh_machines import Machines, ssh_machines

from leaseline.harness.clusters.ssh.cluster import SshCluster
from leaseline.harness.clusters.ssh.hosts import load_hosts
from leaseline.harness.clusters.ssh.transport import CommandFailed, SshFailure, SshNode
from leaseline.harness.systems.host_system import parse_host_table

pytestmark = pytest.mark.docker
NASTY = "n 1'; touch pwned; echo \"$(id)\" `id` $HOME"  # no '/': it names a folder
SMALL_DISK = "/root/.leaseline/small"


@pytest.fixture(scope="module")
def machines() -> Iterator[Machines]:
    with ssh_machines(2, tmpfs={1: f"{SMALL_DISK}:256k"}) as m:
        yield m


def node(machines: Machines, known_hosts: Path | None = None, accept_new: bool = False,
         **over: str) -> SshNode:
    hosts = load_hosts(machines.hosts_toml(known_hosts=known_hosts, overrides={
        n: "\n".join(f"{k} = {v}" for k, v in over.items()) for n in machines.names}))
    return SshNode(hosts.nodes[0], hosts.known_hosts, accept_new)


def test_a_known_host_runs_commands_and_reads_files(machines: Machines) -> None:
    n = node(machines)
    assert n.run("echo hi; echo err >&2", "saying hi").stdout == "hi\n"
    assert n.read_file("/etc/hostname") == b"m1\n"
    assert n.read_file("/no/such/file") is None


def test_an_unknown_host_key_refuses_the_connection_unless_accepted(
        machines: Machines, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    with pytest.raises(SshFailure) as e:
        node(machines, known_hosts=kh).connect()
    msg = str(e.value)
    assert "node m1" in msg and "not in" in msg and "--ssh-accept-new-keys" in msg
    assert "\n" not in msg and e.value.exit_code == 255
    node(machines, known_hosts=kh, accept_new=True).connect()  # accept-new: trusted, recorded
    assert machines.ips["m1"] in kh.read_text()
    node(machines, known_hosts=kh).connect()  # and known from now on


def test_a_changed_host_key_is_refused_even_with_accept_new(
        machines: Machines, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    # m2's keys written down for m1's address: what a man in the middle would look like.
    kh.write_text("".join(f"{machines.ips['m1']} {k}\n" for k in machines.host_keys["m2"]))
    for accept_new in (False, True):
        with pytest.raises(SshFailure) as e:
            node(machines, known_hosts=kh, accept_new=accept_new).connect()
        assert "node m1" in str(e.value) and "differs" in str(e.value)


def test_a_wrong_key_and_an_unreachable_port_are_one_sentence(
        machines: Machines, tmp_path: Path) -> None:
    other = tmp_path / "other_key"
    paramiko.ECDSAKey.generate(bits=256).write_private_key_file(str(other))
    with pytest.raises(SshFailure, match="node m1 .* refused the SSH login"):
        node(machines, key_file=f'"{other}"').connect()
    with pytest.raises(SshFailure, match="node m1 cannot be reached over SSH at .*:2 "):
        node(machines, port="2").connect()


def test_a_passphrase_comes_from_the_environment_and_is_never_stored(
        machines: Machines, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = paramiko.ECDSAKey.from_private_key_file(str(machines.key_file))
    locked = tmp_path / "locked"
    key.write_private_key_file(str(locked), password="s3cret-Passphrase")
    with pytest.raises(SshFailure, match="LL_TEST_PASSPHRASE .* is not set"):
        node(machines, key_file=f'"{locked}"', passphrase_env='"LL_TEST_PASSPHRASE"').connect()
    monkeypatch.setenv("LL_TEST_PASSPHRASE", "s3cret-Passphrase")
    n = node(machines, key_file=f'"{locked}"', passphrase_env='"LL_TEST_PASSPHRASE"')
    assert n.run("echo ok", "checking").stdout == "ok\n"
    assert "s3cret" not in repr(n.spec)


def test_a_refused_command_says_its_exit_and_last_words(machines: Machines) -> None:
    with pytest.raises(CommandFailed) as e:
        node(machines).run("echo first >&2; echo 'no, never' >&2; exit 3", "setting up")
    assert str(e.value) == "setting up on node m1 failed (exit 3: no, never)."
    with pytest.raises(CommandFailed, match="a command is missing"):
        node(machines).run("no-such-tool --now", "setting up")
    with pytest.raises(SshFailure, match="did not finish within 0.5 s"):
        node(machines).run("sleep 5", "waiting", timeout_s=0.5)


def test_node_names_full_of_shell_syntax_stay_one_word(machines: Machines) -> None:
    """Every command of the description with the nasty name: nothing is run but what is
    written, the folder and the file get exactly that name."""
    machines.exec("m1", "find / -xdev -name pwned -delete")
    hosts = load_hosts(machines.hosts_toml(names={"m1": NASTY, "m2": "plain"}))
    cmds = parse_host_table({"host": {
        "dir": "/tmp/ll-quoting/{name}",
        "setup": "printf %s {name} > name.txt; printf %s {ip} > ip.txt",
        "command": ["sh", "-c", "echo started as \"$0\"; exec sleep 600", "{name}"],
        "wipe": ["rm", "-f", "{dir}/gone {name}"],
    }}, Path("."), "quoting.toml")
    cluster = SshCluster(hosts, cmds)
    try:
        cluster.down()
        cluster.up()
        folder = f"/tmp/ll-quoting/{NASTY}"
        assert cluster.copy_file(NASTY, f"{folder}/name.txt") == NASTY.encode()
        assert cluster.status(NASTY) == "running"
        assert f"started as {NASTY}".encode() in cluster.logs(NASTY)
        found = machines.exec("m1", "find / -xdev -name pwned")[1]
        assert found == "", "a node name was executed by a shell"
    finally:
        cluster.down()
        cluster.close()
    assert cluster.status(NASTY) == "exited"


def test_a_full_disk_is_named_and_nothing_starts(machines: Machines) -> None:
    machines.exec("m2", f"dd if=/dev/zero of={SMALL_DISK}/fill bs=1k count=400 2>/dev/null")
    hosts = load_hosts(machines.hosts_toml())
    root = ROOT
    cmds = parse_host_table({"host": {
        "dir": f"{SMALL_DISK}/{{name}}",
        "upload": [{"from": str(root / "sut/leasekv"), "to": "app"}],
        "command": ["sleep", "600"],
    }}, root, "disk.toml")
    cluster = SshCluster(hosts, cmds)
    try:
        with pytest.raises(SshFailure) as e:
            cluster.up()
        assert "node m2" in str(e.value) and "disk is full" in str(e.value)
        assert e.value.exit_code == 255
    finally:
        cluster.down()
        cluster.close()


def test_an_ordinary_user_with_sudo_runs_the_faults_and_one_without_is_refused(
        machines: Machines) -> None:
    """`sudo = true`: the server runs as the user, iptables through `sudo -n`; a user without
    that right gets one sentence naming the node, not a half-applied fault."""
    cmds = parse_host_table({"host": {"command": ["sleep", "600"]}}, Path("."), "user.toml")
    for user, sudo, works in (("leaseline", "true", True), ("nosudo", "true", False),
                              ("nosudo", "false", False)):
        hosts = load_hosts(machines.hosts_toml(user=user, extra=f"sudo = {sudo}"))
        cluster = SshCluster(hosts, cmds)
        try:
            cluster.up()
            assert cluster.dir("m1") == f"/home/{user}/.leaseline/m1"
            pid = machines.exec("m1", f"cat /home/{user}/.leaseline/m1/.leaseline/pid")[1]
            assert machines.exec("m1", f"ps -o user= -p {pid}")[1].strip() == user
            if works:
                cluster.run_in_netns("m1", "iptables -w -N LEASELINE-T")
                assert "-N LEASELINE-T" in machines.exec("m1", "iptables -w -S")[1]
            else:
                with pytest.raises(SshFailure) as e:
                    cluster.run_in_netns("m1", "iptables -w -N LEASELINE-T")
                assert str(e.value).startswith("a fault command on node m1 failed: ")
                assert "\n" not in str(e.value)
        finally:
            if works:
                cluster.down()  # the servers, and Leaseline's chains
            else:
                for n in cluster.nodes:
                    cluster.stop(n)
            cluster.close()
        assert "LEASELINE" not in machines.exec("m1", "iptables -w -S")[1]
        assert machines.exec("m1", "pgrep -u leaseline,nosudo sleep")[0] != 0
