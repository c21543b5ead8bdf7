"""The graph stage: the union of the keys' edges with process and real-time order, its
strongly connected components, and one cycle per anomaly type in each.

Edges are numpy columns (src, dst, kind bits); a pair of txns related several ways is one
edge with several bits. Real-time edges are the transitive reduction of "a completed
before b was invoked" (Elle's sweep): events in time order, invocations before
completions at equal times; an invocation is linked from every completion in a frontier
buffer, and a completion removes from the buffer the txns already linked to it (they
reach everything later through it). With a lease L, read-only txns are invoked L earlier
for this purpose: real-time edges into them from txns completed less than L before they
began vanish, and only those. Process edges link each process's consecutive ok txns.
Only ok txns complete; info txns are invoked and never complete.

SCCs: Tarjan's algorithm, iterative, over a CSR. A cycle of a type lies inside one SCC of
the subgraph of the edge kinds the type allows, so each type is searched there only.

Cycle types (Adya; Elle's names and classification):
  G0                 ww edges only
  G1c                ww and wr, at least one wr
  G-single-item      ww and wr plus exactly one rw
  G-nonadjacent-item ww and wr plus two or more rw, no two consecutive (round the cycle)
  G2-item            ww, wr, rw with two or more rw, two of them consecutive
and each with -process or -realtime: that kind allowed too, and at least one used.
A search is a breadth-first search over (txn, state) where the state counts what the
path used so far; it starts from each candidate first edge (an rw edge for the types that
need one, a wr for G1c, any edge otherwise) in turn; each search finds the shortest cycle
through its first edge, and in a small component a few more first edges are tried after
the first found, for a shorter one. Each search has a budget of
expanded states; running out is reported as `cycle-search-timeout` (verdict unknown
unless something prohibited is found anyway).
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leaseline.checkers.list_append.history import compiled
from leaseline.checkers.list_append.per_key import PROCESS, REALTIME, RW, WR, WW

SEARCH_BUDGET = 500_000  # expanded (txn, state) pairs per (SCC, type): about a second
SHORTER_TRIES = 16  # first edges tried after a cycle is found, for a shorter one,
SHORTER_SCC = 200   # in components of at most this many txns

# base type -> (allowed kinds, wr required, rw rule)
_BASE: dict[str, tuple[int, bool, str]] = {
    "G0": (WW, False, "none"),
    "G1c": (WW | WR, True, "none"),
    "G-single-item": (WW | WR, False, "single"),
    "G-nonadjacent-item": (WW | WR, False, "nonadjacent"),
    "G2-item": (WW | WR, False, "adjacent"),
}
CYCLE_TYPES = tuple(f"{b}{s}" for b in _BASE for s in ("", "-process", "-realtime"))
# Elle's fallback when a search runs out of budget: a cycle of these kinds exists (an SCC
# of the subgraph) -> "<model>-cycle-exists", which that model prohibits (canonical names)
CYCLE_EXISTS = (("PL-1", WW), ("PL-2", WW | WR), ("PL-2.99", WW | WR | RW),
                ("PL-3", WW | WR | RW), ("strong-session-PL-1", WW | PROCESS),
                ("strong-session-PL-2", WW | WR | PROCESS),
                ("strong-session-serializable", WW | WR | RW | PROCESS),
                ("strong-PL-1", WW | REALTIME), ("strong-PL-2", WW | WR | REALTIME),
                ("PL-SS", WW | WR | RW | REALTIME))


@dataclass
class Graph:
    n: int
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray


def merge_edges(n: int, parts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> Graph:
    """One edge per (src, dst) with the OR of their kinds."""
    if not parts:
        return Graph(n, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint8))
    native = compiled()
    if native is not None:  # straight from the parts: no concatenated copy of every edge
        return Graph(n, *native.merge_parts(n, [
            (np.ascontiguousarray(a, np.int64), np.ascontiguousarray(b, np.int64),
             np.ascontiguousarray(k, np.uint8)) for a, b, k in parts]))
    src = np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)
    dst = np.concatenate([p[1] for p in parts]).astype(np.int64, copy=False)
    kind = np.concatenate([p[2] for p in parts]).astype(np.uint8, copy=False)
    if not len(src):
        return Graph(n, src, dst, kind)
    code = src * n + dst
    order = np.argsort(code, kind="stable")
    code, kind = code[order], kind[order]
    starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    merged = np.bitwise_or.reduceat(kind, starts).astype(np.uint8)
    u = code[starts]
    return Graph(n, u // n, u % n, merged)


def process_edges(process: Sequence[object], ok: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each process's consecutive ok txns (rows are in invocation order)."""
    if isinstance(process, np.ndarray):  # the compiled reader's int processes
        rows = np.flatnonzero(ok)
        order = rows[np.argsort(process[rows], kind="stable")]
        same = process[order[1:]] == process[order[:-1]]
        src_a, dst_a = order[:-1][same], order[1:][same]
        return src_a, dst_a, np.full(len(src_a), PROCESS, np.uint8)
    last: dict[object, int] = {}
    src: list[int] = []
    dst: list[int] = []
    for t, p in enumerate(process):
        if not ok[t]:
            continue
        prev = last.get(p)
        if prev is not None:
            src.append(prev)
            dst.append(t)
        last[p] = t
    return (np.asarray(src, np.int64), np.asarray(dst, np.int64),
            np.full(len(src), PROCESS, np.uint8))


