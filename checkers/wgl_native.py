"""The compiled search (wgl_compiled.pyx, built with the package where it can be): its
functions, or None where it is not built (checkers/wgl.py then runs the
pure-Python search and warns once). All or none: setup rebuilds the module whenever its
sources change, so a built module has every one of them."""

from __future__ import annotations

try:  # optional: the checker falls back to pure Python
    from leaseline.checkers.wgl_compiled import DeadStates as compiled_dead_states
    from leaseline.checkers.wgl_compiled import compact as compiled_compact
    from leaseline.checkers.wgl_compiled import encode as compiled_encode
    from leaseline.checkers.wgl_compiled import linearizable as compiled_search
    from leaseline.checkers.wgl_compiled import min_delta as compiled_min_delta
    from leaseline.checkers.wgl_compiled import minimal_ops as compiled_minimal_ops
    from leaseline.checkers.wgl_compiled import overwritten as compiled_overwritten
    from leaseline.checkers.wgl_compiled import read_staleness as compiled_read_staleness
    from leaseline.checkers.wgl_compiled import read_thresholds as compiled_read_thresholds
    from leaseline.checkers.wgl_compiled import refute as compiled_refute
    from leaseline.checkers.wgl_compiled import refuted_below as compiled_refuted_below
except ImportError:  # pragma: no cover - depends on the installation
    compiled_encode = compiled_search = compiled_min_delta = None
    compiled_overwritten = compiled_refute = None
    compiled_minimal_ops = compiled_read_staleness = None
    compiled_compact = compiled_read_thresholds = compiled_refuted_below = None
    compiled_dead_states = None
