"""`leaseline run --hosts` end to end on five sshd machines (tests/ssh_machines.py), treated
as a user's own hosts: leasekv set up through its [host] description, the same faults and
verdicts as in Docker, and failures that are one sentence, exit 255, and leave no fault.

Leaseline runs with DOCKER_HOST pointing at nothing, so any use of the Docker API by the
run itself would fail it: only this test's set-up uses Docker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest
from conftest import wait_for_nemesis_record
from repo_paths import ROOT
from ssh_machines import Machines, ssh_machines

pytestmark = [pytest.mark.docker, pytest.mark.slow]
PASSPHRASE = "pass-phrase-never-logged-7d1c"
SMALL = "/root/.leaseline/leasekv/m2"  # m2's node folder is a small disk of its own


@pytest.fixture(scope="module")
def machines() -> Iterator[Machines]:
    with ssh_machines(5, tmpfs={1: f"{SMALL}:48m"}) as m:
        yield m


def run_env() -> dict[str, str]:
    # No engine at that address: Leaseline must not need Docker in this mode.
    return {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock",
            "LL_TEST_PASSPHRASE": PASSPHRASE}


def leaseline(hosts: Path, results: Path, *args: str, timeout: float = 400, sut: str = "leasekv"
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "leaseline", "run", "--sut", sut, "--hosts", str(hosts),
         "--results-dir", str(results), "--spark-master", "local[2]", *args],
        capture_output=True, text=True, timeout=timeout, env=run_env(), cwd=ROOT)


def leftovers(machines: Machines) -> dict[str, str]:
    """Leaseline chains (netem's too), netem's HTB roots, delay handlers and leasekv
    processes still on each machine ('' if none)."""
    out = {}
    for n in machines.names:
        _, text = machines.exec(n, "iptables -w -S | grep LEASELINE; "
                                   "iptables -w -t mangle -S | grep LEASELINE; "
                                   "tc qdisc show | grep 'htb 11ee:'; "
                                   "ps -eo pid,stat,args | grep '[n]fqueue.py'; "
                                   "ps -eo pid,stat,args | grep '[s]ut.leasekv'")
        out[n] = text.strip()
    return out


def locked_key(machines: Machines) -> Path:
    key = paramiko.ECDSAKey.from_private_key_file(str(machines.key_file))
    path = machines.folder / "locked_key"
    key.write_private_key_file(str(path), password=PASSPHRASE)
    return path


def only_run(results: Path) -> Path:
    (run_dir,) = [p for p in results.rglob("test.json")]
    return run_dir.parent


def test_a_correct_build_is_strict_linearizable_under_the_docker_faults(
        machines: Machines, tmp_path: Path) -> None:
    key = locked_key(machines)
    hosts = machines.hosts_toml(key_file=key, extra='passphrase_env = "LL_TEST_PASSPHRASE"')
    r = leaseline(hosts, tmp_path, "--workload", "register", "--nemesis",
                  "kill-leader,pause,partition-leader", "--nemesis-interval", "3",
                  "--time-limit", "24", "--lease-ms", "0", "--keys", "4")
    assert r.returncode == 0, r.stderr[-2000:]
    run_dir = only_run(tmp_path)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["summary"]["linearizable"] == 4 and results["summary"]["violation"] == 0
    faults = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()
              if '"nemesis"' in line]
    done = {rec["f"] for rec in faults if rec["type"] == "ok"}
    assert {"kill", "restart", "start-partition", "stop-partition", "pause", "resume"} <= done
    test = json.loads((run_dir / "test.json").read_text())
    assert test["nodes"] == machines.names
    for n in machines.names:  # each node's output, fetched over SFTP
        assert b"leasekv INFO node" in (run_dir / "nodes" / n / "node.log").read_bytes()
    # No secret anywhere in the run folder: not the passphrase, the key, nor its path.
    secret = paramiko.ECDSAKey.from_private_key_file(str(machines.key_file))
    private = max(key.read_text().splitlines(), key=len)  # a line of the key itself
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for s in (PASSPHRASE, private, str(key), secret.get_base64()[:40]):
                assert s.encode() not in data, f"{s[:12]}... in {path.name}"
    assert all(v == "" for v in leftovers(machines).values()), leftovers(machines)


def test_the_local_read_bug_is_caught_as_in_docker(machines: Machines, tmp_path: Path) -> None:
    r = leaseline(machines.hosts_toml(), tmp_path, "--sut-opt", "bug=local-read",
                  "--client-routing", "pinned", "--concurrency", "20", "--nemesis",
                  "partition-leader:d=3", "--nemesis-interval", "3", "--time-limit", "20")
    assert r.returncode == 1, r.stderr[-2000:]
    results = json.loads((only_run(tmp_path) / "results.json").read_text())
    assert results["valid"] is False and results["summary"]["violation"] >= 1
    assert all(v == "" for v in leftovers(machines).values()), leftovers(machines)


def test_a_system_file_describes_the_ssh_run_too(machines: Machines, tmp_path: Path) -> None:
    """harness/systems/leasekv.toml: the file that runs leasekv in Docker, whose [host]
    table runs it on these machines; its leader, readiness and transfer probes alike. Its
    delay takes the NFQUEUE path on a kernel without netem and its record says so."""
    r = leaseline(machines.hosts_toml(), tmp_path, "--nemesis",
                  "kill-leader,transfer-leader,delay:one:ms=50:dir=in",
                  "--nemesis-interval", "3", "--time-limit", "21", "--lease-ms", "0",
                  sut=str(ROOT / "harness" / "systems" / "leasekv.toml"))
    assert r.returncode == 0, r.stderr[-2000:]
    run_dir = only_run(tmp_path)
    assert json.loads((run_dir / "test.json").read_text())["nodes"] == list(machines.names)
    nemesis = (run_dir / "nemesis.log").read_text()
    assert "leadership transferred" in nemesis and "killed" in nemesis, nemesis
    records = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()
               if '"start-delay"' in line]
    (started,) = [rec["value"] for rec in records if rec["type"] == "ok"]
    code, _ = machines.exec("m1", "ip link add llt0 type veth peer name llt1 && "
                                  "tc qdisc add dev llt0 root netem delay 1ms; r=$?; "
                                  "ip link del llt0; exit $r")
    assert started["via"] == ("netem" if code == 0 else "nfqueue"), started
    assert "via nfqueue" in nemesis or code == 0, nemesis
    assert all(v == "" for v in leftovers(machines).values()), leftovers(machines)


def one_sentence(r: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("leaseline: ")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    return lines[0]


def test_failures_are_one_sentence_exit_255_and_leave_nothing(
        machines: Machines, tmp_path: Path) -> None:
    cases = []
    # An unreachable node (nothing listens on port 2 of m3).
    cases.append((machines.hosts_toml(overrides={"m3": "port = 2"}),
                  "node m3 cannot be reached over SSH"))
    # A changed host key: m4's address with m5's keys.
    kh = machines.folder / "changed_known_hosts"
    kh.write_text("".join(f"{machines.ips[n]} {k}\n" for n in machines.names
                          for k in machines.host_keys["m5" if n == "m4" else n]))
    cases.append((machines.hosts_toml(known_hosts=kh), "node m4"))
    # A wrong key for m1.
    other = machines.folder / "other_key"
    paramiko.ECDSAKey.generate(bits=256).write_private_key_file(str(other))
    cases.append((machines.hosts_toml(overrides={"m1": f'key_file = "{other}"'}),
                  "node m1 (root@"))
    for hosts, says in cases:
        r = leaseline(hosts, tmp_path / "fail", "--nemesis", "partition-leader",
                      "--time-limit", "5")
        assert r.returncode == 255, r.stderr[-2000:]
        assert says in one_sentence(r)
    # A refused command: m3's node folder cannot be made (a file is in the way).
    machines.exec("m3", "rm -rf /root/.leaseline/leasekv/m3; mkdir -p /root/.leaseline/leasekv;"
                        " touch /root/.leaseline/leasekv/m3")
    r = leaseline(machines.hosts_toml(), tmp_path / "refused", "--time-limit", "5")
    machines.exec("m3", "rm -f /root/.leaseline/leasekv/m3")
    assert r.returncode == 255
    assert "creating its folder on node m3 failed (exit 1: mkdir" in one_sentence(r)
    # A full disk on m2.
    machines.exec("m2", f"rm -rf {SMALL}/* {SMALL}/.leaseline; "
                        f"dd if=/dev/zero of={SMALL}/fill bs=1M count=64 2>/dev/null")
    r = leaseline(machines.hosts_toml(), tmp_path / "full", "--time-limit", "5")
    machines.exec("m2", f"rm -f {SMALL}/fill")
    assert r.returncode == 255
    sentence = one_sentence(r)
    assert "node m2" in sentence and "disk is full" in sentence
    assert all(v == "" for v in leftovers(machines).values()), leftovers(machines)


def start_run(hosts: Path, results: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "leaseline", "run", "--sut", "leasekv", "--hosts", str(hosts),
         "--results-dir", str(results), "--nemesis", "partition-leader:d=60",
         "--nemesis-interval", "1", "--time-limit", "90", "--spark-master", "local[2]"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=run_env(), cwd=ROOT)


def wait_history(results: Path) -> Path:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = list(results.rglob("history.jsonl"))
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no history in {results}")


def test_sigterm_heals_and_a_killed_runs_leftovers_go_before_the_next_run(
        machines: Machines, tmp_path: Path) -> None:
    hosts = machines.hosts_toml()
    proc = start_run(hosts, tmp_path / "term")
    wait_for_nemesis_record(wait_history(tmp_path / "term"), "start-partition", proc, 90)
    assert any("LEASELINE" in v for v in leftovers(machines).values())
    proc.send_signal(signal.SIGTERM)
    proc.wait(120)
    assert proc.returncode == 130
    assert all(v == "" for v in leftovers(machines).values()), leftovers(machines)

    # SIGKILL: nothing of the harness heals; the next run removes the chain and the servers.
    proc = start_run(hosts, tmp_path / "kill")
    wait_for_nemesis_record(wait_history(tmp_path / "kill"), "start-partition", proc, 90)
    proc.kill()
    proc.wait(30)
    left = leftovers(machines)
    assert any("LEASELINE" in v for v in left.values()), left
    old_pids = {v.split()[0] for v in left.values() if "sut.leasekv" in v}
    r = leaseline(hosts, tmp_path / "next", "--time-limit", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    after = leftovers(machines)
    assert all(v == "" for v in after.values()), after
    assert old_pids