def realtime_edges(inv_at: np.ndarray, done_at: np.ndarray, ok: np.ndarray,
                   possible: np.ndarray, inv_tie: np.ndarray | None = None,
                   done_tie: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Transitive reduction of real-time order: ok a -> possible b when a completed before
    b was invoked. Events are ordered by (at, tie): history indexes as `at` give Elle's
    order; times with the lease's shift of read-only invocations give the lease's, where
    ties are broken by index for txns given their own invocation index as tie, and a
    shifted invocation (tie -1) comes before a completion at the same time (a state
    superseded exactly L before it was read was still current L before)."""
    rows = np.flatnonzero(possible)
    done = np.flatnonzero(ok)
    at = np.concatenate([inv_at[rows], done_at[done]])
    zero = np.zeros(len(at), np.int64)
    tie = zero if inv_tie is None or done_tie is None else np.concatenate(
        [inv_tie[rows], done_tie[done]])
    what = np.concatenate([np.zeros(len(rows), np.int8), np.ones(len(done), np.int8)])
    who = np.concatenate([rows, done])
    native = compiled()
    if native is not None:
        order = native.event_order(at.astype(np.int64, copy=False),
                                   tie.astype(np.int64, copy=False), what)
        src_a, dst_a = native.realtime_sweep(len(ok), what[order], who[order].astype(np.int64))
        return src_a, dst_a, np.full(len(src_a), REALTIME, np.uint8)
    order = np.lexsort((what, tie, at))
    frontier: set[int] = set()
    preds: dict[int, list[int]] = {}
    src: list[int] = []
    dst: list[int] = []
    for w, t in zip(what[order].tolist(), who[order].tolist(), strict=True):
        if w == 0:
            if frontier:
                linked = list(frontier)
                preds[t] = linked
                src.extend(linked)
                dst.extend([t] * len(linked))
        else:
            for p in preds.pop(t, ()):
                frontier.discard(p)
            frontier.add(t)
    return (np.asarray(src, np.int64), np.asarray(dst, np.int64),
            np.full(len(src), REALTIME, np.uint8))


def csr(n: int, src: np.ndarray, dst: np.ndarray, kind: np.ndarray
        ) -> tuple[list[int], list[int], list[int]]:
    """(offsets, targets, kinds) as Python lists, the fastest to walk in a Python loop."""
    offsets, targets, kinds = csr_arrays(n, src, dst, kind)
    return offsets.tolist(), targets.tolist(), kinds.tolist()


def csr_arrays(n: int, src: np.ndarray, dst: np.ndarray, kind: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, targets, kinds) as int64 arrays (kinds uint8), edges in source order."""
    counts = np.bincount(src, minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if not len(src) or bool((src[1:] >= src[:-1]).all()):  # merge_edges' order: no copy
        return offsets, dst.astype(np.int64, copy=False), kind
    order = np.argsort(src, kind="stable")
    return offsets, dst[order].astype(np.int64), kind[order]


def graph_sccs(g: Graph) -> list[list[int]]:
    """The components of more than one txn of the whole graph (`sccs`' order), compiled
    where the extension is built."""
    offsets, targets, _ = csr_arrays(g.n, g.src, g.dst, g.kind)
    native = compiled()
    if native is not None:
        return native.sccs(g.n, offsets, targets)
    return sccs(g.n, offsets.tolist(), targets.tolist())


def sccs(n: int, offsets: list[int], targets: list[int], nodes: Sequence[int] | None = None,
         singletons: bool = False) -> list[list[int]]:
    """Strongly connected components of more than one txn (Tarjan, iterative); with
    `singletons`, every component, in Tarjan's order (a component after every component
    it reaches), isolated nodes included."""
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in (range(n) if nodes is None else nodes):
        if index[root] >= 0:
            continue
        if offsets[root] == offsets[root + 1] and not singletons:
            continue
        work = [(root, offsets[root])]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            v, i = work[-1]
            end = offsets[v + 1]
            pushed = False
            while i < end:
                w = targets[i]
                i += 1
                if index[w] < 0:
                    work[-1] = (v, i)
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, offsets[w]))
                    pushed = True
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            if pushed:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or singletons:
                    out.append(comp)
    return out


