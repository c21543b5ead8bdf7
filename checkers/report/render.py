"""report.html: one self-contained page per run (inline CSS/JS/data, opens from disk).

Static parts (verdict, configuration, per-key table, anomaly explanations) are rendered
here as HTML so the page says what matters even with JavaScript off; the timeline, plots
and anomaly graphs are drawn by assets/report.js from a JSON blob whose operation columns
are base64 typed arrays (about 35 bytes per operation). A list-append run shows each
anomaly type with its witnesses in words, each cycle drawn as a small graph whose edges
carry their kind, key and value (checkers/report/cycles.py), and its stale read-only
transactions in the staleness plot.
"""

from __future__ import annotations

import base64
import html
import json
import time
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import numpy as np

from leaseline.checkers.anomalies import TYPES as ANOMALY_TYPES
from leaseline.checkers.list_append_report import (
    all_witnesses,
    count_line,
    headline,
    is_cycle,
    meaning,
    ordered_types,
    result_of,
    standing,
    witness_lines,
)
from leaseline.checkers.report.cycles import micro_text, rows_by_index, witness_graph
from leaseline.checkers.report.rundata import (
    Anomaly,
    History,
    anomalies,
    nemesis_intervals,
    read_history,
)
from leaseline.harness.store.run_dir import TEST, TEXT_FILES, RunDir
from leaseline.harness.systems.client_models import client_model
from leaseline.harness.systems.registry import sut_label

STATUS_ORDER = {"violation": 0, "unknown": 1, "lease-bounded": 2, "linearizable": 3}
MAX_KEY_ROWS = 2000  # the key table is a scroll box; beyond this the page says how many more
MAX_WITNESSES_DRAWN = 60  # list-append witnesses drawn; the rest are counted (results.json)
STALENESS_NOTE = ("Each stale read's staleness: how far its invocation must move earlier for "
                  "its key to be linearizable, every other read of the key moving by the key's "
                  "minimal Δ; the dashed line is the lease window.")
LA_STALENESS_NOTE = ("Each stale read-only transaction's staleness: how long before its "
                     "invocation the state it read had been superseded by an acknowledged "
                     "transaction; the dashed line is the lease window.")


def _asset(name: str) -> str:
    assets = resources.files("leaseline.checkers.report").joinpath("assets")
    return assets.joinpath(name).read_text(encoding="utf-8")


def _b64(a: np.ndarray, dtype: Any) -> str:
    return base64.b64encode(
        np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
    ).decode()


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _lanes(h: History, concurrency: Any) -> tuple[np.ndarray, list[str]]:
    """One lane per worker: Jepsen gives a retired process's successor id p + concurrency."""
    proc = h.ops.process
    if len(proc) == 0:
        return np.zeros(0, dtype=np.int16), []
    ints = proc[proc >= 0]
    if (
        isinstance(concurrency, int)
        and concurrency > 0
        and (len(ints) == 0 or ints.max() >= concurrency)
    ):
        lane = np.where(proc >= 0, proc % concurrency, -1)
        labels = [f"worker {i}" for i in range(concurrency)]
    else:
        uniq = np.unique(ints)
        lane = np.where(proc >= 0, np.searchsorted(uniq, proc), -1)
        labels = [f"process {p}" for p in uniq]
    # Non-integer processes (imported histories) get lanes after the workers.
    for pid, name in sorted(h.ops.process_names.items(), reverse=True):
        lane[proc == pid] = len(labels)
        labels.append(str(name))
    return lane.astype(np.int16), labels


