"""Zone method and WGL agree on verdict AND minimal Δ on random unique-value registers
with planted stale reads, lost writes and info operations; the zone's per-read shifts
are jointly sufficient and their maximum is the minimal Δ."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leaseline.checkers.min_delta import min_delta
from leaseline.checkers.models import Register
from leaseline.checkers.ops import READ, UNKNOWN_END, WRITE, KeyHistory, Operation
from leaseline.checkers.search_limits import SearchLimits
from leaseline.checkers.zone import check_zone


@st.composite
def registers(draw: st.DrawFn) -> KeyHistory:
    """A register simulated with linearization points; reads may see a value current up
    to `stale` before their point (planted stale reads), writes may be lost (never take
    effect, still reported ok: anomalies) or end unknown (info)."""
    n = draw(st.integers(1, 9))
    ops: list[Operation] = []
    effects: list[tuple[int, str]] = []
    reads: list[tuple[int, int, int, int]] = []
    for i in range(n):
        inv = draw(st.integers(0, 60))
        dur = draw(st.integers(0, 12))
        point = draw(st.integers(inv, inv + dur))
        if draw(st.booleans()):
            value = str(i + 1)
            lost = draw(st.integers(0, 9)) == 0
            info = draw(st.integers(0, 6)) == 0
            if not lost:
                effects.append((point, value))
            ops.append(Operation(i, i, WRITE, value, inv, UNKNOWN_END if info else inv + dur))
        else:
            stale = draw(st.sampled_from([0, 0, 0, 5, 15, 40]))
            reads.append((i, inv, inv + dur, max(0, point - draw(st.integers(0, stale)))))
    effects.sort()
    for i, inv, comp, seen in reads:
        current = None
        for t, v in effects:
            if t <= seen:
                current = v
        ops.append(Operation(i, i, READ, current, inv, comp))
    return KeyHistory.from_operations(ops, key="p")


def _wgl_delta(ops: list[Operation]) -> int | None:
    limits = SearchLimits(time.monotonic() + 30, 5_000_000)
    found = min_delta(ops, Register(), None, 0, limits)
    assert found.exact
    return found.min_delta_ns


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(registers())
def test_zone_and_wgl_agree(h: KeyHistory) -> None:
    z = check_zone(h)
    assert z.min_delta_ns == _wgl_delta(h.operations())
    if z.min_delta_ns:
        assert max(s for _, s in z.shifts) == z.min_delta_ns
        assert all(0 < s <= z.min_delta_ns and h.f[row] == READ for row, s in z.shifts)
        shifted = h.operations()
        for row, s in z.shifts:
            shifted[row].invoke -= s
        assert _wgl_delta(shifted) == 0  # the per-read shifts suffice together
    elif z.min_delta_ns == 0:
        assert z.shifts == []
