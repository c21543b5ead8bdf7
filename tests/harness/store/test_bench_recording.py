"""bench/bench_recording.py's own machinery: the order of the arms, the arms given on the
command line, and the recorder-alone run with every kind of arm (real writers, no Redis)."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections import Counter
from pathlib import Path

import pytest

from bench import bench_recording as bench


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7])
def test_arm_order_is_a_williams_square(n: int) -> None:
    arms = [f"a{i}" for i in range(n)]
    rows_per_square = n if n % 2 == 0 else 2 * n
    order = bench.arm_order(arms, 2 * rows_per_square)
    rows = [order[i * n:(i + 1) * n] for i in range(2 * rows_per_square)]
    assert all(sorted(row) == arms for row in rows)  # every arm once a round
    places = Counter((arm, k) for row in rows for k, arm in enumerate(row))
    assert set(places.values()) == {2 * rows_per_square // n}  # every place equally often
    follows = Counter(pair for row in rows for pair in zip(row, row[1:], strict=False))
    assert len(follows) == n * (n - 1)  # every arm after every other ...
    assert len(set(follows.values())) == 1  # ... equally often


def test_two_arms_alternate_abba() -> None:
    assert bench.arm_order(["w", "r"], 4) == ["w", "r", "r", "w", "w", "r", "r", "w"]


def test_default_arms_have_a_control() -> None:
    assert bench.parse_arms(None, None) == ["without", "recording", "without"]
    assert bench.parse_arms(None, "main")[-1] == "baseline"
    assert bench.parse_arms("without,record-only", None) == ["without", "record-only"]


@pytest.mark.parametrize("text, baseline", [("without,nonsense", None), ("without", None),
                                            ("without,baseline", None)])
def test_bad_arms_are_refused_with_254(text: str, baseline: str | None,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench.parse_arms(text, baseline)
    assert exit_.value.code == 254
    err = capsys.readouterr().err
    assert err.startswith("bench_recording: ") and err.count("\n") == 1


def test_probe_arms_without_the_probes_built_are_refused(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench, "probes_built", lambda: False)
    with pytest.raises(SystemExit) as exit_:
        bench.parse_arms("without,spin", None)
    assert exit_.value.code == 254
    assert "pip install --no-deps -e ." in capsys.readouterr().err


def test_loop_runs_every_kind_and_the_writers_write_whole_lines(tmp_path: Path) -> None:
    kinds = ["without", "recording", "without", "record-only", "take-only", "encode-only",
             "slow-flush", "fast-flush", "inline"] + (
                 ["spin", "keep"] if bench.probes_built() else [])
    args = argparse.Namespace(pairs=1, loop_ops=500, baseline=None)
    with contextlib.ExitStack() as stack:
        arms = bench.open_arms(stack, tmp_path, kinds, None, spin_ns=2000)
        costs = bench.loop_costs(arms, args)
    assert list(costs) == ["without", "recording", "without'", "record-only", "take-only",
                           "encode-only", "slow-flush", "fast-flush", "inline"] + kinds[9:]
    assert all(c > 0 for c in costs.values())
    if bench.probes_built():  # two records of 2 us each an op, and nothing kept
        assert costs["spin"] >= 4.0
        assert arms["spin"]._probe.count == 2 * args.loop_ops
    files = {p.name.split("-", 1)[0]: p for p in tmp_path.iterdir()}
    written = {kinds[int(n)]: p.read_bytes() for n, p in files.items()}
    for kind in ("recording", "slow-flush", "fast-flush", "inline"):  # every op's invoke and ok
        lines = written[kind].splitlines()
        assert len(lines) == 2 * args.loop_ops
        records = [json.loads(line) for line in lines]
        assert [r["index"] for r in records] == list(range(len(records)))
    assert written["take-only"] == b"" and written["encode-only"] == b""


def test_the_flush_arms_only_set_the_interval_and_the_lag_follows(tmp_path: Path) -> None:
    for cls, interval in ((bench.SlowFlush, 0.2), (bench.FastFlush, 0.005)):
        with cls(tmp_path / f"{cls.__name__}.jsonl", bench.MonotonicClock()) as w:
            assert w.flush_interval_s == interval
            assert w._pending.lag_ns == int(2 * interval * 1e9)


@pytest.mark.skipif(not bench.probes_built(), reason="the probes are in the recorder's extension")
def test_keep_keeps_the_recorders_lines_until_the_phase_ends() -> None:
    keep = bench.Probe("keep", 0)
    keep.record(3, "invoke", "write", "k1", 7, "n1")
    keep.record(3, "ok", "write", "k1", 7, "n1", None)
    lines = keep._probe.lines
    assert [(x.process, x.type, x.key, x.value, x.node) for x in lines] == [
        (3, "invoke", "k1", 7, "n1"), (3, "ok", "k1", 7, "n1")]
    assert all(isinstance(x, bench.Line) for x in lines)
    keep.between_phases()
    assert keep._probe.lines == []


def _phase(arm: str, ops: int, start: float) -> bench.Phase:
    return bench.Phase(arm, start, ops, 0.1, ops * 50e-6, ops, 0, ops * 25e-6)


def test_the_report_pairs_each_round(capsys: pytest.CaptureFixture[str]) -> None:
    """A recording arm 10 % slower in every round, whatever the drift, comes out 0.900 by
    every per-round statistic; the control, equal in every round, 1.000."""
    phases = []
    for k, level in enumerate([1000, 3000, 500, 2000, 1500, 800]):  # the drift
        phases += [_phase("without", level, k), _phase("recording", int(level * 0.9), k + .1),
                   _phase("without'", level, k + .2)]
    args = argparse.Namespace(workers=4, pairs=6, phase=0.1, gap=0.02, pin=False, spin_ns=500,
                              baseline=None)
    bench.report(phases, args)
    out = capsys.readouterr().out.splitlines()
    assert "this checkout: 0.900 (95 % 0.900-0.900, median 0.900, trimmed 0.900)" in out[2]
    assert ": 1.000 (95 % 1.000-1.000, median 1.000, trimmed 1.000)" in out[3]
    assert "against both arms without recording: 0.900" in out[4]
    assert "target >= 0.97: NOT met" in out[4]
