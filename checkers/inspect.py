"""`leaseline inspect RUN_DIR [--op INDEX] [--open]`: a run's verdict and anomalies in the terminal.

With --op, the operation's neighbourhood: every operation on the same key that overlaps it
in time (those are the ones a linearization has to order it against), the nemesis periods
in force while it ran, and what the checker said about it (a shifted read, part of a
counterexample). A list-append run shows each witness as a panel in words, and --op a
transaction: the witnesses and stale reads that name it, and the transactions on its keys
that overlap it. --open opens report.html in a browser, writing it first if missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from leaseline.checkers.anomalies import describe
from leaseline.checkers.list_append_report import (
    all_witnesses,
    meaning,
    result_of,
    stale_line,
    standing,
    witness_lines,
    witness_txns,
)
from leaseline.checkers.report.cycles import micro_text
from leaseline.checkers.report.rundata import History, read_history
from leaseline.checkers.summary import print_kv_scan, print_list_append, print_snapshot_lease
from leaseline.harness.errors import BadArguments
from leaseline.harness.store.history import read_records
from leaseline.harness.store.run_dir import RunDir
from leaseline.harness.systems.client_models import client_model
from leaseline.harness.systems.registry import sut_label

NEIGHBOURS_SHOWN = 40
MAX_PANELS = 20  # list-append witnesses shown as panels; the rest are counted
VERDICT_STYLE = {True: ("VALID", "bold white on green"), False: ("INVALID", "bold white on red")}
STATUS_STYLE = {
    "linearizable": "green",
    "lease-bounded": "yellow",
    "violation": "bold red",
    "unknown": "magenta",
}


def _ms(v: Any) -> str:
    return "—" if v is None else f"{float(v):,.3f} ms"


def print_overview(run: RunDir, console: Console) -> dict[str, Any] | None:
    problems: list[str] = []
    test: dict[str, Any] = dict(run.read_test(problems))
    results: dict[str, Any] | None = run.read_results(problems)  # type: ignore[assignment]
    title = f"{test.get('name') or run.path.parent.name} · {run.path.name}"
    lines = Text()
    if test.get("sut"):
        test["sut"] = sut_label(test)  # an injected bug shows beside the system's name
    test["clients"] = client_model(test) or None
    for k in ("sut", "workload", "clients", "nemesis", "lease_ms", "concurrency", "keys", "seed",
              "started"):
        if test.get(k) is not None:
            lines.append(f"{k}: ", style="dim")
            v = test[k]
            lines.append(("+".join(map(str, v)) or "none") if isinstance(v, list) else str(v))
            lines.append("\n")
    if results is None:
        verdict = Text(" NO RESULTS ", style="bold white on grey50")
    else:
        word, style = VERDICT_STYLE.get(results.get("valid"), ("UNKNOWN", "bold white on magenta"))
        verdict = Text(f" {word} ", style=style)
    head = Text.assemble(verdict, "\n", lines.rstrip() or lines)
    console.print(Panel(head, title=title, title_align="left"))
    for p in problems:
        console.print(f"[yellow]![/] {p}")
    if results is None:
        return None
    if results.get("reason"):
        console.print(f"[magenta]{results['reason']}[/]")
    for w in results.get("warnings") or []:
        console.print(f"[yellow]warning:[/] {w}")
    if isinstance(results.get("snapshot_lease"), dict):
        print_snapshot_lease(results["snapshot_lease"], console)
        return results
    la = result_of(results)  # type: ignore[arg-type]
    if la is not None:
        print_list_append_overview(la, console)
        return results
    if isinstance(results.get("kv_scan"), dict):
        print_kv_scan(results["kv_scan"], console)
        return results
    summary = results.get("summary") or {}
    t = Table(show_header=True, header_style="bold", box=None)
    for col in ("linearizable", "lease-bounded", "violation", "unknown", "ops", "lease", "max Δ"):
        t.add_column(col, justify="right")
    t.add_row(
        *[Text(str(summary.get(s, 0)), style=STATUS_STYLE[s]) for s in STATUS_STYLE],
        f"{results.get('ops', '—')}",
        _ms(results.get("lease_ms")),
        _ms(results.get("max_delta_ms")),
    )
    console.print(t)
    types = {t: n for t, n in (results.get("anomaly_types") or {}).items() if n}
    if types:
        console.print("anomaly types: " + ", ".join(
            f"[bold red]{t}[/] {n} key{'s' if n != 1 else ''}" for t, n in types.items()))
    keys = results.get("keys") or {}
    # violations, then lease-bounded keys' worst stale reads
    shown = [(k, kr) for k, kr in keys.items()
             if isinstance(kr, dict) and (kr.get("status") == "violation" or (
                 kr.get("status") == "lease-bounded" and kr.get("counterexample")))]
    shown.sort(key=lambda item: item[1]["status"] != "violation")
    for k, kr in shown:
        ce = kr.get("counterexample") or {}
        body = Text()
        body.append(f"{kr.get('reason') or ''}\n", style="bold")
        body.append(
            f"minimal Δ {_ms(kr.get('min_delta_ms'))} (lease {_ms(results.get('lease_ms'))})\n"
        )
        if describe(kr):
            body.append(f"anomaly types: {describe(kr)}\n", style="bold red")
        if ce.get("text"):
            body.append(f"\n{ce['text']}\n")
        for op in ce.get("ops") or []:
            if isinstance(op, dict):
                body.append(
                    f"  #{op.get('index', op.get('id'))} p{op.get('process')} {op.get('f')} "
                    f"{json.dumps(op.get('value'))} {op.get('type', '')} on {op.get('node')} "
                    f"[{_ms(op.get('invoke_ms'))} → {_ms(op.get('complete_ms'))}]\n",
                    style="cyan",
                )
        for n in ce.get("nemesis") or []:
            if isinstance(n, dict):
                body.append(
                    f"  nemesis {n.get('f')} from {_ms(n.get('time_ms'))}"
                    + (f" to {_ms(n['end_ms'])}" if n.get("end_ms") is not None else "")
                    + " "
                    f"{json.dumps(n.get('value'))}\n",
                    style="yellow",
                )
        bad = kr["status"] == "violation"
        console.print(
            Panel(body, title=f"violation on key {k}" if bad else
                  f"lease-bounded key {k}: its worst stale read",
                  title_align="left", border_style="red" if bad else "yellow")
        )
    unknown = [
        (k, kr) for k, kr in keys.items() if isinstance(kr, dict) and kr.get("status") == "unknown"
    ]
    for k, kr in unknown[:20]:
        console.print(f"[magenta]unknown[/] key {k}: {kr.get('reason') or ''}")
    if len(unknown) > 20:
        console.print(f"[magenta]… {len(unknown) - 20} more undecided keys[/]")
    return results


def _nemesis_record(run: RunDir, index: int) -> dict[str, Any] | None:
    for _, rec, _ in read_records(run.history, lambda line: str(index) in line):
        if rec is not None and rec.get("index") == index:
            return rec
    return None


def _record_panel(rec: dict[str, Any], title: str, style: str) -> Panel:
    return Panel(json.dumps(rec, indent=2), title=title, title_align="left", border_style=style)


class _Neighbourhood:
    """What --op shows, chosen once for the terminal and for --json: the operation's row,
    the operations on its key overlapping it in time, the last writes on the key that
    completed before it began (what a read should see), the faults in force meanwhile."""

    def __init__(self, h: History, r: int) -> None:
        ops = h.ops
        self.ops, self.row, self.me = ops, r, ops.record(r)
        key = ops.key[r]
        lo, hi = ops.invoke[r], ops.complete[r]
        self.near = np.nonzero((ops.key == key) & (ops.invoke <= hi) & (ops.complete >= lo))[0]
        before = np.nonzero((ops.key == key) & (ops.f != 0) & (ops.type == 0)
                            & (ops.complete < lo))[0]
        self.before = before[np.argsort(ops.complete[before])][-3:]
        self.in_force = [iv for iv in h.intervals
                         if iv.start_ms <= hi and (iv.end_ms is None or iv.end_ms >= lo)]


def _find(run: RunDir, index: int) -> _Neighbourhood | dict[str, Any]:
    """Operation `index`'s neighbourhood, or the nemesis record with that index."""
    hpath = run.history
    if not hpath.is_file():
        raise BadArguments(f"{run.path} has no {hpath.name}, so operation {index} cannot be "
                           "shown.")
    h: History = read_history(hpath)
    ops = h.ops
    rows = np.nonzero((ops.index == index) | (ops.complete_index == index))[0]
    if len(rows) == 0:
        rec = _nemesis_record(run, index)
        if rec is not None and rec.get("process") == "nemesis":
            return rec
        raise BadArguments(f"operation {index} is not in {hpath} (it has {h.lines} records).")
    return _Neighbourhood(h, int(rows[0]))


