"""The list-append checker against Elle's own expectations: every `scope: "check"` entry
of ../shared/corpora/elle/expected.json (read at run time) gives at least the expected
anomaly types, the same verdict and, where the entry states it, the same `not`.
Entries that assert one of Elle's sub-functions (g1a-cases, g1b-cases, internal-cases)
are held to those anomaly types alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
from repo_paths import CORPORA

from leaseline.checkers.list_append import check_txns, key_results, read_history

ELLE = CORPORA / "elle"
EXPECTED: list[dict[str, Any]] = (json.loads((ELLE / "expected.json").read_text())
                                  if (ELLE / "expected.json").is_file() else [])
needs_corpus = pytest.mark.skipif(not EXPECTED, reason=f"no Elle corpus at {ELLE}")
# huge-scc.edn: Elle's own test says only these are firm (the rest come from its search
# timing out, which depends on speed): invalid, G2-item-realtime, not strong SI.
FIRM_ONLY = {"huge-scc.edn": {"G2-item-realtime"}}


def _models(entry: dict[str, Any]) -> list[str] | None:
    if ":consistency-models nil" in entry["elle_opts"]:
        return None  # Elle: only the anomalies asked for
    return entry["consistency_models"] or ["strict-serializable"]


def _id(entry: dict[str, Any]) -> str:
    return f"{entry['file']}:{entry['elle_opts']}"


CHECKS = [e for e in EXPECTED if e["scope"] == "check" and e["anomaly_types"] is not None]
PARTS = [e for e in EXPECTED if e["scope"] != "check"]


@needs_corpus
def test_corpus_is_complete() -> None:
    assert len(EXPECTED) == 62
    assert (len(CHECKS), len(PARTS)) == (51, 10)


@needs_corpus
@pytest.mark.parametrize("entry", CHECKS, ids=_id)
def test_full_check_agrees_with_elle(entry: dict[str, Any]) -> None:
    _, txns = read_history(ELLE / entry["file"], "edn")
    res = check_txns(txns, consistency_model=_models(entry),
                     anomalies=entry.get("anomalies_requested") or ())
    assert res["valid"] == entry["valid"]
    expected = FIRM_ONLY.get(entry["file"], set(entry["anomaly_types"]))
    assert expected <= set(res["anomaly_types"])
    if entry["file"] in FIRM_ONLY:
        assert "strong-snapshot-isolation" in res["not"]
    elif entry.get("not") is not None:
        assert res["not"] == sorted(entry["not"])


@needs_corpus
@pytest.mark.parametrize("entry", PARTS, ids=_id)
def test_sub_checks_agree_with_elle(entry: dict[str, Any]) -> None:
    """The per-key stage finds exactly Elle's anomalies of the asked kinds (these files
    break the full checker's preconditions on purpose: reads of values never appended,
    one value appended twice), so the records are read without that check."""
    from leaseline.checkers.list_append.history import read_edn
    from leaseline.checkers.list_append.history import txns_from_records as parse

    records, _ = read_edn(ELLE / entry["file"])
    txns = parse(records, unique_appends=False)
    asked = set(entry["scope_anomaly_types"])
    ops: dict[str, set[int]] = {}  # Elle reports one case of a kind per transaction
    for r in key_results(txns):
        for name, ws in r.anomalies.items():
            if name in asked:
                ops.setdefault(name, set()).update(w["op"] for w in ws)
    found = {name: len(v) for name, v in ops.items()}
    got = set(found)
    assert got == set(entry["anomaly_types"])
    for name, count in (entry.get("anomaly_counts") or {}).items():
        assert found.get(name, 0) == count, name


@needs_corpus
def test_paper_example_has_no_client_ops() -> None:
    """Elle drops ops without :process (all of this file's): nothing to relate."""
    _, txns = read_history(ELLE / "paper-example.edn", "edn")
    res = check_txns(txns)
    assert len(txns) == 0
    assert res["valid"] == "unknown"
    assert res["anomaly_types"] == ["empty-transaction-graph"]
