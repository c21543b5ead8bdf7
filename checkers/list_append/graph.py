"""The graph stage: the union of the keys' edges with process and real-time order, its
strongly connected components, and a shortest cycle per anomaly type in each.

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
Each type gets a shortest simple cycle in each SCC of its subgraph (`find_cycle`): a
breadth-first search over (txn, state), where the state counts what the path used so
far, from the head of each candidate first edge, each stopped at the length of the best
cycle found so far (and kept from txns too far from the edges' tails to close a shorter
one); then, only where a shorter closed walk than that cycle exists (a walk through some
txn twice, which can happen for the types that need two things of a cycle, say an rw
edge and a real-time one), a depth-first search over simple paths. The searches
of one (SCC, type) share a budget of expanded states: running out before any cycle is
found is reported as `cycle-search-timeout` (verdict unknown unless something prohibited
is found anyway); after, the best cycle found is reported, marked not proven shortest.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leaseline.checkers.list_append.history import compiled
from leaseline.checkers.list_append.per_key import PROCESS, REALTIME, RW, WR, WW

SEARCH_BUDGET = 500_000  # expanded (txn, state) pairs per (SCC, type): about a second

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
    """One edge per (src, dst) with the OR of their kinds. A list of parts is emptied
    (compiled: once its edges are sorted), so the columns only it holds (a real-time
    order's) are freed before the merged ones are made."""
    if not parts:
        return Graph(n, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint8))
    native = compiled()
    if native is not None:  # straight from the parts: no concatenated copy of every edge
        given = list(parts)
        if isinstance(parts, list):
            parts.clear()
        for i, (a, b, k) in enumerate(given):
            given[i] = (np.ascontiguousarray(a, np.int64), np.ascontiguousarray(b, np.int64),
                        np.ascontiguousarray(k, np.uint8))
        del a, b, k
        return Graph(n, *native.merge_parts(n, given))
    src = np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)
    dst = np.concatenate([p[1] for p in parts]).astype(np.int64, copy=False)
    kind = np.concatenate([p[2] for p in parts]).astype(np.uint8, copy=False)
    if isinstance(parts, list):
        parts.clear()
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


@dataclass
class Cycle:
    """A cycle as (from, to, kind) steps; `shortest` when no cycle of its type in its
    component is shorter (proven: the search ran to the end within its budget)."""

    steps: list[tuple[int, int, int]]
    shortest: bool


@functools.cache
def _accept_table(first: int, need_wr: bool, extra: int, rw_rule: str) -> list[list[bool]]:
    """[state][bit]: a path in `state` whose last edge has kind `bit` closes a cycle."""
    return [[_accepts(st, bit, first, need_wr, extra, rw_rule) for bit in range(REALTIME + 1)]
            for st in range(32)]


