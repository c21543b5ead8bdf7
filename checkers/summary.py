"""The verdict for people: a short rich summary of one history's file report, and the exit code.

Shows the verdict, how many keys ended in each status, how many have each anomaly type,
the largest read shift needed against the lease window, and one line per violating (and
undecided) key saying why and naming its anomaly types. A list-append history shows its
anomaly types instead, the first witnesses of each in words, and its stale read-only
transactions (checkers/list_append_report.py).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from leaseline.checkers.anomalies import describe
from leaseline.checkers.decide import LEASE_BOUNDED, LINEARIZABLE, UNKNOWN, VIOLATION
from leaseline.checkers.list_append_report import (
    count_line,
    meaning,
    ordered_types,
    result_of,
    stale_line,
    standing,
    witness_lines,
)

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN = 0, 1, 2
_VERDICT = {True: ("VALID", "bold green"), False: ("INVALID", "bold red"),
            "unknown": ("UNKNOWN", "bold yellow")}
_STYLE = {LINEARIZABLE: "green", LEASE_BOUNDED: "cyan", VIOLATION: "red", UNKNOWN: "yellow"}
MAX_LISTED = 20  # keys listed per status; the rest are counted
MAX_WITNESSES = 3  # list-append witnesses said in words per anomaly type; the rest counted
MAX_STALE = 5  # stale read-only transactions listed, the stalest first


def exit_code(valid: bool | str) -> int:
    """Jepsen's convention: 0 valid, 1 invalid, 2 unknown."""
    if valid is True:
        return EXIT_VALID
    return EXIT_INVALID if valid is False else EXIT_UNKNOWN


def verdict_text(valid: bool | str) -> tuple[str, str]:
    return _VERDICT.get(valid, _VERDICT["unknown"])


def _ms(v: float | None) -> str:
    if v is None:
        return "—"
    if 0 < v < 0.001:  # Knossos histories without times count in ns steps
        return f"{v * 1e6:.0f} ns"
    return f"{v:,.3f} ms".replace(".000 ms", " ms")


def print_summary(file_report: dict[str, Any], console: Console, title: str | None = None,
                  lease_note: str | None = None) -> None:
    """Print one history's verdict; `title` names the history, `lease_note` where L came from."""
    text, style = verdict_text(file_report["valid"])
    lease = file_report["lease_ms"]
    head = f"[{style}]{text}[/]"
    if title:
        head += f"  {escape(title)}"
    console.print(head)
    if isinstance(file_report.get("snapshot_lease"), dict):
        lease_line = "KV snapshot lease"  # a resource lease: no read lease window applies
    elif isinstance(file_report.get("kv_scan"), dict):
        lease_line = "KV scan sessions"
    else:
        lease_line = f"lease window L = {_ms(lease)}" + (" (strict linearizability)"
                                                        if not lease else "")
    if lease_note:
        lease_line += f" — {escape(lease_note)}"
    console.print(f"  {lease_line}")
    la = result_of(file_report)
    if file_report.get("reason"):
        console.print(f"  [{style}]{escape(str(file_report['reason']))}[/]")
    for warning in file_report.get("warnings") or []:
        console.print(f"  [yellow]warning:[/] {escape(str(warning))}")

    if isinstance(file_report.get("snapshot_lease"), dict):
        print_snapshot_lease(file_report["snapshot_lease"], console)
        return
    if la is not None:
        print_list_append(la, console)
        return
    if isinstance(file_report.get("kv_scan"), dict):
        print_kv_scan(file_report["kv_scan"], console)
        return
    summary = file_report.get("summary") or {}
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    for status in (LINEARIZABLE, LEASE_BOUNDED, VIOLATION, UNKNOWN):
        table.add_column(status, justify="right", style=_STYLE[status])
    table.add_column("keys", justify="right")
    table.add_column("operations", justify="right")
    table.add_row(*(str(summary.get(s, 0)) for s in (LINEARIZABLE, LEASE_BOUNDED, VIOLATION,
                                                     UNKNOWN)),
                  str(len(file_report.get("keys") or {})), f"{file_report.get('ops', 0):,}")
    console.print(table)

    types = {t: n for t, n in (file_report.get("anomaly_types") or {}).items() if n}
    if types:
        console.print("  anomaly types: " + ", ".join(
            f"[red]{t}[/] {n} key{'s' if n != 1 else ''}" for t, n in types.items()))
    max_delta = file_report.get("max_delta_ms")
    if max_delta is not None:
        where = "within" if max_delta <= lease else "beyond"
        console.print(f"  largest read shift needed: {_ms(max_delta)} ({where} the "
                      f"{_ms(lease)} lease window)")
    keys = file_report.get("keys") or {}
    for status, label in ((VIOLATION, "violation"), (UNKNOWN, "undecided")):
        listed = [(k, r) for k, r in keys.items() if r.get("status") == status]
        for k, r in listed[:MAX_LISTED]:
            reason = r.get("reason") or ""
            console.print(f"  [{_STYLE[status]}]{label}[/] key {escape(str(k))}: "
                          f"{escape(reason)}")
            named = describe(r)
            if named:
                console.print(f"    anomaly types: {escape(named)}")
        if len(listed) > MAX_LISTED:
            console.print(f"  … and {len(listed) - MAX_LISTED} more {label} keys "
                          "(see results.json)")


