"""tc netem for `delay` on the user's own machines: the shell scripts that delay chosen links
at their sender's egress, probe a host for what they need, and heal.

netem only acts on what a device sends, so a delayed link (sender -> receiver) is delayed on
the sender: its egress device towards the receiver (`ip route get`) gets an HTB root qdisc
(handle 11ee:, replacing the kernel's default qdisc while a delay is in force), each delay
spec one HTB class 11ee:<id+1> with a netem leaf, and the spec's own iptables chain in the
mangle table (hooked into POSTROUTING) CLASSIFYs the packets to its receivers into its class.
HTB classifies by the priority CLASSIFY sets, so no tc filter is needed; everything else
goes through HTB's direct queue untouched. Two specs have two classes and two chains, so
they start and heal apart (a link both cover is held by one of them: the earlier-hooked
chain's CLASSIFY comes last and wins). The netem leaf has a `rate` far above any link's
(10 Gbit/s), which makes netem keep each class's packets in order with jitter too (without
a rate, netem reorders jittered packets). Healing a spec removes its chain and its class
(packets its netem still holds are dropped; TCP sends them again) and the HTB root once no
class is left in it; `HEAL_ALL` removes every such chain and root, e.g. a killed run's.

The leaf is the one seam: `leaf(ms, jitter, kind)` is netem's command for kind "netem"
and the bare kind otherwise (tests use "pfifo", which needs no netem in the kernel).
Scripts run as root on the host (harness.clusters.ssh.cluster); every value in them is quoted.
"""

from __future__ import annotations

from shlex import quote as q

ROOT = "11ee"  # the HTB root qdisc's handle major (hex): how a root is known to be ours
CHAIN = "LEASELINE-netem"  # each spec's mangle chain is CHAIN-<its id>
RATE = "10gbit"  # of each class and its netem: no link is shaped, netem keeps order
# tc computes no burst for 10 Gbit/s (it shows 0b, and every packet waits for tokens).
CLASS = f"htb rate {RATE} burst 1mb cburst 1mb quantum 60000"
LIMIT = 16384  # packets one netem holds (as many as the NFQUEUE handler's queue)
PROBE_REASON_OK = "netem-ok"

# The devices with our HTB root, one a line.
OUR_DEVICES = (
    f"tc qdisc show 2>/dev/null | sed -n 's/^qdisc htb {ROOT}: dev \\([^ ]*\\) root.*/\\1/p'"
)

# Every LEASELINE* chain of the mangle table unhooked and removed, and every HTB root of
# ours: what a run does first and last on each host (also what a killed run left).
HEAL_ALL = f"""
if command -v iptables >/dev/null 2>&1; then
  for c in $(iptables -w -t mangle -S 2>/dev/null | sed -n 's/^-N \\(LEASELINE[^ ]*\\).*/\\1/p'); do
    while iptables -w -t mangle -D POSTROUTING -j "$c" 2>/dev/null; do :; done
    iptables -w -t mangle -F "$c" 2>/dev/null || true
    iptables -w -t mangle -X "$c" 2>/dev/null || true
  done
fi
if command -v tc >/dev/null 2>&1; then
  for dev in $({OUR_DEVICES}); do tc qdisc del dev "$dev" root 2>/dev/null || true; done
fi
"""


def chain(fault_id: int) -> str:
    return f"{CHAIN}-{fault_id}"


def classid(fault_id: int) -> str:
    """The spec's HTB class; its minor is also its leaf's handle major (below 11ee)."""
    return f"{ROOT}:{fault_id + 1:x}"


def leaf(ms: float, jitter: float, kind: str = "netem") -> str:
    """The leaf qdisc's tc words: `netem delay 300ms 50ms ...` (jitter uniform, as the
    NFQUEUE handler's), or a stand-in kind as it is (e.g. "pfifo")."""
    if kind != "netem":
        return kind
    return f"netem delay {ms:g}ms {jitter:g}ms rate {RATE} limit {LIMIT}"


def _device(ip: str) -> str:
    return f"ip -o route get {q(ip)} 2>/dev/null | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p'"


def apply_script(receiver_ips: list[str], fault_id: int, leaf_words: str) -> str:
    """On a sender: its packets to receiver_ips go through the spec's class and leaf."""
    cid, major, ch = classid(fault_id), f"{fault_id + 1:x}:", q(chain(fault_id))
    lines = [
        "set -e",
        "ll_class() {",
        f"  tc qdisc show dev \"$1\" root | grep -q '^qdisc htb {ROOT}: ' ||",
        f"    tc qdisc add dev \"$1\" root handle {ROOT}: htb default 0",
        f"  tc class replace dev \"$1\" parent {ROOT}: classid {cid} {CLASS}",
        f"  tc qdisc replace dev \"$1\" parent {cid} handle {major} {leaf_words}",
        "}",
        f"iptables -w -t mangle -N {ch} 2>/dev/null || true",
        f"iptables -w -t mangle -F {ch}",
    ]
    for ip in receiver_ips:
        lines += [
            f"dev=$({_device(ip)})",
            f"[ -n \"$dev\" ] || {{ echo no route to {q(ip)} >&2; exit 1; }}",
            "ll_class \"$dev\"",
            f"iptables -w -t mangle -A {ch} -d {q(ip)} -j CLASSIFY --set-class {cid}",
        ]
    lines.append(f"iptables -w -t mangle -C POSTROUTING -j {ch} 2>/dev/null || "
                 f"iptables -w -t mangle -I POSTROUTING 1 -j {ch}")
    return "\n".join(lines)


