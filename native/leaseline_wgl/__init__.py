"""Leaseline's compiled WGL search; checkers/wgl.py uses it when it is installed."""

from leaseline_wgl._search import encode, linearizable, min_delta

__all__ = ["encode", "linearizable", "min_delta"]