def _data_blob(
    h: History | None,
    test: dict[str, Any],
    results: dict[str, Any] | None,
    found: list[Anomaly],
    history_problem: str,
) -> dict[str, Any]:
    res = results or {}
    shifts = [
        float(s.get("shift_ms", 0))
        for kr in (res.get("keys") or {}).values()
        if isinstance(kr, dict)
        for s in (kr.get("shifted_reads") or [])
    ]
    lease = res.get("lease_ms", test.get("lease_ms"))
    la = result_of(res)
    if la is not None:
        shifts = [float(s.get("staleness_ms") or 0) for s in la.get("stale_reads") or []]
    blob: dict[str, Any] = {
        "leaseMs": lease,
        "shifts": shifts,
        "historyProblem": history_problem,
        "anomalies": [{"key": a.key, "title": a.reason if la is not None else None,
                       "graph": a.graph, "ops": a.ops,
                       "types": {} if la is not None else _involved(res, a.key)}
                      for a in found],
        "anomalyTypes": _la_entries(found) if la is not None else _type_entries(res),
        "ops": {"n": 0},
        "values": [],
        "errors": {},
        "keys": [],
        "nodes": [],
        "fOther": {},
        "procNames": {},
        "lanes": [],
        "nemesis": [],
        "endMs": 0,
    }
    if h is None:
        ivs = nemesis_intervals(list(res.get("nemesis") or []))
    else:
        ops = h.ops
        lane, labels = _lanes(h, test.get("concurrency"))
        blob.update(
            ops={
                "n": len(ops),
                "index": _b64(ops.index, np.int32),
                "cindex": _b64(ops.complete_index, np.int32),
                "process": _b64(ops.process, np.int32),
                "lane": _b64(lane, np.int16),
                "f": _b64(ops.f, np.uint8),
                "type": _b64(ops.type, np.uint8),
                "key": _b64(ops.key, np.int32),
                "node": _b64(ops.node, np.int16),
                "invoke": _b64(ops.invoke, np.float64),
                "complete": _b64(ops.complete, np.float64),
            },
            values=ops.values,
            errors={str(k): v for k, v in ops.errors.items()},
            keys=ops.keys,
            nodes=ops.nodes,
            fOther={str(k): v for k, v in ops.f_other.items()},
            procNames={str(k): v for k, v in ops.process_names.items()},
            lanes=labels,
            endMs=h.end_ms,
        )
        ivs = h.intervals
    blob["nemesis"] = [
        {"name": iv.name, "start": iv.start_ms, "end": iv.end_ms, "value": iv.value} for iv in ivs
    ]
    if h is None and ivs:
        blob["endMs"] = max((iv.end_ms or iv.start_ms) for iv in ivs)
    return blob


def _verdict(results: dict[str, Any] | None) -> tuple[str, str]:
    if results is None:
        return "none", "NO RESULTS"
    v = results.get("valid")
    if v is True:
        return "valid", "VALID"
    if v is False:
        return "invalid", "INVALID"
    return "unknown", "UNKNOWN"


def _fmt_ms(v: Any) -> str:
    if v is None:
        return "—"
    try:
        return f"{float(v):,.3f}".rstrip("0").rstrip(".") + " ms"
    except (TypeError, ValueError):
        return _e(v)


def _td(x: Any, cls: str = "", code: bool = False) -> str:
    inner = f"<code>{_e(x)}</code>" if code else _e(x)
    return f'<td class="{cls}">{inner}</td>' if cls else f"<td>{inner}</td>"


def _table(headers: list[str], rows: list[str]) -> str:
    """headers ending in '#' are right-aligned numbers."""
    head = "".join(
        f'<th class="num">{_e(h[:-1])}</th>' if h.endswith("#") else f"<th>{_e(h)}</th>"
        for h in headers
    )
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _stat(value: str, label: str, cls: str = "") -> str:
    return f'<div class="stat {cls}"><b>{value}</b><span>{_e(label)}</span></div>'


def _summary_html(test: dict[str, Any], results: dict[str, Any] | None, h: History | None) -> str:
    cls, word = _verdict(results)
    res = results or {}
    summary = res.get("summary") or {}
    stats = []
    la = result_of(res)
    if la is not None:
        stats = _la_stats(la)
    elif results:
        statuses = ("linearizable", "lease-bounded", "violation", "unknown")
        stats = [_stat(f"{int(summary.get(s, 0)):,}", f"{s} keys", s) for s in statuses]
    ops = res.get("ops", len(h.ops) if h else None)
    stats += [_stat(_fmt_ms(res.get("lease_ms", test.get("lease_ms"))), "lease window L")]
    if la is None:
        stats += [_stat(_fmt_ms(res.get("max_delta_ms")), "largest minimal Δ"),
                  _stat("—" if ops is None else f"{int(ops):,}", "operations")]
    if h is not None:
        stats.append(_stat(str(len(h.intervals)), "nemesis periods"))
    badge = f'<span class="verdict {cls}" id="verdict">{word}</span>'
    return (
        f'<section class="card" id="summary"><h2>Verdict {badge}</h2>'
        f'<div class="stats">{"".join(stats)}</div></section>'
    )


