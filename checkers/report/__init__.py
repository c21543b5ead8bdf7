"""The run report (report.html). The runner calls write_report(run_dir) after results.json."""

from checkers.report.render import render_report, write_report

__all__ = ["render_report", "write_report"]
