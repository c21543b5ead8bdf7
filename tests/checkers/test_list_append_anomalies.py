"""Each anomaly type of the list-append checker, built on purpose, and the lease."""

from __future__ import annotations

from typing import Any

import pytest

from leaseline.checkers.list_append import TxnHistoryError, check_history, graph_stage, key_results
from leaseline.checkers.list_append import txns_from_records as parse

MS = 1_000_000
Mop = tuple[str, str, Any]


def T(mops: list[Mop], typ: str = "ok", at: tuple[int, int] | None = None,
      process: int | None = None) -> dict[str, Any]:
    """A txn: its completed micro-ops, type, [invoke, complete] in ms, process."""
    return {"mops": mops, "type": typ, "at": at, "process": process}


def history(*txns: dict[str, Any]) -> list[dict[str, Any]]:
    """Records of txns; those without times run one after another, 10 ms each."""
    events = []
    for i, t in enumerate(txns):
        start, end = t["at"] or (100 * i, 100 * i + 10)
        p = i if t["process"] is None else t["process"]
        inv = [[f, k, None if f == "r" else v] for f, k, v in t["mops"]]
        done = [list(m) for m in t["mops"]] if t["type"] == "ok" else inv
        events.append((start, 0, i, {"process": p, "type": "invoke", "value": inv}))
        events.append((end, 1, i, {"process": p, "type": t["type"], "value": done}))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    return [{"index": n, "time": e[0] * MS, "f": "txn", **e[3]} for n, e in enumerate(events)]


