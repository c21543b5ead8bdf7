"""`delay` through tc netem (harness/clusters/netem.py): the command text, and the real scripts run
as root in a fresh network namespace (`unshare -n`) with a veth pair. This kernel may lack
netem, so those runs put a pfifo leaf where netem goes (the leaf is the scripts' one seam)
and count packets with `tc -s class show`: only the chosen link's go through the class,
and healing leaves the namespace as it was, a rule of the machine's own included."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from leaseline.harness.clusters import netem
from leaseline.harness.clusters.ssh.cluster import HEAL_ALL_CHAINS

LEAF = "pfifo limit 1000"
DEV = "llv0"
# A veth pair with static neighbours: packets to .2, .3 and .4 leave llv0 through its root
# qdisc (no ARP wait), and a rule of "the machine's own" in the mangle table.
SETUP = f"""
ip link add {DEV} type veth peer name llv1
ip addr add 10.9.0.1/24 dev {DEV}
ip link set {DEV} up; ip link set llv1 up; ip link set lo up
for i in 2 3 4; do
  ip neigh replace 10.9.0.$i lladdr 02:00:00:00:00:0$i dev {DEV} nud permanent
done
iptables -w -t mangle -N USERCHAIN
iptables -w -t mangle -A POSTROUTING -d 10.9.0.9 -j MARK --set-mark 7
"""


def netns_available() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not all(shutil.which(c) for c in ("unshare", "ip", "tc", "iptables")):
        return "needs unshare, ip, tc and iptables"
    r = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    return None if r.returncode == 0 else "unshare -n is not permitted here"


needs_netns = pytest.mark.skipif(netns_available() is not None,
                                 reason=str(netns_available()))


def in_netns(tmp_path: Path, *steps: str) -> list[str]:
    """Runs each step (a shell script) in order in one fresh network namespace, after
    SETUP; returns each step's output. A step that fails fails the test."""
    files = []
    for i, step in enumerate(steps):
        path = tmp_path / f"step{i}.sh"
        path.write_text(step)
        files.append(path)
    driver = SETUP + "".join(
        f"echo '@@step {i}'\nsh {shlex.quote(str(f))} 2>&1 || {{ echo \"@@failed $?\"; exit 1; }}\n"
        for i, f in enumerate(files))
    r = subprocess.run(["unshare", "-n", "sh", "-ec", driver], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return [part.split("\n", 1)[1] if "\n" in part else ""
            for part in r.stdout.split("@@step ")[1:]]


def send(counts: dict[str, int]) -> str:
    """UDP datagrams to each address (port 9: nothing needs to answer)."""
    code = ("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"for ip, n in {counts!r}.items():\n"
            "    for _ in range(n):\n        s.sendto(b'x' * 100, (ip, 9))\n")
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}\n"


SHOW = f"tc -s class show dev {DEV}; echo '--qdisc'; tc -s qdisc show dev {DEV}; " \
       "echo '--mangle'; iptables -w -t mangle -S\n"


def class_packets(out: str, fault_id: int) -> int | None:
    """Packets sent through the spec's class, from `tc -s class show`; None if none."""
    m = re.search(rf"class htb {re.escape(netem.classid(fault_id))} .*?\n Sent \d+ bytes (\d+) pkt",
                  out)
    return int(m.group(1)) if m else None


def direct_packets(out: str) -> int:
    m = re.search(rf"qdisc htb {netem.ROOT}: root .*direct_packets_stat (\d+)", out)
    assert m, out
    return int(m.group(1))


# -- the text --------------------------------------------------------------------------------


def test_netem_leaf_says_delay_and_jitter_in_ms() -> None:
    assert netem.leaf(300, 50) == "netem delay 300ms 50ms rate 10gbit limit 16384"
    assert netem.leaf(0.5, 0).startswith("netem delay 0.5ms 0ms ")
    assert netem.leaf(10_000, 2_500).startswith("netem delay 10000ms 2500ms ")
    assert netem.leaf(300, 50, "pfifo limit 10") == "pfifo limit 10"  # the seam


def test_each_spec_has_its_own_class_chain_and_leaf() -> None:
    assert netem.classid(0) == "11ee:1" and netem.classid(999) == "11ee:3e8"
    assert netem.chain(7) == "LEASELINE-netem-7"
    script = netem.apply_script(["10.0.0.2", "10.0.0.3"], 500, netem.leaf(300, 50))
    assert ("tc qdisc replace dev \"$1\" parent 11ee:1f5 handle 1f5: "
            "netem delay 300ms 50ms rate 10gbit limit 16384") in script
    assert "tc qdisc add dev \"$1\" root handle 11ee: htb default 0" in script
    for ip in ("10.0.0.2", "10.0.0.3"):
        assert (f"iptables -w -t mangle -A LEASELINE-netem-500 -d {ip} -j CLASSIFY "
                "--set-class 11ee:1f5") in script
    assert script.splitlines()[-1] == (
        "iptables -w -t mangle -C POSTROUTING -j LEASELINE-netem-500 2>/dev/null || "
        "iptables -w -t mangle -I POSTROUTING 1 -j LEASELINE-netem-500")
    heal = netem.heal_script(500)
    assert "tc class del dev \"$dev\" classid 11ee:1f5" in heal
    assert "iptables -w -t mangle -X LEASELINE-netem-500" in heal


