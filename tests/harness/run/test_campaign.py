"""Campaign files: parsing, per-case figures and expectations, and one real campaign in Docker."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from repo_paths import ROOT
from rich.console import Console

from leaseline.harness.errors import BadArguments
from leaseline.harness.run.campaign import Case, _case_summary, _print_table, load_campaign
from leaseline.harness.run.config import RunConfig, validate


def write(tmp_path: Path, spec: object) -> Path:
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(spec))
    return path


def test_cases_merge_defaults_and_keep_repeat_and_expect(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "name": "proof",
            "defaults": {"sut": "leasekv", "time_limit": 5},
            "cases": [
                {"label": "kill", "nemesis": ["kill-leader"], "repeat": 3, "expect": "valid"},
                {"label": "bug", "sut_opts": {"bug": "local-read"}, "time_limit": 9},
            ],
        },
    )
    name, cases = load_campaign(path)
    assert name == "proof"
    assert [c.label for c in cases] == ["kill", "bug"]
    assert cases[0].repeat == 3 and cases[0].expect == "valid"
    assert cases[0].settings == {"sut": "leasekv", "time_limit": 5, "nemesis": ["kill-leader"]}
    assert cases[1].settings["time_limit"] == 9 and cases[1].expect is None


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"cases": []}, "non-empty"),
        ({"cases": [{"label": "x", "expect": "green"}]}, "expect must be one of"),
        ({"cases": [{"label": "x", "nemessis": ["kill-leader"]}]}, "unknown setting(s) nemessis"),
    ],
)
def test_bad_campaign_files_say_what_is_wrong(tmp_path: Path, spec: object, says: str) -> None:
    with pytest.raises(BadArguments, match=None) as err:
        load_campaign(write(tmp_path, spec))
    assert says in str(err.value)


def test_not_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{\n"cases": [\n}')
    with pytest.raises(BadArguments) as err:
        load_campaign(path)
    assert str(err.value).startswith(f"{path}:3: not JSON")


@pytest.mark.parametrize(
    ("typo", "says"),
    [
        ({"nemesis_mode": "overlapp"}, "unknown nemesis mode 'overlapp' (valid: one, overlap)"),
        ({"phases": "warmup:5s:rate=-1,rest"}, "--phases: phase 'warmup'"),
        ({"sut_opts": {"bug": "local-raed"}}, "--sut-opt bug=local-raed is not one of"),
        ({"concurrency": "2x"}, "--concurrency must be a number or Nn"),
        ({"nemesis": ["partition-leader:d=oops"]}, "partition-leader"),
        ({"time_limit": "30"}, "--time-limit must be a number"),
        ({"repeat": 0}, "repeat must be a whole number"),
        ({"nemesis_mod": "one"}, "unknown setting(s) nemesis_mod"),
    ],
)
def test_a_typo_in_the_last_case_is_refused_before_any_run_starts(
    tmp_path: Path, typo: dict, says: str
) -> None:
    """The first case is fine and would boot a cluster; the typo two cases later must stop
    the campaign with exit 254 and one sentence before anything starts: no run folder (a run
    makes its folder before its cluster), no container of the campaign's compose project."""
    import shutil
    import subprocess
    import sys

    project = f"ll-camptypo-{tmp_path.name[-12:].lower().replace('_', '-')}"
    path = write(tmp_path, {
        "name": "typo",
        "defaults": {"sut": "leasekv", "client_routing": "pinned", "project": project},
        "cases": [
            {"label": "fine", "nemesis": ["partition-leader"]},
            {"label": "fine-too", "nemesis": ["kill-leader"], "repeat": 2},
            {"label": "typo", "nemesis": ["partition-leader"], **typo},
        ],
    })
    results = tmp_path / "results"
    root = ROOT
    r = subprocess.run(
        [sys.executable, "-m", "leaseline", "campaign", str(path), "--results-dir",
         str(results)], capture_output=True, text=True, cwd=root, timeout=120,
    )
    assert r.returncode == 254, r.stderr
    assert says in r.stderr and "case typo" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not results.exists() or not any(results.rglob("test.json"))
    if shutil.which("docker") is None:
        return  # no engine: nothing could have started anyway
    ps = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True, text=True, timeout=60,
    )
    assert ps.stdout.strip() == ""


def _report(valid: object, *deltas: float | None) -> dict:
    status = {None: "violation", 0: "linearizable"}
    keys = {
        f"k{i}": {"min_delta_ms": d, "status": status.get(d, "lease-bounded"),
                  "anomaly_types": ["violation"] if d is None else []}
        for i, d in enumerate(deltas)
    }
    return {"valid": valid, "keys": keys}


