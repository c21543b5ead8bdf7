"""Leaseline's compiled WGL search; checkers/wgl.py uses it when it is installed."""

from leaseline_wgl._search import linearizable

__all__ = ["linearizable"]
