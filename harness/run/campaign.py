"""Campaigns: many runs from one file, their histories checked together in ONE Spark job.

A campaign file (JSON) names defaults and cases; each case is repeated with seeds 0..n-1
(a "sut" that is a relative path to a .toml system file is relative to the campaign file):

    {"name": "leasekv-proof",
     "defaults": {"sut": "leasekv", "workload": "register", "time_limit": 20},
     "cases": [{"label": "correct-kill", "nemesis": ["kill-leader"], "repeat": 10,
                "expect": "valid"},
               {"label": "local-read", "nemesis": ["partition-leader"],
                "sut_opts": {"bug": "local-read"}, "client_routing": "pinned",
                "expect": "strict-flagged"}]}

`expect` (optional) makes the campaign a gate: "valid" (every run valid at the lease window),
"strict-valid" (no stale read at all: every key has Δ = 0), "strict-flagged" (at least one run
has a stale read), "invalid" (at least one run exceeds the lease window). The campaign exits 0
when every expectation holds, 1 when one does not, 2 when a run could not be decided.
Running first and checking once afterwards pays Spark's start-up once, not once per run.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from leaseline.checkers.anomalies import TYPES as ANOMALY_TYPES
from leaseline.checkers.list_append_report import result_of
from leaseline.harness.errors import (
    EXIT_INVALID,
    EXIT_UNKNOWN,
    EXIT_VALID,
    BadArguments,
    LeaselineError,
)
from leaseline.harness.run.config import RunConfig, validate
from leaseline.harness.run.runner import print_path, run, stdout_to_stderr
from leaseline.harness.store.run_dir import JUNIT, RunDir, point_latest
from leaseline.harness.systems.profile import Profile

EXPECTATIONS = ("valid", "strict-valid", "strict-flagged", "invalid")
_RUN_FIELDS = {f.name for f in fields(RunConfig)} - {"check", "argv", "results_dir", "seed"}


@dataclass
class Case:
    label: str
    settings: dict[str, Any]
    repeat: int = 1
    expect: str | None = None
    run_dirs: list[Path] = field(default_factory=list)
    warnings: dict[Path, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # seconds each run took, as the campaign timed it: run_dirs' runs, then the crashed ones
    seconds: dict[Path, float] = field(default_factory=dict)
    error_seconds: list[float] = field(default_factory=list)


def load_campaign(path: Path) -> tuple[str, list[Case]]:
    try:
        spec = json.loads(path.read_text())
    except OSError as e:
        raise BadArguments(f"cannot read campaign file {path}: {e.strerror}.") from None
    except json.JSONDecodeError as e:
        raise BadArguments(f"{path}:{e.lineno}: not JSON ({e.msg}).") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("cases"), list) or not spec["cases"]:
        raise BadArguments(f'{path}: a campaign needs a non-empty "cases" list.')
    defaults = spec.get("defaults", {})
    cases = []
    for i, raw in enumerate(spec["cases"]):
        merged = {**defaults, **raw}
        label = str(merged.pop("label", f"case{i}"))
        repeat = merged.pop("repeat", 1)
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise BadArguments(f"{path}: case {label}: repeat must be a whole number >= 1.")
        expect = merged.pop("expect", None)
        if expect is not None and expect not in EXPECTATIONS:
            raise BadArguments(
                f"{path}: case {label}: expect must be one of {', '.join(EXPECTATIONS)}."
            )
        unknown = set(merged) - _RUN_FIELDS
        if unknown:
            raise BadArguments(
                f"{path}: case {label}: unknown setting(s) {', '.join(sorted(unknown))}."
            )
        sut = merged.get("sut")
        if isinstance(sut, str) and sut.endswith(".toml") and not Path(sut).is_absolute():
            merged["sut"] = str(path.parent / sut)  # a system file beside the campaign file
        cases.append(Case(label, merged, repeat, expect))
    return str(spec.get("name", path.stem)), cases


@dataclass
class CampaignOutcome:
    exit_code: int
    name: str
    campaign_dir: Path
    cases: list[dict[str, Any]]


def campaign_systems(paths: list[Path]) -> list[type[Profile]]:
    """The systems the campaigns' cases run, each once per set of its options: what their
    runs boot, and so the images a CI job needs before them."""
    from leaseline.harness.systems.registry import profile_class

    systems: dict[str, type[Profile]] = {}
    for path in paths:
        for case in load_campaign(path)[1]:
            sut = str(case.settings.get("sut", RunConfig().sut))
            opts = {str(k): str(v) for k, v in (case.settings.get("sut_opts") or {}).items()}
            systems.setdefault(f"{sut} {sorted(opts.items())}", profile_class(sut, opts))
    return list(systems.values())


def run_campaign(
    path: Path, results_dir: Path, spark_master: str, console: Console | None = None
) -> int:
    return campaign_outcome(path, results_dir, spark_master, console).exit_code


def campaign_for_scripts(path: Path, results_dir: Path, spark_master: str) -> int:
    """`campaign --json`: everything the campaign says goes to stderr, then ONE JSON object
    on stdout: campaign_dir, name, exit_code and the cases' summaries."""
    with stdout_to_stderr():
        outcome = campaign_outcome(path, results_dir, spark_master)
    doc = {"campaign_dir": str(outcome.campaign_dir), "name": outcome.name,
           "exit_code": outcome.exit_code, "cases": outcome.cases}
    sys.stdout.write(json.dumps(doc, default=str) + "\n")
    sys.stdout.flush()
    return outcome.exit_code