def test_summary_counts_strict_flags_separately_from_lease_violations(tmp_path: Path) -> None:
    dirs = [tmp_path / f"r{i}" for i in range(3)]
    reports = {
        dirs[0]: _report(True, 0, 0),
        dirs[1]: _report(True, 0, 120.5),  # stale, but inside the lease: strict flags it
        dirs[2]: _report(False, None, 3.0),  # no Δ helps
    }
    case = Case("c", {"lease_ms": 700}, repeat=3, expect="strict-valid", run_dirs=dirs)
    s = _case_summary(case, reports)
    assert (s["runs"], s["strict_flagged_runs"], s["invalid_runs"]) == (3, 2, 1)
    assert s["max_delta_ms"] == 120.5 and s["no_delta_helps"] is True
    assert s["anomaly_runs"] == {"violation": 1}  # runs with each anomaly type
    assert s["expectation_met"] is False
    case.expect = "strict-flagged"
    assert _case_summary(case, reports)["expectation_met"] is True
    case.expect, case.run_dirs = "valid", dirs[:2]
    assert _case_summary(case, reports)["expectation_met"] is True


def test_the_table_keeps_one_line_per_case_in_a_log_file(tmp_path: Path) -> None:
    dirs = [tmp_path / "r0"]
    case = Case(
        "bug-lease-longer-than-election", {"lease_ms": 700}, 1, "strict-flagged", run_dirs=dirs
    )
    summary = _case_summary(case, {dirs[0]: _report(False, 0, 1194.25, None)})
    log = io.StringIO()  # not a terminal: Rich would assume 80 columns and fold the cells
    console = Console(file=log)
    _print_table("proof", [summary], console)
    rows = [line for line in log.getvalue().splitlines() if "bug-lease" in line]
    assert len(rows) == 1 and "strict-flagged" in rows[0] and "∞" in rows[0]
    assert "violation 1" in rows[0]
    assert console.width == 80, "the console's own width is given back"


@pytest.mark.docker
@pytest.mark.spark
@pytest.mark.slow
def test_a_real_campaign_runs_checks_once_and_gates(tmp_path: Path) -> None:
    from rich.console import Console

    from leaseline.harness.run.campaign import run_campaign

    path = write(
        tmp_path,
        {
            "name": "mini",
            "defaults": {
                "sut": "leasekv",
                "workload": "register",
                "time_limit": 6,
                "rate": 50,
                "concurrency": 2,
                "keys": 2,
                "project": "ll-campaign-test",
            },
            "cases": [
                {
                    "label": "correct-kill",
                    "nemesis": ["kill-leader"],
                    "nemesis_interval": 2,
                    "repeat": 2,
                    "expect": "valid",
                }
            ],
        },
    )
    code = run_campaign(path, tmp_path / "results", "local[2]", Console(stderr=True))
    summary_file = tmp_path / "results" / "campaigns" / "mini" / "latest" / "campaign.json"
    (case,) = json.loads(summary_file.read_text())["cases"]
    assert case["runs"] == 2 and case["errors"] == []
    for d in case["run_dirs"]:
        results = json.loads((Path(d) / "results.json").read_text())
        assert results["lease_ms"] == 700 and results["keys"]
        assert (Path(d) / "report.html").is_file()
    assert (summary_file.parent / "junit.xml").is_file()
    # The correct leasekv build must hold the lease contract under leader kills.
    assert case["expectation_met"] is True and code == 0, case


@pytest.mark.parametrize("path", sorted((ROOT / "campaigns").glob("*.json")), ids=lambda p: p.stem)
def test_the_shipped_campaigns_are_valid_at_the_client_models_they_name(
        path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case of every shipped campaign passes the run's own validation (elastickv's
    needs a build, named by a path the user edits: only its cases' shape is checked; the
    Fluss checkout fluss-kv-scan names by $LEASELINE_FLUSS_SOURCE is a stand-in here)."""
    checkout = tmp_path / "fluss"
    for module in ("fluss-server", "fluss-client"):
        (checkout / module).mkdir(parents=True)
    (checkout / "pom.xml").write_text("<project/>\n")
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    subprocess.run(["git", "-C", str(checkout), "-c", "user.email=t@t", "-c", "user.name=t",
                    "commit", "-q", "--allow-empty", "-m", "fluss"], check=True)
    monkeypatch.setenv("LEASELINE_FLUSS_SOURCE", str(checkout))
    _, cases = load_campaign(path)
    for case in cases:
        if case.settings.get("sut") == "elastickv":
            continue
        validate(RunConfig(**case.settings))
