"""The cluster on a user's own machines, reached over SSH: the second implementation of the
Cluster protocol (harness/clusters/base.py; the first is Docker's).

Each node runs its server from the system description's `[host]` commands
(harness.systems.host_system) in a folder of its own. Leaseline starts the server detached
in a session of its own (`setsid`), so its process group is the node: kill is SIGKILL to
that group, pause and thaw are SIGSTOP/SIGCONT (what `docker pause` does with the
freezer), start runs the command again on the same data. Network faults run the same
iptables scripts as in Docker (harness/clusters/netrules.py), on the host itself, in
chains named LEASELINE*, so healing removes exactly those chains and nothing of the
machine's own firewall; `delay` uses tc netem at each sender's egress where a host has it
(harness/clusters/netem.py: probed once per host, `netem_support`), else the NFQUEUE
handler as a host process. Nothing here uses Docker.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from leaseline.harness.clusters import netem, nfqueue
from leaseline.harness.clusters.netrules import heal_script
from leaseline.harness.clusters.ssh.hosts import HostsFile
from leaseline.harness.clusters.ssh.transport import (
    CommandFailed,
    SshFailure,
    SshNode,
    last_line,
    q,
)
from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.parallel import in_parallel
from leaseline.harness.systems.host_system import HostCommands
from leaseline.harness.systems.templates import TemplateProblem, render

STATE = ".leaseline"  # inside each node's folder: pid files, the delay handler
HANDLER_SOURCE = Path(nfqueue.__file__)
HANDLER = f"{STATE}/nfqueue.py"
CHAIN_PREFIX = "LEASELINE"

# Defines ll_status, which prints running, paused or exited (the server's process group
# leader: stopped by SIGSTOP is "paused", a zombie or no process is "exited").
STATUS_FN = f"""
ll_status() {{
  p=$(cat {STATE}/pid 2>/dev/null)
  if [ -z "$p" ] || ! kill -0 "$p" 2>/dev/null; then echo exited
  else
    s=$(sed 's/.*) //' /proc/"$p"/stat 2>/dev/null | cut -c1)
    case "$s" in T|t) echo paused;; Z|X|"") echo exited;; *) echo running;; esac
  fi
}}
"""
STATUS_SCRIPT = STATUS_FN + "ll_status\n"

# Every LEASELINE* chain unhooked and removed (filter table; netem's in mangle and its HTB
# roots too); only ours, whoever created it (a killed run).
HEAL_ALL_CHAINS = f"""
if command -v iptables >/dev/null 2>&1; then
  for c in $(iptables -w -S 2>/dev/null | sed -n 's/^-N \\({CHAIN_PREFIX}[^ ]*\\).*/\\1/p'); do
    while iptables -w -D INPUT -j "$c" 2>/dev/null; do :; done
    while iptables -w -D OUTPUT -j "$c" 2>/dev/null; do :; done
    iptables -w -F "$c" 2>/dev/null || true
    iptables -w -X "$c" 2>/dev/null || true
  done
fi
{netem.HEAL_ALL}
"""


def stop_handlers_script(pattern: str) -> str:
    """Stops the delay handlers whose pid files match pattern (they accept what they hold)."""
    return f"""
for f in {STATE}/{pattern}.pid; do
  [ -f "$f" ] || continue
  p=$(cat "$f"); kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
  rm -f "$f"