def campaign_outcome(
    path: Path, results_dir: Path, spark_master: str, console: Console | None = None
) -> CampaignOutcome:
    console = console or Console(stderr=True)
    name, cases = load_campaign(path)
    configs = [
        (
            case,
            RunConfig(
                **case.settings,
                seed=seed,
                results_dir=results_dir,
                check=False,
                test_name=f"{name}-{case.label}",
                argv=["campaign", str(path)],
            ),
        )
        for case in cases
        for seed in range(case.repeat)
    ]
    for case, cfg in configs:  # every case's argument problems before the first cluster boots
        try:
            validate(cfg)
        except BadArguments as e:
            raise BadArguments(f"{path}: case {case.label}: {e}") from None
    for n, (case, cfg) in enumerate(configs, 1):
        console.rule(f"[bold]{name}[/] run {n}/{len(configs)}: {case.label} (seed {cfg.seed})")
        began = time.monotonic()
        try:
            outcome = run(cfg, console)
            case.run_dirs.append(outcome.run_dir)
            case.warnings[outcome.run_dir] = outcome.warnings
            case.seconds[outcome.run_dir] = time.monotonic() - began
        except LeaselineError as e:
            case.errors.append(str(e))
            case.error_seconds.append(time.monotonic() - began)
            console.print(f"[red]run failed: {e}[/]")
    return _check_and_summarise(name, cases, results_dir, spark_master, console)


def _check_and_summarise(
    name: str, cases: list[Case], results_dir: Path, spark_master: str, console: Console
) -> CampaignOutcome:
    from leaseline.checkers.check_command import check_runs

    runs = [RunDir(d) for case in cases for d in case.run_dirs]
    warnings = {d: w for case in cases for d, w in case.warnings.items()}
    reports: dict[Path, dict[str, Any]] = {}
    if runs:
        console.print(f"checking {len(runs)} histories (one Spark job per lease window)")
        reports = check_runs(runs, spark_master, console, warnings)

    summary = [_case_summary(case, reports) for case in cases]
    camp_dir = results_dir / "campaigns" / name / time.strftime("%Y%m%dT%H%M%S")
    camp_dir.mkdir(parents=True, exist_ok=True)
    point_latest(camp_dir.parent, camp_dir)
    (camp_dir / "campaign.json").write_text(json.dumps({"name": name, "cases": summary}, indent=2))
    from leaseline.checkers.junit import CampaignCase, write_campaign_junit

    write_campaign_junit([d for c in cases for d in c.run_dirs], camp_dir / JUNIT, [
        CampaignCase(c.label, c.expect, s["expectation_met"],
                     [(d, c.seconds.get(d, 0.0)) for d in c.run_dirs],
                     list(zip(c.errors, c.error_seconds or [0.0] * len(c.errors), strict=True)))
        for c, s in zip(cases, summary, strict=True)])
    _print_table(name, summary, console)
    print_path(console, "campaign folder", camp_dir)
    if any(s["expectation_met"] is False for s in summary):
        code = EXIT_INVALID
    elif any(s["errors"] or s["unknown_runs"] for s in summary):
        code = EXIT_UNKNOWN
    else:
        code = EXIT_VALID
    return CampaignOutcome(code, name, camp_dir, summary)