def test_every_value_is_one_shell_word() -> None:
    evil = "10.0.0.2; touch /tmp/ll-pwned"
    for script in (netem.apply_script([evil], 3, LEAF), netem.probe_script([evil], LEAF)):
        lines = [ln for ln in script.splitlines() if "touch" in ln]
        assert lines
        for line in lines:
            # The address stays one word wherever it appears (a rule, a route, a message).
            assert "'10.0.0.2; touch /tmp/ll-pwned'" in line, line
            assert "; touch" not in line.replace("'10.0.0.2; touch /tmp/ll-pwned'", "")


def test_probe_answer() -> None:
    assert netem.probe_answer("something\nnetem-ok\n") is None
    assert netem.probe_answer("Error: Specified qdisc kind is unknown.\n") == (
        "Error: Specified qdisc kind is unknown")
    assert netem.probe_answer("") == "the probe said nothing"


# -- the real scripts, in a fresh network namespace ----------------------------------------


@needs_netns
def test_only_the_chosen_links_packets_go_through_the_class_and_heal_removes_it(
        tmp_path: Path) -> None:
    out = in_netns(
        tmp_path,
        netem.apply_script(["10.9.0.2"], 7, LEAF),
        netem.apply_script(["10.9.0.2"], 7, LEAF),  # a second start changes nothing
        send({"10.9.0.2": 20, "10.9.0.3": 7}) + SHOW,
        netem.heal_script(7),
        SHOW,
        netem.heal_script(7),  # healing twice (or what was never there) is fine
    )
    counted = out[2]
    assert class_packets(counted, 7) == 20, counted
    assert direct_packets(counted) >= 7, counted
    assert counted.count("-j LEASELINE-netem-7") == 1  # hooked once
    healed = out[4]
    assert "11ee" not in healed and "LEASELINE" not in healed, healed
    assert "qdisc noqueue 0: root" in healed  # the kernel's default is back
    assert "-A POSTROUTING -d 10.9.0.9/32 -j MARK --set-xmark 0x7/0xffffffff" in healed
    assert "-N USERCHAIN" in healed


@needs_netns
def test_two_specs_count_and_heal_apart(tmp_path: Path) -> None:
    out = in_netns(
        tmp_path,
        netem.apply_script(["10.9.0.2"], 7, LEAF),
        netem.apply_script(["10.9.0.3", "10.9.0.4"], 8, LEAF),
        send({"10.9.0.2": 5, "10.9.0.3": 6, "10.9.0.4": 4}) + SHOW,
        netem.heal_script(7) + send({"10.9.0.3": 3}) + SHOW,
        netem.heal_script(8) + SHOW,
    )
    assert class_packets(out[2], 7) == 5 and class_packets(out[2], 8) == 10, out[2]
    one_left = out[3]
    assert class_packets(one_left, 7) is None and class_packets(one_left, 8) == 13, one_left
    assert "LEASELINE-netem-7" not in one_left and "-A POSTROUTING -j LEASELINE-netem-8" in one_left
    assert "11ee" not in out[4] and "LEASELINE" not in out[4], out[4]


@needs_netns
def test_a_killed_runs_leftovers_go_with_the_hosts_heal_all(tmp_path: Path) -> None:
    """What SshCluster runs on every host first and last: also netem's chains and root."""
    out = in_netns(
        tmp_path,
        netem.apply_script(["10.9.0.2"], 7, LEAF) + "\n"
        + netem.apply_script(["10.9.0.3"], 8, LEAF) + "\n"
        + "iptables -w -N LEASELINE-delay-3; iptables -w -I INPUT 1 -j LEASELINE-delay-3\n"
        + SHOW,
        HEAL_ALL_CHAINS + SHOW + "iptables -w -S\n",
    )
    assert class_packets(out[0], 7) == 0 and "LEASELINE-netem-8" in out[0]
    assert "11ee" not in out[1] and "LEASELINE" not in out[1], out[1]
    assert "-N USERCHAIN" in out[1] and "--set-xmark 0x7" in out[1]


@needs_netns
def test_the_probe_builds_the_tree_on_a_throwaway_device(tmp_path: Path) -> None:
    netem_here = subprocess.run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root",
                                 "netem", "delay", "1ms"], capture_output=True, text=True)
    out = in_netns(
        tmp_path,
        netem.probe_script(["10.9.0.2", "10.9.0.3"], LEAF),
        netem.probe_script(["10.9.0.2"], netem.leaf(1, 0)),
        netem.probe_script(["10.200.0.1"], LEAF),
        f"tc qdisc add dev {DEV} root handle 5: tbf rate 1mbit burst 10k latency 50ms\n"
        + netem.probe_script(["10.9.0.2"], LEAF)
        + f"\ntc qdisc del dev {DEV} root\n" + SHOW + "ip -o link\n",
    )
    assert netem.probe_answer(out[0]) is None, out[0]
    if netem_here.returncode == 0:
        assert netem.probe_answer(out[1]) is None, out[1]
    else:  # this kernel (e.g. the reference machine's) has no netem: the probe says why
        assert netem.probe_answer(out[1]) == netem_here.stderr.strip().rstrip("."), out[1]
    assert netem.probe_answer(out[2]) == "no route to 10.200.0.1"
    assert netem.probe_answer(out[3].split("--qdisc")[0]) == (
        "llv0 has a root qdisc of its own (tbf 5:)")
    assert "LEASELINE" not in out[3] and "llp" not in out[3]  # nothing left of the trial


@needs_netns
def test_a_bad_address_fails_the_script_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    script = netem.apply_script([f"10.9.0.2; touch {marker}"], 7, LEAF)
    r = subprocess.run(["unshare", "-n", "sh", "-c", SETUP + script], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode != 0 and "no route to 10.9.0.2; touch" in r.stderr, r.stderr
    assert not marker.exists()