class Budget(Exception):
    pass


def inner_edges(g: Graph, comps: Sequence[Sequence[int]]
                ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each component's own edges (both ends inside it), in one pass over the graph."""
    comp_of = np.full(g.n, -1, np.int32 if len(comps) < 2**31 else np.int64)
    for i, c in enumerate(comps):
        comp_of[np.asarray(c, np.int64)] = i
    cs = comp_of[g.src]
    sel = np.flatnonzero((cs >= 0) & (cs == comp_of[g.dst]))
    order = sel[np.argsort(cs[sel], kind="stable")]
    bounds = np.searchsorted(cs[order], np.arange(len(comps) + 1))
    return [(g.src[order[a:b]], g.dst[order[a:b]], g.kind[order[a:b]])
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)]


_BITS = (WW, WR, RW, PROCESS, REALTIME)


@dataclass
class Sub:
    """A subgraph on a node set (one SCC): per txn its (target, kind bit) pairs, one pair
    per kind an edge has."""

    out: dict[int, list[tuple[int, int]]]

    @classmethod
    def of(cls, nodes: Sequence[int], src: np.ndarray, dst: np.ndarray, kind: np.ndarray,
           mask: int) -> Sub:
        """The subgraph of `mask`'s kinds on `nodes`, from the edges inside them."""
        sel = (kind & mask) != 0
        out: dict[int, list[tuple[int, int]]] = {v: [] for v in nodes}
        for a, b, k in zip(src[sel].tolist(), dst[sel].tolist(),
                           (kind[sel] & mask).tolist(), strict=True):
            lst = out[a]
            for bit in _BITS:
                if k & bit:
                    lst.append((b, bit))
        return cls(out)

    def restricted(self, nodes: Sequence[int], mask: int) -> Sub:
        member = set(nodes)
        return Sub({v: [(w, k) for w, k in self.out[v] if k & mask and w in member]
                    for v in nodes})

    def components(self) -> list[list[int]]:
        nodes = list(self.out)
        local = {v: i for i, v in enumerate(nodes)}
        offsets = [0]
        targets: list[int] = []
        for v in nodes:
            targets.extend(local[b] for b, _ in self.out[v] if b in local)
            offsets.append(len(targets))
        return [[nodes[i] for i in c] for c in sccs(len(nodes), offsets, targets)]