def find_cycle(sub: Sub, nodes: Sequence[int], cycle_type: str, budget: list[int],
               shortest: bool = True) -> Cycle | None:
    """A shortest simple cycle of `cycle_type` inside `nodes` (one SCC of its allowed
    kinds), or None. `budget` is a one-item list, spent as it goes; running out before
    any cycle is found raises Budget, after returns the best found, not proven shortest.
    Without `shortest`, the first cycle found (what bench/bench_cycles.py compares with).

    Every cycle of the type has an edge of one kind, its first edge here: rw for the types
    that need one (those whose head reaches the tail without rw first: the rw-free
    subgraph's SCCs say so at once), else wr for G1c, else the variant's kind, else ww.
    The candidate first edges are grouped by head, and one search runs per head
    (`_Search.walks_from`), most candidates first; each stops at the length of the best
    cycle found so far, and takes no edge of the first kind into a head searched before
    (a cycle with one was that head's to find), so the later ones are cheap. That search
    is over (txn, state), exact for closed walks; a walk that visits a txn twice is no
    cycle, so when the shortest walk found is shorter than the best cycle,
    `_Search.simple_from` searches simple paths, head by head in the same order, for a
    shorter one."""
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
    if first_kind == RW and rw_rule == "single":
        starts = _single_starts(sub.restricted(nodes, allowed & ~RW), nodes, starts, extra)
    tails: dict[int, set[int]] = {}
    for a, b in starts:
        tails.setdefault(b, set()).add(a)
    heads = sorted(tails, key=lambda b: (-len(tails[b]), -len(sub.out[b])))
    search = _Search(sub, member, tails, first_kind, allowed, need_wr, rw_rule, extra,
                     _transitions(rw_rule), budget)
    floor = 4 if rw_rule == "nonadjacent" else 2  # rw, x, rw, y at least; else a 2-cycle
    best: list[tuple[int, int, int]] | None = None
    walk: dict[int, int] = {}  # head -> length of the shortest closed walk through it found
    try:
        for b in heads:
            limit = len(best) if best is not None else len(nodes) + 1
            found, shortest_walk = search.walks_from(b, limit)
            if shortest_walk is not None:
                walk[b] = shortest_walk
            search.done.add(b)
            if found is not None:
                best = found
                if len(best) <= floor or not shortest:
                    return Cycle(best, len(best) <= floor)
        lower = min(walk.values(), default=None)
        search.done.clear()
        # a shorter walk than the best cycle: look for simple cycles shorter than the best
        # through the heads such walks go through, the shortest first found bounding the rest
        b_at = 0
        while lower is not None and b_at < len(heads) and (best is None or lower < len(best)):
            b = heads[b_at]
            limit = len(best) if best is not None else len(nodes) + 1
            found = search.simple_from(b, limit) if walk.get(b, limit) < limit else None
            if found is None:
                search.done.add(b)
                b_at += 1
                continue
            best = found
            if not shortest:
                return Cycle(best, len(best) <= floor)
    except Budget:
        if best is None:
            raise
        return Cycle(best, False)
    return None if best is None else Cycle(best, True)


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


class _Steps(dict[int, list[tuple[int, int]]]):
    """Each txn's usable steps, (target, kind bit) of the allowed kinds inside the
    component, worked out when first asked for (a search often ends after a few)."""

    def __init__(self, out: dict[int, list[tuple[int, int]]], member: set[int],
                 allowed: int) -> None:
        super().__init__()
        self.all, self.member, self.allowed = out, member, allowed

    def __missing__(self, v: int) -> list[tuple[int, int]]:
        steps = [(w, bit) for w, bit in self.all[v] if bit & self.allowed and w in self.member]
        self[v] = steps
        return steps