def neighbourhood_json(run: RunDir, index: int, results: dict[str, Any] | None
                       ) -> dict[str, Any]:
    """--op for --json: the same facts the terminal view prints."""
    found = _find(run, index)
    if isinstance(found, dict):
        return {"nemesis_event": found}
    if found.ops.f_other.get(found.row) == "txn":
        return _TxnNeighbourhood(found.ops, found.row,
                                 result_of(results)).as_json()  # type: ignore[arg-type]
    me = found.me
    kr = ((results or {}).get("keys") or {}).get(me["key"]) if me["key"] is not None else None
    kr = kr if isinstance(kr, dict) else {}
    stale = [s.get("shift_ms") for s in kr.get("shifted_reads") or []
             if s.get("index") == me["index"]]
    part_of = [name for name, a in (kr.get("anomalies") or {}).items()
               if isinstance(a, dict) and me["index"] in (a.get("ops") or [])]
    if any(isinstance(o, dict) and o.get("index") == me["index"]
           for o in (kr.get("counterexample") or {}).get("ops") or []):
        part_of.append("counterexample")
    return {
        "operation": me,
        "key_status": kr.get("status"),
        "key_min_delta_ms": kr.get("min_delta_ms"),
        "stale_by_ms": stale[0] if stale else None,
        "part_of": part_of,
        "last_writes_before": [found.ops.record(int(i)) for i in found.before],
        "overlapping": [found.ops.record(int(i)) for i in found.near],
        "faults_in_force": [{"fault": iv.name, "value": iv.value, "start_ms": iv.start_ms,
                             "end_ms": iv.end_ms} for iv in found.in_force],
    }


