"""A list-append history's verdict in words for people: the one reader of the result.

The checker (checkers/list_append/) returns one result dict per history (its "valid",
"status", "anomaly_types", "anomalies" with their witnesses, "stale_reads", ...), which
the file report and results.json carry whole under "list_append"
(checkers/list_append/file_report.py). The summary, inspect, junit.xml, report.html, the
campaign table and the runs browser read it through here and say each witness in words,
with the checker's own "why" of each edge.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

LIST_APPEND = "list_append"  # the file report's field holding the checker's result

# What each name means, for the summary, the report and junit (Elle's spelling).
MEANING = {
    "G0": "write cycle: transactions whose appends are ordered both ways (ww edges only).",
    "G1a": "aborted read: a read shows an append of a transaction that failed.",
    "G1b": "intermediate read: a read shows a transaction's state between two of its own "
           "appends to one key.",
    "G1c": "circular information flow: a cycle of ww and wr edges.",
    "G-single-item": "read skew: a cycle with exactly one anti-dependency (rw edge).",
    "G-nonadjacent-item": "a cycle with several anti-dependencies, no two of them adjacent.",
    "G2-item": "anti-dependency cycle (e.g. write skew): two adjacent rw edges.",
    "duplicate-elements": "a read shows one appended element more than once (an append "
                          "applied twice).",
    "incompatible-order": "two reads of one key that no single order of its appends explains.",
    "dirty-update": "a committed append follows a failed transaction's append in a key's "
                    "order.",
    "internal": "a transaction contradicts its own earlier micro-operations.",
    "lost-write": "an acknowledged append that no read shows, although reads show later "
                  "appends of its key; or one that reads showed and every read begun "
                  "after them lacks.",
    "future-read": "a transaction reads an element that it appends itself only later.",
    "lost-update": "two transactions read the same version of a key and both append to it.",
    "empty-transaction-graph": "no transaction could be ordered against another: nothing "
                               "was checked.",
}
VARIANTS = {"-process": " Needs the order of each process's transactions.",
            "-realtime": " Needs real-time order (one transaction completed before the other "
                         "began)."}


def meaning(name: str) -> str:
    """One sentence for an anomaly type, its -process / -realtime variant included."""
    for suffix, extra in VARIANTS.items():
        if name.endswith(suffix) and name[: -len(suffix)] in MEANING:
            return MEANING[name[: -len(suffix)]] + extra
    return MEANING.get(name, "an anomaly the checker names this way.")


def result_of(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """The list-append result of a file report or results.json, or None (a register run)."""
    found = (report or {}).get(LIST_APPEND)
    return found if isinstance(found, dict) else None


def elle_list(value: Any) -> str:
    """A read's list as Elle prints it: [1 2 3]."""
    if isinstance(value, list):
        return "[" + " ".join(elle_list(v) for v in value) + "]"
    return "nil" if value is None else str(value)


def edge_text(edge: dict[str, Any]) -> str:
    """One cycle edge in words: the checker's "why", else what the edge says."""
    if edge.get("why"):
        return str(edge["why"])
    on = ""
    if edge.get("key") is not None:
        on = f" on {edge['key']}" + (f" ({edge['value']})" if edge.get("value") is not None
                                      else "")
    return f"T{edge.get('from')} < T{edge.get('to')}: {edge.get('kind')}{on}"


NOT_SHORTEST = ("(not proven shortest: the search ran out of budget before ruling out a "
                "shorter cycle of this type)")


def is_cycle(witness: Any) -> bool:
    return isinstance(witness, dict) and isinstance(witness.get("cycle"), list)


