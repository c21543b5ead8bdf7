"""Consistency models and anomaly names as Elle uses them: what a model prohibits, what an
anomaly implies, and which models a set of anomalies rules out (Elle's `:not`).

Three relations, each a DAG written as a dict (edge a -> b):
  IMPLIES     anomaly a is also an instance of b (G0 is a G1c; a G1 is a G1a, G1b or G1c);
  MODEL_IMPLIES  a history that satisfies model a satisfies b (strict-serializable ->
              serializable -> repeatable-read -> ...), with Adya's PL names as canonical;
  PROSCRIBES  the anomalies model a forbids directly (more come from weaker models).
They are transcribed from the literature Elle cites (Adya's thesis and Adya, Liskov and
O'Neil; Bailis et al., "Highly Available Transactions"; Cerone, Bernardi and Gotsman;
Daudjee and Salem) and checked against Elle's documented results (the corpus tests).

A model prohibits every anomaly it or a model it implies proscribes, and every anomaly
that implies one of those. A set of found anomalies rules out every model that prohibits
one of them or of what they imply; `not` is the weakest of those (no other ruled-out
model is weaker), as Elle reports it.

Leaseline's additions: `lost-write` (an acknowledged append no read shows although reads
show appends begun after it completed) implies G-single-item-realtime, the cycle it
forms: a reader of the longest state anti-depends on the lost append, which completed
before a txn whose append that reader saw began; an append read and then lacking from
every read begun after (checkers/list_append/vanished.py) closes the same kind of cycle
through the last read that showed it. `garbage-read` (a read of an element
no transaction appended) implies G1a, a read of data no committed transaction wrote.
"""

from __future__ import annotations

from collections.abc import Iterable

# anomaly -> anomalies it implies
IMPLIES: dict[str, tuple[str, ...]] = {
    "G0": ("G1c", "G0-process"),
    "G0-process": ("G1c-process", "G0-realtime"),
    "G0-realtime": ("G1c-realtime",),
    "G1a": ("G1",),
    "G1b": ("G1",),
    "G1c": ("G1", "G1c-process"),
    "G1c-process": ("G1c-realtime", "G1-process"),
    "G1c-realtime": ("G1-realtime",),
    "G1": ("G1-process",),
    "G1-process": ("G1-realtime",),
    "G-single-item": ("G-single", "G-single-item-process", "G-nonadjacent-item"),
    "G-single-item-process": ("G-single-process", "G-single-item-realtime",
                              "G-nonadjacent-item-process"),
    "G-single-item-realtime": ("G-single-realtime", "G-nonadjacent-item-realtime"),
    "G-single": ("G-nonadjacent", "GSIb", "G-single-process"),
    "G-single-process": ("G-nonadjacent-process", "G-single-realtime"),
    "G-single-realtime": ("G-nonadjacent-realtime",),
    "G-nonadjacent-item": ("G-nonadjacent", "G2-item", "G-nonadjacent-item-process"),
    "G-nonadjacent-item-process": ("G-nonadjacent-process", "G2-item-process",
                                   "G-nonadjacent-item-realtime"),
    "G-nonadjacent-item-realtime": ("G2-item-realtime", "G-nonadjacent-realtime"),
    "G-nonadjacent": ("G2", "G-nonadjacent-process"),
    "G-nonadjacent-process": ("G2-process", "G-nonadjacent-realtime"),
    "G-nonadjacent-realtime": ("G2-realtime",),
    "G2": ("G2-process",),
    "G2-item": ("G2", "G2-item-process"),
    "G2-item-process": ("G2-process", "G2-item-realtime"),
    "G2-item-realtime": ("G2-realtime",),
    "G2-process": ("G2-realtime",),
    "GSIa": ("GSI",),
    "GSIb": ("GSI",),
    "incompatible-order": ("G1a",),
    "future-read": ("G1c",),
    "dirty-update": ("G1a",),
    "lost-update": ("write-skew", "G2-item"),
    "write-skew": ("G2",),
    "lost-write": ("G-single-item-realtime",),
    "garbage-read": ("G1a",),
}