def print_neighbourhood(
    run: RunDir, index: int, results: dict[str, Any] | None, console: Console
) -> None:
    found = _find(run, index)
    if isinstance(found, dict):
        console.print(_record_panel(found, f"record {index} is a nemesis event", "yellow"))
        return
    if found.ops.f_other.get(found.row) == "txn":
        print_txn_neighbourhood(found.ops, found.row, result_of(results), console)  # type: ignore[arg-type]
        return
    ops, r, me, near = found.ops, found.row, found.me, found.near
    console.print(_record_panel(me, f"operation {me['index']}", "cyan"))
    kr = ((results or {}).get("keys") or {}).get(me["key"]) if me["key"] is not None else None
    if isinstance(kr, dict):
        console.print(
            f"key {me['key']}: [{STATUS_STYLE.get(kr.get('status'), '')}]{kr.get('status')}[/] "
            f"(minimal Δ {_ms(kr.get('min_delta_ms'))}) — {kr.get('reason') or ''}"
        )
        for s in kr.get("shifted_reads") or []:
            if s.get("index") == me["index"]:
                console.print(
                    f"this read is stale by [yellow]{_ms(s.get('shift_ms'))}[/]: its "
                    "invocation must move that far earlier, every other read's by the "
                    "key's minimal Δ."
                )
                for e in s.get("explained_by") or []:
                    ops_ = ", ".join(str(i) for i in e.get("ops") or [])
                    console.print(
                        f"it is also explained by a {e.get('anomaly')} (ops "
                        f"{ops_}): an alternative explanation, not proof it was fresh.")
        for name, a in (kr.get("anomalies") or {}).items():
            if isinstance(a, dict) and me["index"] in (a.get("ops") or []):
                console.print(f"[bold red]this operation is part of the key's {name}.[/]")
        ce = kr.get("counterexample") or {}
        if any(isinstance(o, dict) and o.get("index") == me["index"] for o in ce.get("ops") or []):
            console.print("[bold red]this operation is part of the key's counterexample.[/]")
    _ops_table(ops, found.before, r, f"last writes on key {me['key']} completed before it",
               console)
    title = f"operations on key {me['key']} overlapping it in time ({len(near)})"
    if r in near[:NEIGHBOURS_SHOWN]:
        shown = near[:NEIGHBOURS_SHOWN]
    else:
        shown = np.append(near[: NEIGHBOURS_SHOWN - 1], r)
    _ops_table(ops, shown, r, title, console)
    if len(near) > len(shown):
        console.print(f"… {len(near) - len(shown)} more overlapping operations.")
    if found.in_force:
        for iv in found.in_force:
            end = "the end of the test" if iv.end_ms is None else _ms(iv.end_ms)
            console.print(
                f"[yellow]nemesis in force:[/] {iv.name} {json.dumps(iv.value)} "
                f"from {_ms(iv.start_ms)} to {end}"
            )
    else:
        console.print("no nemesis fault was in force while it ran.")


