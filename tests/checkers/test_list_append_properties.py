"""The list-append checker against a brute-force reference on small random histories.

The reference knows nothing of graphs: a history is serializable when some subset of its
info txns together with all its ok txns, run one at a time in some order, gives every ok
read exactly what it returned; strictly serializable when such an order also puts every
txn after each ok txn that completed before it was invoked; and with a lease L when a
read-only txn need only come after the ok txns that completed at least L before its
invocation. Every subset of info txns and every order is tried. The checker must find a
prohibited anomaly exactly when the reference finds no such order (Elle's "unknown" for a
graph without edges counts as finding nothing).
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leaseline.checkers.list_append import check_history, txns_from_records
from leaseline.checkers.list_append.history import FAIL, INFO, OK, Txns

MS = 1_000_000


def reference(txns: Txns, strict: bool, lease_ns: int = 0, session: bool = False) -> bool:
    """Whether some serial order of the committed txns explains every ok read (and keeps
    real-time order when strict, each process's order of its ok txns when session)."""
    n = len(txns)
    oks = [t for t in range(n) if txns.type[t] == OK]
    infos = [t for t in range(n) if txns.type[t] == INFO]
    invoked = [int(txns.t_invoke[t]) - (lease_ns if txns.read_only[t] else 0)
               for t in range(n)]

    def must_precede(a: int, b: int) -> bool:  # a before b in real time, or in its process
        if session:
            return (txns.process[a] == txns.process[b] and txns.type[a] == OK
                    and txns.type[b] == OK and a < b)
        return txns.type[a] == OK and int(txns.t_complete[a]) < invoked[b]

    for k in range(len(infos) + 1):
        for chosen in itertools.combinations(infos, k):
            for order in itertools.permutations(oks + list(chosen)):
                if (strict or session) and any(must_precede(b, a) for i, a in enumerate(order)
                                  for b in order[i + 1:]):
                    continue
                if _explains(txns, order):
                    return True
    return False


def _explains(txns: Txns, order: tuple[int, ...]) -> bool:
    state: dict[str, list[int]] = {}
    for t in order:
        for is_append, k, v in txns.mops[t]:
            if is_append:
                state.setdefault(k, []).append(v)
            elif txns.type[t] == OK and tuple(state.get(k, ())) != v:
                return False
    return True


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A few txns on one or two keys, run in a random serial order with reads sometimes
    perturbed (stale, missing or reordered elements), at random overlapping times."""
    n = draw(st.integers(1, 5))
    keys = ["x", "y"][: draw(st.integers(1, 2))]
    counter = dict.fromkeys(keys, 0)
    plans: list[list[list[Any]]] = []
    for _ in range(n):
        mops: list[list[Any]] = []
        for _ in range(draw(st.integers(1, 3))):
            k = draw(st.sampled_from(keys))
            if draw(st.booleans()):
                counter[k] += 1
                mops.append(["append", k, counter[k]])
            else:
                mops.append(["r", k, None])
        plans.append(mops)
    types = [draw(st.sampled_from(["ok", "ok", "ok", "info", "fail"])) for _ in range(n)]
    serial = draw(st.permutations(range(n)))
    state: dict[str, list[int]] = {k: [] for k in keys}
    done: dict[int, list[list[Any]]] = {}
    for t in serial:
        applies = types[t] == "ok" or (types[t] == "info" and draw(st.booleans())) or (
            types[t] == "fail" and draw(st.integers(0, 5)) == 0)
        out: list[list[Any]] = []
        for f, k, v in plans[t]:
            if f == "append":
                if applies:
                    state[k].append(v)
                out.append([f, k, v])
                continue
            seen = list(state[k])
            perturb = draw(st.integers(0, 7))
            if perturb == 0 and seen:
                seen = seen[: draw(st.integers(0, len(seen) - 1))]
            elif perturb == 1 and len(seen) > 1:
                seen = [seen[1], seen[0], *seen[2:]]
            elif perturb == 2 and seen:
                seen = [x for x in seen if x != draw(st.sampled_from(seen))]
            out.append([f, k, seen])
        done[t] = out
    # times: a txn's interval lies around its serial position, overlapping neighbours
    rank = {t: i for i, t in enumerate(serial)}
    events = []
    for t in range(n):
        start = rank[t] * 10 - draw(st.integers(0, 25))
        end = rank[t] * 10 + draw(st.integers(1, 25))
        events.append((start, 0, t))
        events.append((end, 1, t))
    events.sort()
    # processes: a txn may reuse the process of one that completed before it began, as a
    # Jepsen worker does after an ok or fail (never after info: that process is retired)
    process = list(range(n))
    if draw(st.booleans()):
        free: list[int] = []
        for _, what, t in events:
            if what == 0 and free and draw(st.booleans()):
                process[t] = process[free.pop(draw(st.integers(0, len(free) - 1)))]
            elif what == 1 and types[t] != "info":
                free.append(t)
    records = []
    for i, (time, what, t) in enumerate(events):
        if what == 0:
            value: Any = [[f, k, None if f == "r" else v] for f, k, v in plans[t]]
            rec = {"type": "invoke", "value": value}
        else:
            value = done[t] if types[t] == "ok" else (
                [[f, k, None if f == "r" else v] for f, k, v in plans[t]])
            rec = {"type": types[t], "value": value}
        records.append({"index": i, "time": (time + 100) * MS, "process": process[t], "f": "txn",
                        **rec})
    return records


def _found_something(res: dict[str, Any]) -> bool:
    return res["valid"] is False


SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(histories())
def test_serializable_exactly_when_the_reference_finds_an_order(ops: list[dict[str, Any]]) -> None:
    txns = txns_from_records(ops)
    res = check_history(ops, consistency_model="serializable")
    assert _found_something(res) != reference(txns, strict=False), res


@SETTINGS
@given(histories())
def test_strict_serializable_exactly_when_the_reference_finds_an_order(
        ops: list[dict[str, Any]]) -> None:
    txns = txns_from_records(ops)
    res = check_history(ops)
    assert _found_something(res) != reference(txns, strict=True), res
    assert (res["status"] in ("valid", "unknown")) == (not _found_something(res)), res


@SETTINGS
@given(histories(), st.sampled_from([5, 12, 30]))
def test_lease_exactly_when_the_reference_finds_an_order(ops: list[dict[str, Any]],
                                                         lease_ms: int) -> None:
    txns = txns_from_records(ops)
    res = check_history(ops, lease_ms=lease_ms)
    strict = reference(txns, strict=True)
    leased = reference(txns, strict=True, lease_ns=lease_ms * MS)
    assert _found_something(res) != leased, res
    if "lost-write" in res["anomaly_types"]:  # a lost write, read or not, is never excused
        assert not leased, res
    if leased and not strict:
        assert res["status"] == "lease-bounded", res
    if res["status"] in ("valid", "lease-bounded"):
        assert res["max_staleness_ms"] <= lease_ms
    if strict:
        assert res["status"] in ("valid", "unknown"), res


@SETTINGS
@given(histories())
def test_strong_session_serializable_exactly_when_the_reference_finds_an_order(
        ops: list[dict[str, Any]]) -> None:
    txns = txns_from_records(ops)
    res = check_history(ops, consistency_model="strong-session-serializable")
    assert _found_something(res) != reference(txns, strict=False, session=True), res


def test_reference_sees_a_stale_read() -> None:
    """The reference itself: a read-only txn that misses an append completed 20 ms before
    it began is strictly serializable only with a lease of 20 ms or more."""
    ops = [
        {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "txn",
         "value": [["append", "x", 1]]},
        {"index": 1, "time": 10 * MS, "process": 0, "type": "ok", "f": "txn",
         "value": [["append", "x", 1]]},
        {"index": 2, "time": 30 * MS, "process": 1, "type": "invoke", "f": "txn",
         "value": [["r", "x", None]]},
        {"index": 3, "time": 40 * MS, "process": 1, "type": "ok", "f": "txn",
         "value": [["r", "x", []]]},
    ]
    txns = txns_from_records(ops)
    assert reference(txns, strict=False)
    assert not reference(txns, strict=True)
    assert not reference(txns, strict=True, lease_ns=19 * MS)
    assert reference(txns, strict=True, lease_ns=21 * MS)
    assert FAIL not in txns.type.tolist()


@st.composite
def failovers(draw: st.DrawFn) -> tuple[list[dict[str, Any]], set[tuple[str, int]], int]:
    """Appends to one or two keys, then reads of prefixes of each key's order at random
    times (a failover may hand later readers a shorter list), some of them read-only; and
    by brute force from the definition, the acknowledged appends read and then lost for
    good at a random lease: some read showed e, and some ok read lacking it began (L
    earlier if read-only) after every read showing it had completed."""
    lease = draw(st.sampled_from([0, 15]))
    txns: list[tuple[int, int, list[list[Any]], str]] = []  # start, end, mops, type
    order: dict[str, list[int]] = {}
    for k in ["x", "y"][: draw(st.integers(1, 2))]:
        order[k] = list(range(1, draw(st.integers(1, 3)) + 1))
        for v in order[k]:
            s = draw(st.integers(0, 30))
            txns.append((s, s + draw(st.integers(1, 10)), [["append", k, v]],
                         draw(st.sampled_from(["ok", "ok", "info"]))))
    for _ in range(draw(st.integers(2, 5))):
        k = draw(st.sampled_from(sorted(order)))
        mops = [["r", k, order[k][: draw(st.integers(0, len(order[k])))]]]
        if draw(st.booleans()):  # not read-only: appends a value nobody reads
            mops.append(["append", k, 100 + len(txns)])
        s = draw(st.integers(0, 120))
        txns.append((s, s + draw(st.integers(1, 30)), mops, "ok"))
    # distinct times, so the history's order and the clock agree
    times = sorted({t for s, e, _, _ in txns for t in (s, e)})
    assume = len(times) == 2 * len(txns)
    if not assume:
        txns = [(s * 1000 + i, e * 1000 + i + 500, m, ty) for i, (s, e, m, ty) in enumerate(txns)]
    else:
        txns = [(s * 1000, e * 1000, m, ty) for s, e, m, ty in txns]
    events = sorted([(s, 0, i) for i, (s, _, _, _) in enumerate(txns)]
                    + [(e, 1, i) for i, (_, e, _, _) in enumerate(txns)])
    records = []
    for n, (at, what, i) in enumerate(events):
        _, _, mops, ty = txns[i]
        blank = [[f, k, None if f == "r" else v] for f, k, v in mops]
        rec = {"type": "invoke", "value": blank} if what == 0 else {
            "type": ty, "value": mops if ty == "ok" else blank}
        records.append({"index": n, "time": at * 1000, "process": i, "f": "txn", **rec})
    lost: set[tuple[str, int]] = set()
    lease_us = lease * 1000
    for k, elems in order.items():
        reads = [(s, e, len(m[0][2]), len(m) == 1) for s, e, m, ty in txns
                 if m[0][0] == "r" and m[0][1] == k]
        for i, v in enumerate(elems):
            writer = next(ty for _, _, m, ty in txns if m[0] == ["append", k, v])
            showing = [e for s, e, n, _ in reads if n > i]
            if writer == "ok" and showing and any(
                    n <= i and s - (lease_us if ro else 0) > max(showing)
                    for s, e, n, ro in reads):
                lost.add((k, v))
    return records, lost, lease


@SETTINGS
@given(failovers())
def test_read_then_lost_appends_exactly_as_defined(case: tuple[Any, ...]) -> None:
    """vanished.py's suffix computation against the definition checked pair by pair; each
    such loss also means the reference finds no order."""
    ops, lost, lease = case
    res = check_history(ops, lease_ms=lease)
    found = {(w["key"], w["element"]) for w in res["anomalies"].get("lost-write", [])
             if "seen_by" in w and "lost-write" in res["anomaly_types"]}
    assert found == lost, res
    txns = txns_from_records(ops)
    if lost and len(txns) <= 7:  # the reference tries every order
        assert not reference(txns, strict=True, lease_ns=lease * MS), res