def _config_html(test: dict[str, Any]) -> str:
    if not test:
        return ""
    rows = "".join(
        f"<dt>{_e(k)}</dt><dd>{_e(json.dumps(v) if not isinstance(v, str) else v)}</dd>"
        for k, v in test.items()
    )
    return (
        f'<section class="card"><details><summary>Configuration ({TEST})</summary>'
        f'<dl class="config">{rows}</dl></details></section>'
    )


def _involved(results: dict[str, Any], key: str) -> dict[str, list[int]]:
    """{anomaly type that applies: the operations involved} of one key."""
    kr = (results.get("keys") or {}).get(key)
    if not isinstance(kr, dict):
        return {}
    found = kr.get("anomalies") or {}
    return {t: list((found.get(t) or {}).get("ops") or []) for t in kr.get("anomaly_types") or []
            if isinstance(found.get(t), dict)}


def _type_entries(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (anomaly type, key) that applies: what the type sections' buttons highlight."""
    out = []
    for key, kr in (results.get("keys") or {}).items():
        if not isinstance(kr, dict):
            continue
        for t, ops in _involved(results, str(key)).items():
            out.append({"type": t, "key": str(key), "ops": ops})
    return out


def _types_html(results: dict[str, Any] | None) -> str:
    """A section per anomaly type: the keys it explains, the operations involved (shown
    highlighted on the timeline by each key's button), and what Δ it leaves."""
    entries = _type_entries(results or {})
    if not entries:
        return ""
    keys = (results or {}).get("keys") or {}
    parts = []
    for t in ANOMALY_TYPES:
        mine = [(i, e) for i, e in enumerate(entries) if e["type"] == t]
        if not mine:
            continue
        rows = []
        for i, e in mine[:MAX_KEY_ROWS]:
            a = keys[e["key"]]["anomalies"][t]
            ops = ", ".join(str(o) for o in e["ops"][:40]) + (" …" if len(e["ops"]) > 40 else "")
            rows.append("<tr>" + _td(e["key"], code=True)
                        + _td(_fmt_ms(a.get("remaining_delta_ms")), "num")
                        + _td(ops, code=True)
                        + f'<td><button class="show-type" id="show-type-{i}">'
                        "Show in timeline</button></td></tr>")
        more = (f'<p class="muted">{len(mine) - MAX_KEY_ROWS:,} more keys are in results.json.</p>'
                if len(mine) > MAX_KEY_ROWS else "")
        count = f"{len(mine):,} key" + ("s" if len(mine) != 1 else "")
        parts.append(
            f'<div class="anomaly-type" id="type-{t}"><h3>{_e(t)} ({count})</h3>'
            f'<p class="muted">{_e(TYPE_MEANING[t])}</p>'
            + _table(["key", "minimal Δ once applied#", "operations involved", ""], rows)
            + more + "</div>")
    return (f'<section class="card" id="anomaly-types"><h2>Anomaly types</h2>{"".join(parts)}'
            "</section>")


TYPE_MEANING = {
    "duplicated-write": "A write, acknowledged or with its outcome unknown, took effect twice "
                        "(a retry): the writes applied twice and the reads of their second "
                        "effect.",
    "lost-write": "An acknowledged write never took effect (e.g. a failover discarded it): "
                  "the writes dropped.",
    "stale-read": "Reads served older values than the lease allows that no duplicated or "
                  "lost write explains: the reads still stale. Each stale read in the key's "
                  "list also names the changes that would explain it, alternatives rather "
                  "than proof that it was fresh.",
    "violation": "No change explains the key (a value never written, …): the "
                 "counterexample's operations.",
}


def _keys_html(results: dict[str, Any] | None) -> str:
    keys = (results or {}).get("keys") or {}
    if not keys:
        return ""
    items = sorted(
        ((str(k), kr) for k, kr in keys.items() if isinstance(kr, dict)),
        key=lambda kv: (
            STATUS_ORDER.get(kv[1].get("status"), 9),
            -(kv[1].get("min_delta_ms") or 0),
            kv[0],
        ),
    )
    rows = []
    for k, kr in items[:MAX_KEY_ROWS]:
        st = str(kr.get("status", ""))
        cells = [
            _td(k, code=True),
            _td(st, f"status {st}"),
            _td(_fmt_ms(kr.get("min_delta_ms")), "num"),
            _td(kr.get("ops"), "num"),
            _td(len(kr.get("shifted_reads") or []), "num"),
            _td(", ".join(kr.get("anomaly_types") or [])),
            _td(kr.get("method")),
            _td(kr.get("reason")),
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    more = ""
    if len(items) > MAX_KEY_ROWS:
        more = f'<p class="muted">{len(items) - MAX_KEY_ROWS:,} more keys are in results.json.</p>'
    headers = ["key", "status", "minimal Δ#", "ops#", "stale reads#", "anomaly types",
               "method", "why"]
    return (
        f'<section class="card" id="keys"><h2>Keys ({len(items):,})</h2>'
        f'<div class="scroll">{_table(headers, rows)}</div>{more}</section>'
    )


def _snapshot_lease_html(results: dict[str, Any] | None) -> str:
    """A kv-snapshot-lease run's counts and violations (checkers/snapshot_lease.py)."""
    found = (results or {}).get("snapshot_lease")
    if not isinstance(found, dict):
        return ""
    counts = "".join(_stat(f"{found.get(k, 0):,}", label) for k, label in (
        ("leases", "leases"), ("upserts", "upserts"), ("snapshot_reads", "snapshot reads"),
        ("covered_reads", "covered by a lease"), ("undecided_reads", "undecided"),
        ("rows_checked", "rows checked")))
    rows = []
    for v in (found.get("violations") or [])[:MAX_KEY_ROWS]:
        if not isinstance(v, dict):
            continue
        cells = [_td(v.get("kind"), "status violation"), _td(v.get("snapshot"), "num"),
                 _td(v.get("bucket"), "num"), _td(v.get("lease"), code=True),
                 _td(v.get("read"), "num"), _td(", ".join(v.get("faults") or [])),
                 _td(v.get("explanation"))]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    headers = ["kind", "snapshot#", "bucket#", "lease", "read op#", "faults in force", "why"]
    table = (f'<div class="scroll">{_table(headers, rows)}</div>' if rows
             else '<p class="muted">No violation: every leased read held.</p>')
    return (f'<section class="card" id="snapshot-lease"><h2>KV snapshot lease (clock margin '
            f'{_e(found.get("clock_margin_ms"))} ms)</h2><div class="stats">{counts}</div>'
            f"{table}</section>")


def _kv_scan_html(results: dict[str, Any] | None) -> str:
    """A kv-scan run's counts and violations (checkers/kv_scan.py)."""
    found = (results or {}).get("kv_scan")
    if not isinstance(found, dict):
        return ""
    counts = "".join(_stat(f"{found.get(k, 0):,}", label) for k, label in (
        ("upserts", "upserts"), ("scans", "scans"), ("scans_read_whole", "read whole"),
        ("rows_checked", "rows checked"), ("continued_within_ttl", "continued within ttl"),
        ("idle_past_ttl", "idle past ttl"), ("expired_as_promised", "expired as promised"),
        ("after_leader_move", "sent after a leader move"), ("retries", "continuations resent")))
    rows = []
    for v in (found.get("violations") or [])[:MAX_KEY_ROWS]:
        if not isinstance(v, dict):
            continue
        cells = [_td(v.get("kind"), "status violation"), _td(v.get("scan"), code=True),
                 _td(v.get("bucket"), "num"), _td(v.get("op"), "num"),
                 _td(", ".join(v.get("faults") or [])), _td(v.get("explanation"))]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    headers = ["kind", "scan", "bucket#", "op#", "faults in force", "why"]
    table = (f'<div class="scroll">{_table(headers, rows)}</div>' if rows
             else '<p class="muted">No violation: every scan kept its promises.</p>')
    return (f'<section class="card" id="kv-scan"><h2>KV scan sessions (clock margin '
            f'{_e(found.get("clock_margin_ms"))} ms)</h2><div class="stats">{counts}</div>'
            f"{table}</section>")


GRAPH_LEGEND = (
    '<span class="legend"><span><i style="background:#5b6b7d"></i>real-time</span>'
    '<span><i style="background:#2d6cdf"></i>reads-from</span>'
    '<span><i style="background:#2e9d5b"></i>version-order</span>'
    '<span><i style="background:#d9534f"></i>cycle</span></span>'
    '<span class="hint">click an operation for its record; drag to rearrange</span>'
)


def _anomaly_html(i: int, a: Anomaly) -> str:
    rows = [
        "<tr>"
        + "".join(
            [
                _td(o.get("index", o.get("id")), "num"),
                _td(o.get("process")),
                _td(o.get("f")),
                _td(json.dumps(o.get("value")), code=True),
                _td(o.get("type")),
                _td(o.get("node")),
                _td(_fmt_ms(o.get("invoke_ms")), "num"),
                _td(_fmt_ms(o.get("complete_ms")), "num"),
            ]
        )
        + "</tr>"
        for o in a.ops
        if isinstance(o, dict)
    ]
    headers = ["index#", "process", "f", "value", "type", "node", "invoked#", "completed#"]
    ops_table = _table(headers, rows) if rows else ""
    nem = "".join(
        f"<li><code>{_e(n.get('f'))}</code> from {_fmt_ms(n.get('time_ms'))}"
        + (f" to {_fmt_ms(n['end_ms'])}" if n.get("end_ms") is not None else "")
        + f" {_e(json.dumps(n.get('value')))}</li>"
        if isinstance(n, dict)
        else f"<li>{_e(n)}</li>"
        for n in a.nemesis
    )
    delta = _fmt_ms(a.min_delta_ms) if a.min_delta_ms is not None else "none: no Δ helps"
    return (
        f'<div class="anomaly" id="anomaly-{i}"><h3>Key <code>{_e(a.key)}</code> — '
        + ("violation" if a.status == "violation" else f"{_e(a.status)}: worst stale read")
        + f' <span class="muted">(minimal Δ {delta})</span></h3><p>{_e(a.reason)}</p>'
        + (f'<div class="why">{_e(a.text)}</div>' if a.text else "")
        + (f"<p><b>Nemesis in force:</b></p><ul>{nem}</ul>" if nem else "")
        + ops_table
        + '<div class="controls" style="margin-top:8px">'
        + f'<button id="show-{i}">Show in timeline</button>{GRAPH_LEGEND}</div>'
        + f'<div class="graph" id="graph-{i}"></div></div>'
    )


def _anomalies_html(found: list[Anomaly], results: dict[str, Any] | None) -> str:
    parts = [_anomaly_html(i, a) for i, a in enumerate(found)]
    unknown = [
        (k, kr)
        for k, kr in ((results or {}).get("keys") or {}).items()
        if isinstance(kr, dict) and kr.get("status") == "unknown"
    ]
    if unknown:
        items = "".join(
            f"<li><code>{_e(k)}</code>: {_e(kr.get('reason'))}</li>" for k, kr in unknown[:200]
        )
        parts.append(f"<h3>Undecided keys ({len(unknown)})</h3><ul>{items}</ul>")
    if parts:
        body = "".join(parts)
    elif results:
        body = "<p class='muted'>No anomalies: no key is a violation or read stale.</p>"
    else:
        body = "<p class='muted'>No results.json: the checker has not run on this history.</p>"
    return f'<section class="card" id="anomalies"><h2>Anomalies ({len(found)})</h2>{body}</section>'


def _nemesis_html(h: History | None) -> str:
    if h is None or not h.nemesis_events:
        return ""
    rows = [
        "<tr>"
        + _td(ev.get("index"), "num")
        + _td(_fmt_ms(int(ev.get("time", 0)) / 1e6), "num")
        + _td(ev.get("type"))
        + _td(ev.get("f"), code=True)
        + _td(json.dumps(ev.get("value")), code=True)
        + "</tr>"
        for ev in h.nemesis_events[:5000]
    ]
    table = _table(["index#", "time#", "type", "f", "value"], rows)
    return (
        f'<section class="card"><details><summary>Nemesis events ({len(h.nemesis_events)})'
        f"</summary><div class='scroll'>{table}</div></details></section>"
    )


def _read_history(run: RunDir, problems: list[str]) -> tuple[History | None, str]:
    hpath = run.history
    if not hpath.is_file():
        return None, f"{hpath.name} is missing from the run folder."
    try:
        h = read_history(hpath)
    except OSError as e:
        return None, f"{hpath.name} could not be read ({e})."
    problems.extend(h.problems)
    return h, ""


def render_report(run_dir: Path) -> str:
    run = RunDir(Path(run_dir))
    problems: list[str] = []
    test: dict[str, Any] = dict(run.read_test(problems))
    results: dict[str, Any] | None = run.read_results(problems)  # type: ignore[assignment]
    h, history_problem = _read_history(run, problems)
    if history_problem:
        problems.append(history_problem)
    la = result_of(results)
    la_found = _la_found(la, h) if la is not None else []
    found = [a for _, _, a in la_found] if la is not None else anomalies(results, run.path,
                                                                           problems)
    blob = _data_blob(h, test, results, found, history_problem)
    name = test.get("name") or run.path.parent.name
    nemesis = "+".join(str(n) for n in test.get("nemesis") or []) or None
    clients = client_model(test)
    sub_parts = (sut_label(test), test.get("workload"), clients and f"{clients} clients",
                 nemesis, test.get("started"), run.path.name)
    problems_html = ""
    if problems:
        items = "".join(f"<li>{_e(p)}</li>" for p in problems)
        problems_html = (
            "<section class='card problems' id='problems'>"
            f"<b>Missing or damaged pieces</b><ul>{items}</ul></section>"
        )
    notes = [str((results or {}).get("reason") or "")] if (results or {}).get("reason") else []
    notes += [str(w) for w in (results or {}).get("warnings") or []]
    if notes:
        items = "".join(f"<li>{_e(w)}</li>" for w in notes)
        problems_html += (
            '<section class="card problems" id="warnings">'
            f"<b>Warnings</b><ul>{items}</ul></section>"
        )
    key_select = ""
    if h is not None and len(h.ops.keys) > 1:
        key_select = (
            '<label>key <select id="key-filter"><option value="-1">all keys</option>'
            "</select></label>"
        )
    data = json.dumps(blob, separators=(",", ":"), allow_nan=False, default=str)
    return Template(_asset("report.html")).substitute(
        name=_e(name),
        sub=" · ".join(_e(x) for x in sub_parts if x),
        links="".join(f'<a href="{f}">{f}</a>' for f in TEXT_FILES if (run.path / f).exists()),
        summary=_summary_html(test, results, h),
        problems=problems_html,
        key_select=key_select,
        anomalies=(_la_html(la, la_found) if la is not None
                   else _types_html(results) + _anomalies_html(found, results)),
        staleness_note=_e(LA_STALENESS_NOTE if la is not None else STALENESS_NOTE),
        keys=_keys_html(results) + _snapshot_lease_html(results) + _kv_scan_html(results),
        nemesis=_nemesis_html(h),
        config=_config_html(test),
        generated=_e(time.strftime("%Y-%m-%d %H:%M:%S")),
        css=_asset("report.css"),
        data=data.replace("<", "\\u003c"),  # no "</script>" or "<!--" can end or confuse the block
        js=_asset("report.js"),
    )


def _la_found(result: dict[str, Any], h: History | None) -> list[tuple[str, dict[str, Any],
                                                                        Anomaly]]:
    """Each list-append witness (the first MAX_WITNESSES_DRAWN) with its graph, as the
    page draws it (the Anomaly's key names the type, its reason says what that means)."""
    ops = h.ops if h is not None else None
    rows = rows_by_index(ops)
    out = []
    for name, w in all_witnesses(result):
        if len(out) >= MAX_WITNESSES_DRAWN:
            break
        graph = witness_graph(name, w, ops, rows)
        out.append((name, w, Anomaly(key=name, status="violation", reason=name,
                                     min_delta_ms=None, text="\n".join(witness_lines(name, w)),
                                     graph=graph, ops=list(graph["nodes"]), nemesis=[])))
    return out


def _la_entries(found: list[Anomaly]) -> list[dict[str, Any]]:
    """What each witness's "Show in timeline" button outlines: its transactions'
    invocations (the timeline names its rows by them)."""
    return [{"type": a.key, "key": "", "ops": [n.get("invoke_index", n["id"])
                                               for n in (a.graph or {}).get("nodes", [])]}
            for a in found]


LA_LEGEND = (
    '<span class="legend"><span><i style="background:#2e9d5b"></i>ww</span>'
    '<span><i style="background:#2d6cdf"></i>wr</span>'
    '<span><i style="background:#d9534f"></i>rw</span>'
    '<span><i style="background:#7a6fd6"></i>process</span>'
    '<span><i style="background:#5b6b7d"></i>realtime</span></span>'
    '<span class="hint">click a transaction for its record; drag to rearrange</span>'
)


def _la_html(result: dict[str, Any], found: list[tuple[str, dict[str, Any], Anomaly]]) -> str:
    """The list-append verdict: each anomaly type, each witness in words with its
    transactions and, for a cycle, its graph; then the stale read-only transactions."""
    parts = [f"<p><b>{_e(headline(result))}</b> <span class='muted'>"
             f"({_e(count_line(result))})</span></p>"]
    if result.get("not"):
        parts.append(f"<p class='muted'>Ruled out: {_e(', '.join(map(str, result['not'])))}"
                     "</p>")
    counts = {t: len(ws or []) for t, ws in (result.get("anomalies") or {}).items()}
    for name in ordered_types(result):
        mine = [(i, w, a) for i, (t, w, a) in enumerate(found) if t == name]
        why_not = standing(result, name)
        parts.append(f'<div class="anomaly-type" id="type-{_e(name)}"><h3>{_e(name)} '
                     f"({counts.get(name, 0):,} found{f', {_e(why_not)}' if why_not else ''})"
                     f'</h3><p class="muted">{_e(meaning(name))}</p>')
        for i, w, a in mine:
            lines = "".join(f"<li>{_e(x)}</li>" for x in witness_lines(name, w))
            rows = ["<tr>" + _td(f"T{n.get('id')}", code=True) + _td(n.get("process"))
                    + _td(n.get("type")) + _td(micro_text(n.get("value")), code=True)
                    + _td(n.get("node")) + _td(_fmt_ms(n.get("invoke_ms")), "num")
                    + _td(_fmt_ms(n.get("complete_ms")), "num") + "</tr>"
                    for n in (a.graph or {}).get("nodes", [])]
            table = _table(["txn", "process", "type", "micro-ops", "node", "invoked#",
                            "completed#"], rows) if rows else ""
            cycle = is_cycle(w)
            parts.append(
                f'<div class="anomaly" id="anomaly-{i}"><ul class="why">{lines}</ul>{table}'
                "<div class='controls' style='margin-top:8px'>"
                f'<button class="show-type" id="show-type-{i}">Show in timeline</button>'
                f"{LA_LEGEND if cycle else ''}</div>"
                + (f'<div class="graph" id="graph-{i}"></div>' if cycle else "") + "</div>")
        more = counts.get(name, 0) - len(mine)
        if more > 0:
            parts.append(f'<p class="muted">{more:,} more in results.json.</p>')
        parts.append("</div>")
    stale = sorted(result.get("stale_reads") or [],
                   key=lambda s: -float(s.get("staleness_ms") or 0))
    if stale:
        lease = result.get("lease_ms")
        rows = []
        for s in stale[:MAX_KEY_ROWS]:
            ms = float(s.get("staleness_ms") or 0)
            within = lease is not None and ms <= float(lease)
            by = s.get("superseded_by")
            rows.append("<tr>" + _td(f"T{s.get('op')}", code=True) + _td(s.get("key"), code=True)
                        + _td(_fmt_ms(ms), "num status "
                              + ("lease-bounded" if within else "violation"))
                        + _td("" if by is None else f"T{by}", code=True) + "</tr>")
        parts.append(f"<h3>Stale read-only transactions ({len(stale):,})</h3>"
                     '<div class="scroll">'
                     + _table(["txn", "key", "staleness#", "superseded by"], rows) + "</div>")
    model = result.get("consistency_model") or "strict-serializable"
    return (f'<section class="card" id="list-append"><h2>List-append: {_e(model)}</h2>'
            f'{"".join(parts)}</section>')


def _la_stats(result: dict[str, Any]) -> list[str]:
    stale = result.get("stale_reads") or []
    types = result.get("anomaly_types") or []
    return [
        _stat(f"{int(result.get('txns') or 0):,}", "transactions"),
        _stat(f"{int(result.get('keys') or 0):,}", "keys"),
        _stat(f"{len(types):,}", "anomaly types", "violation" if types else ""),
        _stat(f"{len(stale):,}", "stale read-only txns", "lease-bounded" if stale else ""),
        _stat(_fmt_ms(result.get("max_staleness_ms")), "largest staleness"),
    ]


def write_report(run_dir: Path) -> Path:
    """Write run_dir/report.html (safe on any run folder: missing pieces are listed on the page)."""
    run = RunDir(Path(run_dir))
    out = run.report
    tmp = run.path / f".{out.name}.tmp"
    tmp.write_text(render_report(run.path), encoding="utf-8")
    tmp.replace(out)  # readers (the runs browser) never see a half-written page
    return out