# friendly model name -> canonical (Adya's PL-x where there is one)
CANONICAL: dict[str, str] = {
    "consistent-view": "PL-2+",
    "conflict-serializable": "PL-3",
    "cursor-stability": "PL-CS",
    "forward-consistent-view": "PL-FCV",
    "monotonic-snapshot-read": "PL-MSR",
    "monotonic-view": "PL-2L",
    "read-committed": "PL-2",
    "read-uncommitted": "PL-1",
    "repeatable-read": "PL-2.99",
    "serializable": "PL-3",
    "snapshot-isolation": "PL-SI",
    "strict-serializable": "PL-SS",
    "strong-serializable": "PL-SS",
    "update-serializable": "PL-3U",
    "strong-session-read-uncommitted": "strong-session-PL-1",
    "strong-session-read-committed": "strong-session-PL-2",
    "strong-read-uncommitted": "strong-PL-1",
    "strong-read-committed": "strong-PL-2",
}
FRIENDLY: dict[str, str] = {v: k for k, v in CANONICAL.items()} | {"PL-3": "serializable",
                                                                     "PL-SS": "strict-serializable"}


def canonical(model: str) -> str:
    return CANONICAL.get(model, model)


def friendly(model: str) -> str:
    return FRIENDLY.get(model, model)


