"""bench_naming_floor's timer of compiled calls: it sees the compiled work naming adds,
and leaves the checker's modules as they were."""

from __future__ import annotations

import sys

from repo_paths import CORPORA

from bench.bench_naming_floor import COMPILED, compiled_timed, measure
from leaseline.checkers.importers.knossos import read_knossos


def _bound() -> dict[tuple[str, str], object]:
    """{(module, name): f} for each function of the timed compiled modules that another
    checker module holds (other compiled modules' functions are not timed)."""
    timed = {id(f) for m in COMPILED for f in vars(m).values()
             if type(f).__name__ == "cython_function_or_method"}
    return {(m.__name__, a): v for m in list(sys.modules.values())
            if getattr(m, "__name__", "").startswith("leaseline.checkers")
            and m not in COMPILED
            for a, v in vars(m).items() if id(v) in timed}


def test_naming_a_violation_adds_compiled_work_and_the_timers_are_undone() -> None:
    before = _bound()
    assert before, "no checker module holds a compiled function"
    key = read_knossos(CORPORA / "knossos" / "cas-register" / "bad" / "cas-failure.edn")
    _, plain = measure([key], 0, anomalies=False, repeat=3)
    _, named = measure([key], 0, anomalies=True, repeat=3)
    # its relaxations are searched (compiled) only when naming
    assert plain > 0 and named > plain
    with compiled_timed():
        assert not _bound()
        assert all(getattr(sys.modules[m], a) is not v for (m, a), v in before.items())
    after = _bound()
    assert after.keys() == before.keys()
    assert all(after[k] is before[k] for k in before)
