"""junit.xml for CI: one testsuite per run, testcases per (workload, nemesis, key group).

Keys are grouped so that a run with 1,000 keys stays readable: every violating or
undecided key is its own testcase (up to MAX_CASES_PER_STATUS, the rest in one), and all
keys that passed (linearizable or lease-bounded) share one testcase that lists them.
failure = a violation with its explanation; error = unknown, or a run with no results
(the harness crashed or the checker never ran). A list-append run has a testcase per
anomaly type its verdict stands on (failure: the witnesses in words) and one listing its
stale read-only transactions.

The checker entry point calls write_junit(run_dir) after the verdict is written; it is safe
on any run folder; its suite's time is the run's, from test.json's start to the history's
last write. write_campaign_junit gathers many runs into one <testsuites> file: given the
campaign's cases, a suite per case naming its expectation, a testcase per run timed by the
campaign (a run that crashed is an error), and one testcase for the expectation itself.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from leaseline.checkers.anomalies import describe
from leaseline.checkers.list_append_report import (
    headline,
    meaning,
    result_of,
    stale_line,
    witness_lines,
)
from leaseline.harness.store.run_dir import RunDir
from leaseline.harness.systems.registry import sut_label

MAX_CASES_PER_STATUS = 100
_INVALID_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: Any) -> str:
    return _INVALID_XML.sub("?", "" if text is None else str(text))


def _ms(v: Any) -> str:
    return "none" if v is None else f"{float(v):g} ms"


def _case(suite: ET.Element, classname: str, name: str, ops: Any = None,
          seconds: float = 0.0) -> ET.Element:
    case = ET.SubElement(suite, "testcase", classname=_clean(classname), name=_clean(name))
    case.set("time", f"{seconds:.3f}")
    if ops is not None:
        case.set("assertions", str(ops))
    return case


def _violation_text(key: str, kr: dict[str, Any], lease: Any) -> str:
    ce = kr.get("counterexample") or {}
    lines = [
        f"key {key}: {kr.get('reason') or 'violation'}",
        f"minimal delta: {_ms(kr.get('min_delta_ms'))} (lease {_ms(lease)})",
    ]
    if describe(kr):
        lines.append(f"anomaly types: {describe(kr)}")
    if ce.get("text"):
        lines += ["", str(ce["text"])]
    for n in ce.get("nemesis") or []:
        if isinstance(n, dict):
            lines.append(
                f"nemesis in force: {n.get('f')} at {_ms(n.get('time_ms'))} {n.get('value')}"
            )
    return "\n".join(lines)


def run_suite(run_dir: Path) -> ET.Element:
    """The <testsuite> element for one run folder (never raises on a partial folder)."""
    run_dir = Path(run_dir)
    problems: list[str] = []
    test = RunDir(run_dir).read_test(problems)
    results: dict[str, Any] | None = RunDir(run_dir).read_results(problems)  # type: ignore[assignment]
    name = str(test.get("name") or run_dir.parent.name)
    nemesis = "+".join(str(n) for n in (test.get("nemesis") or [])) or "none"
    classname = f"{test.get('workload') or 'workload'}.{nemesis}"
    suite = ET.Element("testsuite", name=_clean(f"{name}/{run_dir.name}"))
    props = ET.SubElement(suite, "properties")
    for k in ("sut", "workload", "seed", "lease_ms", "started", "concurrency", "keys"):
        if test.get(k) is not None:
            ET.SubElement(props, "property", name=k, value=_clean(test[k]))
    ET.SubElement(props, "property", name="run_dir", value=_clean(run_dir))
    suite.set("time", f"{run_seconds(run_dir, test.get('started')):.3f}")
    if test.get("sut_opts"):
        ET.SubElement(props, "property", name="sut_opts", value=_clean(sut_label(test)))

    if results is None:
        case = _case(suite, classname, "checker verdict")
        why = "; ".join(problems) or "results.json is unreadable"
        err = ET.SubElement(case, "error", type="no-results")
        err.set("message", _clean(f"no verdict: the run did not finish or was not checked ({why})"))
        _finish(suite)
        return suite

    lease = results.get("lease_ms", test.get("lease_ms"))
    ET.SubElement(props, "property", name="valid", value=_clean(results.get("valid")))
    ET.SubElement(props, "property", name="max_delta_ms", value=_clean(results.get("max_delta_ms")))
    keys = {str(k): kr for k, kr in (results.get("keys") or {}).items() if isinstance(kr, dict)}
    by_status: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for k, kr in sorted(keys.items()):
        by_status.setdefault(str(kr.get("status")), []).append((k, kr))

    for status, tag in (("violation", "failure"), ("unknown", "error")):
        group = by_status.pop(status, [])
        for k, kr in group[:MAX_CASES_PER_STATUS]:
            case = _case(suite, classname, f"key {k}", kr.get("ops"))
            el = ET.SubElement(case, tag, type=status)
            types = ", ".join(kr.get("anomaly_types") or [])
            head = f"{status} ({types})" if types else status
            el.set("message", _clean(f"{head}: {kr.get('reason') or ''}".strip()))
            el.text = _clean(
                _violation_text(k, kr, lease) if status == "violation" else kr.get("reason")
            )
        rest = group[MAX_CASES_PER_STATUS:]
        if rest:
            case = _case(
                suite, classname, f"{len(rest)} more {status} keys", sum(_ops(kr) for _, kr in rest)
            )
            el = ET.SubElement(case, tag, type=status)
            el.set(
                "message",
                _clean(
                    f"{len(rest)} more keys are {status}: {', '.join(k for k, _ in rest[:20])}…"
                ),
            )

    passed = by_status.pop("linearizable", []) + by_status.pop("lease-bounded", [])
    if passed:
        case = _case(
            suite,
            classname,
            f"keys linearizable or lease-bounded ({len(passed)})",
            sum(_ops(kr) for _, kr in passed),
        )
        out = ET.SubElement(case, "system-out")
        out.text = _clean(
            "\n".join(
                f"{k}: {kr.get('status')} "
                f"(minimal delta {_ms(kr.get('min_delta_ms'))}, {kr.get('ops')} ops)"
                for k, kr in passed
            )
        )
    for status, group in by_status.items():  # a status this version does not know
        case = _case(suite, classname, f"keys with status {status} ({len(group)})")
        ET.SubElement(
            case, "error", type=_clean(status), message=_clean(f"unrecognised status {status!r}")
        )

    found = results.get("snapshot_lease")
    for v in (found.get("violations") or [] if isinstance(found, dict) else []
              )[:MAX_CASES_PER_STATUS]:
        case = _case(suite, classname, f"snapshot {v.get('snapshot')} of bucket "
                     f"{v.get('bucket')}, read by op {v.get('read')}")
        el = ET.SubElement(case, "failure", type=_clean(f"snapshot-lease-{v.get('kind')}"))
        el.set("message", _clean(v.get("explanation")))
        el.text = _clean(v.get("explanation"))
    scans = results.get("kv_scan")
    for v in (scans.get("violations") or [] if isinstance(scans, dict) else []
              )[:MAX_CASES_PER_STATUS]:
        case = _case(suite, classname, f"scan {v.get('scan')} of bucket {v.get('bucket')}, "
                     f"op {v.get('op')}")
        el = ET.SubElement(case, "failure", type=_clean(f"kv-scan-{v.get('kind')}"))
        el.set("message", _clean(v.get("explanation")))
        el.text = _clean(v.get("explanation"))

    la = result_of(results)  # type: ignore[arg-type]
    if la is not None:
        ET.SubElement(props, "property", name="consistency_model",
                      value=_clean(la.get("consistency_model")))
        _list_append_cases(suite, classname, la)

    # The run's verdict must agree with its keys; if it does not, say so rather than pass.
    valid = results.get("valid")
    failures = sum(1 for c in suite.iter("testcase") if c.find("failure") is not None)
    errors = sum(1 for c in suite.iter("testcase") if c.find("error") is not None)
    if valid is False and not failures:
        case = _case(suite, classname, "run verdict")
        ET.SubElement(case, "failure", type="invalid", message="results.json says invalid")
    elif valid not in (True, False) and not errors:
        case = _case(suite, classname, "run verdict")
        why = results.get("reason") or (headline(la) if la is not None
                                        else "results.json says unknown")
        ET.SubElement(case, "error", type="unknown", message=_clean(why))
    elif not keys and valid is True:
        _case(suite, classname, "run verdict")
    _finish(suite)
    return suite


def _list_append_cases(suite: ET.Element, classname: str, result: dict[str, Any]) -> None:
    """A failing testcase per anomaly type the verdict stands on, its witnesses in words;
    a passing one listing the stale read-only transactions."""
    anomalies = result.get("anomalies") or {}
    for name in result.get("anomaly_types") or []:
        witnesses = anomalies.get(name) or []
        case = _case(suite, classname, f"list-append {name}", len(witnesses))
        el = ET.SubElement(case, "failure", type=_clean(name))
        el.set("message", _clean(f"{name} ({len(witnesses)} found): {meaning(name)}"))
        lines: list[str] = []
        for w in witnesses[:MAX_CASES_PER_STATUS]:
            lines += [*witness_lines(name, w), ""]
        el.text = _clean("\n".join(lines))
    stale = result.get("stale_reads") or []
    if stale:
        case = _case(suite, classname, f"read-only transactions stale ({len(stale)})")
        out = ET.SubElement(case, "system-out")
        out.text = _clean("\n".join(stale_line(s, result.get("lease_ms"))
                                    for s in stale[:10 * MAX_CASES_PER_STATUS]))


def _ops(kr: dict[str, Any]) -> int:
    try:
        return int(kr.get("ops") or 0)
    except (TypeError, ValueError):
        return 0


def _finish(suite: ET.Element) -> None:
    cases = list(suite.iter("testcase"))
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
    suite.set("skipped", "0")
    suite.set("time", suite.get("time") or "0.000")


def run_seconds(run_dir: Path, started: Any) -> float:
    """How long the run took, from test.json's start (to the second) to the history's last
    write (its final reads), else to now; 0 when the start is not known."""
    try:
        start = datetime.strptime(str(started), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return 0.0
    try:
        end = RunDir(run_dir).history.stat().st_mtime
    except OSError:
        end = time.time()
    return max(0.0, end - start)


def _write(root: ET.Element, path: Path) -> Path:
    ET.indent(root)
    tmp = path.with_name(f".{path.name}.tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)
    return path


def write_junit(run_dir: Path) -> Path:
    """run_dir/junit.xml for this run."""
    run_dir = Path(run_dir)
    root = ET.Element("testsuites", name="leaseline")
    root.append(run_suite(run_dir))
    _totals(root)
    return _write(root, RunDir(Path(run_dir)).junit)


@dataclass
class CampaignCase:
    """One case of a campaign as junit.xml tells it: its runs (folder, seconds the run
    took), the runs that crashed (the sentence, seconds until then), its expectation."""

    label: str
    expect: str | None
    expectation_met: bool | None
    runs: list[tuple[Path, float]] = field(default_factory=list)
    crashed: list[tuple[str, float]] = field(default_factory=list)


# Expectations met by a violation: there a run's violating keys are what the case wants.
EXPECTS_VIOLATIONS = ("invalid", "strict-flagged")


def _run_case(suite: ET.Element, case: CampaignCase, run_dir: Path, seconds: float) -> None:
    """One testcase for one run: failed by a violation unless the case expects them,
    an error when undecided; what its keys said is in its text."""
    run = run_suite(run_dir)
    test = RunDir(run_dir).read_test([])
    name = f"{case.label}: run {run_dir.name} (seed {test.get('seed', '?')})"
    tc = _case(suite, f"{test.get('workload') or 'workload'}.{case.label}", name,
               sum(int(c.get("assertions", "0")) for c in run.iter("testcase")), seconds)
    for prop in run.iter("property"):
        if prop.get("name") == "run_dir":
            ET.SubElement(tc, "properties").append(prop)
    failures = [el for el in run.iter("failure")]
    errors = [el for el in run.iter("error")]
    details = "\n\n".join(_clean(el.text or el.get("message")) for el in failures + errors)
    if errors:
        el = ET.SubElement(tc, "error", type=errors[0].get("type") or "unknown")
        el.set("message", errors[0].get("message") or "undecided")
        el.text = details
    elif failures and case.expect not in EXPECTS_VIOLATIONS:
        el = ET.SubElement(tc, "failure", type=failures[0].get("type") or "violation")
        el.set("message", failures[0].get("message") or "violation")
        el.text = details
    elif failures:
        out = ET.SubElement(tc, "system-out")
        out.text = f"a violation, as the case expects ({case.expect}):\n{details}"


def _expectation_case(suite: ET.Element, case: CampaignCase) -> None:
    seconds = sum(s for _, s in case.runs) + sum(s for _, s in case.crashed)
    tc = _case(suite, f"expectation.{case.label}", f"{case.label}: expect {case.expect}",
               None, seconds)
    runs = len(case.runs) + len(case.crashed)
    if case.expectation_met is False:
        ET.SubElement(tc, "failure", type="expectation-not-met",
                      message=_clean(f"expect {case.expect} did not hold over {runs} runs"))


def write_campaign_junit(run_dirs: Iterable[Path], path: Path,
                         cases: list[CampaignCase] | None = None) -> Path:
    """One junit.xml for a campaign: with its cases, a testsuite per case (its expectation
    a property and a testcase of its own, a testcase per run, crashed runs as errors);
    without, a testsuite per run."""
    root = ET.Element("testsuites", name="leaseline campaign")
    if cases is None:
        for d in run_dirs:
            root.append(run_suite(Path(d)))
    for case in cases or []:
        suite = ET.SubElement(root, "testsuite", name=_clean(case.label))
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="expect", value=_clean(case.expect or "none"))
        for d, seconds in case.runs:
            _run_case(suite, case, Path(d), seconds)
        for n, (sentence, seconds) in enumerate(case.crashed, 1):
            tc = _case(suite, f"crashed.{case.label}", f"{case.label}: crashed run {n}",
                       None, seconds)
            ET.SubElement(tc, "error", type="crashed", message=_clean(sentence))
        if case.expect:
            _expectation_case(suite, case)
        _finish(suite)
        suite.set("time", f"{sum(s for _, s in case.runs) + sum(s for _, s in case.crashed):.3f}")
    _totals(root)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return _write(root, path)


def _totals(root: ET.Element) -> None:
    for attr in ("tests", "failures", "errors"):
        root.set(attr, str(sum(int(s.get(attr, "0")) for s in root.findall("testsuite"))))
    root.set("time", f"{sum(float(s.get('time', '0')) for s in root.findall('testsuite')):.3f}")