def parse_type(cycle_type: str) -> tuple[int, int, bool, str]:
    """(allowed kinds with any rw, the variant's kind or 0, wr required, rw rule)."""
    if cycle_type.endswith("-process"):
        base, extra = cycle_type[: -len("-process")], PROCESS
    elif cycle_type.endswith("-realtime"):
        base, extra = cycle_type[: -len("-realtime")], REALTIME
    else:
        base, extra = cycle_type, 0
    allowed, need_wr, rw_rule = _BASE[base]
    return allowed | extra | (RW if rw_rule != "none" else 0), extra, need_wr, rw_rule


# Search state bits: the path so far has a wr edge, an edge of the variant's kind, ends
# with an rw edge, has two or more rw edges, has two rw edges in a row.
_S_WR, _S_EXTRA, _S_LAST_RW, _S_RW2, _S_ADJ = 1, 2, 4, 8, 16


def _step(s: int, kind: int, rw_rule: str) -> int:
    """The state after one more edge of `kind`, or -1 when the type forbids it."""
    ns = s & ~_S_LAST_RW
    if kind == WR:
        ns |= _S_WR
    elif kind & (PROCESS | REALTIME):
        ns |= _S_EXTRA
    elif kind == RW:
        if rw_rule in ("none", "single"):  # a single rw is the first edge
            return -1
        if s & _S_LAST_RW:
            if rw_rule == "nonadjacent":
                return -1
            ns |= _S_ADJ
        ns |= _S_LAST_RW | _S_RW2
    return ns


@functools.cache
def _transitions(rw_rule: str) -> list[list[int]]:
    """_step for every state and kind bit, once per rw rule."""
    return [[_step(s, bit, rw_rule) for bit in range(REALTIME + 1)] for s in range(32)]


def _accepts(s: int, last_kind: int, first: int, need_wr: bool, extra: int,
             rw_rule: str) -> bool:
    if need_wr and not s & _S_WR:
        return False
    if extra and not s & _S_EXTRA:
        return False
    if rw_rule == "single":
        return first == RW
    if rw_rule in ("nonadjacent", "adjacent"):
        if not s & _S_RW2:
            return False
        adjacent = bool(s & _S_ADJ) or (last_kind == RW and first == RW)
        return adjacent if rw_rule == "adjacent" else not adjacent
    return True


def find_cycle(sub: Sub, nodes: Sequence[int], cycle_type: str, budget: list[int]
               ) -> list[tuple[int, int, int]] | None:
    """A cycle of `cycle_type` inside `nodes` (one SCC of its allowed kinds), as
    (from, to, kind) steps, or None. `budget` is a one-item list, spent as it goes.

    Candidate first edges: rw for the types that need one (those whose head reaches the
    tail without rw first: the rw-free subgraph's SCCs say so at once), else wr for G1c,
    else the variant's kind, else ww."""
    allowed, extra, need_wr, rw_rule = parse_type(cycle_type)
    first_kind = RW if rw_rule != "none" else (WR if need_wr else (extra or WW))
    member = set(nodes)
    present = 0
    for a in nodes:
        for b, k in sub.out[a]:
            if b in member:
                present |= k
    needed = (extra | (WR if need_wr else 0) | (RW if rw_rule != "none" else 0))
    if present & needed != needed:
        return None
    starts = [(a, b) for a in nodes for b, k in sub.out[a] if k == first_kind and b in member]
    if first_kind == RW:
        rest = sub.restricted(nodes, allowed & ~RW)
        if rw_rule == "single":
            starts = _single_starts(rest, nodes, starts, extra)
        else:
            comp = {v: i for i, c in enumerate(rest.components()) for v in c}
            starts.sort(key=lambda e: comp.get(e[0], -1) != comp.get(e[1], -2))
    trans = _transitions(rw_rule)
    best: list[tuple[int, int, int]] | None = None
    tried = 0
    for a, b in starts:
        if best is not None:
            # a few more first edges for a shorter witness, within what is left of the
            # budget; 2 edges is as short as a cycle gets
            tried += 1
            if tried > SHORTER_TRIES or len(best) <= 2 or len(nodes) > SHORTER_SCC:
                break
        try:
            found = _search_from(sub, member, a, b, first_kind, allowed, need_wr, rw_rule,
                                 extra, trans, budget)
        except Budget:
            if best is None:
                raise
            break
        if found is not None and (best is None or len(found) < len(best)):
            best = found
    return best