def _print_counts_and_violations(found: dict[str, Any], console: Console,
                                 columns: tuple[tuple[str, str], ...]) -> None:
    """A keyless checker's counts (each `(field, heading)`) and violations, then its first
    violations in words (the snapshot lease, kv-scan sessions)."""
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    for _, name in columns:
        table.add_column(name, justify="right")
    table.add_column("violations", justify="right")
    violations = found.get("violations") or []
    table.add_row(*(str(found.get(k, 0)) for k, _ in columns),
                  f"[red]{len(violations)}[/]" if violations else "0")
    console.print(table)
    for v in violations[:MAX_LISTED]:
        console.print(f"  [red]{escape(str(v.get('kind')))} violation[/] "
                      f"{escape(str(v.get('explanation')))}")
    if len(violations) > MAX_LISTED:
        console.print(f"  … and {len(violations) - MAX_LISTED} more violations "
                      "(see results.json)")


def print_snapshot_lease(found: dict[str, Any], console: Console) -> None:
    """The snapshot lease checker's counts and violations (checkers/snapshot_lease.py)."""
    _print_counts_and_violations(found, console, (
        ("leases", "leases"), ("upserts", "upserts"), ("snapshot_reads", "snapshot reads"),
        ("covered_reads", "covered by a lease"), ("undecided_reads", "undecided")))
    late = found.get("late_renewals") or []
    if late:
        console.print(f"  {len(late)} renewal{'s' if len(late) != 1 else ''} acknowledged "
                      "after the lease's expiration time (late_renewals in results.json)")


def print_list_append(result: dict[str, Any], console: Console,
                      witnesses: bool = True) -> None:
    """A list-append history's findings (checkers/list_append_report.py): its anomaly
    types, the first witnesses of each in words (unless the caller shows them its own
    way), the stale read-only transactions."""
    console.print(f"  {escape(count_line(result))}")  # the verdict's line is the reason's
    anomalies = result.get("anomalies") or {}
    for name in ordered_types(result):
        found = anomalies.get(name) or []
        why_not = standing(result, name)
        console.print(f"  [{'yellow' if why_not else 'red'}]{escape(name)}[/] "
                      f"{len(found)} found{f' ({why_not})' if why_not else ''}: "
                      f"{escape(meaning(name))}")
        shown = found[:MAX_WITNESSES] if witnesses else []
        for w in shown:
            for n, line in enumerate(witness_lines(name, w)):
                console.print(f"    {'-' if n == 0 else ' '} {escape(line)}")
        if shown and len(found) > len(shown):
            console.print(f"    … and {len(found) - len(shown)} more (see results.json)")
    stale = result.get("stale_reads") or []
    if stale:
        console.print(f"  stale read-only transactions: {len(stale)}, the stalest "
                      f"{_ms(result.get('max_staleness_ms'))} old (lease "
                      f"{_ms(result.get('lease_ms'))})")
        stalest = sorted(stale, key=lambda s: -float(s.get("staleness_ms") or 0))
        for s in stalest[:MAX_STALE]:
            console.print(f"    {escape(stale_line(s, result.get('lease_ms')))}")
        if len(stale) > MAX_STALE:
            console.print(f"    … and {len(stale) - MAX_STALE} more (see results.json)")
    if result.get("not"):
        console.print(f"  ruled out: {escape(', '.join(map(str, result['not'])))}")


def print_kv_scan(found: dict[str, Any], console: Console) -> None:
    """The KV scan checker's counts and violations (checkers/kv_scan.py)."""
    _print_counts_and_violations(found, console, (
        ("scans", "scans"), ("scans_read_whole", "read whole"), ("rows_checked", "rows checked"),
        ("continued_within_ttl", "continued in ttl"), ("idle_past_ttl", "idle past ttl"),
        ("expired_as_promised", "expired"), ("after_leader_move", "sent after a leader move"),
        ("retries", "retries")))