def heal_script(fault_id: int) -> str:
    """On any host, whatever it holds: the spec's chain, then its class, then the HTB root
    if no class is left in it. Never fails."""
    ch, cid = q(chain(fault_id)), classid(fault_id)
    return f"""
if command -v iptables >/dev/null 2>&1; then
  while iptables -w -t mangle -D POSTROUTING -j {ch} 2>/dev/null; do :; done
  iptables -w -t mangle -F {ch} 2>/dev/null || true
  iptables -w -t mangle -X {ch} 2>/dev/null || true
fi
if command -v tc >/dev/null 2>&1; then
  for dev in $({OUR_DEVICES}); do
    tc class del dev "$dev" classid {cid} 2>/dev/null || true
    tc class show dev "$dev" | grep -q . || tc qdisc del dev "$dev" root 2>/dev/null || true
  done
fi
true
"""


def probe_script(receiver_ips: list[str], leaf_words: str) -> str:
    """Prints PROBE_REASON_OK when this host can delay its links to receiver_ips with
    apply_script, else one line saying why not. Builds the same qdisc tree on a throwaway
    device (loopback in an `unshare -n` namespace, else a veth pair made and removed here)
    and one CLASSIFY rule in an unhooked chain, then checks that each receiver's egress
    device has the kernel's default root qdisc (or ours), which a delay may replace."""
    trial = "\n".join([
        "set -e",
        f"tc qdisc add dev \"$1\" root handle {ROOT}: htb default 0",
        f"tc class add dev \"$1\" parent {ROOT}: classid {ROOT}:1 {CLASS}",
        f"tc qdisc add dev \"$1\" parent {ROOT}:1 handle 1: {leaf_words}",
    ])
    probe_chain = f"{CHAIN}-probe"
    lines = [
        "ll_why() { echo \"$*\"; exit 0; }",
        "for c in ip tc iptables; do",
        "  command -v $c >/dev/null 2>&1 || ll_why \"no $c on this host\"",
        "done",
        f"trial={q(trial)}",
        "if unshare -n true 2>/dev/null; then",
        "  out=$(unshare -n sh -c \"$trial\" sh lo 2>&1) ||",
        "    ll_why \"$(echo \"$out\" | tail -n 1)\"",
        "else",
        "  d=llp$$",
        "  ip link add \"${d}a\" type veth peer name \"${d}b\" 2>/dev/null ||"
        " ll_why \"no throwaway device for a tc trial (no unshare -n, no veth)\"",
        "  out=$(sh -c \"$trial\" sh \"${d}a\" 2>&1); rc=$?",
        "  ip link del \"${d}a\" 2>/dev/null || true",
        "  [ $rc -eq 0 ] || ll_why \"$(echo \"$out\" | tail -n 1)\"",
        "fi",
        f"iptables -w -t mangle -N {probe_chain} 2>/dev/null || true",
        f"out=$(iptables -w -t mangle -A {probe_chain} -d 192.0.2.1 -j CLASSIFY "
        f"--set-class {ROOT}:1 2>&1); rc=$?",
        f"iptables -w -t mangle -F {probe_chain} 2>/dev/null || true",
        f"iptables -w -t mangle -X {probe_chain} 2>/dev/null || true",
        "[ $rc -eq 0 ] || ll_why \"iptables CLASSIFY: $(echo \"$out\" | tail -n 1)\"",
    ]
    for ip in receiver_ips:
        lines += [
            f"dev=$({_device(ip)})",
            f"[ -n \"$dev\" ] || ll_why no route to {q(ip)}",
            "set -- $(tc qdisc show dev \"$dev\" root | head -n 1)",
            f"[ \"$3\" = 0: ] || [ \"$2 $3\" = 'htb {ROOT}:' ] ||"
            " ll_why \"$dev has a root qdisc of its own ($2 $3)\"",
        ]
    lines.append(f"echo {PROBE_REASON_OK}")
    return "\n".join(lines)


def probe_answer(output: str) -> str | None:
    """None when probe_script's output says netem can be used, else why not."""
    last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), "")
    if last == PROBE_REASON_OK:
        return None
    return last.rstrip(".") or "the probe said nothing"