def _run_facts(r: dict[str, Any]) -> tuple[list[float | None], bool, set[str], bool]:
    """(its Δs, flagged in strict mode, its anomaly types, no Δ helps) of one run's file
    report: a register run's from its keys, a list-append run's from its result (its
    largest staleness; flagged by any stale read or anomaly)."""
    la = result_of(r)
    if la is not None:
        stale = bool(la.get("stale_reads")) or r["valid"] is False
        return [la.get("max_staleness_ms")], stale, set(la.get("anomaly_types") or []), False
    keys = list(r["keys"].values())
    # Strict mode flags a run when any key needed Δ > 0 (or no Δ helps): a stale read at all.
    return ([k["min_delta_ms"] for k in keys], any(k["min_delta_ms"] != 0 for k in keys),
            {t for k in keys for t in k.get("anomaly_types") or []},
            any(k["status"] == "violation" and k["min_delta_ms"] is None for k in keys))


def _case_summary(case: Case, reports: dict[Path, dict[str, Any]]) -> dict[str, Any]:
    runs = [_run_facts(reports[d]) for d in case.run_dirs]
    valids = [reports[d]["valid"] for d in case.run_dirs]
    deltas = [d for f in runs for d in f[0]]
    strict_flagged = sum(f[1] for f in runs)
    invalid = sum(v is False for v in valids)
    unknown = sum(v == "unknown" for v in valids)
    no_delta_helps = any(f[3] for f in runs)
    finite = [d for d in deltas if d is not None]
    # runs in which each anomaly type was found (the register types first)
    names = [*ANOMALY_TYPES, *sorted({t for f in runs for t in f[2]} - set(ANOMALY_TYPES))]
    types = {t: sum(t in f[2] for f in runs) for t in names}
    lease = case.settings.get("lease_ms")
    if lease is None and case.run_dirs:
        lease = RunDir(case.run_dirs[0]).read_test().get("lease_ms")
    met = {
        "valid": invalid == 0 and unknown == 0 and not case.errors,
        "strict-valid": strict_flagged == 0 and unknown == 0 and not case.errors,
        "strict-flagged": strict_flagged > 0,
        "invalid": invalid > 0,
    }.get(case.expect or "")
    return {
        "label": case.label,
        "settings": case.settings,
        "runs": len(runs),
        "errors": case.errors,
        "strict_flagged_runs": strict_flagged,
        "invalid_runs": invalid,
        "unknown_runs": unknown,
        "max_delta_ms": max(finite) if finite else None,
        "no_delta_helps": no_delta_helps,
        "anomaly_runs": {t: n for t, n in types.items() if n},
        "lease_ms": lease,
        "exceeded_lease": invalid > 0,
        "expect": case.expect,
        "expectation_met": met,
        "run_dirs": [str(d) for d in case.run_dirs],
    }


def _print_table(name: str, summary: list[dict[str, Any]], console: Console) -> None:
    t = Table(title=f"campaign {name}", caption="strict: runs with any stale read (Δ > 0)")
    # Case labels are what the reader scans for: never wrapped or cut.
    t.add_column("case", no_wrap=True)
    for col in ("runs", "strict", "Δ > L", "anomaly types (runs)", "max Δ ms", "L ms", "expect",
                "met"):
        t.add_column(col, overflow="fold")
    for s in summary:
        max_delta = (
            "∞"
            if s["no_delta_helps"]
            else ("-" if s["max_delta_ms"] is None else f"{s['max_delta_ms']:.1f}")
        )
        met = {True: "[green]yes[/]", False: "[red]NO[/]", None: "-"}[s["expectation_met"]]
        runs = f"{s['runs']}" + (f" (+{len(s['errors'])} failed)" if s["errors"] else "")
        t.add_row(
            s["label"],
            runs,
            f"{s['strict_flagged_runs']}/{s['runs']}",
            f"{s['invalid_runs']}/{s['runs']}",
            ", ".join(f"{t} {n}" for t, n in s["anomaly_runs"].items()) or "-",
            max_delta,
            "-" if s["lease_ms"] is None else f"{s['lease_ms']:g}",
            s["expect"] or "-",
            met,
        )
    # A log file or CI console has no width of its own (Rich assumes 80): there the table
    # keeps its natural width instead of folding every cell into slivers.
    width = console.width
    if not console.is_terminal:
        console.width = max(width, 160)
    try:
        console.print(t)
    finally:
        console.width = width
