"""The run report (report.html), written by the checker entry point after results.json."""

from leaseline.checkers.report.render import render_report, write_report

__all__ = ["render_report", "write_report"]