def check(*txns: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return check_history(history(*txns), **kw)


def test_a_correct_history_is_valid() -> None:
    res = check(T([("append", "x", 1)]), T([("r", "x", [1]), ("append", "x", 2)]),
                T([("r", "x", [1, 2])]))
    assert res["valid"] is True and res["status"] == "valid"
    assert res["anomaly_types"] == [] and res["not"] == []
    assert (res["txns"], res["keys"]) == (3, 1)


def test_g0_write_cycle() -> None:
    res = check(T([("append", "x", 1), ("append", "y", 1)]),
                T([("append", "x", 2), ("append", "y", 2)]),
                T([("r", "x", [1, 2]), ("r", "y", [2, 1])]), consistency_model="serializable")
    assert "G0" in res["anomaly_types"] and res["valid"] is False
    assert res["not"] == ["read-uncommitted"]
    (cycle,) = res["anomalies"]["G0"]
    assert {e["kind"] for e in cycle["cycle"]} == {"ww"}
    assert any("appended 2 after" in e["why"] for e in cycle["cycle"])


def test_g1a_aborted_read() -> None:
    res = check(T([("append", "x", 1)], "fail"), T([("r", "x", [1])]))
    (w,) = res["anomalies"]["G1a"]
    assert (w["op"], w["writer"], w["element"]) == (3, 1, 1)


def test_g1b_intermediate_read() -> None:
    res = check(T([("append", "x", 1), ("append", "x", 2)]), T([("r", "x", [1])]))
    (w,) = res["anomalies"]["G1b"]
    assert (w["element"], w["writer"]) == (1, 1)


def test_g1c_circular_information_flow() -> None:
    res = check(T([("append", "x", 1), ("r", "y", [1])], at=(0, 50)),
                T([("append", "y", 1), ("r", "x", [1])], at=(10, 60)),
                consistency_model="read-committed")
    assert res["anomaly_types"] == ["G1c"]
    (cycle,) = res["anomalies"]["G1c"]
    whys = [e["why"] for e in cycle["cycle"]]
    assert any("read x = [1], which includes" in w for w in whys), whys


def test_g_single_item_read_skew() -> None:
    res = check(T([("append", "x", 1), ("append", "y", 1)], at=(0, 50)),
                T([("r", "x", []), ("r", "y", [1])], at=(10, 60)),
                consistency_model="serializable")
    assert res["anomaly_types"] == ["G-single-item"]
    (cycle,) = res["anomalies"]["G-single-item"]
    kinds = sorted(e["kind"] for e in cycle["cycle"])
    assert kinds == ["rw", "wr"]
    rw = next(e for e in cycle["cycle"] if e["kind"] == "rw")
    assert (rw["key"], rw["value"]) == ("x", 1)
    assert "read x = [] and T" in rw["why"]


def test_g_nonadjacent_item() -> None:
    res = check(T([("append", "x", 1)], at=(0, 50)),
                T([("r", "x", [1]), ("r", "y", [])], at=(10, 60)),
                T([("append", "y", 1)], at=(20, 70)),
                T([("r", "y", [1]), ("r", "x", [])], at=(30, 80)),
                consistency_model="serializable")
    assert "G-nonadjacent-item" in res["anomaly_types"]
    assert "G-single-item" not in res["anomaly_types"]
    assert res["not"] == ["repeatable-read", "snapshot-isolation"]


def test_g2_item_write_skew() -> None:
    res = check(T([("r", "x", []), ("append", "y", 1)], at=(0, 50)),
                T([("r", "y", []), ("append", "x", 1)], at=(10, 60)),
                consistency_model="serializable")
    assert res["anomaly_types"] == ["G2-item"]
    assert [e["kind"] for e in res["anomalies"]["G2-item"][0]["cycle"]] == ["rw", "rw"]
    assert check(T([("r", "x", []), ("append", "y", 1)], at=(0, 50)),
                 T([("r", "y", []), ("append", "x", 1)], at=(10, 60)),
                 consistency_model="snapshot-isolation")["valid"] is True


def test_process_variant_under_a_session_model() -> None:
    txns = (T([("append", "x", 1)], process=0), T([("r", "x", [])], process=0))
    res = check(*txns, consistency_model="strong-session-serializable")
    assert res["anomaly_types"] == ["G-single-item-process"]
    assert check(*txns, consistency_model="serializable")["valid"] is True
    strict = check(*txns)
    assert strict["anomaly_types"] == ["G-single-item-realtime"]
    edge = next(e for e in strict["anomalies"]["G-single-item-realtime"][0]["cycle"]
                if e["kind"] == "realtime")
    assert "completed before" in edge["why"] and "90.000 ms earlier" in edge["why"]


def test_g1c_and_g0_realtime() -> None:
    res = check(T([("append", "x", 1)], at=(20, 30)), T([("r", "x", [1])], at=(0, 10)))
    assert "G1c-realtime" in res["anomaly_types"]
    res = check(T([("append", "x", 1)], at=(20, 30)), T([("append", "x", 2)], at=(0, 10)),
                T([("r", "x", [1, 2])], at=(40, 50)))
    assert "G0-realtime" in res["anomaly_types"]


def test_duplicate_elements() -> None:
    res = check(T([("append", "x", 1)]), T([("r", "x", [1, 1])]),
                consistency_model="read-uncommitted")
    (w,) = res["anomalies"]["duplicate-elements"]
    assert (w["element"], w["read"]) == (1, [1, 1])
    assert res["not"] == ["read-uncommitted"]


def test_incompatible_order() -> None:
    res = check(T([("append", "x", 1)]), T([("append", "x", 2)]), T([("r", "x", [1, 2])]),
                T([("r", "x", [2, 1])]))
    assert res["anomalies"]["incompatible-order"][0]["values"] == [[1, 2], [2, 1]]
    # a txn's own appends seen in another order
    res = check(T([("append", "x", 1), ("append", "x", 2)]), T([("r", "x", [2, 1])]),
                consistency_model="serializable")
    assert "incompatible-order" in res["anomaly_types"] and res["valid"] is False


def test_garbage_read() -> None:
    res = check(T([("r", "x", [7])]), consistency_model="read-committed")
    assert "garbage-read" in res["anomaly_types"] and res["valid"] is False


def test_dirty_update() -> None:
    res = check(T([("append", "x", 1)], "fail"), T([("append", "x", 2)]),
                T([("r", "x", [1, 2])]))
    (w,) = res["anomalies"]["dirty-update"]
    assert w["values"] == [1, 2] and w["txns"] == [1, 3]
    assert "G1a" in res["anomaly_types"]


def test_internal_and_future_read() -> None:
    res = check(T([("append", "x", 1), ("r", "x", [])]), consistency_model="serializable")
    assert res["anomalies"]["internal"][0]["expected"] == ["...", 1]
    res = check(T([("r", "x", [1]), ("append", "x", 1)]), consistency_model="read-committed")
    assert "future-read" in res["anomaly_types"]


def test_lost_update() -> None:
    res = check(T([("append", "x", 0)]), T([("r", "x", [0]), ("append", "x", 1)], at=(100, 150)),
                T([("r", "x", [0]), ("append", "x", 2)], at=(110, 160)),
                consistency_model="repeatable-read")
    (w,) = res["anomalies"]["lost-update"]
    assert (w["value"], w["txns"]) == ([0], [4, 5])


def test_lost_write() -> None:
    txns = (T([("append", "x", 1)], at=(0, 10)), T([("append", "x", 2)], at=(20, 30)),
            T([("r", "x", [2])], at=(40, 50)))
    res = check(*txns)
    (w,) = res["anomalies"]["lost-write"]
    assert (w["op"], w["element"], w["later_elements"]) == (1, 1, [2])
    assert res["valid"] is False and "G-single-item-realtime" in res["anomaly_types"]
    # a lost write is no stale read: the lease does not excuse it
    assert check(*txns, lease_ms=1000)["status"] == "violation"
    assert "lost-write" not in check(*txns, consistency_model="serializable")["anomaly_types"]


def test_lost_write_read_then_gone() -> None:
    """An append a read showed, then lacking from every read that began after that read
    ended (a failover threw it away): lost, with the read that saw it and the one that
    did not, and never excused by a lease shorter than the gap between them."""
    txns = (T([("append", "x", 1)], at=(0, 10)), T([("append", "x", 2)], at=(0, 10)),
            T([("r", "x", [1, 2])], at=(20, 30)), T([("r", "x", [1])], at=(80, 90)),
            T([("r", "x", [1])], at=(100, 110)))
    res = check(*txns)
    (w,) = res["anomalies"]["lost-write"]
    assert (w["element"], w["op"], w["seen_by"], w["reader"]) == (2, 3, 5, 9)
    assert w["after_ms"] == 70.0 and res["status"] == "violation"
    assert "lost-write" in check(*txns, lease_ms=60)["anomaly_types"]
    excused = check(*txns, lease_ms=80)  # both later reads may be 80 ms stale
    assert "lost-write" not in excused["anomaly_types"]
    assert "lost-write" in excused["lease_bounded_types"]
    # read again later: a stale read, not a lost write
    again = check(*txns, T([("r", "x", [1, 2])], at=(120, 130)))
    assert "lost-write" not in again["anomaly_types"]
    assert "G-single-item-realtime" in again["anomaly_types"]
    # the later read overlapping the one that saw it: nothing lost for sure
    assert "lost-write" not in check(*txns[:3], T([("r", "x", [1])], at=(25, 90)))[
        "anomalies"]


def test_empty_graph_and_budget_are_unknown() -> None:
    res = check(T([("append", "x", 1)]), consistency_model="serializable")
    assert res["valid"] == "unknown" and res["anomaly_types"] == ["empty-transaction-graph"]
    ops = history(T([("r", "x", []), ("append", "y", 1)], at=(0, 50)),
                  T([("r", "y", []), ("append", "x", 1)], at=(10, 60)))
    txns = parse(ops)
    res = graph_stage(txns, key_results(txns), consistency_model=None,
                      anomalies=["G2-item"], search_budget=0)
    assert res["valid"] == "unknown" and res["status"] == "unknown"
    assert res["anomaly_types"] == ["cycle-search-timeout"]
    # Elle's fallback: a cycle of ww, wr and rw edges exists, which serializability forbids
    res = graph_stage(txns, key_results(txns), consistency_model="serializable",
                      search_budget=0)
    assert res["valid"] is False
    assert {"cycle-search-timeout", "PL-3-cycle-exists"} <= set(res["anomaly_types"])
    (w,) = res["anomalies"]["PL-3-cycle-exists"]
    assert (w["not"], w["scc_size"], w["scc"]) == ("serializable", 2, [2, 3])
    assert "serializable" in res["not"] or "repeatable-read" in res["not"]


STALE = (T([("append", "x", 1)], at=(0, 10)), T([("r", "x", [])], at=(30, 40)))


@pytest.mark.parametrize(("lease_ms", "status"), [(0, "violation"), (19, "violation"),
                                                  (20, "lease-bounded"), (25, "lease-bounded")])
def test_a_read_only_txn_is_stale_by_exactly_how_long(lease_ms: int, status: str) -> None:
    res = check(*STALE, lease_ms=lease_ms)
    assert res["status"] == status
    assert res["valid"] is (status == "lease-bounded")
    (stale,) = res["stale_reads"]
    assert stale == {"op": 3, "invoke_index": 2, "staleness_ms": 20.0, "superseded_by": 1,
                     "key": "x"}
    assert res["max_staleness_ms"] == 20.0
    if status == "lease-bounded":
        assert res["anomaly_types"] == []
        assert res["lease_bounded_types"] == ["G-single-item-realtime"]


def test_the_lease_excuses_read_only_txns_only() -> None:
    """A txn that appends as well as reads gets no lease."""
    res = check(T([("append", "x", 1)], at=(0, 10)),
                T([("r", "x", []), ("append", "y", 5)], at=(30, 40)), lease_ms=1000)
    assert res["status"] == "violation" and res["stale_reads"] == []


def test_info_txns_count_both_ways() -> None:
    # an info append someone read happened; one nobody read may not have
    seen = check(T([("append", "x", 1)], "info", at=(0, 10)), T([("r", "x", [1])], at=(20, 30)))
    unseen = check(T([("append", "x", 1)], "info", at=(0, 10)), T([("r", "x", [])], at=(20, 30)))
    assert seen["status"] == "valid" and unseen["status"] == "valid"


@pytest.mark.parametrize(("value", "what"), [
    ([["write", "x", 1]], "micro-op f must be append or r"),
    ([["append", "x", "one"]], "appended values must be integers"),
    ("x", "a txn's value must be a list"),
    ([["r", "x", 3]], "a read's value must be a list"),
])
def test_malformed_txns_are_one_sentence(value: Any, what: str) -> None:
    ops = [{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "txn", "value": value}]
    with pytest.raises(TxnHistoryError, match=what):
        parse(ops)


def test_one_value_appended_twice_is_refused() -> None:
    with pytest.raises(TxnHistoryError, match="appended to key x twice"):
        parse(history(T([("append", "x", 1)]), T([("append", "x", 1)])))


def test_an_edn_history_of_completions_only_reads_as_elle_reads_it(tmp_path: Any) -> None:
    """Elle's tests write completions alone: such a txn's invocation is unknown, so no
    real-time edge reaches it; process order still holds; non-integer processes are not
    clients."""
    from leaseline.checkers.list_append import check_txns, read_history

    path = tmp_path / "h.edn"
    path.write_text("{:type :ok, :f :txn, :process 0, :value [[:append :x 1]]}\n"
                    "{:type :info, :f :start, :process :nemesis, :value nil}\n"
                    "{:type :ok, :f :txn, :process 0, :value [[:r :x []]]}\n")
    _, txns = read_history(path)
    assert len(txns) == 2 and txns.invoke_index.tolist() == [-1, -1]
    assert check_txns(txns)["status"] == "valid"
    res = check_txns(txns, consistency_model="strong-session-serializable")
    assert res["anomaly_types"] == ["G-single-item-process"]


def test_at_lease_zero_the_history_order_decides_not_the_times() -> None:
    """Times that disagree with the record order (a clock stepped back): at lease 0 the
    verdict is Elle's, from the order; the staleness by the times is still listed."""
    ops = [
        {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "txn",
         "value": [["append", "x", 1]]},
        {"index": 1, "time": 50 * MS, "process": 1, "type": "invoke", "f": "txn",
         "value": [["r", "x", None]]},
        {"index": 2, "time": 10 * MS, "process": 0, "type": "ok", "f": "txn",
         "value": [["append", "x", 1]]},
        {"index": 3, "time": 60 * MS, "process": 1, "type": "ok", "f": "txn",
         "value": [["r", "x", []]]},
    ]
    res = check_history(ops)
    assert res["status"] == "valid"
    assert res["max_staleness_ms"] == 40.0
    assert check_history(ops, lease_ms=30)["status"] == "violation"


def test_an_append_beyond_64_bits_is_refused() -> None:
    ops = [{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "txn",
            "value": [["append", "x", 1 << 64]]}]
    with pytest.raises(TxnHistoryError, match="beyond 64-bit integers"):
        parse(ops)


def test_the_fast_jsonl_reader_agrees_with_the_general_one(tmp_path: Any) -> None:
    """history.jsonl is read by a typed fast path when every record has the usual shape,
    else by the general reader: both give the same txns."""
    import json

    import numpy as np

    from leaseline.checkers.list_append import read_history
    from leaseline.checkers.list_append.history import _Irregular, _typed_txns

    ops = history(T([("append", "x", 1), ("r", "y", [])]), T([("append", "y", 2)], "info"),
                  T([("append", "x", 3)], "fail"), T([("r", "x", [1]), ("r", "y", [2])]))
    ops.insert(2, {"index": 99, "time": 5, "process": "nemesis", "type": "info",
                   "f": "start-kill", "value": {"fault": 1}})
    ops.append({"index": 100, "time": 10**9, "process": 9, "type": "invoke", "f": "txn",
                "value": [["append", "z", 7]]})  # never completed
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ops))
    typed, general = _typed_txns(path, []), parse(ops)
    for name in ("index", "invoke_index", "type", "t_invoke", "t_complete", "read_only"):
        assert np.array_equal(getattr(typed, name), getattr(general, name)), name
    assert typed.mops == general.mops and typed.process == general.process
    faults, txns = read_history(path)
    assert [f["f"] for f in faults] == ["start-kill"] and len(txns) == 5
    path.write_text(path.read_text() + "\n")  # a blank line: the general reader's
    with pytest.raises(_Irregular):
        _typed_txns(path, [])
    assert len(read_history(path)[1]) == 5