def witness_lines(name: str, witness: Any) -> list[str]:
    """A witness in words: a cycle edge by edge, the others in one sentence."""
    if not isinstance(witness, dict):
        return [str(witness)]
    if is_cycle(witness):
        return [edge_text(e) for e in witness["cycle"] if isinstance(e, dict)] + (
            [NOT_SHORTEST] if witness.get("shortest") is False else [])
    if witness.get("why"):
        return [str(witness["why"])]
    key, op = witness.get("key"), witness.get("op")
    if name == "duplicate-elements":
        return [f"T{op} read {key} = {elle_list(witness.get('read'))}: element "
                f"{witness.get('element')} appears more than once"]
    if name == "lost-write" and witness.get("seen_by") is not None:
        after = witness.get("after_ms")
        gap = f" {after:,.1f} ms" if isinstance(after, int | float) else ""
        return [f"T{op}'s acknowledged append of {witness.get('element')} to {key} was read "
                f"by T{witness['seen_by']}, then lost: T{witness.get('reader')} began{gap} "
                f"after T{witness['seen_by']} ended and lacks it, as does every read begun "
                f"after it"]
    if name == "lost-write":
        return [f"T{op}'s acknowledged append of {witness.get('element')} to {key} is in no "
                f"read, though reads show its later appends "
                f"{elle_list(witness.get('later_elements'))}"]
    rest = ", ".join(f"{k} {elle_list(v)}" for k, v in witness.items() if k not in ("key", "op"))
    head = " ".join(x for x in (f"T{op}" if op is not None else "",
                                f"key {key}" if key is not None else "") if x)
    return [f"{head}: {rest}" if head else rest]


def witness_txns(witness: Any) -> list[int]:
    """The history indexes of the transactions a witness names, in order, once each."""
    out: list[int] = []
    if not isinstance(witness, dict):
        return out
    for v in witness.get("txns") or []:
        if isinstance(v, int):
            out.append(v)
    for e in witness.get("cycle") or []:
        if isinstance(e, dict):
            out += [v for v in (e.get("from"), e.get("to")) if isinstance(v, int)]
    for k in ("op", "ops", "txn", "seen_by", "reader", "writer"):
        v = witness.get(k)
        out += [v] if isinstance(v, int) else [x for x in v if isinstance(x, int)] if isinstance(
            v, list) else []
    return list(dict.fromkeys(out))


def ordered_types(result: dict[str, Any]) -> list[str]:
    """The result's anomaly types with witnesses: those the verdict stands on first, then
    those the lease excuses, then any other the checker gave witnesses of."""
    listed = [str(t) for t in result.get("anomaly_types") or []]
    excused = [str(t) for t in result.get("lease_bounded_types") or [] if t not in listed]
    others = sorted(str(t) for t, ws in (result.get("anomalies") or {}).items()
                    if ws and t not in listed and t not in excused)
    return listed + excused + others


def standing(result: dict[str, Any], name: str) -> str:
    """"" for a type the verdict stands on, else why it does not count."""
    if name in (result.get("anomaly_types") or []):
        return ""
    if name in (result.get("lease_bounded_types") or []):
        return "excused by the lease"
    return "allowed under this model"


def headline(result: dict[str, Any]) -> str:
    """The verdict in one sentence."""
    status = result.get("status")
    model = result.get("consistency_model") or "strict-serializable"
    lease = result.get("lease_ms") or 0
    stale = result.get("stale_reads") or []
    worst = result.get("max_staleness_ms")
    types = result.get("anomaly_types") or []
    if status == "violation" or result.get("valid") is False:
        return f"not {model}: " + ", ".join(types) if types else f"not {model}"
    if status == "unknown" or result.get("valid") == "unknown":
        return str(result.get("reason") or "undecided: a search budget ran out")
    if status == "lease-bounded" or stale:
        return (f"{model} within the lease: {len(stale)} read-only transaction"
                f"{'s' if len(stale) != 1 else ''} stale by at most {_ms(worst)} "
                f"(lease {_ms(lease)})")
    return f"{model}: no anomaly"


def stale_line(s: dict[str, Any], lease_ms: float | None) -> str:
    """One stale read-only transaction in words."""
    ms = s.get("staleness_ms")
    where = ""
    if lease_ms is not None and ms is not None:
        where = " (within the lease)" if float(ms) <= float(lease_ms) else " (beyond the lease)"
    key = f" of {s['key']}" if s.get("key") is not None else ""
    by = f", superseded by T{s['superseded_by']}" if s.get("superseded_by") is not None else ""
    return f"T{s.get('op')} read a state{key} {_ms(ms)} old{where}{by}"


def _ms(v: Any) -> str:
    if v is None:
        return "—"
    return f"{float(v):,.3f}".rstrip("0").rstrip(".") + " ms"


def count_line(result: dict[str, Any]) -> str:
    return (f"{int(result.get('txns') or 0):,} transactions over {int(result.get('keys') or 0):,}"
            f" keys, checked as {result.get('consistency_model') or 'strict-serializable'}")


def all_witnesses(result: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    for name in ordered_types(result):
        for w in (result.get("anomalies") or {}).get(name) or []:
            yield name, w