def _canon_graph(g: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for a, bs in g.items():
        out.setdefault(canonical(a), []).extend(canonical(b) for b in bs)
    return {a: tuple(dict.fromkeys(bs)) for a, bs in out.items()}


# model a -> models it implies (a history satisfying a satisfies each)
MODEL_IMPLIES: dict[str, tuple[str, ...]] = _canon_graph({
    "causal-cerone": ("read-atomic",),
    "consistent-view": ("cursor-stability", "monotonic-view"),
    "conflict-serializable": ("view-serializable",),
    "cursor-stability": ("read-committed", "PL-2"),
    "forward-consistent-view": ("consistent-view",),
    "PL-2": ("PL-1",),
    "PL-3": ("repeatable-read", "update-serializable"),
    "update-serializable": ("forward-consistent-view",),
    "monotonic-atomic-view": ("read-committed",),
    "monotonic-view": ("PL-2",),
    "monotonic-snapshot-read": ("PL-2",),
    "parallel-snapshot-isolation": ("causal-cerone", "update-atomic"),
    "prefix": ("causal-cerone",),
    "read-atomic": ("monotonic-atomic-view",),
    "read-committed": ("read-uncommitted",),
    "repeatable-read": ("cursor-stability", "monotonic-atomic-view"),
    "update-atomic": ("read-atomic",),
    "serializable": ("repeatable-read", "snapshot-isolation", "view-serializable"),
    "session-serializable": ("1SR",),
    "snapshot-isolation": ("forward-consistent-view", "monotonic-atomic-view",
                           "monotonic-snapshot-read", "parallel-snapshot-isolation", "prefix"),
    "strict-serializable": ("PL-3", "serializable", "linearizable", "snapshot-isolation",
                            "strong-snapshot-isolation", "strong-session-serializable"),
    "strong-session-PL-1": ("PL-1",),
    "strong-session-PL-2": ("PL-2", "strong-session-PL-1"),
    "strong-PL-1": ("strong-session-PL-1",),
    "strong-PL-2": ("strong-session-PL-2", "strong-PL-1"),
    "strong-session-serializable": ("serializable", "strong-session-snapshot-isolation"),
    "strong-session-snapshot-isolation": ("snapshot-isolation", "strong-session-PL-2"),
    "strong-serializable": ("session-serializable",),
    "strong-snapshot-isolation": ("strong-session-snapshot-isolation", "strong-PL-2"),
    "linearizable": ("sequential",),
    "sequential": ("causal",),
    "causal": ("writes-follow-reads", "PRAM"),
    "PRAM": ("monotonic-reads", "monotonic-writes", "read-your-writes"),
})

# model -> the anomalies it proscribes directly
PROSCRIBES: dict[str, tuple[str, ...]] = _canon_graph({
    "causal-cerone": ("internal", "G1a"),
    "cursor-stability": ("G1", "G-cursor", "lost-update"),
    "monotonic-view": ("G1", "G-monotonic"),
    "monotonic-snapshot-read": ("G1", "G-MSR"),
    "consistent-view": ("G1", "G-single"),
    "forward-consistent-view": ("G1", "G-SIb"),
    "parallel-snapshot-isolation": ("internal", "G1a"),
    "PL-3": ("G1", "G2", "PL-3-cycle-exists"),
    "PL-2": ("G1", "PL-2-cycle-exists"),
    "PL-1": ("G0", "duplicate-elements", "cyclic-versions", "PL-1-cycle-exists"),
    "prefix": ("internal", "G1a"),
    "serializable": ("internal",),
    "snapshot-isolation": ("internal", "G1", "G-SI", "G-nonadjacent"),
    "read-atomic": ("internal", "G1a", "future-read"),
    "repeatable-read": ("G1", "G2-item", "lost-update", "PL-2.99-cycle-exists"),
    "update-atomic": ("lost-update",),
    "strict-serializable": ("G1", "G1c-realtime", "G2-realtime", "PL-SS-cycle-exists"),
    "strong-session-PL-1": ("G0-process", "strong-session-PL-1-cycle-exists"),
    "strong-session-PL-2": ("G1c-process", "strong-session-PL-2-cycle-exists"),
    "strong-PL-1": ("G0-realtime", "strong-PL-1-cycle-exists"),
    "strong-PL-2": ("G1c-realtime", "strong-PL-2-cycle-exists"),
    "strong-session-snapshot-isolation": ("internal", "G1-process", "G-nonadjacent-process"),
    "strong-snapshot-isolation": ("internal", "G1-realtime", "G-nonadjacent-realtime"),
    "strong-session-serializable": ("G1-process", "G2-process",
                                    "strong-session-serializable-cycle-exists"),
    "update-serializable": ("G1", "G-update"),
})

# the models --consistency-model offers
MODELS = ("strict-serializable", "serializable", "snapshot-isolation", "repeatable-read",
          "read-committed", "read-uncommitted", "strong-session-serializable",
          "strong-session-snapshot-isolation", "strong-snapshot-isolation")
ALL_MODELS = frozenset(CANONICAL) | frozenset(CANONICAL.values()) | frozenset(
    MODEL_IMPLIES) | frozenset(m for ms in MODEL_IMPLIES.values() for m in ms)


def _reverse(g: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for a, bs in g.items():
        for b in bs:
            out.setdefault(b, []).append(a)
    return {b: tuple(a) for b, a in out.items()}


def _closure(g: dict[str, tuple[str, ...]], start: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        x = todo.pop()
        if x not in seen:
            seen.add(x)
            todo.extend(g.get(x, ()))
    return seen


_IMPLIED_BY = _reverse(IMPLIES)
_MODEL_IMPLIED_BY = _reverse(MODEL_IMPLIES)
_PROSCRIBED_BY = _reverse(PROSCRIBES)


def implied(anomalies: Iterable[str]) -> set[str]:
    """The anomalies and every anomaly they imply."""
    return _closure(IMPLIES, anomalies)


def implying(anomalies: Iterable[str]) -> set[str]:
    """The anomalies and every anomaly that implies one of them."""
    return _closure(_IMPLIED_BY, anomalies)


def prohibited(models: Iterable[str], anomalies: Iterable[str] = ()) -> set[str]:
    """Every anomaly the models (and the extra anomalies asked for) rule out."""
    direct = [a for m in _closure(MODEL_IMPLIES, map(canonical, models))
              for a in PROSCRIBES.get(m, ())]
    return implying(direct) | implying(anomalies)


def impossible_models(anomalies: Iterable[str]) -> set[str]:
    """Canonical names of every model the anomalies rule out."""
    direct = {m for a in implied(anomalies) for m in _PROSCRIBED_BY.get(a, ())}
    return _closure(_MODEL_IMPLIED_BY, direct)


def ruled_out(anomalies: Iterable[str]) -> list[str]:
    """Elle's `:not`: the weakest models the anomalies rule out, friendly names, sorted."""
    bad = impossible_models(anomalies)
    weakest = {m for m in bad
               if not (_closure(MODEL_IMPLIES, [m]) - {m}) & bad}
    return sorted(friendly(m) for m in weakest)


def uses_realtime(types: Iterable[str]) -> bool:
    return any(t.endswith("-realtime") for t in types)


def uses_process(types: Iterable[str]) -> bool:
    return any(t.endswith("-process") for t in types)