def _single_starts(rest: Sub, nodes: Sequence[int], starts: list[tuple[int, int]],
                   extra: int) -> list[tuple[int, int]]:
    """The rw edges a -> b that close a cycle with one rw: b reaches a without rw (using an
    edge of the variant's kind, if any). Decided on the rw-free subgraph's condensation at
    once for all edges: in Tarjan's order each component's reach is its successors' as a
    bitset, and a component with an internal edge of that kind lets any path through it
    take it. So the node-level search runs once per cycle, and succeeds."""
    local = {v: i for i, v in enumerate(nodes)}
    offsets = [0]
    targets: list[int] = []
    for v in nodes:
        targets.extend(local[w] for w, _ in rest.out[v])
        offsets.append(len(targets))
    comps = sccs(len(nodes), offsets, targets, singletons=True)
    comp = [0] * len(nodes)
    for c, members in enumerate(comps):
        for i in members:
            comp[i] = c
    internal = [False] * len(comps)
    succ: list[dict[int, bool]] = [{} for _ in comps]
    for v in nodes:
        cv = comp[local[v]]
        for w, k in rest.out[v]:
            cw = comp[local[w]]
            if cv == cw:
                internal[cv] = internal[cv] or bool(k & extra)
            else:
                succ[cv][cw] = succ[cv].get(cw, False) or bool(k & extra)
    reach = [0] * len(comps)    # components reachable, as bits
    reach_x = [0] * len(comps)  # ... by a path that can take an edge of the extra kind
    for c in range(len(comps)):  # Tarjan's order: successors first
        r, rx = 1 << c, 0
        for d, kx in succ[c].items():
            r |= reach[d]
            rx |= reach[d] if kx or internal[d] else reach_x[d]
        reach[c] = r
        reach_x[c] = (r if internal[c] else rx) if extra else r
    return [(a, b) for a, b in starts
            if reach_x[comp[local[b]]] >> comp[local[a]] & 1]


def _search_from(sub: Sub, member: set[int], a: int, b: int, first: int, allowed: int,
                 need_wr: bool, rw_rule: str, extra: int, trans: list[list[int]],
                 budget: list[int]) -> list[tuple[int, int, int]] | None:
    """BFS over (txn, state) for a path b ~> a that closes a -first-> b into a cycle of
    the type; the first edge is counted in the start state."""
    s0 = trans[0][first] if first != RW else _S_LAST_RW
    parent: dict[tuple[int, int], tuple[int, int, int]] = {}
    seen = {(b, s0)}
    queue = deque([(b, s0)])
    out = sub.out
    left = budget[0]
    try:
        while queue:
            v, s = queue.popleft()
            left -= 1
            if left < 0:
                raise Budget
            row = trans[s]
            for w, bit in out[v]:
                if not bit & allowed or w not in member:
                    continue
                ns = row[bit]
                if ns < 0:
                    continue
                if w == a:
                    if _accepts(ns, bit, first, need_wr, extra, rw_rule):
                        path = [(v, w, bit)]
                        node, st = v, s
                        while (node, st) != (b, s0):
                            pv, ps, pk = parent[(node, st)]
                            path.append((pv, node, pk))
                            node, st = pv, ps
                        path.append((a, b, first))
                        path.reverse()
                        return path
                elif (w, ns) not in seen:
                    seen.add((w, ns))
                    parent[(w, ns)] = (v, s, bit)
                    queue.append((w, ns))
    finally:
        budget[0] = left
    return None