def print_list_append_overview(result: dict[str, Any], console: Console) -> None:
    """A list-append history's verdict, then each witness as a panel in words."""
    print_list_append(result, console, witnesses=False)  # each is a panel below
    shown = 0
    for name, w in all_witnesses(result):
        if shown >= MAX_PANELS:
            break
        shown += 1
        body = Text(f"{meaning(name)}\n", style="bold")
        for line in witness_lines(name, w):
            body.append(f"  {line}\n")
        txns = witness_txns(w)
        if txns:
            body.append("transactions: " + ", ".join(f"T{t}" for t in txns)
                        + " (inspect --op INDEX shows one)\n", style="cyan")
        why_not = standing(result, name)
        console.print(Panel(body, title=name + (f" ({why_not})" if why_not else ""),
                            title_align="left", border_style="yellow" if why_not else "red"))
    total = sum(len(ws or []) for ws in (result.get("anomalies") or {}).values())
    if total > shown:
        console.print(f"… {total - shown} more witnesses in results.json")


class _TxnNeighbourhood:
    """What --op shows of a transaction, for the terminal and for --json: the witnesses
    and stale reads that name it, the transactions on its keys overlapping it in time."""

    def __init__(self, ops: Any, row: int, result: dict[str, Any] | None) -> None:
        self.ops, self.row, self.me = ops, row, ops.record(row)
        mine = {int(ops.index[row])}
        if ops.complete_index[row] >= 0:
            mine.add(int(ops.complete_index[row]))
        self.part_of = [(name, w) for name, w in all_witnesses(result or {})
                        if mine & set(witness_txns(w))]
        self.stale = [s for s in (result or {}).get("stale_reads") or []
                      if s.get("op") in mine or s.get("invoke_index") in mine]
        self.lease_ms = (result or {}).get("lease_ms")
        self.keys = _txn_keys(self.me.get("value"))
        lo, hi = ops.invoke[row], ops.complete[row]
        overlapping = np.nonzero((ops.invoke <= hi) & (ops.complete >= lo))[0]
        self.near = [int(i) for i in overlapping
                     if int(i) == row or self.keys & _txn_keys(ops.record(int(i)).get("value"))]

    def as_json(self) -> dict[str, Any]:
        return {"operation": self.me,
                "part_of": [{"anomaly": name, "witness": w} for name, w in self.part_of],
                "stale_by_ms": self.stale[0].get("staleness_ms") if self.stale else None,
                "overlapping": [self.ops.record(i) for i in self.near]}