class _Search:
    """The searches of one (component, type) from candidate first edges tail -> head.
    A (txn, state) pair is one int, txn << 5 | state."""

    def __init__(self, sub: Sub, member: set[int], tails: dict[int, set[int]], first: int,
                 allowed: int, need_wr: bool, rw_rule: str, extra: int,
                 trans: list[list[int]], budget: list[int]) -> None:
        self.out = _Steps(sub.out, member, allowed)
        self.member = member
        self.into: dict[int, list[int]] | None = None  # the reverse of `out`, when needed
        self.tails, self.first, self.trans, self.budget = tails, first, trans, budget
        self.s0 = trans[0][first] if first != RW else _S_LAST_RW
        self.done: set[int] = set()  # heads searched: no first-kind edge into them
        self.accept = _accept_table(first, need_wr, extra, rw_rule)

    def walks_from(self, b: int, limit: int
                   ) -> tuple[list[tuple[int, int, int]] | None, int | None]:
        """BFS over (txn, state) from head b for closed walks a -first-> b ~> a shorter
        than `limit` edges: the first simple one found (a shortest simple cycle through b
        when the BFS tree holds one), and the length of the shortest walk found."""
        out, trans, accept, tails = self.out, self.trans, self.accept, self.tails[b]
        first, done = self.first, self.done
        # with a bound, txns too far from b's tails (without states) are not worth a visit
        to_tail = self._distances_to(tails, limit) if limit <= len(out.member) else None
        start = b << 5 | self.s0
        parent: dict[int, int] = {}  # pair -> its parent pair << 5 | the step's kind bit
        seen = {start}
        level = [start]
        shortest_walk: int | None = None
        left = self.budget[0]
        depth = 0  # edges from b to the txns of `level`
        try:
            # closing from `level` gives cycles of depth + 2 edges
            while level and depth + 2 < limit:
                nxt: list[int] = []
                for vs in level:
                    left -= 1
                    if left < 0:
                        raise Budget
                    row = trans[vs & 31]
                    for w, bit in out[vs >> 5]:
                        ns = row[bit]
                        if ns < 0 or bit == first and w in done:
                            continue
                        if w in tails and accept[ns][bit]:
                            if shortest_walk is None:
                                shortest_walk = depth + 2
                            path = self._path(parent, start, vs, w, bit)
                            if len({x for x, _, _ in path}) == len(path):
                                return path, shortest_walk
                        ws = w << 5 | ns
                        if ws not in seen:
                            if to_tail is not None and depth + 2 + to_tail.get(w, limit) >= limit:
                                continue
                            seen.add(ws)
                            parent[ws] = vs << 5 | bit
                            nxt.append(ws)
                level = nxt
                depth += 1
        finally:
            self.budget[0] = left
        return None, shortest_walk

    def _path(self, parent: dict[int, int], start: int, vs: int, a: int, bit: int
              ) -> list[tuple[int, int, int]]:
        path = [(vs >> 5, a, bit)]
        while vs != start:
            p = parent[vs]
            pvs = p >> 5
            path.append((pvs >> 5, vs >> 5, p & 31))
            vs = pvs
        path.append((a, start >> 5, self.first))
        path.reverse()
        return path

    def simple_from(self, b: int, limit: int) -> list[tuple[int, int, int]] | None:
        """Depth-first over simple paths from head b: a cycle shorter than `limit` edges,
        or None. A path goes on only while the txns' distance to b's tails (without
        states, a lower bound) leaves room to close it in time."""
        out, trans, accept, tails = self.out, self.trans, self.accept, self.tails[b]
        first, done = self.first, self.done
        to_tail = self._distances_to(tails, limit)
        steps: list[tuple[int, int, int]] = []
        states = [self.s0]
        on_path = {b}
        todo = [iter(out[b])]
        tip = b
        left = self.budget[0]
        try:
            while todo:
                nxt = next(todo[-1], None)
                if nxt is None:
                    todo.pop()
                    states.pop()
                    if steps:
                        on_path.discard(steps.pop()[1])
                        tip = steps[-1][1] if steps else b
                    continue
                w, bit = nxt
                if w in on_path or bit == first and w in done:
                    continue
                ns = trans[states[-1]][bit]
                if ns < 0:
                    continue
                left -= 1
                if left < 0:
                    raise Budget
                # the first edge, the steps so far and this one
                if w in tails and accept[ns][bit] and len(steps) + 2 < limit:
                    return [(w, b, self.first), *steps, (tip, w, bit)]
                if len(steps) + 2 + to_tail.get(w, limit) >= limit:
                    continue
                steps.append((tip, w, bit))
                states.append(ns)
                on_path.add(w)
                todo.append(iter(out[w]))
                tip = w
        finally:
            self.budget[0] = left
        return None

    def _distances_to(self, targets: set[int], limit: int) -> dict[int, int]:
        """Each txn's fewest steps to one of `targets` (0 for those), by BFS backwards, for
        those fewer than `limit` - 2 steps away (no cycle through b shorter than `limit`
        goes further from them)."""
        if self.into is None:
            self.into = {v: [] for v in self.member}
            for v in self.member:
                for w, _ in self.out[v]:
                    self.into[w].append(v)
        into = self.into
        dist = dict.fromkeys(targets, 0)
        level = list(targets)
        d = 0
        left = self.budget[0]
        while level and d + 3 < limit:
            d += 1
            nxt = []
            for w in level:
                left -= 1
                for v in into[w]:
                    if v not in dist:
                        dist[v] = d
                        nxt.append(v)
            level = nxt
        self.budget[0] = left
        if left < 0:
            raise Budget
        return dist