done
"""


class SshCluster:
    """The nodes of a hosts file, running the system as its description's [host] says."""

    def __init__(self, hosts: HostsFile, commands: HostCommands, accept_new_keys: bool = False,
                 log: Callable[[str], None] = lambda _m: None, name: str = "ssh") -> None:
        self.hosts = hosts
        self.commands = commands
        self.project = f"ll-ssh-{name}"
        self.log = log
        self.nodes = hosts.names
        self.node_names = tuple(hosts.names)
        self.host_files: dict[str, Path] = {}  # nothing of an image is on this machine
        self._ssh = {h.name: SshNode(h, hosts.known_hosts, accept_new_keys) for h in hosts.nodes}
        self._ips = {h.name: _resolve(h.address) for h in hosts.nodes}
        self._dirs: dict[str, str] = {}
        self._homes: dict[str, str] = {}
        self._netem: dict[tuple[str, str], str | None] = {}  # (node, leaf) -> why not

    # -- plumbing ------------------------------------------------------------------------
    def node(self, name: str) -> SshNode:
        try:
            return self._ssh[name]
        except KeyError:
            raise EnvironmentProblem(f"{name!r} is not a node of {self.hosts.path}.") from None

    def node_id(self, name: str) -> int:
        return self.nodes.index(name) + 1

    def dir(self, name: str) -> str:
        """The node's folder, with ~ expanded on the node (asked once)."""
        if name not in self._dirs:
            home = self.home(name)
            raw = self.commands.node_dir(name, self.node_id(name))
            self._dirs[name] = home + raw[1:] if raw.startswith("~/") else raw
        return self._dirs[name]

    def home(self, name: str) -> str:
        if name not in self._homes:
            out = self.node(name).run('printf %s "$HOME"', "finding the home folder").stdout
            self._homes[name] = out.strip() or "/"
        return self._homes[name]

    def _values(self, name: str) -> dict[str, str]:
        peers = [(n, self.node_id(n), self._ips[n]) for n in self.nodes]
        return self.commands.values(name, self.node_id(name), self._ips[name], self.dir(name),
                                    self.home(name), peers)

    def run(self, name: str, script: str, what: str, timeout_s: float | None = None,
            check: bool = True, privileged: bool = False) -> str:
        """script in the node's folder (which must exist); its stdout."""
        body = f"cd {q(self.dir(name))} || exit 1\n{script}"
        return self.node(name).run(body, what, timeout_s if timeout_s is not None
                                   else self.commands.timeout_s, check, privileged).stdout

    def connect_all(self) -> None:
        """Every node reachable with a trusted key, checked at once (one sentence if not)."""
        in_parallel(lambda n: self.node(n).connect(), self.nodes)

    # -- lifecycle -----------------------------------------------------------------------
    def up(self) -> None:
        """Folder, uploads, setup, wipe, start: on every node in parallel."""
        self.connect_all()
        in_parallel(self._prepare, self.nodes)
        in_parallel(self.start, self.nodes)

    def _prepare(self, name: str) -> None:
        node, d = self.node(name), self.dir(name)
        node.run(f"mkdir -p {q(d)}/{STATE}", "creating its folder",
                 self.commands.timeout_s)
        try:
            for up in self.commands.uploads:
                node.upload_tree(up.local, f"{d}/{up.remote}")
            node.upload_tree(HANDLER_SOURCE, f"{d}/{HANDLER}")
        except SshFailure as e:
            raise SshFailure(self._maybe_full(name, str(e))) from None
        values = self._values(name)
        for what, cmd, timeout in (("setting up", self.commands.setup,
                                    self.commands.setup_timeout_s),
                                   ("wiping", self.commands.wipe, self.commands.timeout_s)):
            if not cmd.empty:
                self.run(name, self._shell(cmd, values, name), what, timeout)

    def _maybe_full(self, name: str, sentence: str) -> str:
        """SFTP says only "Failure" when a disk is full: ask df before blaming anything else."""
        with contextlib.suppress(SshFailure):
            avail = self.node(name).run(
                f"df -Pk {q(self.dir(name))} | awk 'NR==2 {{print $4}}'", "checking the disk",
                10, check=False).stdout.strip()
            if avail.isdigit() and int(avail) < 64:
                return (f"node {name}: its disk is full ({avail} KiB free in "
                        f"{self.dir(name)}); nothing was started.")
        return sentence

    def _shell(self, cmd: object, values: dict[str, str], name: str) -> str:
        try:
            return cmd.shell(values)  # type: ignore[attr-defined]
        except TemplateProblem as e:
            raise EnvironmentProblem(f"a [host] command of node {name} {e}.") from None

    def start(self, name: str) -> None:
        """Starts the node's server detached, unless it is running; output goes to node.log."""
        values = self._values(name)
        env = " ".join(f"{k}={q(self._render_env(v, values, name))}"
                       for k, v in self.commands.env.items())
        command = self._shell(self.commands.command, values, name)
        script = f"""
{STATUS_FN}
st=$(ll_status)
[ "$st" = exited ] || exit 0
{f"export {env}" if env else ":"}
setsid {command} >> node.log 2>&1 < /dev/null &
echo $! > {STATE}/pid
sleep 0.2
kill -0 $! 2>/dev/null || {{
  echo "the node's command exited at once:" >&2; tail -n 3 node.log >&2; exit 1; }}
"""
        self.run(name, script, "starting the server")

    @staticmethod
    def _render_env(text: str, values: dict[str, str], name: str) -> str:
        try:
            return render(text, values)
        except TemplateProblem as e:
            raise EnvironmentProblem(f"[host] env of node {name} {e}.") from None

    def stop(self, name: str) -> None:
        """The description's stop (or SIGTERM to the group), then SIGKILL after the grace."""
        grace = self.commands.stop_grace_s
        custom = "" if self.commands.stop.empty else self._shell(
            self.commands.stop, self._values(name), name)
        script = f"""
p=$(cat {STATE}/pid 2>/dev/null) || exit 0
kill -CONT -"$p" 2>/dev/null || true
{custom or 'kill -TERM -"$p" 2>/dev/null || true'}
i=0; while kill -0 -"$p" 2>/dev/null && [ $i -lt {int(grace * 10)} ]; do sleep 0.1; i=$((i+1)); done
kill -KILL -"$p" 2>/dev/null || true
rm -f {STATE}/pid
"""
        self.run(name, script, "stopping the server", self.commands.timeout_s + grace)

    def down(self) -> None:
        """Stops every node and removes every fault Leaseline may have left on it: also what a
        killed earlier run left (its chains, a frozen or stray process, delay handlers)."""
        self.connect_all()
        in_parallel(self._clean, self.nodes)

    def heal_everything(self) -> None:
        """Every fault off every node, the servers left running (--leave-running)."""
        in_parallel(lambda name: self._heal(name, self.thaw), self.nodes)

    def _clean(self, name: str) -> None:
        self._heal(name, self.stop)

    def _heal(self, name: str, then: Callable[[str], object]) -> None:
        """The node's delay handlers stopped, then `then` on its server (thaw: it goes on;
        stop: it goes), then every Leaseline chain removed from the host."""
        if self._exists(name):
            self.run(name, stop_handlers_script("delay-*"), "stopping delay handlers",
                     privileged=True)
            then(name)
        self.node(name).run(HEAL_ALL_CHAINS, "removing Leaseline's iptables chains",
                            self.commands.timeout_s, privileged=True)

    def _exists(self, name: str) -> bool:
        r = self.node(name).run(f"test -d {q(self.dir(name))}", "looking for the folder",
                                check=False)
        return r.returncode == 0

    def close(self) -> None:
        for node in self._ssh.values():
            node.close()

    # -- what nemeses and profiles use ----------------------------------------------------
    def ip(self, name: str) -> str:
        """The node's address; a real machine keeps it while its server is down."""
        self.node(name)
        return self._ips[name]

    def status(self, name: str) -> str:
        """running, paused or exited (the words of Docker's container status)."""
        return self.run(name, STATUS_SCRIPT, "asking for the server's state").strip()

    def is_running(self, name: str) -> bool:
        return self.status(name) == "running"

    def address(self, name: str) -> str:
        return self.ip(name)

    def known_stopped(self, name: str) -> bool:
        return False  # only the node can tell: the system's own probes ask it

    def kill(self, name: str) -> None:
        """SIGKILL to the server's process group; returns once it is gone."""
        self.run(name, f"""
p=$(cat {STATE}/pid 2>/dev/null) || exit 0
kill -KILL -"$p" 2>/dev/null || exit 0
for i in $(seq 50); do kill -0 -"$p" 2>/dev/null || exit 0; sleep 0.1; done
""", "killing the server")

    def pause(self, name: str) -> bool:
        """SIGSTOP to the process group; False if the server was not running."""
        return self._signal_group(name, "running", "STOP", "pausing the server")

    def thaw(self, name: str) -> bool:
        """SIGCONT to the process group; False if it was not paused."""
        return self._signal_group(name, "paused", "CONT", "thawing the server")

    def _signal_group(self, name: str, status: str, signal: str, what: str) -> bool:
        """`signal` to the server's process group if its status is `status`; whether sent."""
        out = self.run(name, f"""
{STATUS_FN}
st=$(ll_status)
[ "$st" = {status} ] || {{ echo no; exit 0; }}
kill -{signal} -"$(cat {STATE}/pid)" && echo yes
""", what)
        return out.strip() == "yes"

    def logs(self, name: str) -> bytes:
        """The server's own output (node.log), over SFTP; b'' if there is none."""
        with contextlib.suppress(SshFailure):
            return self.node(name).read_file(f"{self.dir(name)}/node.log") or b""
        return b""

    def log_paths(self, name: str) -> list[str]:
        """The description's log files besides node.log ([] while the node is unreachable)."""
        try:
            d = self.dir(name)
        except SshFailure:
            return []
        return [p if p.startswith("/") else f"{d}/{p}" for p in self.commands.logs
                if p != "node.log"]

    def node_logs(self, name: str, listed: list[str]) -> dict[str, bytes]:
        """Over SFTP: the server's output, then the [host] table's log files (a profile's
        paths are inside its container, so `listed` does not apply here)."""
        found = {"node.log": self.logs(name)}
        for path in self.log_paths(name):
            data = self.copy_file(name, path)
            if data is not None:
                found[Path(path).name] = data
        return found

    def copy_file(self, name: str, path: str) -> bytes | None:
        with contextlib.suppress(SshFailure):
            return self.node(name).read_file(path)
        return None

    # -- network rules and the delay handler (the Cluster protocol's) ----------------------
    def run_in_netns(self, name: str, script: str) -> str:
        """A fault script (iptables) on the host itself, as root (sudo if the hosts say so)."""
        try:
            return self.node(name).run(script, "a fault command",
                                       self.commands.timeout_s, privileged=True).stdout
        except CommandFailed as e:
            raise SshFailure(f"a fault command on node {name} failed: "
                             f"{last_line(e.stderr) or e}") from None

    def run_on_node(self, name: str, script: str) -> str:
        """On the host itself: its files are the node's."""
        return self.run_in_netns(name, script)

    def heal_chain(self, names: Iterable[str], chain: str) -> list[str]:
        """Removes chain on every node (a node whose server is down keeps its rules: the
        machine's network outlives the server, so it is healed too)."""
        names = list(names)
        in_parallel(lambda n: self.run_in_netns(n, heal_script(chain)), names)
        return names

    def netem_support(self, nodes: list[str], leaf: str) -> dict[str, str | None]:
        """Why each node cannot delay its egress with tc netem (with this leaf), or None if it
        can: harness.clusters.netem's probe, run once per node (SshFailure, not cached, if
        unreachable)."""
        return in_parallel(lambda n: self._netem_missing(n, leaf),
                           [n for n in nodes if n in self.nodes])

    def _netem_missing(self, name: str, leaf: str) -> str | None:
        key = (name, leaf)
        if key not in self._netem:
            others = [self._ips[n] for n in self.nodes if n != name]
            out = self.node(name).run(netem.probe_script(others, leaf), "probing for tc netem",
                                      self.commands.timeout_s, check=False, privileged=True)
            self._netem[key] = netem.probe_answer(out.stdout or out.stderr)
        return self._netem[key]

    def start_delay_handler(self, name: str, rules: str, args: str, instance: int,
                            timeout_s: float) -> None:
        """The delay handler (harness/clusters/nfqueue.py, uploaded at setup) detached on the
        host after its NFQUEUE rules; returns once it holds the queue, else SshFailure with
        its last words."""
        tag = str(instance)
        script = f"""
{rules}
setsid python3 {HANDLER} {args} > {STATE}/delay-{tag}.log 2>&1 < /dev/null &
echo $! > {STATE}/delay-{tag}.pid
i=0
while [ $i -lt {int(timeout_s * 10)} ]; do
  grep -q 'bound queue' {STATE}/delay-{tag}.log && exit 0
  kill -0 $! 2>/dev/null || {{ tail -n 1 {STATE}/delay-{tag}.log >&2; exit 1; }}
  sleep 0.1; i=$((i+1))
done
echo "did not bind its queue within {timeout_s:g} s" >&2; exit 1
"""
        try:
            self.run(name, script, "starting the delay handler",
                     timeout_s + 10, privileged=True)
        except CommandFailed as e:
            raise SshFailure(f"the delay handler on node {name} stopped: "
                             f"{last_line(e.stderr) or e}") from None

    def heal_delay(self, nodes: list[str], chain: str, instance: int) -> None:
        """The chain and netem's class in one command per node, then the handlers."""
        script = f"{heal_script(chain)}\n{netem.heal_script(instance)}"
        in_parallel(lambda n: self.run_in_netns(n, script), nodes)
        in_parallel(lambda n: self.run(n, stop_handlers_script(f"delay-{instance}"),
                                       "stopping the delay handler",
                                       privileged=True), nodes)

    @classmethod
    def queue_missing(cls, queue: int) -> str | None:
        return None  # the handler runs on each host: a kernel without it shows at the start

    @contextlib.contextmanager
    def armed_cut(self, name: str, peer_ips: list[str], chain: str
                  ) -> Iterator[Callable[[], None]]:
        """What the Docker cluster's armed_cut does with a helper container: the DROP rules
        are made first, in their chain but not hooked; the yielded function hooks them in
        one SSH command (tens of ms), so the cut can follow a freeze or a hand-over
        closely."""
        lines = [f"iptables -w -N {q(chain)} 2>/dev/null || true", f"iptables -w -F {q(chain)}"]
        for ip in peer_ips:
            lines += [f"iptables -w -A {q(chain)} -s {q(ip)} -j DROP",
                      f"iptables -w -A {q(chain)} -d {q(ip)} -j DROP"]
        self.run_in_netns(name, "\n".join(lines))

        def cut() -> None:
            self.run_in_netns(name, f"iptables -w -I INPUT 1 -j {q(chain)}\n"
                                    f"iptables -w -I OUTPUT 1 -j {q(chain)}")

        yield cut


def _resolve(address: str) -> str:
    """An IPv4 address for iptables rules (the address itself if it cannot be resolved)."""
    try:
        return socket.gethostbyname(address)
    except OSError:
        return address