def print_txn_neighbourhood(ops: Any, row: int, result: dict[str, Any] | None,
                            console: Console) -> None:
    """A transaction: its record, the witnesses and stale reads that name it, and the
    transactions overlapping it in time on any of its keys."""
    n = _TxnNeighbourhood(ops, row, result)
    console.print(_record_panel(n.me, f"transaction {n.me['index']}", "cyan"))
    for name, w in n.part_of:
        console.print(f"[bold red]this transaction is part of {name}:[/]")
        for line in witness_lines(name, w):
            console.print(f"  {line}", markup=False)
    for s in n.stale:
        console.print(f"[yellow]this read-only transaction is stale by "
                      f"{_ms(s.get('staleness_ms'))}[/] (lease {_ms(n.lease_ms)}):")
        console.print(f"  {stale_line(s, n.lease_ms)}", markup=False)
    title = (f"transactions on {', '.join(sorted(n.keys)) or 'no key'} overlapping it in "
             f"time ({len(n.near)})")
    _ops_table(ops, np.array(n.near[:NEIGHBOURS_SHOWN], dtype=np.int64), row, title, console)
    if len(n.near) > NEIGHBOURS_SHOWN:
        console.print(f"… {len(n.near) - NEIGHBOURS_SHOWN} more overlapping transactions.")


def _txn_keys(value: Any) -> set[str]:
    return {str(m[1]) for m in value or [] if isinstance(m, list) and len(m) == 3}


def _ops_table(ops: Any, rows: np.ndarray, me: int, title: str, console: Console) -> None:
    if len(rows) == 0:
        return
    t = Table(title=f"{title} (times in ms)", title_justify="left")
    # Short headers: the table must fit an 80-column terminal without eliding the cells.
    for col in ("#", "proc", "f", "value", "type", "node", "invoked", "done", "latency"):
        right = col in ("#", "proc", "invoked", "done", "latency")
        t.add_column(col, justify="right" if right else "left", overflow="fold")
    for i in rows:
        o = ops.record(int(i))
        style = (
            "bold cyan"
            if int(i) == me
            else {"fail": "red", "info": "yellow", "open": "yellow"}.get(o["type"], "")
        )
        cells = [
            str(o["index"]),
            str(o["process"]),
            o["f"],
            micro_text(o["value"]) if o["f"] == "txn" else json.dumps(o["value"]),
            o["type"],
            str(o["node"]),
        ]
        cells += [f"{o[k]:,.1f}" for k in ("invoke_ms", "complete_ms", "latency_ms")]
        t.add_row(*cells, style=style)
    console.print(t)


def open_report(run: RunDir, console: Console) -> Path:
    report = run.report
    if not report.exists():
        from leaseline.checkers.report import write_report

        report = write_report(run.path)
    console.print(f"report: {report}")
    has_display = (
        sys.platform == "darwin" or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    opener = shutil.which("xdg-open") or shutil.which("open")
    if has_display and opener:
        subprocess.Popen(
            [opener, str(report)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    else:
        console.print("no browser here: open the path above from a desktop.")
    return report


def inspect_json(run_dir: Path, op: int | None = None) -> dict[str, Any]:
    """`inspect --json`: the run's configuration and results as stored, and with `op` that
    operation's neighbourhood; problems reading them are listed, as the terminal view says."""
    run = RunDir.existing(run_dir)
    problems: list[str] = []
    test = run.read_test(problems)
    results = run.read_results(problems)
    doc: dict[str, Any] = {
        "run_dir": str(run.path),
        "valid": results.get("valid", "unknown") if isinstance(results, dict) else None,
        "test": test,
        "results": results,
        "problems": problems,
    }
    if op is not None:
        doc["op"] = neighbourhood_json(run, op, results if isinstance(results, dict) else None)
    return doc


def inspect_run(
    run_dir: Path, op: int | None = None, open_: bool = False, console: Console | None = None
) -> int:
    console = console or Console()
    run = RunDir.existing(run_dir)
    results = print_overview(run, console)
    if op is not None:
        print_neighbourhood(run, op, results, console)
    if open_:
        open_report(run, console)
    return 0
